#!/usr/bin/python3
"""The pieces of petdaq-nema's sinogram method on constructed data (python/petdaq/nema.py):
the +-7 mm split of a profile with a known peak on a known background, the shift of each
projection's maximum to the centre, and each line's radial distance against geometry.
Exit 1 on a failure, 77 without NumPy."""
import os
import sys

try:
    import numpy as np
except ImportError as e:
    print(f"skipped: {e} (python3-numpy)")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "..", "python"))
from petdaq import nema  # noqa: E402
from petdaq.geometry import Geometry  # noqa: E402

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


# A linear background under a peak that lies wholly inside the band: the split returns the
# background exactly (trapezoid between the band's edges, plus everything outside).
k, n = 9, 81
centre = n // 2
x = np.arange(n) - centre
background = 100 + 2 * x                       # linear: exact under the straight line
peak = np.zeros(n)
peak[centre - 3:centre + 4] = [5, 20, 60, 100, 60, 20, 5]
total, rs = nema.split_profile(background + peak, centre, k)
check(abs((total - rs) - peak.sum()) < 1e-9, f"trues of a peak on a linear background: {total - rs} = {peak.sum()}")
check(abs(rs - background.sum()) < 1e-9, "randoms + scatter = the background")

# Each projection's maximum goes to the centre, whatever its position.
h = np.zeros((3, 4, n), dtype=np.int64)
for a, pos in enumerate([centre - 10, centre, centre + 7, centre + 20]):
    h[:, a, pos] = 10
    h[:, a, pos + 1] = 3
sino = nema.Sinograms(h, np.zeros_like(h), centre, 7 / 9)
prof = nema.profile(h, nema.shifts_of(sino))
check(prof[centre] == 4 * 3 * 10 and prof[centre + 1] == 4 * 3 * 3 and prof.sum() == h.sum(),
      "every projection's maximum shifted onto the centre bin, no count lost")

# Radial distance: the line between two crystals' centres against the point-line distance.
g = Geometry()
rng = np.random.default_rng(1)
ca = rng.integers(0, g.crystal_count, 2000)
cb = rng.integers(0, g.crystal_count, 2000)
keep = g.crystal_in_ring(ca) != g.crystal_in_ring(cb)
ca, cb = ca[keep], cb[keep]
_, s, sl = nema.sinogram_coords(g, ca, cb, 180)
pa, pb = g.position_mm(ca), g.position_mm(cb)
d = pb[:, :2] - pa[:, :2]
dist = np.abs(pa[:, 0] * d[:, 1] - pa[:, 1] * d[:, 0]) / np.hypot(d[:, 0], d[:, 1])
check(np.allclose(np.abs(s), dist, atol=1e-9), "|s| is the distance from the axis to the line")
check(np.array_equal(sl, g.ring(ca) + g.ring(cb)), "slice = ring_a + ring_b (single-slice rebinning)")

# Signed radial distance: s = p . n with n the line's unit normal whose angle lies in [0, pi),
# for every line including those parallel to the y axis (dx = 0, normal angle 0 or pi),
# which must wrap to angle 0 with s = +x. Pairs with equal x: a crystal and its mirror
# image across the x axis.
ring0 = np.arange(g.crystals_per_ring)
x0 = g.position_mm(ring0)[:, 0]
mirror = [(i, j) for i in ring0 for j in ring0 if i < j and x0[i] == x0[j]]
check(len(mirror) > 0, f"lines with dx = 0 exist in the default ring ({len(mirror)})")
ma = np.array([m[0] for m in mirror] + list(ca))
mb = np.array([m[1] for m in mirror] + list(cb))
a_bin, s, _ = nema.sinogram_coords(g, ma, mb, 180)
pa, pb = g.position_mm(ma), g.position_mm(mb)
nx, ny = -(pb[:, 1] - pa[:, 1]), pb[:, 0] - pa[:, 0]
norm = np.hypot(nx, ny)
nx, ny = nx / norm, ny / norm
flip = (ny < 0) | ((ny == 0) & (nx < 0))
nx, ny = np.where(flip, -nx, nx), np.where(flip, -ny, ny)
phi = np.arctan2(ny, nx)
# (A line whose normal is within rounding of angle pi may fall on either side of the wrap.)
clear = np.abs(phi - np.pi) > 1e-9
check(np.allclose(s[clear], (pa[:, 0] * nx + pa[:, 1] * ny)[clear], atol=1e-9),
      "signed s = p . n, n's angle in [0, pi)")
check(np.array_equal(s[:len(mirror)], pa[:len(mirror), 0]), "a line parallel to y at x has s = +x")
near = np.abs(phi / np.pi * 180 - np.round(phi / np.pi * 180)) > 1e-6
check(np.array_equal(a_bin[near], np.minimum((phi[near] / np.pi * 180).astype(int), 179)),
      "angle bin of the normal's angle")
check(np.all(a_bin[:len(mirror)] == 0), "lines parallel to y fall in angle bin 0")
sys.exit(1 if failures else 0)

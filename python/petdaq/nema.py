"""NEMA NU 4-2008 count-rate analysis (section 4 of the standard) of list-mode files.

The method, as the standard and the published evaluations describe it (docs/nema.md):
every prompt's line of response goes into a sinogram per slice after single-slice rebinning
(the slice of the mean axial position); sinogram pixels further than 8 mm beyond the
phantom's edge are set to zero; in each projection angle the line source's peak is shifted
to the centre; the projections are summed into one profile per slice; the counts under the
peak above the straight line joining the profile at -7 mm and +7 mm, plus nothing outside,
are the trues; the rest (outside the +-7 mm band, and under the line inside it) are randoms
plus scatter. Randoms come from the delayed-window sinogram (the same mask and shifts), or,
without one, from the scatter fraction of the lowest activity (the standard's alternative).

Rates: R_tot (all prompts in the mask), R_t, R_s, R_r per second; SF = R_s / (R_t + R_s);
NECR = R_t^2 / R_tot.
"""
import math
import os
from dataclasses import dataclass, field

import numpy as np

from .geometry import Geometry
from .plm import read_plm

PHANTOMS = {  # radius, length, line-source offset (mm): NU 4-2008 section 4.1
    "nema-mouse": (12.5, 70.0, 10.0),
    "nema-rat": (25.0, 150.0, 17.5),
}
BAND_MM = 7.0       # half-width of the band around the line source
EDGE_MM = 8.0       # sinogram pixels this far beyond the phantom edge are set to zero


@dataclass
class Options:
    phantom_radius_mm: float = 12.5
    bin_mm: float = 7.0 / 9       # radial bin; BAND_MM is made a whole number of bins
    angles: int = 0               # 0: crystals per ring / 2
    randoms: str = "delayed"      # delayed | scatter-fraction


def sinogram_coords(geom, crystal_a, crystal_b, angles):
    """Per LOR: angle bin, signed radial distance s (mm), SSRB slice (ring_a + ring_b)."""
    pos = geom.lut()
    pa = pos[np.asarray(crystal_a, dtype=np.int64)]
    pb = pos[np.asarray(crystal_b, dtype=np.int64)]
    dx, dy = pb[:, 0] - pa[:, 0], pb[:, 1] - pa[:, 1]
    phi = np.arctan2(dx, -dy)                # the LOR's normal (-dy, dx) ... as an angle
    s = pa[:, 0] * np.cos(phi) + pa[:, 1] * np.sin(phi)
    # Into [0, pi): a line at phi and at phi - pi is the same line with s of opposite sign.
    # arctan2 gives (-pi, pi]; pi itself (a line parallel to y, dx = 0) wraps to 0 too.
    flip = (phi < 0) | (phi >= np.pi)
    phi = np.where(phi < 0, phi + np.pi, np.where(phi >= np.pi, phi - np.pi, phi))
    s = np.where(flip, -s, s)
    a = np.minimum((phi / np.pi * angles).astype(np.int64), angles - 1)
    slice_ = geom.ring(crystal_a) + geom.ring(crystal_b)
    return a, s, slice_


@dataclass
class Sinograms:
    prompts: np.ndarray      # [slice][angle][radial bin]
    delayed: np.ndarray
    centre: int              # the radial bin of s = 0
    bin_mm: float


def radial_grid(geom, opt):
    """(bin width w, centre bin, bin count): BAND_MM is a whole number of bins."""
    k = max(1, round(BAND_MM / opt.bin_mm))
    w = BAND_MM / k
    half = int(math.ceil((geom.ring_radius_mm + geom.crystal_depth_mm) / w)) + 1
    return w, half, 2 * half + 1


def sinogram_bins(geom, records, opt):
    """Per record: (slice, angle bin, radial bin, inside the mask). The mask is the
    standard's: pixels whose centre lies more than 8 mm beyond the phantom's edge are zero.
    The truth comparison (tests/tools/nema_test.py) keeps the same records through this."""
    angles = opt.angles or geom.crystals_per_ring // 2
    w, half, nbins = radial_grid(geom, opt)
    a, s, sl = sinogram_coords(geom, records["crystal_a"], records["crystal_b"], angles)
    r = np.rint(s / w).astype(np.int64) + half
    ok = (r >= 0) & (r < nbins) & (np.abs((r - half) * w) <= opt.phantom_radius_mm + EDGE_MM)
    return sl, a, r, ok


def make_sinograms(geom, prompts, delayed, opt):
    angles = opt.angles or geom.crystals_per_ring // 2
    w, half, nbins = radial_grid(geom, opt)
    slices = 2 * geom.ring_count - 1
    out = []
    for rec in (prompts, delayed):
        h = np.zeros((slices, angles, nbins), dtype=np.int64)
        if rec.size:
            sl, a, r, ok = sinogram_bins(geom, rec, opt)
            np.add.at(h, (sl[ok], a[ok], r[ok]), 1)
        out.append(h)
    return Sinograms(out[0], out[1], half, w)


def shifts_of(sino):
    """Per angle, the shift that brings the line source's peak to the centre: the maximum of
    the projection summed over slices (the line is parallel to the axis, so one position
    serves every slice and low-count slices do not pick noise)."""
    proj = sino.prompts.sum(axis=0)
    return sino.centre - np.argmax(proj, axis=1)


def profile(h, shifts):
    """The sum over slices and angles of the projections, each shifted by its angle's shift."""
    summed = h.sum(axis=0)  # over slices: the shifts are the same in every slice
    n = summed.shape[1]
    out = np.zeros(n, dtype=np.int64)
    for a, sh in enumerate(shifts):
        row = summed[a]
        if sh >= 0:
            out[sh:] += row[:n - sh]
        else:
            out[:n + sh] += row[-sh:]
    return out


def split_profile(p, centre, k):
    """(total, randoms + scatter) counts of a profile by the +-7 mm rule: the band is the
    bins from centre - k to centre + k (the edge bins half in it); under the peak the
    background is the trapezoid between the profile at the band's edges."""
    p = p.astype(float)
    lo, hi = centre - k, centre + k
    total = p.sum()
    outside = p[:lo].sum() + p[hi + 1:].sum() + 0.5 * (p[lo] + p[hi])
    under = 0.5 * (p[lo] + p[hi]) * (2 * k)
    return total, outside + under


@dataclass
class Point:
    name: str
    activity_MBq: float
    duration_s: float
    prompts: int = 0
    delayed: int = 0
    counts_total: float = 0
    counts_rs: float = 0
    counts_delayed: float = 0
    R_tot: float = 0
    R_t: float = 0
    R_s: float = 0
    R_r: float = 0
    SF: float = 0
    NECR: float = 0
    profile: np.ndarray = field(default=None, repr=False)


def duration_of(plm_data):
    times = [r["time_a"] for r in (plm_data.prompts, plm_data.delayed) if r.size]
    if not times:
        return 0.0
    t = np.concatenate(times)
    return float(int(t.max()) - int(t.min())) * plm_data.tick_ps * 1e-12


def analyse(files, geom, opt):
    """files: [(path, activity MBq, duration s or None)]; the points in activity order."""
    points = []
    for path, activity, duration in files:
        d = read_plm(path)
        if d.header["crystal_count"] != geom.crystal_count:
            raise ValueError(f"{path}: {d.header['crystal_count']} crystals, the configuration "
                             f"{geom.crystal_count}")
        sino = make_sinograms(geom, d.prompts, d.delayed, opt)
        shifts = shifts_of(sino)
        k = round(BAND_MM / sino.bin_mm)
        prof = profile(sino.prompts, shifts)
        total, rs = split_profile(prof, sino.centre, k)
        dur = duration if duration else duration_of(d)
        if not dur > 0:
            raise ValueError(f"{path}: no acquisition time (no records, or give FILE=MBQ@SECONDS)")
        pt = Point(os.path.basename(path), activity, dur, int(d.prompts.size), int(d.delayed.size),
                   total, rs, float(sino.delayed.sum()), profile=prof)
        points.append(pt)
    points.sort(key=lambda p: p.activity_MBq)
    if opt.randoms == "delayed" and not any(p.delayed for p in points):
        raise ValueError("no delayed coincidences in any file (coincidence.delayed.enabled off?): "
                         "use --randoms scatter-fraction")
    sf_low = None
    for pt in points:
        T = pt.duration_s
        pt.R_tot = pt.counts_total / T
        pt.R_t = (pt.counts_total - pt.counts_rs) / T
        if opt.randoms == "delayed":
            pt.R_r = pt.counts_delayed / T
            pt.R_s = pt.counts_rs / T - pt.R_r
        else:
            if sf_low is None:  # the lowest activity: randoms taken as negligible
                sf_low = pt.counts_rs / pt.counts_total if pt.counts_total else 0.0
            pt.R_s = sf_low / (1 - sf_low) * pt.R_t if sf_low < 1 else 0.0
            pt.R_r = pt.counts_rs / T - pt.R_s
            if abs(pt.R_r) < 1e-9 * pt.R_tot:  # the lowest activity: 0 by construction
                pt.R_r = 0.0
        pt.SF = pt.R_s / (pt.R_t + pt.R_s) if pt.R_t + pt.R_s > 0 else 0.0
        pt.NECR = pt.R_t ** 2 / pt.R_tot if pt.R_tot > 0 else 0.0
    return points


def peak(points):
    i = int(np.argmax([p.NECR for p in points]))
    return points[i]


def table(points):
    rows = ["| activity MBq | duration s | prompts | R_tot /s | R_t /s | R_s /s | R_r /s | SF | NECR /s |",
            "|---|---|---|---|---|---|---|---|---|"]
    for p in points:
        rows.append(f"| {p.activity_MBq:g} | {p.duration_s:.4g} | {p.prompts} | {p.R_tot:.5g} | {p.R_t:.5g} | "
                    f"{p.R_s:.5g} | {p.R_r:.5g} | {p.SF:.4f} | {p.NECR:.5g} |")
    return "\n".join(rows) + "\n"


def plots(points, out_dir, bin_mm):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    a = [p.activity_MBq for p in points]
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for attr, label in (("R_tot", "total"), ("R_t", "trues"), ("R_s", "scatter"), ("R_r", "randoms"),
                        ("NECR", "NECR")):
        ax.plot(a, [getattr(p, attr) / 1e3 for p in points], "o-", label=label)
    pk = peak(points)
    ax.axvline(pk.activity_MBq, color="gray", ls=":", lw=0.8)
    ax.set_xlabel("activity (MBq)")
    ax.set_ylabel("count rate (kcps)")
    ax.set_title(f"NEMA NU 4 count rates: peak NECR {pk.NECR / 1e3:.1f} kcps at {pk.activity_MBq:g} MBq")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "count_rate.png"), dpi=80)
    plt.close(fig)
    p = points[0]
    k = round(BAND_MM / bin_mm)
    w = BAND_MM / k
    centre = (p.profile.size - 1) // 2
    s = (np.arange(p.profile.size) - centre) * w
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.semilogy(s, np.maximum(p.profile, 0.5), drawstyle="steps-mid", label="summed profile")
    ax.plot([-BAND_MM, BAND_MM], [p.profile[centre - k], p.profile[centre + k]], "r-",
            label="background under the peak")
    ax.axvspan(-BAND_MM, BAND_MM, color="orange", alpha=0.15)
    ax.set_xlabel("radial distance from the line source (mm)")
    ax.set_ylabel("counts")
    ax.set_title(f"profile at {p.activity_MBq:g} MBq")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "profile.png"), dpi=80)
    plt.close(fig)

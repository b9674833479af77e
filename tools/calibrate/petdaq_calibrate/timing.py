"""Step 3, time offsets: per-crystal offsets from the prompts' time differences.

The frames go through petdaq-offline with the crystal map and energy tables just made and no
time offsets. For a prompt between crystals a (earlier) and b, dt = t_b - t_a = (time of
flight to b - time of flight to a) + (delay_b - delay_a) + noise. The time of flight comes
from geometry: from the source point (a point source), or, for a uniform cylinder, from the
middle of the stretch of the line of response inside the cylinder (every point of that
stretch is equally likely, and dt is linear along it). The delays of all crystals are then
the least-squares solution of delay_b - delay_a = dt - expected over all prompts at once:
the normal equations are a graph Laplacian over crystals (degree on the diagonal, minus the
pair count off it), solved by conjugate gradients with the mean delay fixed at zero, twice
more after dropping prompts further than 3 robust sigma from the fit (randoms and scatter).
The offset table is minus the delay, rounded to ticks.
"""
import os
import subprocess
from dataclasses import dataclass

import numpy as np
import yaml
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from scipy.sparse.linalg import cg

from . import CalibrationError
from .listmode import read_coincidences
from .scanner import LIGHT_MM_PER_PS


@dataclass
class Source:
    shape: str = "point"             # point | cylinder
    centre_mm: tuple = (0.0, 0.0, 0.0)
    radius_mm: float = 15.0
    length_mm: float = 70.0


@dataclass
class TimingOptions:
    min_prompts_per_crystal: int = 20
    outlier_sigmas: float = 3.0
    iterations: int = 3
    min_link_fraction: float = 0.02


@dataclass
class TimingResult:
    prompts: int                     # prompts in the .plm file
    used: int                        # in the final fit
    per_crystal: np.ndarray          # prompts per crystal (global id) in the final fit
    residual_rms_ticks: float        # of the final fit's prompts
    residual_sigma_ticks: float      # robust (1.4826 MAD)
    offset_sigma_ticks: float        # expected statistical error per crystal (median)
    raw_dt: np.ndarray               # dt - expected before correction (ticks), a sample
    corrected_dt: np.ndarray         # after
    offsets_ticks: np.ndarray        # float solution


def run_offline(offline, config_doc, config_path, frames, position_lut, energy_correction, work_dir,
                histograms=None):
    """Coincidences of the frames with the given tables and no time offsets; the .plm path.
    With `histograms`, petdaq-offline also writes the run's histogram file there."""
    doc = dict(config_doc)
    cal = dict(doc.get("calibration") or {})
    cal["position_lut"] = os.path.abspath(position_lut)
    cal["energy_correction"] = os.path.abspath(energy_correction)
    cal["time_offsets"] = ""
    doc["calibration"] = cal
    output = dict(doc.get("output") or {})
    output["file"] = {"enabled": False}
    doc["output"] = output
    conf = os.path.join(work_dir, "offline.yaml")
    with open(conf, "w", encoding="utf-8") as f:
        yaml.safe_dump(doc, f, sort_keys=False)
    plm = os.path.join(work_dir, "prompts.plm")
    cmd = [offline, "--config", conf, "--input", os.path.abspath(frames), "--output", plm,
           "--backend", "cpu", "--quiet"]
    if histograms:
        cmd += ["--histograms", histograms]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:
        raise CalibrationError(f"{offline}: cannot run petdaq-offline: {e.strerror}") from e
    if done.returncode != 0:
        raise CalibrationError(f"petdaq-offline failed on {frames} (config from {config_path}), "
                               f"exit {done.returncode}: {done.stderr.strip()}")
    return plm


def expected_dt_ticks(positions, a, b, source, tick_ps):
    """Expected t_b - t_a of prompts between crystals a and b; NaN where the line misses the
    source cylinder."""
    pa, pb = positions[a], positions[b]
    c = np.asarray(source.centre_mm, dtype=float)
    if source.shape == "point":
        da = np.linalg.norm(pa - c, axis=1)
        db = np.linalg.norm(pb - c, axis=1)
        return (db - da) / LIGHT_MM_PER_PS / tick_ps
    d = pb - pa
    length = np.linalg.norm(d, axis=1)
    # Transaxial: |(pa - c)_xy + t d_xy| <= r; axial: |pa_z - c_z + t d_z| <= L / 2.
    ox, oy = pa[:, 0] - c[0], pa[:, 1] - c[1]
    qa = d[:, 0] ** 2 + d[:, 1] ** 2
    qb = 2 * (ox * d[:, 0] + oy * d[:, 1])
    qc = ox ** 2 + oy ** 2 - source.radius_mm ** 2
    disc = qb * qb - 4 * qa * qc
    with np.errstate(invalid="ignore", divide="ignore"):
        root = np.sqrt(disc)
        t0, t1 = (-qb - root) / (2 * qa), (-qb + root) / (2 * qa)
        oz = pa[:, 2] - c[2]
        za = (-0.5 * source.length_mm - oz) / d[:, 2]
        zb = (0.5 * source.length_mm - oz) / d[:, 2]
        flat = np.abs(d[:, 2]) < 1e-12
        inside_z = np.abs(oz) <= 0.5 * source.length_mm
        z0 = np.where(flat, np.where(inside_z, -np.inf, np.inf), np.minimum(za, zb))
        z1 = np.where(flat, np.where(inside_z, np.inf, -np.inf), np.maximum(za, zb))
        lo = np.maximum(np.maximum(t0, z0), 0.0)
        hi = np.minimum(np.minimum(t1, z1), 1.0)
        mid = 0.5 * (lo + hi)
        dt_mm = (1 - 2 * mid) * length
    dt_mm[~((disc > 0) & (hi > lo))] = np.nan
    return dt_mm / LIGHT_MM_PER_PS / tick_ps


def solve_offsets(a, b, r, n, options):
    """Least-squares delays (mean zero over the crystals seen) from r = delay_b - delay_a + noise."""
    keep = np.ones(a.size, dtype=bool)
    delay = np.zeros(n)
    sigma = np.inf
    for _ in range(options.iterations):
        aa, bb, rr = a[keep], b[keep], r[keep]
        deg = np.bincount(aa, minlength=n) + np.bincount(bb, minlength=n)
        seen = deg > 0
        rows = np.concatenate([aa, bb, np.arange(n)])
        cols = np.concatenate([bb, aa, np.arange(n)])
        vals = np.concatenate([-np.ones(aa.size), -np.ones(aa.size), deg + (~seen)])
        lap = coo_matrix((vals, (rows, cols)), shape=(n, n)).tocsr()
        rhs = np.bincount(bb, weights=rr, minlength=n) - np.bincount(aa, weights=rr, minlength=n)
        # The Laplacian is singular along the constant; the right-hand side sums to zero, so
        # CG converges to a solution, centred afterwards. A point at the mean helps it start.
        delay, info = cg(lap, rhs, x0=np.zeros(n), tol=1e-10, maxiter=5000)
        if info != 0:
            raise CalibrationError(f"the least-squares solve of the time offsets did not converge ({info})")
        delay[seen] -= delay[seen].mean()
        delay[~seen] = 0
        res = r - (delay[b] - delay[a])
        sigma = 1.4826 * np.median(np.abs(res[keep] - np.median(res[keep])))
        keep = np.abs(res) < options.outlier_sigmas * sigma
    return delay, keep, sigma, deg


def bdm_groups(a, b, scanner, options):
    """Groups of BDMs that the prompts link. A BDM pair counts as linked when it holds at
    least `min_link_fraction` of the prompts of the busier pair either BDM has: randoms link
    every pair a little, and cannot be trusted to relate the offsets."""
    ring = scanner.crystals_per_ring
    cpr_bdm = scanner.du_transaxial * scanner.crystal_transaxial
    rows_bdm = scanner.du_axial * scanner.crystal_axial

    def bdm_of(c):
        b_trans = (c % ring) // cpr_bdm
        b_axial = (c // ring) // rows_bdm
        return b_axial * scanner.bdm_transaxial + b_trans

    nb = scanner.bdm_count
    ba, bb = bdm_of(a), bdm_of(b)
    counts = np.bincount(np.minimum(ba, bb) * nb + np.maximum(ba, bb), minlength=nb * nb).reshape(nb, nb)
    counts = counts + counts.T - np.diag(np.diag(counts))
    off = counts - np.diag(np.diag(counts))
    best = off.max(axis=1)
    linked = off >= options.min_link_fraction * np.minimum(best[:, None], best[None, :])
    linked &= off > 0
    ncomp, comp = connected_components(linked, directed=False)
    return [list(np.flatnonzero(comp == k)) for k in range(ncomp)]


def make_time_offsets(plm, scanner, source, options, name=None):
    """The offset table from a .plm of prompts made without time offsets; messages name
    `name` (the frame file it came from) or the .plm."""
    records, head = read_coincidences(plm)
    name = name or plm
    if int(head["crystal_count"]) != scanner.crystal_count:
        raise CalibrationError(f"{name}: {head['crystal_count']} crystals where the scanner has "
                               f"{scanner.crystal_count}")
    n = scanner.crystal_count
    if records.size == 0:
        raise CalibrationError(f"{name}: no prompt coincidences: the acquisition has none to time")
    # A record's a is its earlier single, so its dt is never negative; turned so that a is
    # the lower crystal id, dt is the usual signed difference and its noise is symmetric.
    ca = records["crystal_a"].astype(np.int64)
    cb = records["crystal_b"].astype(np.int64)
    swap = ca > cb
    a, b = np.where(swap, cb, ca), np.where(swap, ca, cb)
    dt = np.where(swap, -records["dt"].astype(float), records["dt"].astype(float))
    positions = scanner.crystal_positions_mm()
    expected = expected_dt_ticks(positions, a, b, source, scanner.tick_ps)
    valid = np.isfinite(expected)
    a, b = a[valid], b[valid]
    r = dt[valid] - expected[valid]
    delay, keep, sigma, deg = solve_offsets(a, b, r, n, options)
    seen = deg > 0
    problems = []
    few = np.flatnonzero(deg < options.min_prompts_per_crystal)
    if few.size:
        problems.append(f"{few.size} crystals with fewer than {options.min_prompts_per_crystal} "
                        f"prompts (crystal {few[0]}: {deg[few[0]]}): too few counts")
    groups = bdm_groups(a[keep], b[keep], scanner, options)
    if len(groups) > 1:
        shown = "; ".join("BDMs " + ",".join(map(str, g)) for g in groups[:6])
        problems.append(
            f"the prompts link the BDMs only within {len(groups)} separate groups ({shown}), "
            "so the offsets of one group cannot be related to another's: a point source at "
            "the centre sees only facing BDMs; use a uniform cylinder or an off-centre point")
    if problems:
        raise CalibrationError(f"{name}: " + "; ".join(problems))
    res = r[keep] - (delay[b[keep]] - delay[a[keep]])
    offset_sigma = float(np.median(sigma / np.sqrt(deg[seen])))
    sample = slice(None, 200000)
    result = TimingResult(int(records.size), int(keep.sum()), deg, float(np.sqrt(np.mean(res ** 2))),
                          float(sigma), offset_sigma, r[sample].copy(),
                          (r - (delay[b] - delay[a]))[sample].copy(), -delay)
    table = np.rint(-delay).astype("<i4")
    return table, result

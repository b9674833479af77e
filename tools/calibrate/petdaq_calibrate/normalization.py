"""Component-based normalisation from a uniform cylinder acquisition (docs/calibrate.md,
"Normalisation"; the table's format is DESIGN section 3, "Normalisation table").

The expected prompts on the line of response (i, j) of a centred uniform cylinder are modelled
as

    n_ij = K · d_i · d_j · g[c(i, j)] · a[r_i, r_j] · P_ij

P_ij: the cylinder's projection on the line (chord length L through it, attenuated by
exp(-mu L) since the activity fills the water); d_i: the crystal's efficiency as its fan sum
sees it (Defrise et al. 1991: fan sums over a uniform source); g: the transaxial geometric
factor of the line's class under the ring's rotation by one BDM panel (the panel difference
and the two crystals' positions across their panels: radial profile and crystal interference
together); a: the axial factor of the ring pair (plane efficiencies). The factors are the
Poisson maximum-likelihood solution, found by updating each in turn as observed / expected
over the lines it multiplies (Casey et al. 1995 do the same sums by hand). Then d_i splits
into the block profile b[r, t] (the mean of d over the crystals at ring r and position t
across a panel, one per panel: the crystal-in-block factor) and the crystal efficiency
eps_i = d_i / b[r_i, t_i].

Only lines through the cylinder (P_ij > 0) carry its information: the geometric factor of a
class no such line belongs to is 1 (the report counts them); use a cylinder as wide as the
field of view to be imaged.
"""
import math
import os
from dataclasses import dataclass

import numpy as np

from . import CalibrationError
from .listmode import PROMPTS, read_coincidences

WATER_MU_PER_MM = 0.0096  # 511 keV, Compton (Klein-Nishina) in water
CRYSTAL_FILE = "norm_crystal_efficiency.npy"
BLOCK_FILE = "norm_block_profile.npy"
GEOMETRIC_FILE = "norm_geometric.npy"
AXIAL_FILE = "norm_axial.npy"


@dataclass
class NormOptions:
    radius_mm: float = 15.0
    length_mm: float = 70.0
    mu_per_mm: float = WATER_MU_PER_MM
    iterations: int = 30
    min_counts_per_crystal: float = 100.0


class Layout:
    """Ring, panel and position across the panel of every crystal (DESIGN section 3)."""

    def __init__(self, scanner):
        self.n = scanner.crystal_count
        self.per_ring = scanner.crystals_per_ring
        self.per_panel = scanner.du_transaxial * scanner.crystal_transaxial
        self.panels = scanner.bdm_transaxial
        self.rings = self.n // self.per_ring
        c = np.arange(self.n)
        self.ring = c // self.per_ring
        in_ring = c % self.per_ring
        self.panel = in_ring // self.per_panel
        self.pos = in_ring % self.per_panel
        self.positions = scanner.crystal_positions_mm()

    def geometric_class(self, i, j):
        """Class of the pair under rotation by a panel, the same for (i, j) and (j, i)."""
        p, t = self.panel, self.pos
        dp = (p[j] - p[i]) % self.panels
        k1 = (dp * self.per_panel + t[i]) * self.per_panel + t[j]
        k2 = (((self.panels - dp) % self.panels) * self.per_panel + t[j]) * self.per_panel + t[i]
        return np.minimum(k1, k2)

    def axial_class(self, i, j):
        ri, rj = self.ring[i], self.ring[j]
        return np.minimum(ri, rj) * self.rings + np.maximum(ri, rj)

    @property
    def geometric_classes(self):
        return self.panels * self.per_panel * self.per_panel


def chord_mm(a, b, radius, half_length):
    """Length of the segments a-b (arrays of points, mm) inside the cylinder |xy| < radius,
    |z| < half_length."""
    d = b - a
    qa = d[:, 0] ** 2 + d[:, 1] ** 2
    qb = a[:, 0] * d[:, 0] + a[:, 1] * d[:, 1]
    qc = a[:, 0] ** 2 + a[:, 1] ** 2 - radius ** 2
    disc = qb * qb - qa * qc
    ok = (disc > 0) & (qa > 0)
    sq = np.sqrt(np.where(ok, disc, 0.0))
    safe = np.where(ok, qa, 1.0)
    lo = np.where(ok, (-qb - sq) / safe, 1.0)
    hi = np.where(ok, (-qb + sq) / safe, 0.0)
    dz = d[:, 2]
    moving = np.abs(dz) > 1e-12
    dzs = np.where(moving, dz, 1.0)
    z1 = (-half_length - a[:, 2]) / dzs
    z2 = (half_length - a[:, 2]) / dzs
    inside_z = np.abs(a[:, 2]) < half_length
    zlo = np.where(moving, np.minimum(z1, z2), np.where(inside_z, -np.inf, np.inf))
    zhi = np.where(moving, np.maximum(z1, z2), np.where(inside_z, np.inf, -np.inf))
    lo = np.maximum.reduce([lo, zlo, np.zeros_like(lo)])
    hi = np.minimum.reduce([hi, zhi, np.ones_like(hi)])
    return np.maximum(hi - lo, 0.0) * np.sqrt(qa + dz * dz)


class Lines:
    """The lines of response through the cylinder: crystals i < j, class indices, P_ij."""

    def __init__(self, layout, opts, rows_per_chunk=256):
        n = layout.n
        pos = layout.positions
        parts_i, parts_j, parts_p = [], [], []
        for start in range(0, n - 1, rows_per_chunk):
            rows = np.arange(start, min(n - 1, start + rows_per_chunk))
            i = np.repeat(rows, n - 1 - rows)
            j = np.concatenate([np.arange(r + 1, n) for r in rows])
            length = chord_mm(pos[i], pos[j], opts.radius_mm, 0.5 * opts.length_mm)
            keep = length > 0
            parts_i.append(i[keep].astype(np.int64))
            parts_j.append(j[keep].astype(np.int64))
            lk = length[keep]
            parts_p.append(lk * np.exp(-opts.mu_per_mm * lk))
        self.i = np.concatenate(parts_i)
        self.j = np.concatenate(parts_j)
        self.projection = np.concatenate(parts_p)
        self.key = self.i * n + self.j  # ascending: rows in order, j ascending
        self.cls = layout.geometric_class(self.i, self.j)
        self.ax = layout.axial_class(self.i, self.j)
        self.n_crystals = n
        if self.i.size == 0:
            raise CalibrationError("no line of response crosses the source cylinder "
                                   "(--source-radius-mm, --source-length-mm)")

    def counts(self, records):
        """Prompts per line (those on lines that miss the cylinder are left out), and how
        many prompts were used."""
        a = records["crystal_a"].astype(np.int64)
        b = records["crystal_b"].astype(np.int64)
        lo, hi = np.minimum(a, b), np.maximum(a, b)
        ok = (lo != hi) & (hi < self.n_crystals)
        key = lo[ok] * self.n_crystals + hi[ok]
        at = np.searchsorted(self.key, key)
        at = np.minimum(at, self.key.size - 1)
        hit = self.key[at] == key
        return np.bincount(at[hit], minlength=self.key.size).astype(np.float64), int(hit.sum())


@dataclass
class NormResult:
    efficiency: np.ndarray      # eps_i, [crystal]
    block: np.ndarray           # b, [ring, position]
    geometric: np.ndarray       # g, [panel difference, t_i, t_j]
    axial: np.ndarray           # a, [ring, ring]
    fan_counts: np.ndarray      # prompts on lines through the cylinder, per crystal
    prompts: int                # prompts read
    used: int                   # prompts on lines through the cylinder
    lines: int                  # lines through the cylinder
    classes_measured: int
    classes_total: int
    iterations: int
    max_change: float           # relative change of d in the last iteration

    @property
    def predicted_sigma(self):
        """Statistical rms of eps from the fan counts (Poisson: 1 / sqrt(counts))."""
        return float(np.sqrt(np.mean(1.0 / np.maximum(self.fan_counts, 1.0))))


def _fit(lines, layout, counts, opts):
    n = layout.n
    i, j, proj, cls, ax = lines.i, lines.j, lines.projection, lines.cls, lines.ax
    n_g, n_a = layout.geometric_classes, layout.rings * layout.rings
    fan = np.bincount(i, counts, n) + np.bincount(j, counts, n)
    low = np.flatnonzero(fan < opts.min_counts_per_crystal)
    if low.size:
        raise CalibrationError(
            f"{low.size} crystals have fewer than {opts.min_counts_per_crystal:g} prompts on lines "
            f"through the source (crystal {low[0]}: {fan[low[0]]:.0f}): acquire longer "
            f"(docs/calibrate.md gives the length the figures need)")
    d = np.ones(n)
    g = np.ones(n_g)
    a = np.ones(n_a)
    g_num = np.bincount(cls, counts, n_g)
    a_num = np.bincount(ax, counts, n_a)
    change = 0.0
    for _ in range(opts.iterations):
        base = proj * g[cls] * a[ax]
        den = np.bincount(i, d[j] * base, n) + np.bincount(j, d[i] * base, n)
        new_d = fan / den
        new_d /= new_d.mean()
        change = float(np.max(np.abs(new_d / d - 1.0)))
        d = new_d
        e = d[i] * d[j] * proj
        g_den = np.bincount(cls, e * a[ax], n_g)
        g = np.where(g_den > 0, g_num / np.where(g_den > 0, g_den, 1.0), 1.0)
        a_den = np.bincount(ax, e * g[cls], n_a)
        a = np.where(a_den > 0, a_num / np.where(a_den > 0, a_den, 1.0), 1.0)
        a_meas = a_den > 0
        a[a_meas] /= a[a_meas].mean()
    return d, g, a, fan, change, g_num


def make_normalization(plm, scanner, opts):
    records, head = read_coincidences(plm, PROMPTS)
    if int(head["crystal_count"]) != scanner.crystal_count:
        raise CalibrationError(f"{plm}: {int(head['crystal_count'])} crystals, the configuration "
                               f"{scanner.crystal_count}")
    layout = Layout(scanner)
    lines = Lines(layout, opts)
    counts, used = lines.counts(records)
    d, g, a, fan, change, g_counts = _fit(lines, layout, counts, opts)

    # The block profile: d averaged over the panels at each ring and position across a panel.
    rp = layout.ring * layout.per_panel + layout.pos
    block = np.bincount(rp, d, layout.rings * layout.per_panel) / np.bincount(
        rp, minlength=layout.rings * layout.per_panel)
    block /= block.mean()
    eps = d / block[rp]

    # Every (panel difference, t_i, t_j) entry from its class, measured or 1.
    P, T = layout.panels, layout.per_panel
    dp, ti, tj = np.meshgrid(np.arange(P), np.arange(T), np.arange(T), indexing="ij")
    k1 = (dp * T + ti) * T + tj
    k2 = (((P - dp) % P) * T + tj) * T + ti
    measured = g_counts > 0
    geo = g.copy()
    # Scale: the mean efficiency over the measured lines is 1 (the global factor is the
    # reconstruction's calibration, not the table's).
    eff = eps[lines.i] * eps[lines.j] * block[rp[lines.i]] * block[rp[lines.j]] * g[lines.cls] * a[lines.ax]
    geo[measured] /= eff.mean()
    geo[~measured] = 1.0
    geometric = geo[np.minimum(k1, k2)].astype(np.float32)
    r1, r2 = np.meshgrid(np.arange(layout.rings), np.arange(layout.rings), indexing="ij")
    axial = a[np.minimum(r1, r2) * layout.rings + np.maximum(r1, r2)].astype(np.float32)
    return NormResult(efficiency=eps.astype(np.float32),
                      block=block.reshape(layout.rings, T).astype(np.float32),
                      geometric=geometric, axial=axial, fan_counts=fan, prompts=int(records.size),
                      used=used, lines=int(lines.i.size),
                      classes_measured=int(measured.sum()),
                      classes_total=int(np.unique(np.minimum(k1, k2)).size),
                      iterations=opts.iterations, max_change=change)


def lor_efficiency(layout, tables, i, j):
    """The table's relative efficiency of the lines (i, j) (DESIGN section 3)."""
    eps, block, geometric, axial = tables
    lo, hi = np.minimum(i, j), np.maximum(i, j)
    dp = (layout.panel[hi] - layout.panel[lo]) % layout.panels
    return (eps[lo] * eps[hi] * block[layout.ring[lo], layout.pos[lo]]
            * block[layout.ring[hi], layout.pos[hi]]
            * geometric[dp, layout.pos[lo], layout.pos[hi]]
            * axial[layout.ring[lo], layout.ring[hi]]).astype(np.float64)


@dataclass
class Flatness:
    """chi2 / degrees of freedom of an acquisition's counts against the cylinder's projection
    times the table's efficiency, grouped several ways, and the same without the table.

    With a perfect model chi2/dof is at most 1 + r, r = check prompts / calibration prompts:
    the table's own Poisson noise (its factors come from 1/r times the check's counts) adds r
    to the check's where a group follows one fitted factor (a crystal's fan, a class, a ring
    pair), less where a group averages many (a sinogram bin). `expected` is 1 + r, `limit` it
    plus 3 standard deviations of chi2/dof."""
    prompts: int
    ratio: float
    groups: dict        # name -> (chi2/dof with the table, without it, groups, expected, limit)


def check_flatness(plm, scanner, opts, tables, calibration_prompts):
    records, _ = read_coincidences(plm, PROMPTS)
    layout = Layout(scanner)
    lines = Lines(layout, opts)
    counts, used = lines.counts(records)
    eff = lor_efficiency(layout, tables, lines.i, lines.j)
    ratio = used / max(1, calibration_prompts)
    # Sinogram bins (32 angles over 180 degrees x 8 radial bins across the cylinder): the
    # image's view of the lines, unlike the fitted components.
    pi_, pj_ = layout.positions[lines.i], layout.positions[lines.j]
    dx, dy = pj_[:, 0] - pi_[:, 0], pj_[:, 1] - pi_[:, 1]
    phi = np.mod(np.arctan2(dy, dx), np.pi)
    radial = (pi_[:, 0] * dy - pi_[:, 1] * dx) / np.hypot(dx, dy)
    radial = np.where(np.arctan2(dy, dx) < 0, -radial, radial)
    phi_bin = np.minimum((phi / np.pi * 32).astype(np.int64), 31)
    s_bin = np.clip(((radial / opts.radius_mm + 1) * 4).astype(np.int64), 0, 7)
    groupings = {
        "crystal (fan sums)": (np.concatenate([lines.i, lines.j]), 2),
        "geometric class": (lines.cls, 1),
        "ring pair": (lines.ax, 1),
        "sinogram bin (32 angles x 8 radii)": (phi_bin * 8 + s_bin, 1),
    }
    out = {}
    for name, (index, repeat) in groupings.items():
        row = []
        for model in (eff, np.ones_like(eff)):
            expected = model * lines.projection
            expected *= counts.sum() / expected.sum()
            o = np.bincount(index, np.tile(counts, repeat))
            e = np.bincount(index, np.tile(expected, repeat))
            ok = e > 5
            dof = max(1, int(ok.sum()) - 1)
            row.append(float(np.sum((o[ok] - e[ok]) ** 2 / e[ok])) / dof)
        row += [dof + 1, 1.0 + ratio, 1.0 + ratio + 3.0 * math.sqrt(2.0 / dof) * (1.0 + ratio)]
        out[name] = tuple(row)
    return Flatness(prompts=used, ratio=ratio, groups=out)


def save_tables(out_dir, result):
    paths = []
    for name, table in ((CRYSTAL_FILE, result.efficiency), (BLOCK_FILE, result.block),
                        (GEOMETRIC_FILE, result.geometric), (AXIAL_FILE, result.axial)):
        path = os.path.join(out_dir, name)
        np.save(path, np.ascontiguousarray(table, dtype=np.float32))
        paths.append(path)
    return paths


def load_tables(directory, scanner):
    layout = Layout(scanner)
    want = {CRYSTAL_FILE: (layout.n,), BLOCK_FILE: (layout.rings, layout.per_panel),
            GEOMETRIC_FILE: (layout.panels, layout.per_panel, layout.per_panel),
            AXIAL_FILE: (layout.rings, layout.rings)}
    tables = []
    for name, shape in want.items():
        path = os.path.join(directory, name)
        try:
            t = np.load(path)
        except (OSError, ValueError) as e:
            raise CalibrationError(f"{path}: cannot read the normalisation table: {e}") from e
        if t.dtype != np.float32 or t.shape != shape:
            raise CalibrationError(f"{path}: {t.dtype}{list(t.shape)}, expected float32{list(shape)}")
        tables.append(t)
    return tuple(tables)


def report_text(plm, result, opts, flatness=None):
    fan = result.fan_counts
    lines = [
        "petdaq-calibrate normalization",
        f"acquisition: {plm}",
        f"source: uniform cylinder, radius {opts.radius_mm:g} mm, length {opts.length_mm:g} mm, "
        f"mu {opts.mu_per_mm:g} / mm",
        f"prompts: {result.prompts}, on {result.lines} lines through the cylinder: {result.used}",
        f"fan counts per crystal: min {fan.min():.0f}, median {np.median(fan):.0f}, max {fan.max():.0f}",
        f"crystal efficiency: rms {np.std(result.efficiency) * 100:.2f} %, statistical precision "
        f"(1 / sqrt(fan counts)) {result.predicted_sigma * 100:.2f} % rms",
        f"block profile: min {result.block.min():.3f}, max {result.block.max():.3f}",
        f"geometric classes measured: {result.classes_measured} of {result.classes_total} "
        f"(the others: 1)",
        f"axial factors: min {result.axial.min():.3f}, max {result.axial.max():.3f}",
        f"iterations: {result.iterations}, last relative change {result.max_change:.2e}",
    ]
    if flatness:
        lines.append(f"flatness of {flatness.prompts} prompts of the check acquisition, "
                     f"{flatness.ratio:.3f} times the calibration's (chi2 / dof with the table, "
                     f"without it; groups; at most 1 + ratio with a perfect model; limit +3 sigma):")
        for name, (with_t, without, groups, expected, limit) in flatness.groups.items():
            lines.append(f"  {name}: {with_t:.3f}  {without:.3f}  {groups}  {expected:.3f}  {limit:.3f}")
    return "\n".join(lines) + "\n"

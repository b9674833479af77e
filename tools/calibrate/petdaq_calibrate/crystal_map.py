"""Step 1, the crystal map: flood maps segmented into position_lut.npy (DESIGN section 3).

Per DU: the flood map of the frames near the DU's photopeak (sharper than the Compton
frames, whose light centroid wanders more); its crystal columns and rows from the peaks of
its two projections (Anger logic compresses the grid towards the edges, but keeps it a
grid); each crystal's peak refined in two dimensions by a centroid around its grid node;
every pixel labelled with its nearest peak, or 255 further than `max_radius` of that peak's
distance to its nearest neighbour (the valleys outside the outer crystals).
"""
from dataclasses import dataclass

import numpy as np
from scipy import ndimage, signal
from scipy.spatial import cKDTree

from . import CalibrationError

NO_CRYSTAL = 255
ENERGY_BIN_ADC = 16
ENERGY_BINS = 65536 // ENERGY_BIN_ADC


@dataclass
class MapOptions:
    min_counts_per_crystal: float = 30.0
    gate_low: float = 0.6        # flood frames: raw energy above gate_low x the DU's photopeak
    max_radius: float = 0.75     # label radius, in units of the peak's nearest-neighbour distance
    min_contrast: float = 2.0    # weakest accepted projection peak / strongest rejected one


@dataclass
class DuMap:
    frames: int
    gated: int
    photopeak_adc: float
    peaks: np.ndarray            # [crystal_transaxial][crystal_axial][2] (x, y) in pixels
    peak_counts: np.ndarray      # gated frames within the label of each crystal
    contrast: float              # per projection, the weaker of the two
    labelled_fraction: float     # gated frames on a crystal label


def histogram_pass(frame_file, scanner):
    """Per DU raw-energy spectra (16-ADC bins)."""
    spectra = np.zeros((scanner.du_count, ENERGY_BINS), dtype=np.int64)
    for du, _, _, energy in frame_file.chunks():
        spectra += np.bincount(du * ENERGY_BINS + energy // ENERGY_BIN_ADC,
                               minlength=spectra.size).reshape(spectra.shape)
    return spectra


def du_photopeaks(spectra):
    """The photopeak of each DU's spectrum: the maximum of the smoothed spectrum above the
    low-energy trigger region (ADC)."""
    smooth = ndimage.gaussian_filter1d(spectra.astype(float), 4, axis=1)
    # The Compton shoulder and the background lie below the photopeak; the 511 keV peak is
    # the spectrum's highest point once the first few bins (threshold region) are left out.
    smooth[:, :8] = 0
    return (np.argmax(smooth, axis=1) + 0.5) * ENERGY_BIN_ADC


def flood_pass(frame_file, scanner, gates_adc):
    n = scanner.position_size
    floods = np.zeros((scanner.du_count, n, n), dtype=np.int64)
    for du, x, y, energy in frame_file.chunks():
        keep = energy >= gates_adc[du]
        idx = (du[keep] * n + y[keep]) * n + x[keep]
        floods += np.bincount(idx, minlength=floods.size).reshape(floods.shape)
    return floods


def _grid_lines(profile, count, name, options):
    """Positions of `count` peaks of a projection, sorted; refuses an unresolved one."""
    smooth = ndimage.gaussian_filter1d(profile.astype(float), 1.5)
    if count == 1:
        return np.array([float(np.argmax(smooth))]), np.inf
    idx, props = signal.find_peaks(smooth, prominence=0)
    prom = props["prominences"]
    if idx.size < count:
        raise CalibrationError(f"{name}: {idx.size} peaks where {count} crystals are expected")
    order = np.argsort(prom)[::-1]
    weakest = prom[order[count - 1]]
    strongest_rejected = prom[order[count]] if idx.size > count else 0.0
    contrast = weakest / strongest_rejected if strongest_rejected > 0 else np.inf
    if contrast < options.min_contrast:
        raise CalibrationError(
            f"{name}: the {count} crystals cannot be told from noise (weakest peak "
            f"prominence {weakest:.0f}, next {strongest_rejected:.0f}; contrast "
            f"{contrast:.2f} < {options.min_contrast})")
    pos = np.sort(idx[order[:count]]).astype(float)
    # Sub-pixel: parabola through the maximum and its neighbours.
    i = pos.astype(int)
    lo, mid, hi = smooth[np.maximum(i - 1, 0)], smooth[i], smooth[np.minimum(i + 1, smooth.size - 1)]
    den = lo - 2 * mid + hi
    pos += np.where(den < 0, 0.5 * (lo - hi) / np.where(den < 0, den, -1), 0)
    gaps = np.diff(pos)
    if gaps.min() < 0.35 * np.median(gaps):
        raise CalibrationError(f"{name}: crystal peaks {gaps.min():.1f} pixels apart where "
                               f"the median spacing is {np.median(gaps):.1f}: not a crystal grid")
    return pos, contrast


def _local_spacing(lines):
    if lines.size == 1:
        return np.array([np.inf])
    gaps = np.diff(lines)
    return np.minimum(np.r_[gaps[0], gaps], np.r_[gaps, gaps[-1]])


def segment_du(flood, scanner, name, options):
    """Peaks and labels of one DU's flood map."""
    ct, ca = scanner.crystal_transaxial, scanner.crystal_axial
    n = scanner.position_size
    total = int(flood.sum())
    if total == 0:
        raise CalibrationError(f"{name}: no frames in the flood map (a dead DU?)")
    if total < options.min_counts_per_crystal * ct * ca:
        raise CalibrationError(
            f"{name}: {total} flood frames for {ct * ca} crystals, fewer than "
            f"{options.min_counts_per_crystal:g} per crystal: too few counts to find the crystals")
    cols, c1 = _grid_lines(flood.sum(axis=0), ca, f"{name}: flood-map columns (x)", options)
    rows, c2 = _grid_lines(flood.sum(axis=1), ct, f"{name}: flood-map rows (y)", options)
    sx, sy = _local_spacing(cols), _local_spacing(rows)
    gx, gy = np.meshgrid(cols, rows)
    rx = np.broadcast_to(np.minimum(0.35 * sx, n)[None, :], gx.shape)
    ry = np.broadcast_to(np.minimum(0.35 * sy, n)[:, None], gy.shape)
    px, py = gx.copy(), gy.copy()
    yy, xx = np.mgrid[0:n, 0:n]
    f = flood.astype(float)
    # Centroid in an ellipse around the current estimate, a few times (mean shift): the
    # neighbours lie beyond the ellipse, so they do not pull the peak.
    for _ in range(4):
        for r in range(ct):
            for c in range(ca):
                x0, x1 = int(max(0, px[r, c] - rx[r, c])), int(min(n - 1, px[r, c] + rx[r, c])) + 1
                y0, y1 = int(max(0, py[r, c] - ry[r, c])), int(min(n - 1, py[r, c] + ry[r, c])) + 1
                w = f[y0:y1, x0:x1]
                dx = (xx[y0:y1, x0:x1] - px[r, c]) / rx[r, c]
                dy = (yy[y0:y1, x0:x1] - py[r, c]) / ry[r, c]
                w = w * ((dx * dx + dy * dy) <= 1)
                s = w.sum()
                if s > 0:
                    px[r, c] = (w * xx[y0:y1, x0:x1]).sum() / s
                    py[r, c] = (w * yy[y0:y1, x0:x1]).sum() / s
    moved = np.maximum(np.abs(px - gx) / np.broadcast_to(sx[None, :], gx.shape),
                       np.abs(py - gy) / np.broadcast_to(sy[:, None], gy.shape))
    if np.isfinite(moved).all() and moved.max() > 0.5:
        r, c = np.unravel_index(np.argmax(moved), moved.shape)
        raise CalibrationError(f"{name}: the peak of crystal row {r}, column {c} lies "
                               f"{moved.max():.2f} spacings off its grid node: not a crystal grid")
    labels, counts = label_pixels(np.stack([px, py], axis=-1), flood, scanner, options)
    weak = counts < 0.1 * np.median(counts)
    if weak.any():
        r, c = np.unravel_index(np.argmax(weak), weak.shape)
        raise CalibrationError(f"{name}: crystal row {r}, column {c} has {counts[r, c]} frames, "
                               f"under a tenth of the median {np.median(counts):.0f}: no crystal there")
    return labels, np.stack([px, py], axis=-1), counts, min(c1, c2)


def label_pixels(peaks, flood, scanner, options):
    """Nearest-peak labels within max_radius x the peak's nearest-neighbour distance."""
    ct, ca = scanner.crystal_transaxial, scanner.crystal_axial
    n = scanner.position_size
    pts = peaks.reshape(-1, 2)
    tree = cKDTree(pts)
    if len(pts) > 1:
        nn = tree.query(pts, k=2)[0][:, 1]
    else:
        nn = np.full(1, float(n))
    yy, xx = np.mgrid[0:n, 0:n]
    dist, which = tree.query(np.stack([xx.ravel(), yy.ravel()], axis=1))
    ok = dist <= options.max_radius * nn[which]
    labels = np.where(ok, which, NO_CRYSTAL).astype(np.uint8).reshape(n, n)
    counts = np.bincount(labels.ravel(), weights=flood.ravel(), minlength=256)[:ct * ca]
    return labels, counts.reshape(ct, ca).astype(np.int64)


def make_crystal_map(frame_file, scanner, options):
    """position_lut (uint8[bdm][du][y][x]) and per-DU results; refuses any DU it cannot map."""
    spectra = histogram_pass(frame_file, scanner)
    peaks_adc = du_photopeaks(spectra)
    floods = flood_pass(frame_file, scanner, (options.gate_low * peaks_adc).astype(np.int64))
    n = scanner.position_size
    lut = np.full((scanner.du_count, n, n), NO_CRYSTAL, dtype=np.uint8)
    results = []
    errors = []
    for i in range(scanner.du_count):
        name = f"{frame_file.path}: {scanner.du_name(i)}"
        frames = int(spectra[i].sum())
        if frames == 0:
            errors.append(f"{name}: no frames at all (a dead DU?)")
            continue
        try:
            labels, peaks, counts, contrast = segment_du(floods[i], scanner, name, options)
        except CalibrationError as e:
            errors.append(str(e))
            continue
        lut[i] = labels
        gated = int(floods[i].sum())
        results.append(DuMap(frames, gated, float(peaks_adc[i]), peaks, counts, contrast,
                             float(counts.sum()) / gated))
    if errors:
        more = f" (and {len(errors) - 5} more DUs)" if len(errors) > 5 else ""
        raise CalibrationError("\n".join(errors[:5]) + more)
    return lut.reshape(scanner.bdm_count, scanner.du_per_bdm, n, n), results, floods

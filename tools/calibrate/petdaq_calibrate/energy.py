"""Step 2, energy: per-crystal photopeaks and one non-linearity, into energy_correction.npy.

With the crystal map, every frame's raw ADC value goes to its crystal's spectrum (binned as
the table is: `energy_bin_width` ADC units per bin), leaving out the frames within a couple
of pixels of a label border, where the neighbours' frames (another gain) land. Each crystal's 511 keV photopeak gives
its gain. The light yield saturates alike in every crystal, raw = k E / (1 + E / E_s), so
one E_s serves the scanner: it is fitted on the sum of all crystals' spectra, each scaled
to put its photopeak at 511 (u = 511 raw / peak), where the Compton edge of 511 keV photons
(340.7 keV) is a second point of known energy. The model fitted is the photopeak and the
Klein-Nishina continuum of single Compton deposits, both blurred by the resolution measured
on the photopeak (sigma growing as sqrt(E)), plus a linear term for what the model leaves
out (scatter in the object, LYSO background). The table then holds, per crystal and bin,
E(u) / raw at the bin's mean raw value, with E(u) = u / (1 + 511/E_s - u/E_s).
"""
from dataclasses import dataclass

import numpy as np
from scipy import ndimage
from scipy.optimize import curve_fit

from . import CalibrationError

PHOTOPEAK_KEV = 511.0
COMPTON_EDGE_KEV = PHOTOPEAK_KEV * 2 / 3  # 2 alpha / (1 + 2 alpha) at alpha = 1


@dataclass
class EnergyOptions:
    bins: int = 1000
    min_photopeak_counts: int = 100
    saturation_keV: float = 0.0      # > 0: fixed E_s instead of the fit; inf: linear
    fit_low_keV: float = 250.0
    fit_high_keV: float = 620.0
    margin_px: int = 2               # spectra leave out the pixels this close to a label border


@dataclass
class EnergyResult:
    peaks_adc: np.ndarray            # per table crystal (bdm, du, crystal)
    fwhm: np.ndarray                 # relative FWHM of each photopeak
    photopeak_counts: np.ndarray
    saturation_keV: float            # inf: linear
    saturation_sigma_keV: float
    sigma511_keV: float
    spectrum_u: tuple                # (bin centres in keV-equivalent, counts) of the scaled sum
    fit_curve: tuple                 # (u, model) over the fit range; empty when not fitted
    spectra: np.ndarray              # per crystal raw spectra


def core_labels(lut, scanner, margin_px):
    """The crystal map without the pixels within margin_px of another label: frames that
    the light spread carried into a neighbour land mostly by the border, and would mix
    that neighbour's gain into the spectrum."""
    n = scanner.position_size
    lab = lut.reshape(scanner.du_count, n, n)
    size = (1, 2 * margin_px + 1, 2 * margin_px + 1)
    same = ndimage.maximum_filter(lab, size=size) == ndimage.minimum_filter(lab, size=size)
    return np.where(same, lab, 255).astype(np.uint8)


def crystal_spectra(frame_file, scanner, lut, bins, margin_px=0):
    """Raw spectra of every crystal, [bdm*du*crystal][bins]; also the frames counted."""
    n = scanner.position_size
    per_du = scanner.crystals_per_du
    flat_lut = (core_labels(lut, scanner, margin_px) if margin_px else lut).reshape(scanner.du_count, n * n)
    spectra = np.zeros(scanner.crystal_count * bins, dtype=np.int64)
    labelled = 0
    for du, x, y, energy in frame_file.chunks():
        label = flat_lut[du, y * n + x].astype(np.int64)
        keep = label < per_du
        labelled += int(keep.sum())
        local = scanner.label_to_local(label[keep])
        idx = (du[keep] * per_du + local) * bins + np.minimum(energy[keep] // scanner.energy_bin_width, bins - 1)
        spectra += np.bincount(idx, minlength=spectra.size)
    return spectra.reshape(scanner.crystal_count, bins), labelled


def _gauss(x, a, mu, sig):
    return a * np.exp(-0.5 * ((x - mu) / sig) ** 2)


def _fit_photopeak(centres, h, start):
    """A Gaussian over +-2 sigma of the peak, the window re-centred and re-sized on each fit
    (the Compton valley under a photopeak is low: no background term, which a window this
    narrow could not tell from the peak); (mean, sigma) in ADC, or None."""
    mu, sig = start, 0.05 * start
    for _ in range(4):
        win = np.abs(centres - mu) < 2.0 * sig
        x, y = centres[win], h[win].astype(float)
        if win.sum() < 5 or y.sum() <= 0:
            return None
        try:
            p, _ = curve_fit(_gauss, x, y, p0=[y.max(), mu, sig], sigma=np.sqrt(np.maximum(y, 1)))
        except (RuntimeError, ValueError):
            return None
        mu, sig = p[1], abs(p[2])
        if not (x[0] < mu < x[-1] and 0.015 * mu < sig < 0.15 * mu):
            return None
    return mu, sig


def photopeaks(spectra, scanner, frame_path, options):
    """Photopeak position (ADC) and relative FWHM of every crystal; refuses a crystal
    without a photopeak."""
    width = scanner.energy_bin_width
    bins = spectra.shape[1]
    centres = (np.arange(bins) + 0.5) * width
    per_du = scanner.crystals_per_du
    du_sum = spectra.reshape(scanner.du_count, per_du, bins).sum(axis=1)
    du_smooth = ndimage.gaussian_filter1d(du_sum.astype(float), 3, axis=1)
    du_smooth[:, :max(1, 100 // width)] = 0
    du_peak = (np.argmax(du_smooth, axis=1) + 0.5) * width
    smooth = ndimage.gaussian_filter1d(spectra.astype(float), 2, axis=1)
    peaks = np.full(scanner.crystal_count, np.nan)
    fwhm = np.full(scanner.crystal_count, np.nan)
    counts = np.zeros(scanner.crystal_count, dtype=np.int64)
    errors = []
    for i in range(scanner.crystal_count):
        name = f"{frame_path}: {scanner.crystal_name(i)}"
        # Gains spread by tens of percent between crystals of one DU: search the crystal's
        # maximum between 0.6 and 1.6 times the DU's photopeak.
        ref = du_peak[i // per_du]
        lo, hi = int(0.6 * ref / width), min(bins, int(1.6 * ref / width) + 1)
        if hi - lo < 3:
            errors.append(f"{name}: no photopeak in its spectrum")
            continue
        j = lo + int(np.argmax(smooth[i, lo:hi]))
        h = spectra[i]
        fitted = _fit_photopeak(centres, h, centres[j])
        if fitted is None:
            errors.append(f"{name}: its photopeak cannot be fitted ({int(h.sum())} frames in "
                          "the spectrum: too few counts, or a dead crystal)")
            continue
        mu, sig = fitted
        counts[i] = int(h[np.abs(centres - mu) < 2.0 * sig].sum())
        if counts[i] < options.min_photopeak_counts:
            errors.append(f"{name}: {counts[i]} frames in the photopeak, fewer than "
                          f"{options.min_photopeak_counts}: too few counts")
            continue
        peaks[i], fwhm[i] = mu, 2.3548 * sig / mu
    if errors:
        more = f" (and {len(errors) - 5} more crystals)" if len(errors) > 5 else ""
        raise CalibrationError("\n".join(errors[:5]) + more)
    return peaks, fwhm, counts


def scaled_sum_spectrum(spectra, peaks, width, step_keV=2.0, top_keV=900.0):
    """All crystals' spectra on one axis, u = 511 raw / peak (keV if the response were linear)."""
    bins = spectra.shape[1]
    centres = (np.arange(bins) + 0.5) * width
    u = PHOTOPEAK_KEV * centres[None, :] / peaks[:, None]
    edges = np.arange(0.0, top_keV + step_keV, step_keV)
    h, _ = np.histogram(u.ravel(), bins=edges, weights=spectra.ravel())
    return 0.5 * (edges[1:] + edges[:-1]), h


def _kn_deposit(t_keV):
    """Klein-Nishina distribution of the energy a 511 keV photon leaves in one Compton scatter."""
    s = t_keV / PHOTOPEAK_KEV
    return np.where(t_keV < COMPTON_EDGE_KEV, 2 + s * s / (1 - s) ** 2 + s / (1 - s) * (s - 2), 0.0)


_T_GRID = np.arange(0.5, COMPTON_EDGE_KEV, 1.0)
_KN = _kn_deposit(_T_GRID)
_KN /= _KN.sum()


def energy_of_u(u, kappa):
    """Inverse of the saturation, normalised at 511: kappa = 1 / E_s (0 = linear)."""
    return u / np.maximum((1 + PHOTOPEAK_KEV * kappa) - u * kappa, 0.1 * (1 + PHOTOPEAK_KEV * kappa))


def _spectrum_model(u, a_peak, a_compton, b0, b1, sigma511, kappa):
    e = energy_of_u(u, kappa)
    de_du = (1 + PHOTOPEAK_KEV * kappa) / ((1 + PHOTOPEAK_KEV * kappa) - u * kappa) ** 2
    s_e = sigma511 * np.sqrt(e / PHOTOPEAK_KEV)
    peak = a_peak * np.exp(-0.5 * ((e - PHOTOPEAK_KEV) / s_e) ** 2)
    compton = a_compton * (_KN[None, :] * np.exp(-0.5 * ((e[:, None] - _T_GRID[None, :]) / s_e[:, None]) ** 2)
                           ).sum(axis=1) / s_e * 100
    return (peak + compton + b0 + b1 * (e - 400)) * de_du


def fit_saturation(u, h, options):
    fit = (u >= options.fit_low_keV) & (u <= options.fit_high_keV)
    x, y = u[fit], h[fit].astype(float)
    if y.sum() < 1000:
        raise CalibrationError(f"{y.sum():.0f} frames between {options.fit_low_keV:g} and "
                               f"{options.fit_high_keV:g} keV: too few to fit the non-linearity")
    top = y.max()
    p0 = [top, 0.3 * top, 0.05 * top, 0.0, 25.0, 1e-4]
    lower = [0, 0, -np.inf, -np.inf, 3.0, 0.0]
    upper = [np.inf, np.inf, np.inf, np.inf, 150.0, 1 / 500.0]
    try:
        p, cov = curve_fit(_spectrum_model, x, y, p0=p0, sigma=np.sqrt(np.maximum(y, 1)),
                           bounds=(lower, upper), maxfev=20000)
    except (RuntimeError, ValueError) as e:
        raise CalibrationError(f"the non-linearity fit of the summed spectrum failed: {e}") from e
    kappa, dk = p[5], float(np.sqrt(max(cov[5, 5], 0)))
    es = 1 / kappa if kappa > 0 else np.inf
    es_sigma = dk / kappa ** 2 if kappa > 0 else np.inf
    return es, es_sigma, p[4], (x, _spectrum_model(x, *p))


def correction_table(peaks, saturation_keV, width, bins):
    raw = np.arange(bins) * float(width) + 0.5 * (width - 1)
    raw = np.maximum(raw, 0.5)
    kappa = 0.0 if not np.isfinite(saturation_keV) else 1.0 / saturation_keV
    u = PHOTOPEAK_KEV * raw[None, :] / peaks[:, None]
    return (energy_of_u(u, kappa) / raw[None, :]).astype("<f4")


def make_energy_correction(frame_file, scanner, lut, options):
    spectra, _ = crystal_spectra(frame_file, scanner, lut, options.bins, options.margin_px)
    peaks, fwhm, counts = photopeaks(spectra, scanner, frame_file.path, options)
    u, h = scaled_sum_spectrum(spectra, peaks, scanner.energy_bin_width)
    curve = ()
    if options.saturation_keV > 0:
        es, es_sigma, sigma511 = options.saturation_keV, 0.0, float("nan")
    else:
        es, es_sigma, sigma511, curve = fit_saturation(u, h, options)
    table = correction_table(peaks, es, scanner.energy_bin_width, options.bins)
    table = table.reshape(scanner.bdm_count, scanner.du_per_bdm, scanner.crystals_per_du, options.bins)
    return table, EnergyResult(peaks, fwhm, counts, es, es_sigma, sigma511, (u, h), curve, spectra)

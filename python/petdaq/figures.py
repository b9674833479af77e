"""The scanner's figures from its histograms (docs/figures.md): coincidence time resolution
(CTR) and energy resolution, fitted with SciPy.

    import petdaq
    from petdaq import figures
    h = petdaq.read_histograms("run.pdh")
    ctr = figures.ctr(h)                  # a CtrFit of the signed Δt of all prompts, or None
    ctr.fwhm_ps, ctr.fwhm_err_ps, ctr.centre_ps
    m = figures.ctr_map(h)                # [du][du] FWHM in ps, NaN where too few counts
    e = figures.energy_resolution(h)      # per-crystal photopeaks and the scanner's
    e.global_fit.resolution_percent, e.resolution_percent[crystal]

Definitions:
* CTR: the FWHM of the Gaussian fitted, with a flat floor (the randoms), to the signed Δt of
  the prompts (Δt = t(lower crystal id) − t(higher); DESIGN section 5), over the whole
  coincidence window but its two end bins. The model is the Gaussian integrated over each bin
  (the bins are a tick or coarser); least squares with Poisson variances from the model
  (after a first pass with the counts' own), so that sparse bins bias nothing.
* Energy resolution: per crystal, the FWHM of a Gaussian (integrated over each bin) plus a
  flat background fitted to the photopeak of its corrected-energy spectrum over
  [μ − 2σ, μ + 3σ] (the range placed by two fits weighted by the counts, then the fit as
  for the CTR), divided by the peak's position, in %;
  the global figure fits the spectrum of all crystals summed.

Needs SciPy (Debian: python3-scipy).
"""

import math
from dataclasses import dataclass

import numpy as np

FWHM_PER_SIGMA = 2.0 * math.sqrt(2.0 * math.log(2.0))
CTR_MIN_COUNTS = 200          # prompts a CTR fit needs (in the Δt histogram given)
PHOTOPEAK_MIN_COUNTS = 200    # counts a photopeak fit needs in its range
PHOTOPEAK_SEARCH_KEV = 300.0  # the photopeak is the highest bin at or above this energy


@dataclass
class CtrFit:
    fwhm_ps: float
    fwhm_err_ps: float
    centre_ps: float
    centre_err_ps: float
    trues: float            # counts under the Gaussian
    floor_per_bin: float    # the flat floor (randoms), counts per bin
    counts: int             # prompts in the histogram
    x: np.ndarray           # bin centres and the fitted model, for plots
    model: np.ndarray


@dataclass
class PeakFit:
    position_keV: float
    fwhm_keV: float
    resolution_percent: float   # FWHM / position
    resolution_err_percent: float
    counts: int                 # spectrum counts in the fit range


@dataclass
class EnergyResolution:
    position_keV: np.ndarray        # per crystal; NaN where not fitted
    fwhm_keV: np.ndarray
    resolution_percent: np.ndarray
    global_fit: PeakFit             # all crystals summed; None when it could not be fitted
    summed: np.ndarray              # the summed spectrum
    edges: np.ndarray

    @property
    def fitted(self):
        return np.isfinite(self.resolution_percent)


def _gauss_floor(edges):
    """The model on bins with these edges, A × (the Gaussian's share of each bin) + B, and
    its derivatives by (A, μ, σ, B), as curve_fit takes them."""
    from scipy.special import erf

    def parts(mu, sigma):
        s = max(abs(sigma), 1e-9 * (edges[1] - edges[0]))
        k = 1.0 / (math.sqrt(2.0) * s)
        u = (edges - mu) * k
        return s, k, u, np.exp(-u * u), 0.5 * np.diff(erf(u))

    def model(_, area, mu, sigma, floor):
        return area * parts(mu, sigma)[4] + floor

    def jac(_, area, mu, sigma, floor):
        s, k, u, ex, shape = parts(mu, sigma)
        d_mu = area * k / math.sqrt(math.pi) * (ex[:-1] - ex[1:])
        d_sigma = area / (math.sqrt(math.pi) * s) * (ex[:-1] * u[:-1] - ex[1:] * u[1:])
        return np.column_stack([shape, d_mu, d_sigma * (1.0 if sigma >= 0 else -1.0),
                                np.ones_like(shape)])

    return model, jac


def _poisson_fit(edges, x, y, p0, model_passes=2):
    """Least squares with Poisson variances taken from the model (a first pass weighted by the
    counts, then `model_passes` weighted by the previous pass's model): unlike weights from
    the counts alone, no bias towards low bins where counts are few. (p, covariance, model)."""
    from scipy.optimize import curve_fit
    model, jac = _gauss_floor(edges)
    p, cov = curve_fit(model, x, y, p0=p0, sigma=np.sqrt(np.maximum(y, 1.0)),
                       absolute_sigma=True, jac=jac, maxfev=5000)
    for _ in range(model_passes):
        m = model(x, *p)
        p, cov = curve_fit(model, x, y, p0=p, sigma=np.sqrt(np.maximum(m, 0.5)),
                           absolute_sigma=True, jac=jac, maxfev=5000)
    return p, cov, model


def fit_ctr(counts, edges, min_counts=CTR_MIN_COUNTS):
    """Gaussian plus a flat floor fitted to a signed Δt histogram (counts over bins with
    these edges, in ps); a CtrFit, or None with fewer than min_counts prompts or when the fit
    does not converge."""
    y_all = np.asarray(counts, dtype=np.float64)
    edges = np.asarray(edges, dtype=np.float64)
    n = int(y_all.sum())
    if n < min_counts or y_all.size < 8:
        return None
    # The two end bins also hold whatever lies past the axis: left out.
    y = y_all[1:-1]
    e = edges[1:-1]
    x = 0.5 * (e[1:] + e[:-1])
    width = e[1] - e[0]
    span = x[-1] - x[0]
    outer = np.abs(x - 0.5 * (x[0] + x[-1])) > 0.35 * span
    floor0 = float(np.median(y[outer])) if outer.any() else 0.0
    net = np.clip(y - floor0, 0, None)
    peak = int(np.argmax(net))
    half = net[peak] / 2.0
    lo, hi = peak, peak
    while lo > 0 and net[lo] > half:
        lo -= 1
    while hi < net.size - 1 and net[hi] > half:
        hi += 1
    sigma0 = max((hi - lo) * width / FWHM_PER_SIGMA, width)
    mu0 = float(x[peak])
    area0 = max(float(net.sum()), 1.0)

    try:
        p, cov, model = _poisson_fit(e, x, y, [area0, mu0, sigma0, floor0])
    except (RuntimeError, ValueError):
        return None
    if not np.all(np.isfinite(p)) or p[0] <= 0:
        return None
    err = np.sqrt(np.abs(np.diag(cov))) if np.all(np.isfinite(cov)) else np.full(4, np.nan)
    sigma = abs(p[2])
    return CtrFit(fwhm_ps=sigma * FWHM_PER_SIGMA, fwhm_err_ps=float(err[2]) * FWHM_PER_SIGMA,
                  centre_ps=float(p[1]), centre_err_ps=float(err[1]), trues=float(p[0]),
                  floor_per_bin=float(p[3]), counts=n, x=x, model=model(x, *p))


def has_signed_tof(h):
    """Whether the file carries the signed Δt histograms (version 3 on), of their shapes."""
    return ("tof_prompt" in h and h["tof_prompt"].counts.ndim == 1 and
            "du_pair_tof_prompt" in h and h["du_pair_tof_prompt"].counts.ndim == 3)


def ctr(h, min_counts=CTR_MIN_COUNTS):
    """The scanner's CTR: fit_ctr() of tof_prompt; None for a file without it."""
    if not has_signed_tof(h):
        return None
    t = h["tof_prompt"]
    return fit_ctr(t.counts, t.edges, min_counts)


def ctr_map(h, min_counts=CTR_MIN_COUNTS):
    """CTR FWHM (ps) and Gaussian centre (ps) per cell of du_pair_tof_prompt ([DU of the lower
    crystal][DU of the higher crystal]); NaN where a cell has fewer than min_counts prompts or
    its fit fails. None for a file without it."""
    if not has_signed_tof(h):
        return None
    t = h["du_pair_tof_prompt"]
    c = t.counts
    fwhm = np.full(c.shape[:2], np.nan)
    centre = np.full(c.shape[:2], np.nan)
    totals = c.sum(axis=2)
    for a, b in zip(*np.nonzero(totals >= min_counts)):
        f = fit_ctr(c[a, b], t.edges, min_counts)
        if f is not None:
            fwhm[a, b], centre[a, b] = f.fwhm_ps, f.centre_ps
    return fwhm, centre


def fit_photopeak(counts, edges, search_keV=PHOTOPEAK_SEARCH_KEV, min_counts=PHOTOPEAK_MIN_COUNTS):
    """Gaussian plus a flat background fitted to the photopeak of an energy spectrum (keV); a PeakFit or
    None."""
    y_all = np.asarray(counts, dtype=np.float64)
    edges = np.asarray(edges, dtype=np.float64)
    x_all = 0.5 * (edges[1:] + edges[:-1])
    width = edges[1] - edges[0]
    # The last bin holds everything above the axis: never part of a peak.
    usable = (x_all >= search_keV) & (np.arange(y_all.size) < y_all.size - 1)
    if y_all[usable].sum() < min_counts:
        return None
    smooth = np.convolve(y_all, np.ones(3) / 3.0, mode="same")
    peak = int(np.argmax(np.where(usable, smooth, -1.0)))
    half = smooth[peak] / 2.0
    hi = peak
    while hi < y_all.size - 2 and smooth[hi] > half:
        hi += 1
    mu, sigma = float(x_all[peak]), max((x_all[hi] - x_all[peak]) / (FWHM_PER_SIGMA / 2.0), width)
    fit = None
    for rnd in range(3):
        sel = (x_all >= mu - 2.0 * sigma) & (x_all <= mu + 3.0 * sigma) & \
              (np.arange(y_all.size) < y_all.size - 1)
        if sel.sum() < 6 or y_all[sel].sum() < min_counts:
            return None
        x, y = x_all[sel], y_all[sel]
        e = np.append(edges[:-1][sel], edges[1:][sel][-1])
        # The first two rounds only place the range: weights from the counts will do.
        try:
            p, cov, _ = _poisson_fit(e, x, y, [max(y.sum(), 1.0), mu, sigma, 0.0],
                                     model_passes=2 if rnd == 2 else 0)
        except (RuntimeError, ValueError):
            return None
        if not np.all(np.isfinite(p)) or p[0] <= 0 or not (x[0] <= p[1] <= x[-1]):
            return None
        mu, sigma = float(p[1]), abs(float(p[2]))
        fit = (p, cov, int(y.sum()))
    p, cov, n = fit
    err = np.sqrt(np.abs(np.diag(cov))) if np.all(np.isfinite(cov)) else np.full(4, np.nan)
    fwhm = sigma * FWHM_PER_SIGMA
    res = 100.0 * fwhm / mu
    res_err = res * math.hypot(float(err[2]) / sigma, float(err[1]) / mu)
    return PeakFit(position_keV=mu, fwhm_keV=fwhm, resolution_percent=res,
                   resolution_err_percent=res_err, counts=n)


def energy_resolution(h, min_counts=PHOTOPEAK_MIN_COUNTS):
    """Per-crystal photopeak position, FWHM and resolution (%) from energy_keV, and the
    global fit of all crystals summed."""
    e = h["energy_keV"]
    spectra = e.counts
    crystals = spectra.shape[0]
    pos = np.full(crystals, np.nan)
    fwhm = np.full(crystals, np.nan)
    res = np.full(crystals, np.nan)
    totals = spectra.sum(axis=1)
    for c in np.nonzero(totals >= min_counts)[0]:
        f = fit_photopeak(spectra[c], e.edges, min_counts=min_counts)
        if f is not None:
            pos[c], fwhm[c], res[c] = f.position_keV, f.fwhm_keV, f.resolution_percent
    summed = spectra.sum(axis=0, dtype=np.uint64)
    return EnergyResolution(position_keV=pos, fwhm_keV=fwhm, resolution_percent=res,
                            global_fit=fit_photopeak(summed, e.edges, min_counts=min_counts),
                            summed=summed, edges=e.edges)

// The CTR and energy-resolution fits (core/figures.h): a small Levenberg–Marquardt on a
// Gaussian integrated over bins plus a flat background.
#include "core/figures.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "core/histograms.h"

namespace petdaq {

namespace {

constexpr int kParams = 4;  // area, centre, sigma, background per bin
using Vec = std::array<double, kParams>;
using Mat = std::array<Vec, kParams>;

// The data and model of one fit: bins [first, last) of the histogram.
struct Problem {
  const double* y;
  std::size_t first, last;
  double lo, width;
  const double* variance = nullptr;  // per bin from `first`; none: max(y, 1)

  double model(const Vec& p, std::size_t i) const {
    Vec unused;
    return model(p, i, unused);
  }
  // The model in bin i and its derivatives by each parameter (in J).
  double model(const Vec& p, std::size_t i, Vec& J) const {
    constexpr double kTwoOverSqrtPi = 1.1283791670955126;
    const double a = lo + static_cast<double>(i) * width;
    const double sigma = std::max(std::abs(p[2]), 1e-9 * width);
    const double k = 1.0 / (std::sqrt(2.0) * sigma);
    const double u0 = (a - p[1]) * k, u1 = (a + width - p[1]) * k;
    const double e0 = std::exp(-u0 * u0), e1 = std::exp(-u1 * u1);
    const double shape = 0.5 * (std::erf(u1) - std::erf(u0));
    J[0] = shape;
    J[1] = 0.5 * p[0] * kTwoOverSqrtPi * (e0 - e1) * k;
    J[2] = 0.5 * p[0] * kTwoOverSqrtPi * (e0 * u0 - e1 * u1) / sigma * (p[2] < 0 ? -1.0 : 1.0);
    J[3] = 1;
    return p[0] * shape + p[3];
  }
  double weight(std::size_t i) const {
    return variance ? 1.0 / variance[i - first] : 1.0 / std::max(y[i], 1.0);
  }
  double chi2(const Vec& p) const {
    double c = 0;
    for (std::size_t i = first; i < last; ++i) {
      const double r = y[i] - model(p, i);
      c += r * r * weight(i);
    }
    return c;
  }
};

// Solves A x = b (n x n, in place) by Gaussian elimination with partial pivoting; false when
// singular.
bool solve(Mat& A, Vec& b, int n) {
  for (int c = 0; c < n; ++c) {
    int piv = c;
    for (int r = c + 1; r < n; ++r)
      if (std::abs(A[r][c]) > std::abs(A[piv][c])) piv = r;
    if (!(std::abs(A[piv][c]) > 1e-300)) return false;
    std::swap(A[c], A[piv]);
    std::swap(b[c], b[piv]);
    for (int r = c + 1; r < n; ++r) {
      const double f = A[r][c] / A[c][c];
      for (int k = c; k < n; ++k) A[r][k] -= f * A[c][k];
      b[r] -= f * b[c];
    }
  }
  for (int c = n - 1; c >= 0; --c) {
    for (int k = c + 1; k < n; ++k) b[c] -= A[c][k] * b[k];
    b[c] /= A[c][c];
  }
  return true;
}

// Levenberg–Marquardt from p; on success p holds the fit and err the parameters' 1σ errors.
bool levenberg_marquardt(const Problem& pr, Vec& p, Vec& err) {
  constexpr int n = kParams;
  double lambda = 1e-3;
  double chi = pr.chi2(p);
  Mat JtJ{};
  bool converged = false;
  for (int iter = 0; iter < 100 && !converged; ++iter) {
    JtJ = {};
    Vec Jtr{};
    for (std::size_t i = pr.first; i < pr.last; ++i) {
      Vec J{};
      const double m = pr.model(p, i, J);
      const double w = pr.weight(i), r = pr.y[i] - m;
      for (int a = 0; a < n; ++a) {
        Jtr[a] += w * J[a] * r;
        for (int b = 0; b < n; ++b) JtJ[a][b] += w * J[a] * J[b];
      }
    }
    bool improved = false;
    for (int tries = 0; tries < 10 && !improved; ++tries) {
      auto A = JtJ;
      Vec d = Jtr;
      for (int a = 0; a < n; ++a) A[a][a] *= 1.0 + lambda;
      if (!solve(A, d, n)) {
        lambda *= 10;
        continue;
      }
      Vec q = p;
      for (int a = 0; a < n; ++a) q[a] += d[a];
      const double c = pr.chi2(q);
      if (std::isfinite(c) && c <= chi) {
        converged = chi - c < 1e-6 * std::max(chi, 1.0);
        p = q;
        chi = c;
        lambda = std::max(lambda / 10, 1e-12);
        improved = true;
      } else {
        lambda *= 10;
      }
    }
    if (!improved) break;  // no step lowers χ²: at the minimum
  }
  // Covariance: (JᵀWJ)⁻¹ at the minimum, one column at a time.
  for (int k = 0; k < n; ++k) {
    auto A = JtJ;
    Vec e{};
    e[k] = 1;
    if (!solve(A, e, n)) return false;
    err[k] = std::sqrt(std::abs(e[k]));
  }
  for (int k = 0; k < n; ++k)
    if (!std::isfinite(p[k])) return false;
  return p[0] > 0;
}

// Least squares with Poisson variances from the model: a first pass weighted by the counts,
// then `model_passes` weighted by the previous pass's model (max(m, 0.5)), which unlike the
// counts' own weights does not pull the fit towards sparse bins.
bool poisson_fit(Problem pr, Vec& p, Vec& err, int model_passes = 2) {
  if (!levenberg_marquardt(pr, p, err)) return false;
  std::vector<double> variance(pr.last - pr.first);
  for (int pass = 0; pass < model_passes; ++pass) {
    for (std::size_t i = pr.first; i < pr.last; ++i)
      variance[i - pr.first] = std::max(pr.model(p, i), 0.5);
    pr.variance = variance.data();
    if (!levenberg_marquardt(pr, p, err)) return false;
  }
  return true;
}

GaussFit result(const Problem& pr, const Vec& p, const Vec& err) {
  GaussFit f;
  f.ok = true;
  f.area = p[0];
  f.centre = p[1];
  f.fwhm = std::abs(p[2]) * kFwhmPerSigma;
  f.fwhm_err = err[2] * kFwhmPerSigma;
  f.centre_err = err[1];
  f.floor = p[3];
  for (std::size_t i = pr.first; i < pr.last; ++i) f.counts += pr.y[i];
  return f;
}

double median(std::vector<double> v) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  if (v.size() % 2) return *mid;
  return 0.5 * (*mid + *std::max_element(v.begin(), mid));
}

}  // namespace

GaussFit fit_ctr(const double* y, std::size_t n, double lo, double width, double min_counts) {
  double total = 0;
  for (std::size_t i = 0; i < n; ++i) total += y[i];
  if (n < 8 || total < min_counts || !(width > 0)) return {};
  // The end bins also hold what lies past the axis: left out.
  Problem pr{y, 1, n - 1, lo, width};
  const double span = static_cast<double>(n - 2) * width, mid = lo + 0.5 * static_cast<double>(n) * width;
  std::vector<double> outer;
  for (std::size_t i = pr.first; i < pr.last; ++i)
    if (std::abs(lo + (static_cast<double>(i) + 0.5) * width - mid) > 0.35 * span) outer.push_back(y[i]);
  const double floor0 = outer.empty() ? 0.0 : median(outer);
  std::size_t peak = pr.first;
  double area0 = 0;
  for (std::size_t i = pr.first; i < pr.last; ++i) {
    if (y[i] > y[peak]) peak = i;
    area0 += std::max(0.0, y[i] - floor0);
  }
  const double half = (y[peak] - floor0) / 2;
  std::size_t a = peak, b = peak;
  while (a > pr.first && y[a] - floor0 > half) --a;
  while (b + 1 < pr.last && y[b] - floor0 > half) ++b;
  Vec p{std::max(area0, 1.0), lo + (static_cast<double>(peak) + 0.5) * width,
        std::max(static_cast<double>(b - a) * width / kFwhmPerSigma, width), floor0};
  Vec err{};
  if (!poisson_fit(pr, p, err)) return {};
  return result(pr, p, err);
}

GaussFit fit_photopeak(const double* y, std::size_t n, double lo, double width, double search_keV,
                       double min_counts) {
  if (n < 8 || !(width > 0)) return {};
  // The last bin holds everything above the axis: never part of a peak.
  const auto centre = [&](std::size_t i) { return lo + (static_cast<double>(i) + 0.5) * width; };
  const auto smooth = [&](std::size_t i) {
    const double l = i > 0 ? y[i - 1] : 0, r = i + 1 < n ? y[i + 1] : 0;
    return (l + y[i] + r) / 3;
  };
  std::size_t peak = n;
  double usable = 0;
  for (std::size_t i = 0; i + 1 < n; ++i) {
    if (centre(i) < search_keV) continue;
    usable += y[i];
    if (peak == n || smooth(i) > smooth(peak)) peak = i;
  }
  if (peak == n || usable < min_counts) return {};
  std::size_t hi = peak;
  while (hi + 2 < n && smooth(hi) > smooth(peak) / 2) ++hi;
  double mu = centre(peak);
  double sigma = std::max((centre(hi) - mu) / (kFwhmPerSigma / 2), width);
  GaussFit fit;
  for (int round = 0; round < 3; ++round) {
    const double from = mu - 2.0 * sigma, to = mu + 3.0 * sigma;
    std::size_t first = n, last = 0;
    for (std::size_t i = 0; i + 1 < n; ++i) {
      if (centre(i) < from || centre(i) > to) continue;
      first = std::min(first, i);
      last = i + 1;
    }
    if (first >= last || last - first < 6) return {};
    double counts = 0;
    for (std::size_t i = first; i < last; ++i) counts += y[i];
    if (counts < min_counts) return {};
    Problem pr{y, first, last, lo, width};
    Vec p{counts, mu, sigma, 0};
    Vec err{};
    // The first two rounds only place the range: weights from the counts will do.
    if (!poisson_fit(pr, p, err, round == 2 ? 2 : 0)) return {};
    if (p[1] < centre(first) || p[1] > centre(last - 1)) return {};
    fit = result(pr, p, err);
    mu = p[1];
    sigma = std::abs(p[2]);
  }
  return fit;
}

ScannerFigures scanner_figures(const HistogramFile& f, bool per_crystal) {
  ScannerFigures s;
  std::vector<double> row;
  const auto load = [&](const HistDescriptor& d, std::uint64_t offset, std::uint64_t n) {
    row.assign(n, 0);
    for (std::uint64_t i = 0; i < n; ++i) row[i] = f.number(d, offset + i);
  };
  const HistDescriptor* tof = f.find(hist_name(Hist::tof_prompt));
  const HistDescriptor* du = f.find(hist_name(Hist::du_pair_tof_prompt));
  s.has_signed_tof = tof && tof->rank == 1 && du && du->rank == 3;
  if (s.has_signed_tof) {
    load(*tof, 0, tof->shape[0]);
    s.ctr = fit_ctr(row.data(), row.size(), tof->lo, tof->width);
  }
  const HistDescriptor* e = f.find(hist_name(Hist::energy_keV));
  if (e && e->rank == 2) {
    const std::uint64_t crystals = e->shape[0], bins = e->shape[1];
    std::vector<double> summed(bins, 0);
    const double nan = std::numeric_limits<double>::quiet_NaN();
    s.resolution_percent.assign(per_crystal ? crystals : 0, nan);
    s.photopeak_keV.assign(per_crystal ? crystals : 0, nan);
    std::vector<double> fitted;
    for (std::uint64_t c = 0; c < crystals; ++c) {
      load(*e, c * bins, bins);
      double total = 0;
      for (std::uint64_t i = 0; i < bins; ++i) {
        summed[i] += row[i];
        total += row[i];
      }
      if (!per_crystal || total < kPhotopeakMinCounts) continue;
      const GaussFit g = fit_photopeak(row.data(), bins, e->lo, e->width);
      if (!g.ok || !(g.centre > 0)) continue;
      s.resolution_percent[c] = 100 * g.fwhm / g.centre;
      s.photopeak_keV[c] = g.centre;
      fitted.push_back(s.resolution_percent[c]);
    }
    s.crystals_fitted = static_cast<std::uint32_t>(fitted.size());
    s.median_resolution_percent = median(fitted);
    s.energy = fit_photopeak(summed.data(), bins, e->lo, e->width);
  }
  return s;
}

}  // namespace petdaq

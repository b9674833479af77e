// The scanner's figures from its histograms (docs/figures.md), for the live tools (petdaq-web,
// petdaq-top): the coincidence time resolution (CTR) from the signed Δt histograms and the
// energy resolution from the per-crystal spectra. The same models and ranges as the Python
// package's SciPy fits (python/petdaq/figures.py), fitted here by Levenberg–Marquardt:
//
// * CTR: a Gaussian integrated over each bin plus a flat floor (the randoms), over the whole
//   axis but its two end bins (they also hold what lies past the axis).
// * Photopeak: a Gaussian integrated over each bin plus a flat background, over
//   [μ − 2σ, μ + 3σ], placed by two fits weighted by the counts; resolution = FWHM / μ.
// Both: least squares with Poisson variances from the model (a first pass with the counts'
// own), so that sparse bins bias nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace petdaq {

struct HistogramFile;
struct HistDescriptor;

inline constexpr double kFwhmPerSigma = 2.3548200450309493;
inline constexpr double kCtrMinCounts = 200;        // prompts a CTR fit needs
inline constexpr double kPhotopeakMinCounts = 200;  // counts a photopeak fit needs in its range
inline constexpr double kPhotopeakSearchKeV = 300;  // the photopeak is the highest bin from here

struct GaussFit {
  bool ok = false;
  double area = 0;      // counts under the Gaussian
  double centre = 0;    // in the axis's unit
  double fwhm = 0;
  double fwhm_err = 0;  // 1σ, from the fit's covariance
  double centre_err = 0;
  double floor = 0;     // background per bin at the centre
  double counts = 0;    // in the range fitted
};

// Gaussian plus flat floor on a signed Δt histogram of n bins from `lo`, `width` wide.
GaussFit fit_ctr(const double* counts, std::size_t n, double lo, double width,
                 double min_counts = kCtrMinCounts);
// Gaussian plus a flat background on the photopeak of an energy spectrum (keV).
GaussFit fit_photopeak(const double* counts, std::size_t n, double lo, double width,
                       double search_keV = kPhotopeakSearchKeV,
                       double min_counts = kPhotopeakMinCounts);

// The figures of one histogram file or message. Anything the file lacks (signed Δt before
// version 3) or too few counts leaves its fit not ok.
struct ScannerFigures {
  GaussFit ctr;                       // tof_prompt, ps
  GaussFit energy;                    // energy_keV of all crystals summed, keV
  std::vector<double> resolution_percent;  // per crystal; NaN where not fitted
  std::vector<double> photopeak_keV;       // per crystal; NaN where not fitted
  std::uint32_t crystals_fitted = 0;
  double median_resolution_percent = 0;
  bool has_signed_tof = false;
};
// `per_crystal`: also fit every crystal's photopeak (slower: about 0.07 ms a crystal). The
// CTR per DU pair is petdaq-qa's (python/petdaq/figures.py).
ScannerFigures scanner_figures(const HistogramFile& f, bool per_crystal = true);

}  // namespace petdaq

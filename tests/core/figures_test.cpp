// The CTR and photopeak fits (core/figures.h) on histograms drawn from known distributions:
// the fitted FWHM must come back within its statistical reach, a wider one must read wider,
// and too few counts give no fit.
#include "core/figures.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace {

using namespace petdaq;

// Signed Δt in integer ticks of 15.625 ps, one bin per tick over [−257, 257) ticks:
// `trues` from a Gaussian of `fwhm_ps` at `centre_ps`, `randoms` flat over ±4000 ps.
std::vector<double> tof_histogram(double fwhm_ps, double centre_ps, int trues, int randoms,
                                  unsigned seed) {
  constexpr double tick = 15.625;
  constexpr int half = 257;
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g(centre_ps, fwhm_ps / kFwhmPerSigma);
  std::uniform_real_distribution<double> u(-4000, 4000);
  std::vector<double> h(2 * half, 0);
  const auto add = [&](double t) {
    const long k = std::lround(t / tick) + half;
    h[static_cast<std::size_t>(std::clamp<long>(k, 0, 2 * half - 1))] += 1;
  };
  for (int i = 0; i < trues; ++i) add(g(rng));
  for (int i = 0; i < randoms; ++i) add(u(rng));
  return h;
}

TEST(Figures, CtrFitRecoversTheFwhmCentreAndFloor) {
  for (const double fwhm : {300.0, 495.0, 800.0}) {
    const std::vector<double> h = tof_histogram(fwhm, 40, 40000, 20000, 7);
    const GaussFit f = fit_ctr(h.data(), h.size(), -257.5 * 15.625, 15.625);
    ASSERT_TRUE(f.ok) << fwhm;
    EXPECT_NEAR(f.fwhm, fwhm, 4 * f.fwhm_err) << fwhm;
    EXPECT_LT(f.fwhm_err, 0.01 * fwhm);
    EXPECT_NEAR(f.centre, 40, 4 * f.centre_err + 1);
    EXPECT_NEAR(f.area, 40000, 4 * std::sqrt(40000.0) + 600);
    // 20 000 randoms over 8000 ps in bins of 15.625 ps: 39 a bin.
    EXPECT_NEAR(f.floor, 20000 / (8000 / 15.625), 2.0);
  }
}

TEST(Figures, CtrFitNeedsEnoughPrompts) {
  const std::vector<double> h = tof_histogram(495, 0, 100, 50, 3);
  EXPECT_FALSE(fit_ctr(h.data(), h.size(), -257.5 * 15.625, 15.625).ok);
  const std::vector<double> flat(514, 0.0);
  EXPECT_FALSE(fit_ctr(flat.data(), flat.size(), -257.5 * 15.625, 15.625).ok);
}

// A spectrum of 5 keV bins over [0, 1000): a photopeak at `peak_keV` of relative FWHM `res`,
// a Compton shelf below the edge, and a falling exponential background.
std::vector<double> spectrum(double peak_keV, double res, int photo, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g(peak_keV, res * peak_keV / kFwhmPerSigma);
  std::uniform_real_distribution<double> shelf(0, peak_keV * 2 / 3);
  std::exponential_distribution<double> bg(1 / 150.0);
  std::vector<double> h(200, 0);
  const auto add = [&](double e) { h[static_cast<std::size_t>(std::clamp(e / 5, 0.0, 199.0))] += 1; };
  for (int i = 0; i < photo; ++i) add(g(rng));
  for (int i = 0; i < photo; ++i) add(shelf(rng));
  for (int i = 0; i < photo / 2; ++i) add(bg(rng));
  return h;
}

TEST(Figures, PhotopeakFitRecoversPositionAndResolution) {
  for (const double res : {0.08, 0.12, 0.18}) {
    const std::vector<double> h = spectrum(511, res, 50000, 11);
    const GaussFit f = fit_photopeak(h.data(), h.size(), 0, 5);
    ASSERT_TRUE(f.ok) << res;
    EXPECT_NEAR(f.centre, 511, 1.0) << res;
    EXPECT_NEAR(100 * f.fwhm / f.centre, 100 * res, 0.3) << res;
  }
  // An uncalibrated crystal: the peak elsewhere, found all the same.
  const std::vector<double> h = spectrum(430, 0.12, 20000, 5);
  const GaussFit f = fit_photopeak(h.data(), h.size(), 0, 5);
  ASSERT_TRUE(f.ok);
  EXPECT_NEAR(f.centre, 430, 2.0);
  const std::vector<double> few = spectrum(511, 0.12, 60, 5);
  EXPECT_FALSE(fit_photopeak(few.data(), few.size(), 0, 5).ok);
}

}  // namespace

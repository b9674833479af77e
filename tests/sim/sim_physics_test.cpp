// The physics check (docs/simulator.md): acquisitions of a mouse phantom in the default
// scanner through convert, sort and coincidence, every prompt classified with the truth.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/sim/sim_fixture.h"
#include "tools/sim/check.h"

namespace petdaq::sim {
namespace {

using testing::default_config;
using testing::ScratchDir;

CheckResult run(const std::filesystem::path& dir, double activity_MBq, double duration_s,
                bool background, std::uint64_t seed = 7) {
  SimOptions o;
  o.activity_MBq = activity_MBq;
  o.duration_s = duration_s;
  o.background = background;
  o.seed = seed;
  simulate(default_config(), dir, o);
  return check_acquisition(dir);
}

// At low activity almost every pair of a decay is alone in its window, and kill_multiples
// must find each of those as a prompt; the files convert with almost no bad frames.
TEST(SimPhysics, EveryIsolatedTruePairIsFoundAtLowActivity) {
  ScratchDir dir;
  const CheckResult r = run(dir.path(), 0.1, 0.2, true);
  ASSERT_GT(r.truth_pairs, 300u);
  EXPECT_EQ(r.truth_pairs_isolated_found, r.truth_pairs_isolated);
  EXPECT_GT(double(r.truth_pairs_isolated), 0.99 * double(r.truth_pairs));
  EXPECT_GE(r.trues + r.scatters, r.truth_pairs_isolated);
  EXPECT_LT(double(r.bad_frames) / double(r.frames), 0.01);
  EXPECT_EQ(r.bad_frames, r.no_crystal) << "only the flood map's valleys lose frames";
  // Scatter fraction of a mouse phantom with a 350 keV threshold: about a tenth.
  EXPECT_GT(r.scatter_fraction(), 0.04);
  EXPECT_LT(r.scatter_fraction(), 0.25);
}

// Trues grow linearly and randoms quadratically with activity (no LYSO background, whose
// singles would add randoms that do not scale). kill_multiples loses a few per cent more
// at the higher rate (windows with a third single), which the tolerance allows for.
TEST(SimPhysics, TruesLinearRandomsQuadraticDelayedEstimatesRandoms) {
  ScratchDir dir;
  const CheckResult lo = run(dir.path() / "lo", 4.0, 0.1, false);
  const CheckResult hi = run(dir.path() / "hi", 16.0, 0.03, false);
  ASSERT_GT(lo.randoms, 200u);
  ASSERT_GT(hi.randoms, 1000u);

  const double trues_ratio = hi.rate(hi.trues) / lo.rate(lo.trues) / 4.0;
  const double trues_sigma = std::sqrt(1.0 / hi.trues + 1.0 / lo.trues);
  EXPECT_NEAR(trues_ratio, 1.0, 4 * trues_sigma + 0.05) << "trues per MBq";

  const double randoms_ratio = hi.rate(hi.randoms) / lo.rate(lo.randoms) / 16.0;
  const double randoms_sigma = std::sqrt(1.0 / hi.randoms + 1.0 / lo.randoms);
  EXPECT_NEAR(randoms_ratio, 1.0, 4 * randoms_sigma + 0.05) << "randoms per MBq^2";

  // kill_multiples: the delayed window over-estimates the random prompts, because an opener
  // whose own partner shares its prompt window cannot make a random prompt but still opens
  // a delayed window (measured 12-20 % high, docs/simulator.md).
  for (const CheckResult* r : {&lo, &hi}) {
    const double ratio = double(r->delayed) / double(r->randoms);
    const double sigma = ratio * std::sqrt(1.0 / r->delayed + 1.0 / r->randoms);
    EXPECT_GT(ratio, 1.02 - 3 * sigma);
    EXPECT_LT(ratio, 1.30 + 3 * sigma);
  }

  // every_single with take_all_goods: each single opens one prompt and one delayed window
  // and every pair counts, so delayed is an unbiased estimate of the random prompts.
  CoincidenceSettings unbiased = load_settings(dir.path() / "hi" / "petdaq.yaml").coincidence;
  unbiased.window_mode = WindowMode::every_single;
  unbiased.policy = Policy::take_all_goods;
  const CheckResult u = check_acquisition(dir.path() / "hi", &unbiased);
  const double ratio = double(u.delayed) / double(u.randoms);
  const double sigma = ratio * std::sqrt(1.0 / u.delayed + 1.0 / u.randoms);
  EXPECT_NEAR(ratio, 1.0, 0.03 + 3 * sigma);
  EXPECT_GE(u.trues, hi.trues) << "take_all_goods keeps the trues kill_multiples drops";
}

}  // namespace
}  // namespace petdaq::sim

// The randoms estimates of core/randoms.h (docs/randoms.md) against the true random prompts
// of a simulated acquisition: a mouse phantom at 40 MBq with the LYSO background, short
// enough for CI, under the default policy, take_all_goods in both window modes and
// take_winner_of_goods.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "tests/sim/sim_fixture.h"
#include "tools/sim/check.h"

namespace petdaq::sim {
namespace {

using testing::default_config;
using testing::ScratchDir;

TEST(SimRandoms, SinglesPromptsEstimateMatchesTheTrueRandomsUnderEveryModelledPolicy) {
  ScratchDir dir;
  SimOptions o;
  o.activity_MBq = 40;
  o.duration_s = 0.02;
  o.background = true;
  o.seed = 11;
  simulate(default_config(), dir.path(), o);
  CoincidenceSettings base = load_settings(dir.path() / "petdaq.yaml").coincidence;
  // The simulated detector's coincidence time resolution: two singles of 350 ps FWHM each.
  base.time_resolution_ps = std::sqrt(2.0) * o.time_resolution_fwhm_ps;

  struct Case {
    Policy policy;
    WindowMode mode;
    const char* name;
  };
  for (const Case c :
       {Case{Policy::kill_multiples, WindowMode::first_open, "kill_multiples first_open"},
        Case{Policy::take_all_goods, WindowMode::first_open, "take_all_goods first_open"},
        Case{Policy::take_all_goods, WindowMode::every_single, "take_all_goods every_single"},
        // Modelled approximately (energy-blind choice of the kept pair, docs/randoms.md).
        Case{Policy::take_winner_of_goods, WindowMode::first_open,
             "take_winner_of_goods first_open"}}) {
    CoincidenceSettings cs = base;
    cs.policy = c.policy;
    cs.window_mode = c.mode;
    const CheckResult r = check_acquisition(dir.path(), &cs);
    ASSERT_GT(r.randoms, 5000u) << c.name;
    const double R = static_cast<double>(r.randoms);
    const double sigma =
        1.0 / std::sqrt(R);  // the true count is Poisson; the estimate far less noisy
    const double sp = r.randoms_singles_prompts / R;
    EXPECT_NEAR(sp, 1.0, 0.05 + 3 * sigma) << c.name << ": singles-prompts / true randoms";
    // The delayed window is biased by 9-16 % under the first_open policies (docs/randoms.md);
    // the singles-prompts estimate must do better than it there.
    const double delayed = double(r.delayed) / R;
    if (c.mode == WindowMode::first_open)
      EXPECT_LT(std::abs(sp - 1), std::abs(delayed - 1)) << c.name;
    // every_single + take_all_goods: the singles-rate estimate S²τ is unbiased too, and
    // the model's delayed and multiples agree with the engine's.
    if (c.mode == WindowMode::every_single)
      EXPECT_NEAR(r.randoms_singles_rate / R, 1.0, 0.05 + 3 * sigma) << c.name << ": singles-rate";
    EXPECT_NEAR(r.model_delayed / double(r.delayed), 1.0, 0.05 + 3 / std::sqrt(double(r.delayed)))
        << c.name;
    EXPECT_NEAR(r.model_multiples / double(r.multiples), 1.0,
                0.05 + 3 / std::sqrt(double(r.multiples)))
        << c.name;
  }
}

}  // namespace
}  // namespace petdaq::sim

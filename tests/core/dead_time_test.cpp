// The dead-time model (core/dead_time.h): the inverse of both formulas, live fractions, and
// the table's refusals.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/calibration.h"
#include "core/dead_time.h"
#include "tests/support/scratch_dir.h"

namespace petdaq {
namespace {

TEST(DeadTime, LosslessRateInvertsBothModels) {
  const double tau = 800e-9;
  for (const double n : {1.0, 1e3, 1e5, 5e5, 1e6}) {
    bool saturated = true;
    const double m_np = n / (1 + n * tau);
    EXPECT_NEAR(lossless_rate(DeadTimeKind::non_paralysable, m_np, tau, &saturated), n, 1e-9 * n);
    EXPECT_FALSE(saturated);
    const double m_p = n * std::exp(-n * tau);
    EXPECT_NEAR(lossless_rate(DeadTimeKind::paralysable, m_p, tau, &saturated), n, 1e-6 * n);
    EXPECT_FALSE(saturated);
  }
  // Past the model's maximum there is no lossless rate: flagged, and finite.
  bool saturated = false;
  EXPECT_TRUE(std::isfinite(lossless_rate(DeadTimeKind::non_paralysable, 2 / tau, tau, &saturated)));
  EXPECT_TRUE(saturated);
  saturated = false;
  EXPECT_DOUBLE_EQ(lossless_rate(DeadTimeKind::paralysable, 1 / tau, tau, &saturated), 1 / tau);
  EXPECT_TRUE(saturated);
  EXPECT_DOUBLE_EQ(lossless_rate(DeadTimeKind::none, 123.0, tau, nullptr), 123.0);
  EXPECT_DOUBLE_EQ(lossless_rate(DeadTimeKind::non_paralysable, 0.0, tau, nullptr), 0.0);
}

TEST(DeadTime, LiveFractionsPerBoardAndScanner) {
  DeadTimeModel model{DeadTimeKind::non_paralysable, {1e-6, 1e-6, 2e-6}};
  const std::vector<double> m = {1e5, 2e5, 1e5};
  const LiveTime live = live_time(model, m);
  ASSERT_EQ(live.bdm.size(), 3u);
  EXPECT_NEAR(live.bdm[0], 0.9, 1e-12);  // 1 − m τ
  EXPECT_NEAR(live.bdm[1], 0.8, 1e-12);
  EXPECT_NEAR(live.bdm[2], 0.8, 1e-12);
  const double n = 1e5 / 0.9 + 2e5 / 0.8 + 1e5 / 0.8;
  EXPECT_NEAR(live.singles, 4e5 / n, 1e-12);
  EXPECT_NEAR(live.coincidences, live.singles * live.singles, 1e-12);
  EXPECT_EQ(live.saturated_bdms, 0u);
  // No model (or one for another scanner): everything live.
  const LiveTime none = live_time(DeadTimeModel{}, m);
  EXPECT_EQ(none.singles, 1.0);
  EXPECT_EQ(none.coincidences, 1.0);
  EXPECT_EQ(none.bdm, std::vector<double>(3, 1.0));
  // Correlated dead time: singles² (1 + κ x), x the singles-weighted load n τ.
  DeadTimeModel correlated = model;
  correlated.coincidence_correlation = 0.05;
  const LiveTime with = live_time(correlated, m);
  const double n0 = 1e5 / 0.9, n1 = 2e5 / 0.8, n2 = 1e5 / 0.8;
  const double x = (n0 * n0 * 1e-6 + n1 * n1 * 1e-6 + n2 * n2 * 2e-6) / n;
  EXPECT_NEAR(with.load, x, 1e-12);
  EXPECT_NEAR(with.singles, live.singles, 1e-12);
  EXPECT_NEAR(with.coincidences, live.singles * live.singles * (1 + 0.05 * x), 1e-12);
  EXPECT_GT(with.coincidences, live.coincidences);
  // A board past 1/τ counts as saturated.
  const LiveTime sat = live_time(model, std::vector<double>{2e6, 1e5, 1e5});
  EXPECT_EQ(sat.saturated_bdms, 1u);
}

TEST(DeadTime, TableLoadsAndRefusesWhatIsWrong) {
  {
    test::ScratchDir dir;
    const auto f = dir.write("dead_time.yaml",
                             "format: petdaq dead-time 1\nmodel: paralysable\ntau_s: [1.0e-6, 2.0e-6]\n");
    const DeadTimeModel m = load_dead_time_model(f, 2);
    EXPECT_EQ(m.kind, DeadTimeKind::paralysable);
    EXPECT_EQ(m.tau_s, (std::vector<double>{1e-6, 2e-6}));
    EXPECT_EQ(m.coincidence_correlation, 0.0);  // optional
  }
  {
    test::ScratchDir dir;
    const auto f = dir.write("dead_time.yaml",
                             "format: petdaq dead-time 1\nmodel: non_paralysable\ntau_s: [1.0e-6, 2.0e-6]\n"
                             "coincidence_correlation: 0.04\n");
    EXPECT_EQ(load_dead_time_model(f, 2).coincidence_correlation, 0.04);
  }
  const char* bad[] = {
      "format: petdaq dead-time 1\nmodel: paralysable\ntau_s: [1.0e-6]\n",            // 1 of 2 BDMs
      "format: petdaq dead-time 2\nmodel: paralysable\ntau_s: [1.0e-6, 1.0e-6]\n",    // format
      "format: petdaq dead-time 1\nmodel: sometimes\ntau_s: [1.0e-6, 1.0e-6]\n",      // model
      "format: petdaq dead-time 1\nmodel: paralysable\ntau_s: [-1.0e-6, 1.0e-6]\n",   // negative
      "format: petdaq dead-time 1\nmodel: paralysable\ntau_s: [x, 1.0e-6]\n",         // not a number
      "format: petdaq dead-time 1\nmodel: paralysable\ntau_s: 3\n",                   // not a list
      "format: petdaq dead-time 1\nmodel: paralysable\ntau_s: [1.0e-6, 1.0e-6]\n"
      "coincidence_correlation: 20\n",                                             // κ range
      "format: petdaq dead-time 1\nmodel: paralysable\ntau_s: [1.0e-6, 1.0e-6]\n"
      "coincidence_correlation: high\n",                                           // κ text
      "[1, 2",                                                                        // not YAML
      "just text\n",                                                                  // not a map
  };
  test::ScratchDir dir;
  for (const char* text : bad) {
    EXPECT_THROW(load_dead_time_model(dir.write("dead_time.yaml", text), 2), CalibrationError) << text;
  }
  EXPECT_THROW(load_dead_time_model("/nonexistent/dead_time.yaml", 2), CalibrationError);
}

}  // namespace
}  // namespace petdaq

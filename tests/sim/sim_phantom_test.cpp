// petdaq-sim's NEMA NU 4-2008 phantoms: the options they set, the truth they write, and the
// scatter they make (tools/sim, docs/simulator.md).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

#include "tests/sim/sim_fixture.h"
#include "tools/sim/options.h"

namespace petdaq::sim {
namespace {

using testing::default_config;
using testing::read_text;
using testing::ScratchDir;

SimOptions nema(const char* phantom, SimOptionText& text) {
  SimOptions o;
  o.duration_s = 0.02;
  o.activity_MBq = 10;
  o.threads = 2;
  o.background = false;
  text.phantom = phantom;
  finish_sim_options(text, o);
  return o;
}

TEST(SimNemaPhantom, OptionsAreTheStandardsAndLineOptionsStillApply) {
  SimOptionText text;
  const SimOptions m = nema("nema-mouse", text);
  EXPECT_EQ(m.phantom, PhantomKind::polyethylene_cylinder);
  EXPECT_EQ(m.source, SourceShape::line);
  EXPECT_DOUBLE_EQ(m.phantom_radius_mm, 12.5);
  EXPECT_DOUBLE_EQ(m.phantom_length_mm, 70.0);
  EXPECT_DOUBLE_EQ(m.line_offset_mm, 10.0);
  SimOptionText rat_text;
  rat_text.line_length_mm = 100;
  const SimOptions r = nema("nema-rat", rat_text);
  EXPECT_DOUBLE_EQ(r.phantom_radius_mm, 25.0);
  EXPECT_DOUBLE_EQ(r.phantom_length_mm, 150.0);
  EXPECT_DOUBLE_EQ(r.line_offset_mm, 17.5);
  EXPECT_DOUBLE_EQ(r.line_length_mm, 100.0) << "a given --line-length-mm beats the phantom's";
  SimOptionText bad;
  bad.line_radius_mm = -1;
  EXPECT_THROW(nema("nema-mouse", bad), std::invalid_argument);
}

TEST(SimNemaPhantom, TruthNamesThePhantomAndTheRatScattersMore) {
  ScratchDir dir;
  double scattered_share[2] = {};
  const char* phantoms[2] = {"nema-mouse", "nema-rat"};
  for (int i = 0; i < 2; ++i) {
    SimOptionText text;
    const SimOptions o = nema(phantoms[i], text);
    const SimSummary s = simulate(default_config(), dir.path() / phantoms[i], o);
    const auto truth = nlohmann::json::parse(read_text(dir.path() / phantoms[i] / "truth.json"));
    EXPECT_EQ(truth["phantom"], "polyethylene_cylinder");
    EXPECT_EQ(truth["source"], "line");
    EXPECT_DOUBLE_EQ(truth["line_source_mm"]["offset"].get<double>(), o.line_offset_mm);
    ASSERT_GT(s.pairs_in_window, 1000u);
    scattered_share[i] = double(s.pairs_in_window_scattered) / double(s.pairs_in_window);
  }
  // A 25 mm mouse phantom scatters a few per cent of the pairs, a 50 mm rat phantom several
  // times more (docs/nema.md: 6 % and 20 % by the NEMA method).
  EXPECT_GT(scattered_share[0], 0.02);
  EXPECT_LT(scattered_share[0], 0.12);
  EXPECT_GT(scattered_share[1], 2 * scattered_share[0]);
  EXPECT_LT(scattered_share[1], 0.35);
}

// A decaying source: the decays follow A0 2^(−t / T½), in total and over time.
TEST(SimDecayingSource, DecaysFollowTheHalfLife) {
  ScratchDir dir;
  SimOptions o;
  o.activity_MBq = 20;
  o.half_life_s = 0.01;
  o.duration_s = 0.03;  // three half-lives
  o.background = false;
  o.threads = 2;
  const SimSummary s = simulate(testing::write_small_config(dir.path()), dir.path(), o);
  const double expected = o.activity_MBq * 1e6 * o.half_life_s / std::log(2.0) * (1 - 0.125);
  EXPECT_NEAR(double(s.decays), expected, 5 * std::sqrt(expected));
  // The frames of the first half-life outnumber those of the third by about four.
  const auto frames = testing::read_frames(dir.path() / "frames.bin");
  const double tick_s = 15.625e-12;
  std::uint64_t t0 = ~0ull;
  for (const auto& f : frames) t0 = std::min(t0, f.time_ticks);
  double first = 0, third = 0;
  for (const auto& f : frames) {
    const double t = double(f.time_ticks - t0) * tick_s;
    first += t < 0.01;
    third += t >= 0.02;
  }
  ASSERT_GT(third, 1000);
  EXPECT_NEAR(first / third, 4.0, 0.2);
  const auto truth = nlohmann::json::parse(read_text(dir.path() / "truth.json"));
  EXPECT_DOUBLE_EQ(truth["half_life_s"].get<double>(), 0.01);
  SimOptionText text;
  SimOptions bad;
  bad.half_life_s = -1;
  EXPECT_THROW(finish_sim_options(text, bad), std::invalid_argument);
}

}  // namespace
}  // namespace petdaq::sim

// petdaq-sim's NEMA NU 4-2008 phantoms: the options they set, the truth they write, and the
// scatter they make (tools/sim, docs/simulator.md).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

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

}  // namespace
}  // namespace petdaq::sim

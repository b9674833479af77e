// petdaq-top's crystals view (tools/top/crystals.h): per-DU singles equal the sums made here
// from the crystal map, and the hot and dead crystals are exactly those planted; then
// petdaq-top --plain --crystals against a test publisher sending such a message.
#include "tools/top/crystals.h"

#include <gtest/gtest.h>

#include <cmath>
#include <csignal>
#include <cstring>
#include <regex>
#include <set>

#include "core/counters.h"
#include "core/test_scanner.h"
#include "tests/tools/tool_harness.h"

namespace petdaq::top {
namespace {

struct Planted {
  std::uint32_t hot = 0, dead = 0;
  std::vector<std::uint64_t> du_sum;
};

// Crystal maps of about 103 singles per crystal, BDM 0 at 5 (too few to judge), one hot and
// one dead crystal.
Planted plant(const test::TestScanner& sc, HistogramSet& h) {
  const Geometry g = sc.geometry();
  Planted p;
  p.du_sum.assign(g.bdm_count() * g.du_per_bdm(), 0);
  auto* singles = h.layout().u64(h.bins(), Hist::crystal_singles);
  for (std::uint32_t c = 0; c < g.crystal_count(); ++c) {
    singles[c] = g.address_of(c).bdm == 0 ? 5 : 100 + c % 7;
  }
  p.hot = g.crystal_id(2, 1, 5);
  p.dead = g.crystal_id(3, 3, 0);
  singles[p.hot] = 1000;
  singles[p.dead] = 10;
  for (std::uint32_t c = 0; c < g.crystal_count(); ++c) {
    const CrystalAddress a = g.address_of(c);
    p.du_sum[a.bdm * g.du_per_bdm() + a.du] += singles[c];
  }
  return p;
}

TEST(TopCrystals, PetdaqTopPrintsTheFlaggedCrystals) {
  test::TestScanner sc;
  sc.settings.output.histograms.enabled = true;
  HistogramSet h(make_histogram_layout(sc.settings));
  const Planted p = plant(sc, h);
  // The signed Δt of the prompts: expected counts of a Gaussian of 450 ps FWHM over a floor.
  const HistogramLayout& l = h.layout();
  auto* tof = l.u64(h.bins(), Hist::tof_prompt);
  const double tick = sc.settings.scanner.tick_ps, w = l.dt_bin_ticks * tick;
  const double lo = (-static_cast<double>(l.tof_half) * l.dt_bin_ticks - 0.5) * tick;
  const double s = 450 / 2.3548200450309493 * std::sqrt(2.0);
  for (std::uint32_t i = 0; i < l.tof_bins; ++i)
    tof[i] = static_cast<std::uint64_t>(std::llround(
        20 + 50000 * 0.5 * (std::erf((lo + (i + 1) * w) / s) - std::erf((lo + i * w) / s))));
  std::vector<std::uint8_t> bytes;
  encode_histogram_file(h, sc.settings, 5, histogram_metadata_json(sc.settings, 5, "cpu", nullptr), bytes);
  const auto file = sc.dir / "planted.pdh";
  write_histogram_file(file, bytes);
  const std::string endpoint = "ipc://" + (sc.dir / "pub.sock").string();
  test::Child top({(test::bin_dir() / "petdaq-top").string(), "--endpoint", endpoint, "--plain",
                   "--crystals"},
                  sc.dir / "top.out", sc.dir / "top.err");
  test::Child publisher({(test::bin_dir() / "petdaq-test-publisher").string(), "--endpoint",
                         endpoint, "--wait-subscriptions", "2", "--rates", "--interval-ms", "200",
                         "--duration-s", "1", "--histograms", file.string()},
                        sc.dir / "pub.out", sc.dir / "pub.err");
  ASSERT_TRUE(publisher.wait_for(std::chrono::seconds(20)).has_value());
  top.signal(SIGTERM);
  EXPECT_EQ(top.wait_for(std::chrono::seconds(5)), 0);
  const std::string out = test::read_text(sc.dir / "top.out");
  EXPECT_NE(out.find("run 5 crystals: 1 hot, 1 dead (12 of 16 DUs judged)"), std::string::npos) << out;
  // The CTR fitted on the planted Δt; no spectra, no photopeak.
  std::smatch ctr;
  ASSERT_TRUE(std::regex_search(out, ctr, std::regex("CTR ([0-9.]+) \\+- ([0-9.]+) ps FWHM"))) << out;
  EXPECT_NEAR(std::stod(ctr[1]), 450, 2);
  EXPECT_NE(out.find("energy resolution - (no photopeak)"), std::string::npos) << out;
  EXPECT_NE(out.find("crystal " + std::to_string(p.hot) + " (BDM 2 DU 1 #5) hot: 1000 singles"),
            std::string::npos) << out;
  EXPECT_NE(out.find("crystal " + std::to_string(p.dead) + " (BDM 3 DU 3 #0) dead: 10 singles"),
            std::string::npos) << out;
}

TEST(TopCrystals, PerDuSinglesAndPlantedHotAndDeadCrystals) {
  test::TestScanner sc;
  sc.settings.output.histograms.enabled = true;
  HistogramSet h(make_histogram_layout(sc.settings));
  const Planted p = plant(sc, h);
  const std::uint32_t hot = p.hot, dead = p.dead;
  const std::vector<std::uint64_t>& du_sum = p.du_sum;
  const Geometry g = sc.geometry();
  std::vector<std::uint8_t> bytes;
  encode_histogram_file(h, sc.settings, 3, histogram_metadata_json(sc.settings, 3, "cpu", nullptr), bytes);
  const CrystalView v = analyse_crystals(parse_histogram_file(bytes.data(), bytes.size()));
  EXPECT_EQ(v.run_id, 3u);
  ASSERT_EQ(v.dus.size(), du_sum.size());
  for (std::size_t u = 0; u < du_sum.size(); ++u) {
    EXPECT_EQ(v.dus[u].singles, du_sum[u]) << u;
    EXPECT_EQ(v.dus[u].bdm, u / g.du_per_bdm());
    EXPECT_EQ(v.dus[u].judged, u / g.du_per_bdm() != 0) << u;
  }
  ASSERT_EQ(v.flagged.size(), 2u);
  std::set<std::pair<std::uint32_t, bool>> got;
  for (const FlaggedCrystal& f : v.flagged) {
    got.insert({f.crystal, f.hot});
    const CrystalAddress a = g.address_of(f.crystal);
    EXPECT_EQ(f.bdm, a.bdm);
    EXPECT_EQ(f.du, a.du);
    EXPECT_EQ(f.local, a.crystal);
  }
  EXPECT_TRUE(got.count({hot, true}));
  EXPECT_TRUE(got.count({dead, false}));
  EXPECT_EQ(v.dus[2 * g.du_per_bdm() + 1].hot, 1u);
  EXPECT_EQ(v.dus[3 * g.du_per_bdm() + 3].dead, 1u);

  // A message whose metadata lacks the geometry is refused, not misread.
  std::vector<std::uint8_t> other;
  encode_histogram_file(h, sc.settings, 3, "{\"run_id\":3}", other);
  EXPECT_THROW(analyse_crystals(parse_histogram_file(other.data(), other.size())), HistogramFileError);
}

}  // namespace
}  // namespace petdaq::top

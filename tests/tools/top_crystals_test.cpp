// petdaq-top's crystals view (tools/top/crystals.h): per-DU singles equal the sums made here
// from the crystal map, and the hot and dead crystals are exactly those planted.
#include "tools/top/crystals.h"

#include <gtest/gtest.h>

#include <cstring>
#include <set>

#include "core/counters.h"
#include "core/test_scanner.h"

namespace petdaq::top {
namespace {

TEST(TopCrystals, PerDuSinglesAndPlantedHotAndDeadCrystals) {
  test::TestScanner sc;
  sc.settings.output.histograms.enabled = true;
  HistogramSet h(make_histogram_layout(sc.settings));
  const Geometry g = sc.geometry();
  auto* singles = h.layout().u64(h.bins(), Hist::crystal_singles);
  std::vector<std::uint64_t> du_sum(g.bdm_count() * g.du_per_bdm(), 0);
  for (std::uint32_t c = 0; c < g.crystal_count(); ++c) {
    singles[c] = 100 + c % 7;  // medians near 103
    const CrystalAddress a = g.address_of(c);
    if (a.bdm == 0) singles[c] = 5;  // BDM 0: too few counts to judge
  }
  const std::uint32_t hot = g.crystal_id(2, 1, 5), dead = g.crystal_id(3, 3, 0);
  singles[hot] = 1000;
  singles[dead] = 10;
  for (std::uint32_t c = 0; c < g.crystal_count(); ++c) {
    const CrystalAddress a = g.address_of(c);
    du_sum[a.bdm * g.du_per_bdm() + a.du] += singles[c];
  }
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

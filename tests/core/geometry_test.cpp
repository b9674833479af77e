// Scanner addressing and the global crystal id (DESIGN section 3).
#include "core/geometry.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/settings.h"
#include "test_scanner.h"

namespace petdaq {
namespace {

Geometry make(std::uint32_t bdm_t, std::uint32_t bdm_a, std::uint32_t du_t, std::uint32_t du_a,
              std::uint32_t c_t, std::uint32_t c_a, std::uint32_t position_size = 64) {
  return Geometry::from(test::scanner_shape(bdm_t, bdm_a, du_t, du_a, c_t, c_a, position_size));
}

const Geometry kDefault = make(12, 2, 2, 2, 13, 13, 256);

TEST(Geometry, FromSettingsCopiesTheScanner) {
  ScannerSettings s;
  s.bdm_transaxial = 5;
  s.bdm_axial = 3;
  s.du_transaxial = 4;
  s.du_axial = 1;
  s.crystal_transaxial = 6;
  s.crystal_axial = 7;
  s.position_size = 128;
  const Geometry g = Geometry::from(s);
  EXPECT_EQ(g.bdm_transaxial, 5u);
  EXPECT_EQ(g.bdm_axial, 3u);
  EXPECT_EQ(g.du_transaxial, 4u);
  EXPECT_EQ(g.du_axial, 1u);
  EXPECT_EQ(g.crystal_transaxial, 6u);
  EXPECT_EQ(g.crystal_axial, 7u);
  EXPECT_EQ(g.position_size, 128u);
}

TEST(Geometry, DefaultCounts) {
  EXPECT_EQ(kDefault.bdm_count(), 24u);
  EXPECT_EQ(kDefault.du_per_bdm(), 4u);
  EXPECT_EQ(kDefault.crystals_per_du(), 169u);
  // 12 boards x 2 DUs x 13 crystals around the ring (the earlier pipeline forgot the board count).
  EXPECT_EQ(kDefault.crystals_per_ring(), 312u);
  EXPECT_EQ(kDefault.ring_count(), 52u);
  EXPECT_EQ(kDefault.crystal_count(), 16224u);
}

TEST(Geometry, CrystalIdsOfFirstAndLastBdm) {
  // First crystal of the first BDM.
  EXPECT_EQ(kDefault.crystal_id(0, 0, 0), 0u);
  // Last crystal of the first BDM: DU 3 (d_trans 1, d_axial 1), local 168 (c_trans 12,
  // c_axial 12): in_ring 13 + 12 = 25, ring 13 + 12 = 25 -> 25 * 312 + 25.
  EXPECT_EQ(kDefault.crystal_id(0, 3, 168), 7825u);
  // First crystal of the last BDM: b = 23 (b_axial 1, b_trans 11): in_ring 11 * 26 = 286,
  // ring 26 -> 26 * 312 + 286.
  EXPECT_EQ(kDefault.crystal_id(23, 0, 0), 8398u);
  // Last crystal of the last BDM is the last crystal of the scanner.
  EXPECT_EQ(kDefault.crystal_id(23, 3, 168), 16223u);
  // Second BDM along the ring, same DU/crystal as the first: one board's width further.
  EXPECT_EQ(kDefault.crystal_id(1, 0, 0), 26u);
  // DU 1 is the next DU along the axis (d_axial 1): 13 rings further.
  EXPECT_EQ(kDefault.crystal_id(0, 1, 0), 13u * 312u);
  // DU 2 is the next DU around the ring (d_trans 1).
  EXPECT_EQ(kDefault.crystal_id(0, 2, 0), 13u);
}

TEST(Geometry, NonSquareDu) {
  // 3 crystals across the ring x 5 along the axis; 4 x 3 boards; 2 x 1 DUs per board.
  const Geometry g = make(4, 3, 2, 1, 3, 5);
  EXPECT_EQ(g.crystals_per_ring(), 24u);
  EXPECT_EQ(g.ring_count(), 15u);
  // b 6: b_axial 1, b_trans 2; d 1: d_trans 1, d_axial 0; c 13: c_trans 2, c_axial 3.
  // in_ring = 2 * 6 + 1 * 3 + 2 = 17; ring = 1 * 5 + 0 + 3 = 8 -> 8 * 24 + 17.
  EXPECT_EQ(g.crystal_id(6, 1, 13), 209u);
  const CrystalAddress a = g.address_of(209);
  EXPECT_EQ(a.bdm, 6u);
  EXPECT_EQ(a.du, 1u);
  EXPECT_EQ(a.crystal, 13u);
}

TEST(Geometry, SeveralAxialBdmsAndDus) {
  // 3 x 2 boards, 1 x 2 DUs, 4 x 2 crystals.
  const Geometry g = make(3, 2, 1, 2, 4, 2);
  EXPECT_EQ(g.crystals_per_ring(), 12u);
  EXPECT_EQ(g.ring_count(), 8u);
  // b 5: b_axial 1, b_trans 2; d 1: d_trans 0, d_axial 1; c 7: c_trans 3, c_axial 1.
  // in_ring = 2 * 4 + 0 + 3 = 11; ring = 1 * 4 + 1 * 2 + 1 = 7 -> 7 * 12 + 11.
  EXPECT_EQ(g.crystal_id(5, 1, 7), 95u);
  // b 3: b_axial 1, b_trans 0; d 0, c 0 -> ring 4, in_ring 0.
  EXPECT_EQ(g.crystal_id(3, 0, 0), 48u);
}

TEST(Geometry, LabelRowZeroIsTheLastTransaxialCrystal) {
  // Square 13 x 13: label 0 (row 0, col 0) is c_trans 12, c_axial 0.
  EXPECT_EQ(kDefault.local_crystal_of_label(0), 12u * 13u);
  EXPECT_EQ(kDefault.local_crystal_of_label(168), 12u);
  EXPECT_EQ(kDefault.local_crystal_of_label(14), 11u * 13u + 1u);
  // Non-square: 3 rows (transaxial) of 5 columns (axial).
  const Geometry g = make(1, 1, 1, 1, 3, 5);
  EXPECT_EQ(g.local_crystal_of_label(0), 10u);   // row 0 -> c_trans 2, col 0
  EXPECT_EQ(g.local_crystal_of_label(4), 14u);   // row 0, col 4
  EXPECT_EQ(g.local_crystal_of_label(7), 7u);    // row 1 -> c_trans 1, col 2
  EXPECT_EQ(g.local_crystal_of_label(14), 4u);   // row 2 -> c_trans 0, col 4
  EXPECT_EQ(g.label_of_local_crystal(10), 0u);
  EXPECT_EQ(g.label_of_local_crystal(4), 14u);
}

TEST(Geometry, LabelMappingIsABijection) {
  for (const Geometry& g : {kDefault, make(1, 1, 1, 1, 3, 5), make(1, 1, 1, 1, 5, 3),
                            make(1, 1, 1, 1, 1, 7), make(1, 1, 1, 1, 15, 17)}) {
    std::vector<bool> seen(g.crystals_per_du(), false);
    for (std::uint32_t label = 0; label < g.crystals_per_du(); ++label) {
      const std::uint32_t c = g.local_crystal_of_label(label);
      ASSERT_LT(c, g.crystals_per_du());
      ASSERT_FALSE(seen[c]) << "label " << label;
      seen[c] = true;
      ASSERT_EQ(g.label_of_local_crystal(c), label);
    }
  }
}

TEST(Geometry, CrystalIdIsABijectionAndAddressOfItsInverse) {
  const Geometry geometries[] = {kDefault, make(4, 3, 2, 1, 3, 5), make(3, 2, 1, 2, 4, 2),
                                 make(1, 1, 1, 1, 1, 1), make(5, 1, 3, 4, 2, 7),
                                 make(2, 4, 4, 4, 1, 9)};
  for (const Geometry& g : geometries) {
    std::vector<bool> seen(g.crystal_count(), false);
    std::uint32_t n = 0;
    for (std::uint32_t b = 0; b < g.bdm_count(); ++b)
      for (std::uint32_t d = 0; d < g.du_per_bdm(); ++d)
        for (std::uint32_t c = 0; c < g.crystals_per_du(); ++c) {
          const std::uint32_t id = g.crystal_id(b, d, c);
          ASSERT_LT(id, g.crystal_count());
          ASSERT_FALSE(seen[id]) << "crystal " << id << " twice";
          seen[id] = true;
          ++n;
          const CrystalAddress a = g.address_of(id);
          ASSERT_EQ(a.bdm, b);
          ASSERT_EQ(a.du, d);
          ASSERT_EQ(a.crystal, c);
          ASSERT_EQ(g.sector_of(id), b % g.bdm_transaxial);
        }
    EXPECT_EQ(n, g.crystal_count());
    for (std::uint32_t id = 0; id < g.crystal_count(); ++id) {
      const CrystalAddress a = g.address_of(id);
      ASSERT_EQ(g.crystal_id(a.bdm, a.du, a.crystal), id);
    }
  }
}

TEST(Geometry, SectorOf) {
  EXPECT_EQ(kDefault.sector_of(0), 0u);
  EXPECT_EQ(kDefault.sector_of(25), 0u);   // last crystal of board 0 in ring 0
  EXPECT_EQ(kDefault.sector_of(26), 1u);
  EXPECT_EQ(kDefault.sector_of(311), 11u);
  EXPECT_EQ(kDefault.sector_of(312), 0u);  // the next ring starts at sector 0 again
  EXPECT_EQ(kDefault.sector_of(kDefault.crystal_id(23, 3, 168)), 11u);
}

TEST(Geometry, SectorDistanceIsCircular) {
  EXPECT_EQ(sector_distance(3, 3, 12), 0u);
  EXPECT_EQ(sector_distance(0, 1, 12), 1u);
  EXPECT_EQ(sector_distance(0, 11, 12), 1u);
  EXPECT_EQ(sector_distance(11, 0, 12), 1u);
  EXPECT_EQ(sector_distance(0, 6, 12), 6u);
  EXPECT_EQ(sector_distance(2, 9, 12), 5u);
  EXPECT_EQ(sector_distance(0, 3, 5), 2u);
  EXPECT_EQ(sector_distance(0, 0, 1), 0u);
  for (std::uint32_t n = 1; n <= 16; ++n)
    for (std::uint32_t a = 0; a < n; ++a)
      for (std::uint32_t b = 0; b < n; ++b) {
        const std::uint32_t d = sector_distance(a, b, n);
        ASSERT_EQ(d, sector_distance(b, a, n));
        ASSERT_LE(d, n / 2);
        ASSERT_TRUE((a + d) % n == b || (b + d) % n == a);
      }
}

}  // namespace
}  // namespace petdaq

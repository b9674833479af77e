// tools/export/yardl_binary.h's bytes, the PETSIRD schema string against the release's (test
// data), the PETSIRD layout against DESIGN section 3's crystal centres, and the TOF binning.
// The file as a whole is read back by tests/python/test_petsird.py.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "tests/support/files.h"
#include "tests/support/scratch_dir.h"
#include "tools/export/crystal_position.h"
#include "tools/export/petsird_schema.h"
#include "tools/export/petsird_writer.h"
#include "tools/export/yardl_binary.h"

namespace petdaq::exporter {
namespace {

TEST(YardlWriter, WritesTheEncodingsOfTheReferenceAndTheRuntime) {
  test::ScratchDir dir;
  const std::filesystem::path f = dir / "yardl-bytes";
  {
    YardlWriter w(f, "{}");
    w.varuint(0);
    w.varuint(127);
    w.varuint(128);
    w.varuint(300);
    w.varint(0);
    w.varint(-1);
    w.varint(1);
    w.varint(-2);
    w.varint(std::numeric_limits<std::int64_t>::min());
    w.u8(200);  // 8-bit: one raw byte, not a varint
    w.i8(-1);
    w.boolean(true);
    w.f32(1.0f);
    w.string("hello");
    w.presence(false);
    w.union_index(4);
    w.close();
  }
  const std::vector<std::uint8_t> want = {
      'y', 'a', 'r', 'd', 'l',  // magic
      1, 0, 0, 0,               // u32 binary format version
      2, '{', '}',              // schema: length, bytes
      0x00,                     // varuint 0
      0x7F,                     // varuint 127
      0x80, 0x01,               // varuint 128
      0xAC, 0x02,               // varuint 300
      0x00,                     // varint 0
      0x01,                     // varint -1 (zigzag 1)
      0x02,                     // varint 1 (zigzag 2)
      0x03,                     // varint -2 (zigzag 3)
      0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01,  // varint INT64_MIN
      0xC8,                     // uint8 200
      0xFF,                     // int8 -1
      0x01,                     // bool
      0x00, 0x00, 0x80, 0x3F,   // float32 1.0
      5, 'h', 'e', 'l', 'l', 'o',  // string
      0x00,                     // optional: absent
      0x04,                     // union case index
  };
  EXPECT_EQ(test::read_bytes(f), want);
}

TEST(PetsirdSchema, IsTheReleaseStringByteForByte) {
  const auto data = test::read_bytes(std::filesystem::path(PETDAQ_SOURCE_DIR) / "tests" / "export" /
                              "data" / "petsird-0.9.1.schema.json");
  ASSERT_FALSE(data.empty());
  EXPECT_EQ(std::string(data.begin(), data.end()), std::string(kPetsirdSchema));
  EXPECT_EQ(kPetsirdRelease, "0.9.1");
}

// A point p of an element: module · (element · p).
std::array<double, 3> place(const std::array<float, 12>& m, const std::array<float, 12>& e) {
  std::array<double, 3> local{}, out{};
  for (int r = 0; r < 3; ++r) local[r] = e[r * 4 + 3];
  for (int r = 0; r < 3; ++r)
    out[r] = m[r * 4] * local[0] + m[r * 4 + 1] * local[1] + m[r * 4 + 2] * local[2] + m[r * 4 + 3];
  return out;
}

void expect_every_crystal_at_its_centre(const ScannerSettings& s) {
  const PetsirdLayout layout(s);
  const Geometry g = Geometry::from(s);
  ASSERT_EQ(layout.detection_bins(), g.crystal_count());
  std::set<std::uint32_t> bins;
  for (std::uint32_t c = 0; c < g.crystal_count(); ++c) {
    const std::uint32_t bin = layout.detection_bin(c);
    ASSERT_LT(bin, layout.detection_bins());
    bins.insert(bin);
    const auto at = place(layout.module_transform(layout.module_of(c)),
                          layout.element_transform(layout.element_of(c)));
    const CrystalPlace want = crystal_place(s, c);
    for (int i = 0; i < 3; ++i) ASSERT_NEAR(at[i], want.centre_mm[i], 1e-3) << "crystal " << c;
    // The element's x axis (the box's depth) points out through its panel.
    const auto m = layout.module_transform(layout.module_of(c));
    ASSERT_NEAR(m[0], want.outward[0], 1e-6);
    ASSERT_NEAR(m[4], want.outward[1], 1e-6);
  }
  EXPECT_EQ(bins.size(), g.crystal_count());
}

TEST(PetsirdLayout, PlacesEveryCrystalAtItsCentre) {
  expect_every_crystal_at_its_centre(ScannerSettings{});
  ScannerSettings odd;
  odd.bdm_transaxial = 5;
  odd.bdm_axial = 3;
  odd.du_transaxial = 3;
  odd.du_axial = 1;
  odd.crystal_transaxial = 4;
  odd.crystal_axial = 7;
  odd.crystal_pitch_axial_mm = 2.1;
  expect_every_crystal_at_its_centre(odd);
}

TEST(PetsirdTofBins, OneTickBinsKeepTheSignedDtExactly) {
  const PetsirdTofBins bins(256, 1);
  EXPECT_EQ(bins.count(), 513u);
  std::uint32_t k = 0;
  for (std::int64_t s = -256; s <= 256; ++s) {
    ASSERT_TRUE(bins.index(s, k));
    EXPECT_EQ(k, static_cast<std::uint32_t>(s + 256));
  }
  EXPECT_FALSE(bins.index(257, k));
  EXPECT_FALSE(bins.index(-257, k));
  const auto e = bins.edges_ticks();
  ASSERT_EQ(e.size(), 514u);
  EXPECT_EQ(e.front(), -256.5);
  EXPECT_EQ(e.back(), 256.5);
}

TEST(PetsirdTofBins, WideBinsHoldEachDtBetweenTheirEdges) {
  for (std::uint32_t width : {2u, 3u, 4u, 7u}) {
    const PetsirdTofBins bins(100, width);
    const auto e = bins.edges_ticks();
    ASSERT_EQ(e.size(), bins.count() + 1);
    for (std::int64_t s = -100; s <= 100; ++s) {
      std::uint32_t k = 0;
      ASSERT_TRUE(bins.index(s, k)) << s;
      ASSERT_LT(k, bins.count());
      EXPECT_LT(e[k], s) << "width " << width << " dt " << s;
      EXPECT_GT(e[k + 1], s) << "width " << width << " dt " << s;
      EXPECT_EQ(e[k + 1] - e[k], width);
    }
  }
}

}  // namespace
}  // namespace petdaq::exporter

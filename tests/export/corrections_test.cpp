// tools/export/corrections.h and the CASToR event layout: the live time read from a .plm's
// dead intervals (other kinds skipped), the normalisation table's refusals and its LOR
// efficiency, the CASToR event with TOF, randoms and normalisation, and an out-of-range
// crystal refused with nothing written.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <unistd.h>
#include <vector>

#include "core/calibration.h"
#include "core/geometry.h"
#include "core/settings.h"
#include "proto/bytes.h"
#include "proto/records.h"
#include "tests/support/files.h"
#include "tests/support/scratch_dir.h"
#include "tools/export/castor.h"
#include "tools/export/corrections.h"

namespace petdaq {
namespace {

namespace fs = std::filesystem;

// A .plm file: header, then messages of any kind with raw bodies.
class PlmBytes {
 public:
  explicit PlmBytes(double tick_ps) {
    PlmHeader h;
    h.tick_ps = tick_ps;
    h.crystal_count = 16;
    h.crystals_per_ring = 8;
    bytes_.resize(kPlmHeaderBytes);
    encode_plm_header(h, bytes_.data());
  }
  void message(MessageKind kind, std::uint64_t run, std::uint64_t t_begin, std::uint64_t t_end,
               std::uint32_t count, std::uint32_t record_size, const std::vector<std::uint8_t>& body) {
    MessageHeader m;
    m.kind = static_cast<std::uint16_t>(kind);
    m.run_id = run;
    m.t_begin = t_begin;
    m.t_end = t_end;
    m.record_count = count;
    m.record_size = record_size;
    std::uint8_t head[kMessageHeaderBytes];
    encode_message_header(m, head);
    bytes_.insert(bytes_.end(), head, head + sizeof head);
    bytes_.insert(bytes_.end(), body.begin(), body.end());
  }
  void prompts(std::uint64_t run, std::uint64_t t_begin, std::uint64_t t_end, std::uint32_t n) {
    message(MessageKind::prompts, run, t_begin, t_end, n, 32, std::vector<std::uint8_t>(32u * n));
  }
  void dead(std::uint64_t run, std::vector<std::pair<std::uint64_t, std::uint64_t>> intervals) {
    std::vector<std::uint8_t> body(24 * intervals.size());
    for (std::size_t k = 0; k < intervals.size(); ++k) {
      bytes::store_le64(body.data() + 24 * k, intervals[k].first);
      bytes::store_le64(body.data() + 24 * k + 8, intervals[k].second);
      bytes::store_le64(body.data() + 24 * k + 16, 7);
    }
    message(MessageKind::deadtime, run, intervals.front().first, intervals.back().second,
            std::uint32_t(intervals.size()), 24, body);
  }
  void write(const fs::path& file) const {
    std::ofstream out(file, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes_.data()), std::streamsize(bytes_.size()));
  }
  std::vector<std::uint8_t>& bytes() { return bytes_; }

 private:
  std::vector<std::uint8_t> bytes_;
};

TEST(LiveTime, DeadIntervalsOverTheRunsSpansOtherKindsSkipped) {
  test::ScratchDir scratch;
  // tick 1000 ps: 1e9 ticks = 1 s. Run 1 spans [1e9, 3e9), run 2 [10e9, 11e9): 3 s in all.
  PlmBytes f(1000.0);
  f.prompts(1, 1'000'000'000, 2'000'000'000, 3);
  f.dead(1, {{1'500'000'000, 1'600'000'000}, {1'700'000'000, 1'750'000'000}});
  f.message(static_cast<MessageKind>(9), 1, 0, 0, 2, 5, std::vector<std::uint8_t>(10));  // unknown
  f.prompts(1, 2'000'000'000, 3'000'000'000, 2);
  f.prompts(2, 10'000'000'000, 11'000'000'000, 4);
  f.dead(2, {{10'000'000'000, 10'150'000'000}});
  const fs::path file = scratch / "live.plm";
  f.write(file);
  const exporter::LiveTime live = exporter::scan_live_time(file, 1000.0);
  EXPECT_DOUBLE_EQ(live.acquisition_s, 3.0);
  EXPECT_NEAR(live.dead_s, 0.3, 1e-12);
  EXPECT_EQ(live.dead_intervals, 3u);
  EXPECT_EQ(live.prompts, 9u);
  EXPECT_NEAR(live.live_fraction(), 0.9, 1e-12);
}

TEST(LiveTime, NoDeadIntervalsIsAllLiveAndACutTailEndsTheScan) {
  test::ScratchDir scratch;
  PlmBytes f(1000.0);
  f.prompts(0, 0, 2'000'000'000, 1);
  f.prompts(0, 2'000'000'000, 4'000'000'000, 5);
  f.bytes().resize(f.bytes().size() - 40);  // the second message cut short (still written)
  const fs::path file = scratch / "nodead.plm";
  f.write(file);
  const exporter::LiveTime live = exporter::scan_live_time(file, 1000.0);
  EXPECT_DOUBLE_EQ(live.acquisition_s, 2.0);
  EXPECT_EQ(live.prompts, 1u);
  EXPECT_DOUBLE_EQ(live.live_fraction(), 1.0);
}

TEST(LiveTime, ABadDeadIntervalRecordSizeIsRefused) {
  test::ScratchDir scratch;
  PlmBytes f(1000.0);
  f.message(MessageKind::deadtime, 0, 0, 10, 1, 16, std::vector<std::uint8_t>(16));
  const fs::path file = scratch / "badsize.plm";
  f.write(file);
  EXPECT_THROW(exporter::scan_live_time(file, 1000.0), std::runtime_error);
}

// A small scanner: 4 panels of 2 crystals, 2 rings (16 crystals).
Settings small() {
  Settings s;
  s.scanner.bdm_transaxial = 4;
  s.scanner.bdm_axial = 1;
  s.scanner.du_transaxial = 1;
  s.scanner.du_axial = 1;
  s.scanner.crystal_transaxial = 2;
  s.scanner.crystal_axial = 2;
  return s;
}

void write_tables(const fs::path& dir, float crystal3 = 1.5f) {
  fs::create_directories(dir);
  std::vector<float> eps(16, 1.0f), block(2 * 2, 1.0f), geo(4 * 2 * 2, 1.0f), axial(2 * 2, 1.0f);
  eps[3] = crystal3;
  block[1 * 2 + 0] = 0.8f;      // ring 1, position 0
  geo[(2 * 2 + 1) * 2 + 0] = 2.0f;  // panel difference 2, t_i 1, t_j 0
  axial[0 * 2 + 1] = axial[1 * 2 + 0] = 0.5f;
  write_npy(dir / exporter::NormalizationTable::kCrystalFile, {16}, eps);
  write_npy(dir / exporter::NormalizationTable::kBlockFile, {2, 2}, block);
  write_npy(dir / exporter::NormalizationTable::kGeometricFile, {4, 2, 2}, geo);
  write_npy(dir / exporter::NormalizationTable::kAxialFile, {2, 2}, axial);
}

TEST(NormalizationTable, TheLorEfficiencyIsTheProductOfItsComponents) {
  test::ScratchDir scratch;
  const Settings s = small();
  const Geometry g = Geometry::from(s.scanner);
  ASSERT_EQ(g.crystal_count(), 16u);
  ASSERT_EQ(g.crystals_per_ring(), 8u);
  const fs::path dir = scratch / "norm";
  write_tables(dir);
  const exporter::NormalizationTable t(dir, g);
  // Crystal 3: ring 0, panel 1, t 1. Crystal 13: ring 1, in ring 5 = panel 2... no: 13 % 8
  // = 5, panel 2, t 1. Panel difference 1: geometric 1; ring pair (0, 1): 0.5.
  EXPECT_NEAR(t.efficiency(3, 13), 1.5 * 1.0 * 0.5, 1e-6);
  // Crystal 3 (panel 1, t 1) and 8 (ring 1, panel 0... 8 % 8 = 0: panel 0, t 0): difference
  // (0 - 1) mod 4 = 3. Crystal 1 (panel 0, t 1) and 12 (ring 1, in ring 4: panel 2, t 0):
  // difference 2, (t_i, t_j) = (1, 0): 2.0; ring 1 position 0: 0.8; axial 0.5.
  EXPECT_NEAR(t.efficiency(1, 12), 2.0 * 0.8 * 0.5, 1e-6);
  EXPECT_NEAR(t.efficiency(3, 8), 1.5 * 0.8 * 0.5, 1e-6);
}

TEST(NormalizationTable, AWrongShapeOrANonPositiveValueIsRefusedNamingTheFile) {
  test::ScratchDir scratch;
  const Geometry g = Geometry::from(small().scanner);
  const fs::path dir = scratch / "norm_bad";
  write_tables(dir, 0.0f);
  try {
    exporter::NormalizationTable t(dir, g);
    FAIL() << "a zero efficiency was accepted";
  } catch (const CalibrationError& e) {
    EXPECT_NE(std::string(e.what()).find("norm_crystal_efficiency.npy"), std::string::npos) << e.what();
  }
  write_tables(dir);
  write_npy(dir / exporter::NormalizationTable::kAxialFile, {3}, std::vector<float>(3, 1.0f));
  EXPECT_THROW(exporter::NormalizationTable(dir, g), CalibrationError);
}

float float_at(const std::vector<std::uint8_t>& b, std::size_t at) {
  const std::uint32_t bits = bytes::load_le32(b.data() + at);
  float v;
  std::memcpy(&v, &bits, 4);
  return v;
}

TEST(CastorWriter, TofIsTheSignedDtWithCrystalOneTheLowerIdAndNormIncludesTheLiveTime) {
  test::ScratchDir scratch;
  Settings s = small();
  s.scanner.tick_ps = 10.0;
  exporter::Corrections c;
  const fs::path dir = scratch / "norm_castor";
  write_tables(dir);
  c.normalization.emplace(dir, Geometry::from(s.scanner));
  c.live.acquisition_s = 2.0;
  c.live.dead_s = 0.5;
  c.live_known = true;
  const fs::path base = scratch / "castor";
  exporter::CastorWriter w(base, s, 10.0, c);
  ASSERT_TRUE(w.writes_normalization());
  ASSERT_FALSE(w.writes_randoms());
  ASSERT_EQ(w.event_bytes(), 20u);
  MessageHeader m;
  m.kind = static_cast<std::uint16_t>(MessageKind::prompts);
  m.t_begin = 0;
  m.t_end = 1000;
  // Crystal 12 first (earlier), 1 later by 7 ticks: signed Δt = t(1) − t(12) = +70 ps.
  CoincRecord r1{100, 7, 12, 1, 511, 511, 0};
  // Crystal 3 first, 13 later by 4 ticks: t(3) − t(13) = −40 ps.
  CoincRecord r2{200, 4, 3, 13, 511, 511, 0};
  const CoincRecord both[2] = {r1, r2};
  w.add(m, both, 2);
  w.finish();
  const auto b = test::read_bytes(fs::path(base.string() + ".cdf"));
  ASSERT_EQ(b.size(), 40u);
  EXPECT_NEAR(float_at(b, 4), 1.0 / (2.0 * 0.8 * 0.5 * 0.75), 1e-5);
  EXPECT_FLOAT_EQ(float_at(b, 8), 70.0f);
  EXPECT_EQ(bytes::load_le32(b.data() + 12), 1u);
  EXPECT_EQ(bytes::load_le32(b.data() + 16), 12u);
  EXPECT_NEAR(float_at(b, 24), 1.0 / (1.5 * 0.5 * 0.75), 1e-5);
  EXPECT_FLOAT_EQ(float_at(b, 28), -40.0f);
  EXPECT_EQ(bytes::load_le32(b.data() + 32), 3u);
  EXPECT_EQ(bytes::load_le32(b.data() + 36), 13u);
  const std::string head = test::read_text(base.string() + ".cdh");
  EXPECT_NE(head.find("TOF information flag: 1\n"), std::string::npos) << head;
  EXPECT_NE(head.find("List TOF measurement range (ps): " + std::to_string(int(2 * s.coincidence.window_ps))),
            std::string::npos) << head;
  EXPECT_NE(head.find("Normalization correction flag: 1\n"), std::string::npos) << head;
  EXPECT_NE(head.find("Random correction flag: 0\n"), std::string::npos) << head;
  EXPECT_NE(head.find("petdaq live-time fraction: 0.75\n"), std::string::npos) << head;
  // The normalisation data file: every pair i < j (min_sector_difference 0), in order, with
  // the events' factor; its header in CASToR's normalisation mode.
  EXPECT_EQ(w.normalization_lines(), 16u * 15u / 2u);
  const auto n = test::read_bytes(fs::path(base.string() + "_norm.cdf"));
  ASSERT_EQ(n.size(), 12u * 120u);
  std::size_t at = 0;
  for (std::uint32_t i = 0; i < 16; ++i) {
    for (std::uint32_t j = i + 1; j < 16; ++j, at += 12) {
      ASSERT_EQ(bytes::load_le32(n.data() + at + 4), i);
      ASSERT_EQ(bytes::load_le32(n.data() + at + 8), j);
      if (i == 1 && j == 12) {
        EXPECT_NEAR(float_at(n, at), 1.0 / (0.8 * 0.75), 1e-5);
      }
      if (i == 3 && j == 13) {
        EXPECT_NEAR(float_at(n, at), 1.0 / (0.75 * 0.75), 1e-5);
      }
    }
  }
  const std::string norm_head = test::read_text(base.string() + "_norm.cdh");
  EXPECT_NE(norm_head.find("Data mode: normalization\n"), std::string::npos) << norm_head;
  EXPECT_NE(norm_head.find("Number of events: 120\n"), std::string::npos) << norm_head;
}

TEST(CastorWriter, TheNormalisationFileLeavesOutPairsTheSorterCannotForm) {
  test::ScratchDir scratch;
  Settings s = small();
  s.coincidence.min_sector_difference = 2;  // 4 sectors: only opposite panels pair
  exporter::Corrections c;
  const fs::path dir = scratch / "norm_sectors";
  write_tables(dir);
  c.normalization.emplace(dir, Geometry::from(s.scanner));
  const fs::path base = scratch / "castor_sectors";
  exporter::CastorWriter w(base, s, 15.625, c);
  w.finish();
  // Each crystal pairs with the 4 crystals (2 per ring, 2 rings) of the opposite panel.
  EXPECT_EQ(w.normalization_lines(), 16u * 4u / 2u);
  EXPECT_EQ(fs::file_size(base.string() + "_norm.cdf"), 12u * 32u);
}

TEST(CastorWriter, AnOutOfRangeCrystalIsRefusedAndNotWritten) {
  test::ScratchDir scratch;
  const Settings s = small();
  exporter::Corrections c;
  const fs::path base = scratch / "castor_bad";
  exporter::CastorWriter w(base, s, 15.625, c);
  EXPECT_EQ(w.event_bytes(), 16u);  // time, TOF, two ids: no correction known
  std::filesystem::remove(base.string() + "_norm.cdf");
  MessageHeader m;
  m.kind = static_cast<std::uint16_t>(MessageKind::prompts);
  m.message_id = 42;
  const CoincRecord good{1, 0, 0, 5, 511, 511, 0}, bad{2, 0, 3, 16, 511, 511, 0};
  w.add(m, &good, 1);
  try {
    w.add(m, &bad, 1);
    FAIL() << "crystal 16 of 16 was accepted";
  } catch (const exporter::BadRecord& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("crystal id 16"), std::string::npos) << what;
    EXPECT_NE(what.find("message 42"), std::string::npos) << what;
  }
  w.finish();
  EXPECT_EQ(fs::file_size(base.string() + ".cdf"), 16u);  // the good event only
  EXPECT_FALSE(fs::exists(base.string() + "_norm.cdf"));  // no table, no normalisation file
}

TEST(CastorWriter, AHistogramListsEveryLineWithItsPromptsAndFactors) {
  test::ScratchDir scratch;
  const Settings s = small();
  exporter::Corrections c;
  const fs::path dir = scratch / "norm_histogram";
  write_tables(dir);
  c.normalization.emplace(dir, Geometry::from(s.scanner));
  const fs::path base = scratch / "castor_histogram";
  exporter::CastorWriter w(base, s, 10.0, c, exporter::CastorMode::histogram);
  MessageHeader m;
  m.kind = static_cast<std::uint16_t>(MessageKind::prompts);
  m.t_end = 100;
  const CoincRecord r[3] = {{1, 2, 12, 1, 511, 511, 0}, {2, 3, 1, 12, 511, 511, 0}, {3, 1, 3, 13, 511, 511, 0}};
  w.add(m, r, 3);
  w.finish();
  EXPECT_EQ(w.events(), 3u);
  EXPECT_EQ(w.histogram_lines(), 120u);
  // time, normalisation, count, crystal 1, crystal 2: 20 bytes a line, every pair in order.
  const auto b = test::read_bytes(fs::path(base.string() + ".cdf"));
  ASSERT_EQ(b.size(), 20u * 120u);
  double total = 0;
  std::size_t at = 0;
  for (std::uint32_t i = 0; i < 16; ++i) {
    for (std::uint32_t j = i + 1; j < 16; ++j, at += 20) {
      ASSERT_EQ(bytes::load_le32(b.data() + at), 0u);
      ASSERT_EQ(bytes::load_le32(b.data() + at + 12), i);
      ASSERT_EQ(bytes::load_le32(b.data() + at + 16), j);
      const float count = float_at(b, at + 8);
      total += count;
      if (i == 1 && j == 12) {
        EXPECT_EQ(count, 2.0f);  // both orders of the pair
        EXPECT_NEAR(float_at(b, at + 4), 1.0 / 0.8, 1e-5);
      }
      if (i == 3 && j == 13) {
        EXPECT_EQ(count, 1.0f);
      }
    }
  }
  EXPECT_EQ(total, 3.0);
  const std::string head = test::read_text(base.string() + ".cdh");
  EXPECT_NE(head.find("Data mode: histogram\n"), std::string::npos) << head;
  EXPECT_NE(head.find("Number of events: 120\n"), std::string::npos) << head;
  EXPECT_NE(head.find("TOF information flag: 0\n"), std::string::npos) << head;
}

}  // namespace
}  // namespace petdaq

// convert_frames() (the CPU stage: per-byte pass tables, per-(BDM, DU) and per-label parts,
// blocks of frames, counts per BDM) equals convert_frame() frame by frame, the one definition
// of the rule: singles bit for bit, every counter and both per-BDM counts, on streams in runs
// of one source as datagrams bring them, with every kind of bad frame mixed in, on scanners at
// the limits of the frame's fields and with markers checked or not.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "core/calibration.h"
#include "core/convert.h"
#include "core/settings.h"
#include "test_scanner.h"

namespace petdaq {
namespace {


struct Case {
  Settings settings;
  Calibration cal;
  std::vector<RawFrame> frames;
};

// A calibration for `s` with labels past the DU's crystals and NaN, negative and huge gains
// here and there, and a stream in runs of one BDM (1 to 600 frames), each frame good or bad
// in one of the ways a frame can be.
// Settings of a scanner shape with an energy window (keV).
Settings scanner_settings(const ScannerSettings& scanner, double low_keV, double high_keV) {
  Settings s;
  s.scanner = scanner;
  s.energy_window.low_keV = low_keV;
  s.energy_window.high_keV = high_keV;
  return s;
}

Case make_case(const Settings& s, bool with_offsets, std::uint64_t seed) {
  Case c;
  c.settings = s;
  const Geometry g = Geometry::from(s.scanner);
  std::mt19937_64 rng(seed);
  const std::uint32_t ps = g.position_size;
  c.cal.position_lut.resize(std::size_t{g.bdm_count()} * g.du_per_bdm() * ps * ps);
  const std::uint32_t labels = g.crystals_per_du();
  for (auto& v : c.cal.position_lut)
    v = static_cast<std::uint8_t>(rng() % 20 ? rng() % std::min(labels, 256u) : 200 + rng() % 56);
  c.cal.energy_bins = 7;
  c.cal.energy_bin_width = 150;
  c.cal.energy_correction.resize(std::size_t{g.bdm_count()} * g.du_per_bdm() * labels * 7);
  for (auto& v : c.cal.energy_correction) {
    const auto r = rng() % 100;
    v = r == 0   ? std::numeric_limits<float>::quiet_NaN()
        : r == 1 ? -0.5f
        : r == 2 ? 1e30f
                 : 0.3f + static_cast<float>(rng() % 100) / 100.0f;
  }
  if (with_offsets) {
    c.cal.time_offsets.resize(g.crystal_count());
    for (auto& v : c.cal.time_offsets) v = static_cast<std::int32_t>(rng() % 20001) - 10000;
  }
  c.frames.resize(20000);
  std::uint32_t bdm = 0;
  std::size_t run_left = 0;
  for (RawFrame& f : c.frames) {
    if (run_left == 0) {
      run_left = 1 + rng() % 600;
      bdm = static_cast<std::uint32_t>(rng() % g.bdm_count());
    }
    --run_left;
    FrameFields ff{};
    ff.head_marker = s.frame.head_marker;
    ff.tail_marker = s.frame.tail_marker;
    ff.bdm = static_cast<std::uint8_t>(bdm);
    ff.du = static_cast<std::uint8_t>(rng() % g.du_per_bdm());
    ff.x = static_cast<std::uint8_t>(rng() % ps);
    ff.y = static_cast<std::uint8_t>(rng() % ps);
    ff.time_ticks = 5000 + rng() % 1000000;
    ff.energy_raw = static_cast<std::uint16_t>(rng() % 1500);
    ff.temp_frac_16ths = static_cast<std::uint8_t>(rng() % 16);
    switch (rng() % 40) {  // one frame in four is bad in some way
      case 0: ff.head_marker = static_cast<std::uint8_t>(rng() % 16); break;
      case 1: ff.tail_marker = static_cast<std::uint8_t>(rng() % 16); break;
      case 2: ff.bdm = static_cast<std::uint8_t>(rng() % 256); break;
      case 3: ff.du = static_cast<std::uint8_t>(rng() % 16); break;
      case 4: ff.x = static_cast<std::uint8_t>(rng() % 256); break;
      case 5: ff.y = static_cast<std::uint8_t>(rng() % 256); break;
      case 6: ff.time_ticks = rng() % 20000; break;  // below 0 after some offsets
      case 7: ff.time_ticks = (std::uint64_t{1} << 63) - rng() % 20000; break;
      case 8: ff.time_ticks = rng() | (std::uint64_t{1} << 63); break;
      case 9: ff.energy_raw = static_cast<std::uint16_t>(rng()); break;  // past the table
      default: break;
    }
    encode_frame(ff, f.bytes);
  }
  return c;
}

// Every prefetch distance kind: none, gain off, both, at and past the rings' limits, and
// distances longer than the stream's blocks.
const PrefetchDistance kDistances[] = {{}, {0, 0}, {1, 0}, {3, 2}, {16, 16}, {4, 9},
                                       {17, 5}, {512, 511}, {600, 300}, {50000, 20000}};

void expect_frame_by_frame(const Case& c, std::size_t n) {
  const Geometry g = Geometry::from(c.settings.scanner);
  const ConvertTables t = make_convert_tables(c.settings, c.cal);
  std::vector<Single> expected;
  CounterDelta expected_delta;
  std::vector<std::uint64_t> expected_bdm(g.bdm_count()), expected_rejected(g.bdm_count());
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint8_t* f = c.frames[i].bytes;
    Single one{};
    const FrameStatus status = convert_frame(f, t, one);
    expected_delta[counter_of(status)] += 1;
    if (status == FrameStatus::single) expected.push_back(one), ++expected_bdm[f[frame_offset::bdm]];
    if (status == FrameStatus::energy_rejected) ++expected_rejected[f[frame_offset::bdm]];
  }
  for (const PrefetchDistance d : kDistances) {
    std::vector<Single> out(n);
    CounterDelta delta;
    // Counts are added to what the arrays hold.
    std::vector<std::uint64_t> bdm(g.bdm_count(), 3), rejected(g.bdm_count(), 5);
    const std::size_t kept = convert_frames(c.frames.data(), n, t, out.data(), delta, bdm.data(),
                                            rejected.data(), d);
    ASSERT_EQ(kept, expected.size()) << d.position << " / " << d.energy;
    for (std::size_t i = 0; i < kept; ++i) {
      ASSERT_EQ(out[i].time, expected[i].time) << i;
      ASSERT_EQ(out[i].crystal, expected[i].crystal) << i;
      ASSERT_EQ(std::bit_cast<std::uint32_t>(out[i].energy), std::bit_cast<std::uint32_t>(expected[i].energy))
          << i;
    }
    for (std::size_t k = 0; k < kCounterCount; ++k)
      ASSERT_EQ(delta[static_cast<Counter>(k)], expected_delta[static_cast<Counter>(k)])
          << counter_name(static_cast<Counter>(k)) << ", prefetch " << d.position << " / " << d.energy;
    for (std::uint32_t b = 0; b < g.bdm_count(); ++b) {
      ASSERT_EQ(bdm[b], expected_bdm[b] + 3) << "BDM " << b;
      ASSERT_EQ(rejected[b], expected_rejected[b] + 5) << "BDM " << b;
    }
  }
}

// The stream has frames of every status, enough to mean something.
void expect_every_status(const Case& c) {
  const ConvertTables t = make_convert_tables(c.settings, c.cal);
  std::uint64_t by_status[kFrameStatusCount] = {};
  for (const RawFrame& f : c.frames) {
    Single one{};
    ++by_status[static_cast<int>(convert_frame(f.bytes, t, one))];
  }
  for (int s = 0; s < kFrameStatusCount; ++s) {
    if (s == static_cast<int>(FrameStatus::bad_position) && c.settings.scanner.position_size == 256) continue;
    if (s == static_cast<int>(FrameStatus::bad_du) && Geometry::from(c.settings.scanner).du_per_bdm() >= 16) continue;
    if (s == static_cast<int>(FrameStatus::bad_bdm) && Geometry::from(c.settings.scanner).bdm_count() == 256) continue;
    if (s == static_cast<int>(FrameStatus::bad_time) && c.cal.time_offsets.empty()) continue;
    if (s == static_cast<int>(FrameStatus::dead)) continue;  // the tables have no dead ranges
    EXPECT_GT(by_status[s], 20u) << "status " << s;
  }
}

TEST(ConvertFrames, RunsOfOneSourceWithEveryKindOfBadFrame) {
  const Settings s = scanner_settings(test::scanner_shape(3, 2, 2, 2, 4, 3, 8), 300, 700);
  for (const bool offsets : {true, false}) {
    const Case c = make_case(s, offsets, offsets ? 11 : 12);
    expect_every_status(c);
    for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{15}, std::size_t{17},
                                std::size_t{533}, c.frames.size()})
      expect_frame_by_frame(c, n);
  }
}

// Dead ranges (core/dead_ranges.h): a frame with a source (markers and BDM valid) whose raw
// time lies in one is dropped as dead, counted in stream.dead_frames and per BDM; the other
// frames convert as they would without the ranges, and a bad frame in a range keeps its own
// reason.
TEST(ConvertFrames, FramesInDeadRangesAreDroppedAndCountedPerBdm) {
  const Settings s = scanner_settings(test::scanner_shape(3, 2, 2, 2, 4, 3, 8), 300, 700);
  const Case c = make_case(s, true, 21);
  const Geometry g = Geometry::from(s.scanner);
  const ConvertTables plain = make_convert_tables(c.settings, c.cal);
  // Two ranges around the times of the 5 000th and the 12 000th frames.
  ConvertTables t = plain;
  std::vector<std::uint64_t> bdm_dead(g.bdm_count(), 0);
  t.dead.count = 2;
  for (int r = 0; r < 2; ++r) {
    const std::uint64_t mid = frame_time(c.frames[r == 0 ? 5000 : 12000].bytes);
    t.dead.begin[r] = mid - 3000;
    t.dead.end[r] = mid + 3000;
  }
  t.dead.bdm_frames = bdm_dead.data();
  // What the rule says, frame by frame, from the bytes.
  std::vector<RawFrame> alive;
  std::vector<std::uint64_t> want_dead(g.bdm_count(), 0);
  std::uint64_t dead = 0;
  for (const RawFrame& f : c.frames) {
    const bool source = markers_ok(f.bytes, true, plain.head_marker, plain.tail_marker) &&
                        f.bytes[frame_offset::bdm] < g.bdm_count();
    const std::uint64_t time = frame_time(f.bytes);
    const bool in = (time >= t.dead.begin[0] && time < t.dead.end[0]) ||
                    (time >= t.dead.begin[1] && time < t.dead.end[1]);
    if (source && in) {
      ++dead;
      ++want_dead[f.bytes[frame_offset::bdm]];
    } else {
      alive.push_back(f);
    }
  }
  ASSERT_GT(dead, 20u);
  ASSERT_LT(dead, c.frames.size() / 4);
  std::vector<Single> out(c.frames.size()), want(c.frames.size());
  CounterDelta delta, want_delta;
  std::vector<std::uint64_t> bdm(g.bdm_count(), 0), rejected(g.bdm_count(), 0);
  std::vector<std::uint64_t> want_bdm(g.bdm_count(), 0), want_rejected(g.bdm_count(), 0);
  const std::size_t kept = convert_frames(c.frames.data(), c.frames.size(), t, out.data(), delta,
                                          bdm.data(), rejected.data());
  const std::size_t want_kept = convert_frames(alive.data(), alive.size(), plain, want.data(),
                                               want_delta, want_bdm.data(), want_rejected.data());
  want_delta[Counter::stream_dead_frames] += dead;
  ASSERT_EQ(kept, want_kept);
  for (std::size_t i = 0; i < kept; ++i) {
    ASSERT_EQ(out[i].time, want[i].time) << i;
    ASSERT_EQ(out[i].crystal, want[i].crystal) << i;
  }
  for (std::size_t k = 0; k < kCounterCount; ++k)
    EXPECT_EQ(delta[static_cast<Counter>(k)], want_delta[static_cast<Counter>(k)])
        << counter_name(static_cast<Counter>(k));
  EXPECT_EQ(bdm, want_bdm);
  EXPECT_EQ(rejected, want_rejected);
  EXPECT_EQ(bdm_dead, want_dead);
}

TEST(ConvertFrames, MarkersNotChecked) {
  Settings s = scanner_settings(test::scanner_shape(3, 2, 2, 2, 4, 3, 8), 100, 900);
  s.frame.check_markers = false;
  const Case c = make_case(s, true, 13);
  expect_frame_by_frame(c, c.frames.size());
}

TEST(ConvertFrames, OtherMarkers) {
  Settings s = scanner_settings(test::scanner_shape(2, 2, 1, 3, 5, 2, 16), 200, 800);
  s.frame.head_marker = 0x0;
  s.frame.tail_marker = 0xF;
  const Case c = make_case(s, true, 14);
  expect_every_status(c);
  expect_frame_by_frame(c, c.frames.size());
}

// The frame's fields at their limits: 256 BDMs, 16 DUs, a 256 x 256 flood map (no bad
// position), labels past 255 crystals per DU.
TEST(ConvertFrames, ScannersAtTheFieldLimits) {
  for (const ScannerSettings& sc : {test::scanner_shape(64, 4, 4, 4, 2, 2, 8), test::scanner_shape(4, 1, 2, 2, 16, 17, 256),
                                    test::scanner_shape(1, 1, 1, 1, 1, 1, 1)}) {
    const Settings s = scanner_settings(sc, 250, 750);
    const Case c = make_case(s, true, 15);
    expect_frame_by_frame(c, c.frames.size());
  }
}

// A scanner no configuration passes (20 DUs per BDM, more than the DU nibble names) takes
// convert_frames()'s frame-by-frame path: the same result.
TEST(ConvertFrames, MoreDusThanTheNibbleHolds) {
  const Settings s = scanner_settings(test::scanner_shape(16, 16, 5, 4, 2, 2, 4), 250, 750);
  const Case c = make_case(s, true, 16);
  expect_frame_by_frame(c, c.frames.size());
}

}  // namespace
}  // namespace petdaq

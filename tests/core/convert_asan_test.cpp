// The convert stage (DESIGN sections 2-4) under AddressSanitizer and UBSan: every bad-frame
// reason and its counter, the order of the checks, the energy table's edges, the window.
#include "core/convert.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <iterator>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/calibration.h"
#include "core/settings.h"

// Undefined behaviour (a signed overflow in a time correction, say) fails the test.
extern "C" const char* __ubsan_default_options() { return "halt_on_error=1:print_stacktrace=1"; }

namespace petdaq {
namespace {

// Small scanner: 3 x 2 BDMs, 2 x 1 DUs, 3 x 4 crystals, 8 x 8 flood map, 4 energy bins of 10.
constexpr std::uint32_t kBdms = 6, kDus = 2, kCrystals = 12, kPos = 8, kBins = 4, kBinWidth = 10;
constexpr std::uint8_t kNoCrystal = 255;

struct FrameSpec {
  std::uint32_t bdm = 0, du = 0, x = 0, y = 0;
  std::uint64_t time = 1000;
  std::uint16_t energy = 500;
  std::uint8_t head = 0xA, tail = 0x5;
};

RawFrame make_frame(const FrameSpec& s) {
  FrameFields f{};
  f.head_marker = s.head;
  f.du = static_cast<std::uint8_t>(s.du);
  f.bdm = static_cast<std::uint8_t>(s.bdm);
  f.time_ticks = s.time;
  f.x = static_cast<std::uint8_t>(s.x);
  f.y = static_cast<std::uint8_t>(s.y);
  f.energy_raw = s.energy;
  f.temp_int_degC = 30;
  f.tail_marker = s.tail;
  RawFrame r;
  encode_frame(f, r.bytes);
  return r;
}

class Convert : public ::testing::Test {
 public:
  Settings settings;
  Calibration cal;
  Geometry g;

  Convert() {
    settings.scanner.bdm_transaxial = 3;
    settings.scanner.bdm_axial = 2;
    settings.scanner.du_transaxial = 2;
    settings.scanner.du_axial = 1;
    settings.scanner.crystal_transaxial = 3;
    settings.scanner.crystal_axial = 4;
    settings.scanner.position_size = kPos;
    settings.energy_window.low_keV = 100;
    settings.energy_window.high_keV = 60000;
    g = Geometry::from(settings.scanner);
    // Flood map: 2 x 2 pixels per crystal in the top 6 rows (label = (y / 2) * 4 + x / 2);
    // row 6 is 255 (no crystal), row 7 holds label 12, past the DU's 12 crystals.
    cal.position_lut.resize(std::size_t{kBdms} * kDus * kPos * kPos);
    for (std::size_t bd = 0; bd < kBdms * kDus; ++bd)
      for (std::uint32_t y = 0; y < kPos; ++y)
        for (std::uint32_t x = 0; x < kPos; ++x) {
          std::uint8_t label = static_cast<std::uint8_t>((y / 2) * 4 + x / 2);
          if (y == 6) label = kNoCrystal;
          if (y == 7) label = kCrystals;
          cal.position_lut[(bd * kPos + y) * kPos + x] = label;
        }
    // Sized exactly, so that ASan sees any read past the last bin of the last crystal.
    cal.energy_correction.assign(std::size_t{kBdms} * kDus * kCrystals * kBins, 1.0f);
    cal.energy_bins = kBins;
    cal.energy_bin_width = kBinWidth;
  }

  ConvertTables tables() const { return make_convert_tables(settings, cal); }

  float& gain(std::uint32_t bdm, std::uint32_t du, std::uint32_t local, std::uint32_t bin) {
    return cal.energy_correction[((std::size_t{bdm} * kDus + du) * kCrystals + local) * kBins + bin];
  }

  // Local crystal and pixel: label (y/2)*4 + x/2, row y/2 is c_trans 2 - y/2.
  static std::uint32_t local_of_pixel(std::uint32_t x, std::uint32_t y) {
    return (2 - y / 2) * 4 + x / 2;
  }

  struct Result {
    std::vector<Single> singles;
    CounterDelta delta;
    std::vector<std::uint64_t> bdm_singles = std::vector<std::uint64_t>(kBdms);
    std::vector<std::uint64_t> bdm_rejected = std::vector<std::uint64_t>(kBdms);
  };

  Result run(const std::vector<RawFrame>& frames) const {
    Result r;
    std::vector<Single> out(frames.size());  // capacity n, exactly
    const ConvertTables t = tables();
    const std::size_t kept = convert_frames(frames.data(), frames.size(), t, out.data(), r.delta,
                                            r.bdm_singles.data(), r.bdm_rejected.data());
    out.resize(kept);
    r.singles = out;
    return r;
  }

  FrameStatus one(const FrameSpec& s, Single* out = nullptr) const {
    Single dummy{};
    const RawFrame f = make_frame(s);
    return convert_frame(f.bytes, tables(), out ? *out : dummy);
  }
};

// One frame through convert_frames: exactly `expected` is counted, nothing is kept.
void expect_only(const Convert::Result& r, Counter expected) {
  EXPECT_TRUE(r.singles.empty());
  for (std::size_t i = 0; i < kCounterCount; ++i) {
    const auto c = static_cast<Counter>(i);
    EXPECT_EQ(r.delta[c], c == expected ? 1u : 0u) << counter_name(c);
  }
  for (std::uint32_t b = 0; b < kBdms; ++b) {
    EXPECT_EQ(r.bdm_singles[b], 0u);
    if (expected != Counter::single_energy_rejected) {
      EXPECT_EQ(r.bdm_rejected[b], 0u);
    }
  }
}

TEST_F(Convert, GoodFrameBecomesASingle) {
  FrameSpec s;
  s.bdm = 4;  // b_axial 1, b_trans 1
  s.du = 1;   // d_trans 1
  s.x = 5;    // col 2
  s.y = 3;    // row 1 -> c_trans 1
  s.time = 123456789;
  s.energy = 511;
  gain(4, 1, 1 * 4 + 2, 511 / kBinWidth >= kBins ? kBins - 1 : 511 / kBinWidth) = 1.25f;
  const Result r = run({make_frame(s)});
  ASSERT_EQ(r.singles.size(), 1u);
  // in_ring = 1 * (2 * 3) + 1 * 3 + 1 = 10; ring = 1 * 4 + 2 = 6; 18 crystals per ring.
  EXPECT_EQ(r.singles[0].crystal, 6u * 18u + 10u);
  EXPECT_EQ(r.singles[0].crystal, g.crystal_id(4, 1, 6));
  EXPECT_EQ(r.singles[0].time, 123456789u);
  EXPECT_EQ(r.singles[0].energy, 511.0f * 1.25f);
  EXPECT_EQ(r.delta[Counter::single_accepted], 1u);
  EXPECT_EQ(r.bdm_singles[4], 1u);
}

TEST_F(Convert, BadMarkerHead) {
  FrameSpec s;
  s.head = 0xB;
  EXPECT_EQ(one(s), FrameStatus::bad_marker);
  expect_only(run({make_frame(s)}), Counter::frame_bad_marker);
}

TEST_F(Convert, BadMarkerTail) {
  FrameSpec s;
  s.tail = 0x6;
  EXPECT_EQ(one(s), FrameStatus::bad_marker);
  expect_only(run({make_frame(s)}), Counter::frame_bad_marker);
}

TEST_F(Convert, MarkersIgnoredWhenCheckingIsOff) {
  settings.frame.check_markers = false;
  FrameSpec s;
  s.head = 0x0;
  s.tail = 0xF;
  EXPECT_EQ(one(s), FrameStatus::single);
  // Other markers can be configured.
  settings.frame.check_markers = true;
  settings.frame.head_marker = 0x0;
  settings.frame.tail_marker = 0xF;
  EXPECT_EQ(one(s), FrameStatus::single);
  EXPECT_EQ(one(FrameSpec{}), FrameStatus::bad_marker);
}

TEST_F(Convert, BadBdm) {
  for (std::uint32_t bdm : {kBdms, 255u}) {
    FrameSpec s;
    s.bdm = bdm;
    EXPECT_EQ(one(s), FrameStatus::bad_bdm);
    expect_only(run({make_frame(s)}), Counter::frame_bad_bdm);
  }
  FrameSpec last;
  last.bdm = kBdms - 1;
  EXPECT_EQ(one(last), FrameStatus::single);
}

TEST_F(Convert, BadDu) {
  for (std::uint32_t du : {kDus, 15u}) {
    FrameSpec s;
    s.du = du;
    EXPECT_EQ(one(s), FrameStatus::bad_du);
    expect_only(run({make_frame(s)}), Counter::frame_bad_du);
  }
}

TEST_F(Convert, BadPositionXAndY) {
  for (std::uint32_t v : {kPos, 255u}) {
    FrameSpec sx;
    sx.x = v;
    EXPECT_EQ(one(sx), FrameStatus::bad_position);
    expect_only(run({make_frame(sx)}), Counter::frame_bad_position);
    FrameSpec sy;
    sy.y = v;
    EXPECT_EQ(one(sy), FrameStatus::bad_position);
    expect_only(run({make_frame(sy)}), Counter::frame_bad_position);
  }
  FrameSpec edge;
  edge.x = kPos - 1;
  edge.y = 5;
  EXPECT_EQ(one(edge), FrameStatus::single);
}

TEST_F(Convert, NoCrystal) {
  FrameSpec none;
  none.y = 6;  // label 255
  EXPECT_EQ(one(none), FrameStatus::no_crystal);
  expect_only(run({make_frame(none)}), Counter::frame_no_crystal);
  FrameSpec past;
  past.y = 7;  // label 12 = crystals_per_du
  EXPECT_EQ(one(past), FrameStatus::no_crystal);
  expect_only(run({make_frame(past)}), Counter::frame_no_crystal);
}

TEST_F(Convert, BadTimeFromANegativeCorrection) {
  cal.time_offsets.assign(g.crystal_count(), 0);
  FrameSpec s;
  s.bdm = 2;
  s.x = 1;
  s.y = 1;
  s.time = 5;
  const std::uint32_t crystal = g.crystal_id(2, 0, local_of_pixel(1, 1));
  cal.time_offsets[crystal] = -6;
  cal.min_time_offset = -6;
  EXPECT_EQ(one(s), FrameStatus::bad_time);
  expect_only(run({make_frame(s)}), Counter::frame_bad_time);
  // Corrected to exactly 0: good.
  cal.time_offsets[crystal] = -5;
  Single out{};
  EXPECT_EQ(one(s, &out), FrameStatus::single);
  EXPECT_EQ(out.time, 0u);
}

TEST_F(Convert, BadTimePastInt64Max) {
  FrameSpec s;
  s.time = 0x8000'0000'0000'0000ull;
  EXPECT_EQ(one(s), FrameStatus::bad_time);
  expect_only(run({make_frame(s)}), Counter::frame_bad_time);
  s.time = ~0ull;
  EXPECT_EQ(one(s), FrameStatus::bad_time);
  s.time = 0x7FFF'FFFF'FFFF'FFFFull;
  Single out{};
  EXPECT_EQ(one(s, &out), FrameStatus::single);
  EXPECT_EQ(out.time, 0x7FFF'FFFF'FFFF'FFFFull);
  // With time offsets: a correction that would carry past INT64_MAX is a bad time too.
  cal.time_offsets.assign(g.crystal_count(), 1);
  EXPECT_EQ(one(s), FrameStatus::bad_time);
  s.time -= 1;
  EXPECT_EQ(one(s, &out), FrameStatus::single);
  EXPECT_EQ(out.time, 0x7FFF'FFFF'FFFF'FFFFull);
}

TEST_F(Convert, ChecksInOrder) {
  // Each frame is bad for two reasons; it is counted under the first of the documented order.
  struct Case {
    FrameSpec s;
    FrameStatus want;
    Counter counter;
  };
  std::vector<Case> cases;
  FrameSpec s;
  s.head = 0x1;
  s.bdm = 200;
  cases.push_back({s, FrameStatus::bad_marker, Counter::frame_bad_marker});
  s = {};
  s.bdm = 200;
  s.du = 9;
  cases.push_back({s, FrameStatus::bad_bdm, Counter::frame_bad_bdm});
  s = {};
  s.du = 9;
  s.x = 200;
  cases.push_back({s, FrameStatus::bad_du, Counter::frame_bad_du});
  s = {};
  s.y = 200;
  s.time = ~0ull;
  cases.push_back({s, FrameStatus::bad_position, Counter::frame_bad_position});
  s = {};
  s.y = 6;
  s.time = ~0ull;
  cases.push_back({s, FrameStatus::no_crystal, Counter::frame_no_crystal});
  s = {};
  s.time = ~0ull;
  s.energy = 1;  // bad time and outside the window: bad time
  cases.push_back({s, FrameStatus::bad_time, Counter::frame_bad_time});
  for (const Case& c : cases) {
    EXPECT_EQ(one(c.s), c.want);
    expect_only(run({make_frame(c.s)}), c.counter);
  }
  // The all-0xFF frame is wrong everywhere: a bad marker, or with markers off a bad BDM.
  RawFrame ones;
  std::fill(std::begin(ones.bytes), std::end(ones.bytes), 0xFF);
  expect_only(run({ones}), Counter::frame_bad_marker);
  settings.frame.check_markers = false;
  expect_only(run({ones}), Counter::frame_bad_bdm);
}

TEST_F(Convert, EnergyPastTheTableUsesTheLastBin) {
  // The last entry of the whole table: the last bin of the last crystal of the last DU of
  // the last BDM, at the very end of its allocation.
  const std::uint32_t local = kCrystals - 1;  // c_trans 2, c_axial 3: label 3 -> x 6..7, y 0..1
  ASSERT_EQ(local_of_pixel(7, 1), local);
  cal.energy_correction.back() = 0.5f;
  gain(kBdms - 1, kDus - 1, local, 2) = 0.25f;
  FrameSpec s;
  s.bdm = kBdms - 1;
  s.du = kDus - 1;
  s.x = 7;
  s.y = 1;
  const std::pair<std::uint16_t, float> cases[] = {
      {65535, 65535.f * 0.5f},  // bin 6553 -> last
      {40, 40.f * 0.5f},        // bin 4 = bins -> last
      {39, 39.f * 0.5f},        // bin 3, the last in range
      {29, 29.f * 0.25f},       // bin 2
      {0, 0.f},
  };
  settings.energy_window.low_keV = 0;
  for (const auto& [raw, keV] : cases) {
    s.energy = raw;
    Single out{};
    EXPECT_EQ(one(s, &out), FrameStatus::single) << raw;
    EXPECT_EQ(out.energy, keV) << raw;
    EXPECT_EQ(out.crystal, g.crystal_id(kBdms - 1, kDus - 1, local));
  }
  s.energy = 65535;
  const Result r = run({make_frame(s)});
  ASSERT_EQ(r.singles.size(), 1u);
  EXPECT_EQ(r.singles[0].energy, 65535.f * 0.5f);
}

TEST_F(Convert, EnergyWindowEdgesAreInclusive) {
  settings.energy_window.low_keV = 400;
  settings.energy_window.high_keV = 600;
  FrameSpec s;
  s.energy = 1;  // energy = 1 * gain: the gain picks the exact float
  float& g1 = gain(0, 0, local_of_pixel(0, 0), 0);
  Single out{};
  g1 = 400.0f;
  EXPECT_EQ(one(s, &out), FrameStatus::single);
  EXPECT_EQ(out.energy, 400.0f);
  g1 = 600.0f;
  EXPECT_EQ(one(s), FrameStatus::single);
  g1 = std::nextafter(400.0f, 0.0f);
  EXPECT_EQ(one(s), FrameStatus::energy_rejected);
  g1 = std::nextafter(600.0f, 1e9f);
  EXPECT_EQ(one(s, &out), FrameStatus::energy_rejected);
  EXPECT_EQ(out.energy, std::nextafter(600.0f, 1e9f));  // written even when rejected
  const Result r = run({make_frame(s)});
  expect_only(r, Counter::single_energy_rejected);
  EXPECT_EQ(r.bdm_rejected[0], 1u);
}

TEST_F(Convert, WindowBoundsAreRoundedToFloatOnce) {
  // 0.1 as a float is a little above 0.1: compared as floats, 0.1f is inside [0, 0.1].
  settings.energy_window.low_keV = 0.0;
  settings.energy_window.high_keV = 0.1;
  gain(0, 0, local_of_pixel(0, 0), 0) = 0.1f;
  FrameSpec s;
  s.energy = 1;
  EXPECT_EQ(one(s), FrameStatus::single);
  EXPECT_EQ(tables().high_keV, 0.1f);
}

TEST_F(Convert, NanGainIsOutsideEveryWindow) {
  settings.energy_window.low_keV = -1e30;
  settings.energy_window.high_keV = 1e30;
  gain(0, 0, local_of_pixel(0, 0), 500 / kBinWidth < kBins ? 500 / kBinWidth : kBins - 1) =
      std::numeric_limits<float>::quiet_NaN();
  const Result r = run({make_frame(FrameSpec{})});
  expect_only(r, Counter::single_energy_rejected);
  EXPECT_EQ(r.bdm_rejected[0], 1u);
}

TEST_F(Convert, NegativeZeroIsNormalised) {
  settings.energy_window.low_keV = 0;
  gain(0, 0, local_of_pixel(0, 0), 0) = -1.0f;
  FrameSpec s;
  s.energy = 0;  // 0 * -1 = -0
  Single out{};
  out.energy = 1.0f;
  EXPECT_EQ(one(s, &out), FrameStatus::single);
  EXPECT_EQ(std::bit_cast<std::uint32_t>(out.energy), 0u);
  EXPECT_FALSE(std::signbit(out.energy));
}

TEST_F(Convert, PerBdmCountsAndOrder) {
  settings.energy_window.low_keV = 300;
  settings.energy_window.high_keV = 700;
  std::vector<RawFrame> frames;
  std::vector<std::uint64_t> want_singles(kBdms), want_rejected(kBdms);
  std::vector<std::uint64_t> kept_times;
  for (std::uint32_t i = 0; i < 60; ++i) {
    FrameSpec s;
    s.bdm = i % kBdms;
    s.du = (i / kBdms) % kDus;
    s.x = i % kPos;
    s.y = (i / 3) % 6;
    s.time = 1000 + i;
    s.energy = static_cast<std::uint16_t>(i % 4 == 0 ? 100 : 500);  // every 4th rejected
    if (i % 10 == 9) s.tail = 0;                                      // some bad frames
    frames.push_back(make_frame(s));
    if (i % 10 == 9) continue;
    if (i % 4 == 0) {
      ++want_rejected[s.bdm];
    } else {
      ++want_singles[s.bdm];
      kept_times.push_back(s.time);
    }
  }
  const Result r = run(frames);
  EXPECT_EQ(r.bdm_singles, want_singles);
  EXPECT_EQ(r.bdm_rejected, want_rejected);
  ASSERT_EQ(r.singles.size(), kept_times.size());
  for (std::size_t i = 0; i < kept_times.size(); ++i) EXPECT_EQ(r.singles[i].time, kept_times[i]);
  EXPECT_EQ(r.delta[Counter::single_accepted], kept_times.size());
  EXPECT_EQ(r.delta[Counter::frame_bad_marker], 6u);
  std::uint64_t rejected = 0;
  for (auto n : want_rejected) rejected += n;
  EXPECT_EQ(r.delta[Counter::single_energy_rejected], rejected);
}

TEST_F(Convert, TimeOffsetsAreApplied) {
  cal.time_offsets.assign(g.crystal_count(), 0);
  for (std::uint32_t c = 0; c < g.crystal_count(); ++c)
    cal.time_offsets[c] = static_cast<std::int32_t>(c % 2 ? c * 3 : -static_cast<std::int32_t>(c));
  std::vector<RawFrame> frames;
  std::vector<Single> want;
  for (std::uint32_t b = 0; b < kBdms; ++b)
    for (std::uint32_t d = 0; d < kDus; ++d)
      for (std::uint32_t y = 0; y < 6; y += 2)
        for (std::uint32_t x = 0; x < kPos; x += 2) {
          FrameSpec s;
          s.bdm = b;
          s.du = d;
          s.x = x;
          s.y = y;
          s.time = 1'000'000 + b * 100 + d;
          frames.push_back(make_frame(s));
          const std::uint32_t crystal = g.crystal_id(b, d, local_of_pixel(x, y));
          want.push_back({s.time + static_cast<std::uint64_t>(std::int64_t{cal.time_offsets[crystal]}),
                          crystal, 500.0f});
        }
  const Result r = run(frames);
  ASSERT_EQ(r.singles.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(r.singles[i].time, want[i].time) << i;
    EXPECT_EQ(r.singles[i].crystal, want[i].crystal) << i;
    EXPECT_EQ(r.singles[i].energy, want[i].energy) << i;
  }
  // Every crystal of the scanner was hit exactly once.
  std::vector<bool> seen(g.crystal_count());
  for (const Single& s : r.singles) {
    ASSERT_FALSE(seen[s.crystal]);
    seen[s.crystal] = true;
  }
}

TEST_F(Convert, TablesFollowTheSettings) {
  settings.frame.head_marker = 0x3;
  settings.energy_window.low_keV = 123.4;
  const ConvertTables t = tables();
  EXPECT_EQ(t.position_lut, cal.position_lut.data());
  EXPECT_EQ(t.energy_correction, cal.energy_correction.data());
  EXPECT_EQ(t.time_offsets, nullptr);
  EXPECT_EQ(t.energy_bins, kBins);
  EXPECT_EQ(t.energy_bin_width, kBinWidth);
  EXPECT_EQ(t.head_marker, 0x3);
  EXPECT_EQ(t.low_keV, 123.4f);
  EXPECT_EQ(t.geometry.crystal_count(), g.crystal_count());
}

TEST_F(Convert, EmptyInput) {
  CounterDelta delta;
  std::uint64_t a[kBdms] = {}, b[kBdms] = {};
  EXPECT_EQ(convert_frames(nullptr, 0, tables(), nullptr, delta, a, b), 0u);
  for (auto v : delta.value) EXPECT_EQ(v, 0u);
}

}  // namespace
}  // namespace petdaq

// The division-free addressing of convert_frame(): the crystal id, the local crystal and the
// gain's index equal those of Geometry and of plain division for every valid input.
#include <gtest/gtest.h>

#include <climits>
#include <cstdint>
#include <random>
#include <vector>

#include "core/calibration.h"
#include "core/convert.h"
#include "core/settings.h"
#include "test_scanner.h"

namespace petdaq {
namespace {

TEST(ByteDivisor, ExactForEveryByteAndDivisor) {
  for (std::uint32_t d = 1; d <= 1000; ++d) {
    const ByteDivisor b = ByteDivisor::of(d);
    for (std::uint32_t n = 0; n < 256; ++n) ASSERT_EQ(b.quotient(n), n / d) << n << " / " << d;
  }
}

TEST(EnergyBin, MultiplierEqualsDivisionForEveryRawValue) {
  std::vector<std::uint32_t> widths;
  for (std::uint32_t w = 1; w <= 1100; ++w) widths.push_back(w);
  for (std::uint32_t w : {1023u, 4093u, 9973u, 32767u, 32768u, 40000u, 65535u, 65536u, 65537u,
                          100000u, 0xFFFFFFFFu})
    widths.push_back(w);
  for (const std::uint32_t w : widths) {
    ConvertTables t;
    t.geometry.bdm_transaxial = t.geometry.bdm_axial = 1;
    t.geometry.du_transaxial = t.geometry.du_axial = 1;
    t.geometry.crystal_transaxial = t.geometry.crystal_axial = 1;
    t.geometry.position_size = 1;
    t.energy_bins = 0xFFFFFFFFu;  // no clamping: the bin itself is compared
    t.energy_bin_width = w;
    t.derive();
    std::uint8_t f[kFrameBytes] = {};
    for (std::uint32_t raw = 0; raw < 65536; ++raw) {
      f[frame_offset::energy] = static_cast<std::uint8_t>(raw >> 8);
      f[frame_offset::energy + 1] = static_cast<std::uint8_t>(raw);
      ASSERT_EQ(energy_index(f, 0, t), raw / w) << raw << " / " << w;
    }
  }
}

// Every (BDM, DU, label) of a scanner through convert_frame(): the single's crystal is
// Geometry::crystal_id, and the gain read is the one at [bdm][du][local crystal][bin].
void check_scanner(const ScannerSettings& scanner) {
  Settings s;
  s.scanner = scanner;
  s.energy_window.low_keV = 0;
  s.energy_window.high_keV = 1e9;
  const Geometry g = Geometry::from(scanner);
  Calibration cal;
  const std::uint32_t ps = scanner.position_size;
  const std::size_t dus = std::size_t{g.bdm_count()} * g.du_per_bdm();
  // Pixel (x, y) of every DU holds label y * ps + x, or 255 past the DU's crystals.
  cal.position_lut.resize(dus * ps * ps);
  for (std::size_t bd = 0; bd < dus; ++bd)
    for (std::uint32_t p = 0; p < ps * ps; ++p)
      cal.position_lut[bd * ps * ps + p] =
          static_cast<std::uint8_t>(p < g.crystals_per_du() ? p : 255);
  cal.energy_bins = 3;
  cal.energy_bin_width = 7;
  cal.energy_correction.resize(dus * g.crystals_per_du() * cal.energy_bins);
  // Each gain is its own index, so the energy of raw value 1 names the entry read.
  for (std::size_t i = 0; i < cal.energy_correction.size(); ++i)
    cal.energy_correction[i] = static_cast<float>(i);
  const ConvertTables t = make_convert_tables(s, cal);

  std::size_t checked = 0;
  for (std::uint32_t bdm = 0; bdm < g.bdm_count(); ++bdm)
    for (std::uint32_t du = 0; du < g.du_per_bdm(); ++du)
      for (std::uint32_t label = 0; label < g.crystals_per_du(); ++label) {
        FrameFields ff{};
        ff.head_marker = s.frame.head_marker;
        ff.tail_marker = s.frame.tail_marker;
        ff.bdm = static_cast<std::uint8_t>(bdm);
        ff.du = static_cast<std::uint8_t>(du);
        ff.x = static_cast<std::uint8_t>(label % ps);
        ff.y = static_cast<std::uint8_t>(label / ps);
        ff.time_ticks = 1000;
        ff.energy_raw = 1;
        RawFrame f;
        encode_frame(ff, f.bytes);
        Single out{};
        ASSERT_EQ(convert_frame(f.bytes, t, out), FrameStatus::single);
        const std::uint32_t local = g.local_crystal_of_label(label);
        ASSERT_EQ(local_of_label(label, t), local);
        ASSERT_EQ(out.crystal, g.crystal_id(bdm, du, local))
            << "bdm " << bdm << " du " << du << " label " << label;
        const std::size_t entry =
            ((std::size_t{bdm} * g.du_per_bdm() + du) * g.crystals_per_du() + local) * 3;
        ASSERT_EQ(out.energy, static_cast<float>(entry));
        ++checked;
      }
  EXPECT_EQ(checked, dus * g.crystals_per_du());
}


TEST(ConvertIndex, DefaultScanner) { check_scanner(ScannerSettings{}); }

TEST(ConvertIndex, UnevenScanners) {
  check_scanner(test::scanner_shape(7, 3, 3, 5, 11, 9, 16));   // every factor different, 99 crystals
  check_scanner(test::scanner_shape(1, 1, 1, 1, 1, 1, 1));     // one crystal
  check_scanner(test::scanner_shape(85, 3, 1, 16, 16, 16, 16));  // 255 BDMs, 16 DUs, 256 labels
  check_scanner(test::scanner_shape(3, 85, 16, 1, 1, 255, 16));  // long axial
  check_scanner(test::scanner_shape(255, 1, 2, 1, 255, 1, 16));
}


// The corrected time and its bad_time test against the plain signed arithmetic, at the edges:
// times near 0 and near INT64_MAX and past it, offsets of either sign up to the int32 limits.
TEST(ConvertTime, CorrectionEqualsSignedArithmetic) {
  Settings s;
  s.scanner = test::scanner_shape(1, 1, 1, 1, 1, 1, 1);
  s.energy_window.low_keV = 0;
  s.energy_window.high_keV = 1e9;
  Calibration cal;
  cal.position_lut = {0};
  cal.energy_bins = 1;
  cal.energy_bin_width = 10;
  cal.energy_correction = {1.0f};
  cal.time_offsets = {0};
  constexpr std::uint64_t kMax = 0x7FFF'FFFF'FFFF'FFFFull;
  const std::vector<std::uint64_t> times = {0, 1, 2, 5, 1000, 0x7FFF'FFFFull, 0x8000'0000ull,
                                            0xFFFF'FFFFull, 1ull << 40, kMax - 0x8000'0000ull,
                                            kMax - 0x7FFF'FFFFull, kMax - 1000, kMax - 1, kMax,
                                            kMax + 1, kMax + 0x8000'0000ull, ~0ull};
  const std::vector<std::int32_t> offsets = {INT32_MIN, INT32_MIN + 1, -1000, -5, -1, 0, 1, 5,
                                             1000, INT32_MAX - 1, INT32_MAX};
  for (const std::int32_t offset : offsets) {
    cal.time_offsets[0] = offset;
    const ConvertTables t = make_convert_tables(s, cal);
    for (const std::uint64_t time : times) {
      FrameFields ff{};
      ff.head_marker = s.frame.head_marker;
      ff.tail_marker = s.frame.tail_marker;
      ff.time_ticks = time;
      ff.energy_raw = 100;
      RawFrame f;
      encode_frame(ff, f.bytes);
      Single out{};
      const FrameStatus status = convert_frame(f.bytes, t, out);
      // Valid when the raw and the corrected time lie in [0, INT64_MAX].
      const std::uint64_t magnitude =
          static_cast<std::uint64_t>(offset < 0 ? -std::int64_t{offset} : std::int64_t{offset});
      const bool valid = time <= kMax && (offset >= 0 ? time <= kMax - magnitude : time >= magnitude);
      ASSERT_EQ(status, valid ? FrameStatus::single : FrameStatus::bad_time)
          << "time " << time << " offset " << offset;
      if (valid) ASSERT_EQ(out.time, offset >= 0 ? time + magnitude : time - magnitude);
    }
  }
}

// convert_frames() with its prefetching pipeline equals convert_frame() frame by frame, over a
// stream longer than its ring and with many bad frames, at every kind of prefetch distance.
TEST(ConvertFrames, EqualsTheFrameByFrameConversion) {
  Settings s;
  s.scanner = test::scanner_shape(3, 2, 2, 2, 4, 3, 8);
  s.energy_window.low_keV = 300;
  s.energy_window.high_keV = 700;
  const Geometry g = Geometry::from(s.scanner);
  std::mt19937_64 rng(7);
  Calibration cal;
  cal.position_lut.resize(std::size_t{g.bdm_count()} * g.du_per_bdm() * 64);
  for (auto& v : cal.position_lut) v = static_cast<std::uint8_t>(rng() % 14);  // 12 and 13: no crystal
  cal.energy_bins = 5;
  cal.energy_bin_width = 200;
  cal.energy_correction.resize(std::size_t{g.bdm_count()} * g.du_per_bdm() * g.crystals_per_du() * 5);
  for (auto& v : cal.energy_correction) v = 0.5f + static_cast<float>(rng() % 100) / 100.0f;
  cal.time_offsets.resize(g.crystal_count());
  for (auto& v : cal.time_offsets) v = static_cast<std::int32_t>(rng() % 2001) - 1000;
  const ConvertTables t = make_convert_tables(s, cal);

  std::vector<RawFrame> frames(3000);
  for (RawFrame& f : frames) {
    FrameFields ff{};
    ff.head_marker = rng() % 50 ? s.frame.head_marker : 0x3;
    ff.tail_marker = s.frame.tail_marker;
    ff.bdm = static_cast<std::uint8_t>(rng() % (g.bdm_count() + 1));
    ff.du = static_cast<std::uint8_t>(rng() % (g.du_per_bdm() + 1));
    ff.x = static_cast<std::uint8_t>(rng() % 9);
    ff.y = static_cast<std::uint8_t>(rng() % 9);
    ff.time_ticks = rng() % 100 ? 500 + rng() % 100000 : rng() % 600;
    ff.energy_raw = static_cast<std::uint16_t>(rng() % 1400);
    encode_frame(ff, f.bytes);
  }
  std::vector<Single> expected;
  CounterDelta expected_delta;
  std::vector<std::uint64_t> expected_bdm(g.bdm_count()), expected_rejected(g.bdm_count());
  for (const RawFrame& f : frames) {
    Single one{};
    const FrameStatus status = convert_frame(f.bytes, t, one);
    expected_delta[counter_of(status)] += 1;
    if (status == FrameStatus::single) expected.push_back(one), ++expected_bdm[f.bytes[frame_offset::bdm]];
    if (status == FrameStatus::energy_rejected) ++expected_rejected[f.bytes[frame_offset::bdm]];
  }
  ASSERT_GT(expected.size(), 300u);
  ASSERT_GT(expected_delta[Counter::frame_no_crystal], 100u);
  ASSERT_GT(expected_delta[Counter::single_energy_rejected], 100u);
  for (const PrefetchDistance d : {PrefetchDistance{}, PrefetchDistance{0, 0}, PrefetchDistance{1, 0},
                                   PrefetchDistance{3, 2}, PrefetchDistance{16, 16}, PrefetchDistance{4, 9},
                                   PrefetchDistance{512, 511}, PrefetchDistance{600, 300},
                                   PrefetchDistance{5000, 2500}}) {
    std::vector<Single> out(frames.size());
    CounterDelta delta;
    std::vector<std::uint64_t> bdm(g.bdm_count()), rejected(g.bdm_count());
    const std::size_t kept = convert_frames(frames.data(), frames.size(), t, out.data(), delta,
                                            bdm.data(), rejected.data(), d);
    ASSERT_EQ(kept, expected.size()) << d.position << " / " << d.energy;
    for (std::size_t i = 0; i < kept; ++i) {
      ASSERT_EQ(out[i].time, expected[i].time);
      ASSERT_EQ(out[i].crystal, expected[i].crystal);
      ASSERT_EQ(out[i].energy, expected[i].energy);
    }
    for (std::size_t c = 0; c < kCounterCount; ++c)
      ASSERT_EQ(delta[static_cast<Counter>(c)], expected_delta[static_cast<Counter>(c)]);
    EXPECT_EQ(bdm, expected_bdm);
    EXPECT_EQ(rejected, expected_rejected);
  }
}

}  // namespace
}  // namespace petdaq

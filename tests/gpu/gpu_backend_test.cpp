// The GPU backend against the CPU backend (the reference): the same slice requests go to
// both, and every slice must agree record for record, with the same batch interval,
// carry-over, counters and per-BDM counts. Skips where no CUDA device is usable.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "core/calibration.h"
#include "core/coincidence.h"
#include "core/cpu_backend.h"
#include "core/phase_timer.h"
#include "core/settings.h"
#include "gpu/gpu_backend.h"
#include "proto/bytes.h"
#include "proto/frame.h"
#include "tests/core/test_scanner.h"

namespace petdaq {

void PrintTo(const CoincRecord& r, std::ostream* os) {
  *os << "{" << r.time_a << ", " << r.dt << ", " << r.crystal_a << ", " << r.crystal_b << ", "
      << r.energy_a << ", " << r.energy_b << ", 0x" << std::hex << r.flags << std::dec << "}";
}

namespace {

using test::TestScanner;

// The test scanner of tests/core/test_scanner.h (4 sectors x 1 ring of boards, 2 x 2 DUs of
// 4 x 4 crystals, a 16 x 16 flood map where each crystal covers 4 x 4 pixels and the corner
// pixel (15, 15) maps to no crystal), with this file's engine settings: small slices, carry
// and record limits so that each is reached.
Settings small_scanner(const TestScanner& sc) {
  Settings s = sc.settings;
  s.coincidence.window_ps = 4'000.0;           // W = 256 ticks
  s.coincidence.delayed.offset_ps = 50'000.0;  // D = 3200 ticks
  s.stream.max_slice_frames = 4096;
  s.stream.max_carry_singles = 8192;
  s.stream.max_records_per_single = 2;
  return s;
}

constexpr std::uint64_t kW = 256;

// The fixture's flood map with random gains (one crystal dead: NaN energies are outside
// every window) and, if asked, random time offsets, drawn from `seed`.
Calibration random_calibration(const TestScanner& sc, bool with_offsets, std::uint32_t seed) {
  const Geometry g = sc.geometry();
  std::mt19937 rng(seed);
  Calibration cal = sc.calibration;
  const std::uint32_t bins = TestScanner::kEnergyBins;
  cal.energy_bins = bins;
  cal.energy_correction.resize(std::size_t{g.bdm_count()} * g.du_per_bdm() *
                               g.crystals_per_du() * bins);
  std::uniform_real_distribution<float> gain(0.9f, 1.1f);
  for (float& v : cal.energy_correction) v = gain(rng);
  for (std::uint32_t b = 0; b < bins; ++b) cal.energy_correction[5 * bins + b] = NAN;
  cal.time_offsets.clear();
  cal.min_time_offset = cal.max_time_offset = 0;
  if (with_offsets) {
    std::uniform_int_distribution<std::int32_t> offset(-3, 3);
    cal.time_offsets.resize(g.crystal_count());
    for (auto& o : cal.time_offsets) o = offset(rng);
    cal.min_time_offset = *std::min_element(cal.time_offsets.begin(), cal.time_offsets.end());
    cal.max_time_offset = *std::max_element(cal.time_offsets.begin(), cal.time_offsets.end());
  }
  return cal;
}

struct StreamShape {
  std::size_t frames = 20'000;
  double mean_gap_ticks = 400;  // exponential gaps
  double tie_fraction = 0.05;   // gap 0: equal times
  double exact_w_fraction = 0.05;  // gap of exactly W (and W +- 1)
  double bad_fraction = 0.02;
  std::uint32_t crystal_pool = 0;  // 0: any crystal; else only this many (equal crystals)
  std::uint16_t raw_energy_low = 300;
  std::uint16_t raw_energy_high = 720;
  std::uint64_t start_ticks = 0;
};

RawFrame make_frame(std::uint8_t head, std::uint8_t du, std::uint8_t bdm, std::uint64_t time,
                    std::uint8_t x, std::uint8_t y, std::uint16_t energy, std::uint8_t tail) {
  RawFrame f{};
  f.bytes[frame_offset::head_du] = static_cast<std::uint8_t>(head << 4 | du);
  f.bytes[frame_offset::bdm] = bdm;
  bytes::store_be64(f.bytes + frame_offset::time, time);
  f.bytes[frame_offset::x] = x;
  f.bytes[frame_offset::y] = y;
  bytes::store_be16(f.bytes + frame_offset::energy, energy);
  f.bytes[frame_offset::temp_int] = 31;
  f.bytes[frame_offset::temp_frac_tail] = static_cast<std::uint8_t>(0x8 << 4 | tail);
  return f;
}

struct Pixel {
  std::uint8_t bdm, du, x, y;
};

// Frames in ascending raw time, with ties, gaps of exactly W, repeated crystals and every
// kind of bad frame.
std::vector<RawFrame> make_stream(const Geometry& g, const StreamShape& shape, std::uint32_t seed) {
  std::mt19937_64 rng(seed);
  const std::uint32_t bdms = g.bdm_count(), dus = g.du_per_bdm(), pixels = g.position_size;
  const auto pixel = [&] {
    return Pixel{static_cast<std::uint8_t>(rng() % bdms), static_cast<std::uint8_t>(rng() % dus),
                 static_cast<std::uint8_t>(rng() % pixels), static_cast<std::uint8_t>(rng() % pixels)};
  };
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::exponential_distribution<double> gap(1.0 / shape.mean_gap_ticks);
  std::uniform_int_distribution<int> energy(shape.raw_energy_low, shape.raw_energy_high);
  std::vector<Pixel> pool;
  for (std::uint32_t i = 0; i < std::max<std::uint32_t>(shape.crystal_pool, 1); ++i)
    pool.push_back(pixel());
  std::vector<RawFrame> frames;
  frames.reserve(shape.frames);
  std::uint64_t t = shape.start_ticks;
  for (std::size_t i = 0; i < shape.frames; ++i) {
    const double r = u(rng);
    if (r < shape.tie_fraction) {
    } else if (r < shape.tie_fraction + shape.exact_w_fraction) {
      t += kW - 1 + rng() % 3;
    } else {
      t += static_cast<std::uint64_t>(gap(rng));
    }
    Pixel px = shape.crystal_pool ? pool[rng() % pool.size()] : pixel();
    std::uint8_t head = 0xA, tail = 0x5;
    std::uint16_t e = static_cast<std::uint16_t>(energy(rng));
    if (u(rng) < 0.01) e = 65535;  // past the table's range: the last bin
    std::uint64_t time = t;
    if (u(rng) < shape.bad_fraction) {
      switch (rng() % 6) {
        case 0: head = 0xB; break;
        case 1: px.bdm = static_cast<std::uint8_t>(bdms + rng() % 10); break;
        case 2: px.du = static_cast<std::uint8_t>(dus + rng() % 5); break;
        case 3: px.x = static_cast<std::uint8_t>(pixels + rng() % 100); break;
        case 4: px.x = px.y = static_cast<std::uint8_t>(pixels - 1); break;  // no crystal
        case 5: time = 0x8000'0000'0000'0000ull + rng() % 1000; break;  // past INT64_MAX
      }
    }
    frames.push_back(make_frame(head, px.du, px.bdm, time, px.x, px.y, e, tail));
  }
  return frames;
}

constexpr std::uint64_t kMaxTime = 0x7FFF'FFFF'FFFF'FFFFull;

struct Request {
  std::size_t begin = 0, end = 0;  // frame range
  SliceRequest req;
};

// Cuts [0, frames) into slices of random sizes up to max_frames (0 allowed); the bound of a
// slice is the raw time of the next frame (a frame staged earlier at or after it stays
// staged for a later slice, and a slice may split: both backends get the same requests).
std::vector<Request> cut_slices(const std::vector<RawFrame>& frames, std::size_t max_frames,
                                std::int32_t min_offset, std::uint32_t seed,
                                std::size_t fixed_size = 0, bool run_start = true) {
  std::mt19937 rng(seed);
  std::vector<Request> out;
  std::size_t at = 0;
  std::uint64_t id = 0;
  while (true) {
    const std::size_t size =
        fixed_size ? fixed_size : std::uniform_int_distribution<std::size_t>(0, max_frames)(rng);
    Request r;
    r.begin = at;
    r.end = std::min(frames.size(), at + size);
    r.req.slice_id = id++;
    r.req.run_start = run_start && out.empty();
    r.req.final = r.end == frames.size();
    if (!r.req.final) {
      // The earliest later frame (frames with corrupt times past INT64_MAX do not count).
      std::size_t next = r.end;
      while (next < frames.size() && frame_time(frames[next].bytes) > kMaxTime) ++next;
      (void)min_offset;
      r.req.bound = next < frames.size() ? frame_time(frames[next].bytes) : kMaxTime;
    }
    out.push_back(r);
    at = r.end;
    if (r.req.final) break;
  }
  return out;
}

struct SliceOut {
  std::uint64_t slice_id, t_begin, t_end;
  std::size_t carry;
  std::vector<CoincRecord> prompts, delayed;
  CounterDelta counters;
  std::vector<std::uint64_t> bdm_singles, bdm_rejected;
};

SliceOut copy_result(const SliceResult& r, std::uint32_t bdm_count) {
  SliceOut o;
  o.slice_id = r.slice_id;
  o.t_begin = r.t_begin;
  o.t_end = r.t_end;
  o.carry = r.carry_count;
  o.prompts.assign(r.prompts, r.prompts + r.prompt_count);
  o.delayed.assign(r.delayed, r.delayed + r.delayed_count);
  o.counters = r.counters;
  o.bdm_singles.assign(r.bdm_singles, r.bdm_singles + bdm_count);
  o.bdm_rejected.assign(r.bdm_energy_rejected, r.bdm_energy_rejected + bdm_count);
  return o;
}

// Submits as many slices as the backend keeps in flight before collecting; each slice's
// frames are shuffled (a backend must not rely on their order within a slice).
std::vector<SliceOut> run_backend(Backend& backend, const std::vector<RawFrame>& frames,
                                  const std::vector<Request>& requests, std::uint32_t bdm_count) {
  std::vector<SliceOut> out;
  std::mt19937 rng(7);
  for (const Request& r : requests) {
    if (backend.in_flight() == backend.max_in_flight()) out.push_back(copy_result(backend.collect(), bdm_count));
    std::vector<RawFrame> buffer(frames.begin() + r.begin, frames.begin() + r.end);
    std::shuffle(buffer.begin(), buffer.end(), rng);
    backend.wait_staged(backend.stage(buffer.data(), buffer.size()));
    backend.submit(r.req);
  }
  while (backend.in_flight() > 0) out.push_back(copy_result(backend.collect(), bdm_count));
  return out;
}

struct Totals {
  std::uint64_t prompts = 0, delayed = 0, multiples = 0, slices = 0, carry_overflows = 0,
                records_overflow = 0;
};

// Runs both backends and compares every slice; returns the CPU's totals so that a case can
// check it exercised what it meant to.
Totals expect_same(const Settings& s, const Calibration& cal, const std::vector<RawFrame>& frames,
                   const std::vector<Request>& requests) {
  const std::uint32_t bdm_count = Geometry::from(s.scanner).bdm_count();
  CpuBackend cpu(s, cal);
  const auto gpu = make_gpu_backend(s, cal);
  const std::vector<SliceOut> want = run_backend(cpu, frames, requests, bdm_count);
  const std::vector<SliceOut> got = run_backend(*gpu, frames, requests, bdm_count);
  Totals totals;
  EXPECT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    const SliceOut& w = want[i];
    const SliceOut& g = got[i];
    SCOPED_TRACE("slice " + std::to_string(i));
    EXPECT_EQ(g.slice_id, w.slice_id);
    EXPECT_EQ(g.t_begin, w.t_begin);
    EXPECT_EQ(g.t_end, w.t_end);
    EXPECT_EQ(g.carry, w.carry);
    EXPECT_EQ(g.prompts, w.prompts);
    EXPECT_EQ(g.delayed, w.delayed);
    for (std::size_t c = 0; c < kCounterCount; ++c)
      EXPECT_EQ(g.counters.value[c], w.counters.value[c])
          << counter_name(static_cast<Counter>(c));
    EXPECT_EQ(g.bdm_singles, w.bdm_singles);
    EXPECT_EQ(g.bdm_rejected, w.bdm_rejected);
    totals.prompts += w.prompts.size();
    totals.delayed += w.delayed.size();
    totals.multiples += w.counters[Counter::coinc_multiples];
    totals.carry_overflows += w.counters[Counter::stream_carry_overflow];
    totals.records_overflow += w.counters[Counter::coinc_records_overflow];
    ++totals.slices;
    if (::testing::Test::HasFailure()) break;  // one slice's diff is enough to read
  }
  return totals;
}

class GpuBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string reason;
    if (!gpu_device_usable(reason)) GTEST_SKIP() << "no usable CUDA device: " << reason;
  }
};

TEST(GpuDeviceTest, UsableAnswersWithAReason) {
  std::string reason;
  const bool usable = gpu_device_usable(reason);
  EXPECT_FALSE(reason.empty()) << "usable=" << usable;
}

struct Combo {
  Policy policy;
  WindowMode mode;
  WindowEdge edge;
  bool delayed;
};

class GpuBackendComboTest : public GpuBackendTest, public ::testing::WithParamInterface<Combo> {};

TEST_P(GpuBackendComboTest, MatchesCpuRecordForRecord) {
  const Combo c = GetParam();
  const TestScanner sc;
  Settings s = small_scanner(sc);
  s.coincidence.policy = c.policy;
  s.coincidence.window_mode = c.mode;
  s.coincidence.window_edge = c.edge;
  s.coincidence.delayed.enabled = c.delayed;
  s.coincidence.min_sector_difference = 1;
  const Calibration cal = random_calibration(sc, true, 11);
  StreamShape shape;
  shape.frames = 12'000;
  shape.mean_gap_ticks = 150;  // windows of several members are common
  const auto frames = make_stream(sc.geometry(), shape, 100 + static_cast<int>(c.policy));
  const auto requests = cut_slices(frames, 1500, cal.min_time_offset, 5);
  const Totals t = expect_same(s, cal, frames, requests);
  EXPECT_GT(t.multiples, 0u);
  if (c.policy != Policy::kill_multiples || c.mode == WindowMode::every_single) {
    EXPECT_GT(t.prompts, 0u);
  }
  if (c.delayed) {
    EXPECT_GT(t.delayed, 0u);
  }
}

std::vector<Combo> all_combos() {
  std::vector<Combo> out;
  for (Policy p : {Policy::kill_multiples, Policy::take_all_goods, Policy::take_winner_of_goods,
                   Policy::take_winner_if_good, Policy::take_winner_if_all_good,
                   Policy::kill_all_if_multiple_goods})
    for (WindowMode m : {WindowMode::first_open, WindowMode::every_single})
      for (WindowEdge e : {WindowEdge::closed, WindowEdge::half_open})
        for (bool d : {false, true}) out.push_back({p, m, e, d});
  return out;
}

INSTANTIATE_TEST_SUITE_P(AllPolicies, GpuBackendComboTest, ::testing::ValuesIn(all_combos()),
                         [](const ::testing::TestParamInfo<Combo>& info) {
                           const Combo& c = info.param;
                           return std::string(to_string(c.policy)) + "_" + to_string(c.mode) +
                                  "_" + to_string(c.edge) + (c.delayed ? "_delayed" : "");
                         });

TEST_F(GpuBackendTest, SparseAndDenseRandomStreamsWithTiesAndEqualCrystals) {
  const TestScanner sc;
  Settings s = small_scanner(sc);
  s.coincidence.policy = Policy::take_all_goods;
  const Calibration cal = random_calibration(sc, true, 3);
  int seed = 0;
  for (double gap : {5000.0, 600.0, 60.0}) {
    for (std::uint32_t pool : {0u, 3u}) {
      StreamShape shape;
      shape.mean_gap_ticks = gap;
      shape.tie_fraction = 0.2;
      shape.exact_w_fraction = 0.2;
      shape.crystal_pool = pool;
      const auto frames = make_stream(sc.geometry(), shape, 1000 + seed);
      const auto requests = cut_slices(frames, 3000, cal.min_time_offset, 2000 + seed++);
      SCOPED_TRACE("gap " + std::to_string(gap) + " pool " + std::to_string(pool));
      expect_same(s, cal, frames, requests);
    }
  }
}

TEST_F(GpuBackendTest, VeryHighRateWindowsOfManyMembers) {
  const TestScanner sc;
  Settings s = small_scanner(sc);
  s.coincidence.policy = Policy::take_winner_of_goods;
  s.stream.max_carry_singles = 20'000;
  const Calibration cal = random_calibration(sc, false, 4);
  StreamShape shape;
  shape.frames = 30'000;
  shape.mean_gap_ticks = 12;  // about 20 singles per window
  const auto frames = make_stream(sc.geometry(), shape, 77);
  const auto requests = cut_slices(frames, 4096, 0, 78);
  const Totals t = expect_same(s, cal, frames, requests);
  EXPECT_GT(t.multiples, 100u);
}

TEST_F(GpuBackendTest, SlicesOfOneFrame) {
  const TestScanner sc;
  Settings s = small_scanner(sc);
  s.coincidence.window_mode = WindowMode::every_single;
  const Calibration cal = random_calibration(sc, true, 5);
  StreamShape shape;
  shape.frames = 1500;
  shape.mean_gap_ticks = 100;
  const auto frames = make_stream(sc.geometry(), shape, 8);
  const auto requests = cut_slices(frames, 1, cal.min_time_offset, 9, 1);
  const Totals t = expect_same(s, cal, frames, requests);
  EXPECT_GT(t.prompts, 0u);
}

TEST_F(GpuBackendTest, SlicesOfTheMaximumSize) {
  const TestScanner sc;
  Settings s = small_scanner(sc);
  const Calibration cal = random_calibration(sc, true, 6);
  StreamShape shape;
  shape.frames = 5 * s.stream.max_slice_frames;
  const auto frames = make_stream(sc.geometry(), shape, 10);
  const auto requests = cut_slices(frames, 0, cal.min_time_offset, 11, s.stream.max_slice_frames);
  expect_same(s, cal, frames, requests);
}

TEST_F(GpuBackendTest, AllFramesBad) {
  const TestScanner sc;
  Settings s = small_scanner(sc);
  const Calibration cal = random_calibration(sc, false, 7);
  StreamShape shape;
  shape.frames = 6000;
  shape.bad_fraction = 1.0;
  const auto frames = make_stream(sc.geometry(), shape, 12);
  const auto requests = cut_slices(frames, 1000, 0, 13);
  const Totals t = expect_same(s, cal, frames, requests);
  EXPECT_EQ(t.prompts, 0u);
}

TEST_F(GpuBackendTest, AllEnergiesRejected) {
  const TestScanner sc;
  Settings s = small_scanner(sc);
  s.energy_window.low_keV = 2000;
  s.energy_window.high_keV = 3000;
  const Calibration cal = random_calibration(sc, false, 8);
  StreamShape shape;
  shape.frames = 6000;
  const auto frames = make_stream(sc.geometry(), shape, 14);
  const auto requests = cut_slices(frames, 1000, 0, 15);
  const Totals t = expect_same(s, cal, frames, requests);
  EXPECT_EQ(t.prompts, 0u);
}

TEST_F(GpuBackendTest, EmptySlicesBetweenFullOnes) {
  const TestScanner sc;
  Settings s = small_scanner(sc);
  s.coincidence.delayed.enabled = true;
  const Calibration cal = random_calibration(sc, true, 9);
  StreamShape shape;
  shape.frames = 8000;
  const auto frames = make_stream(sc.geometry(), shape, 16);
  std::vector<Request> requests = cut_slices(frames, 2000, cal.min_time_offset, 17);
  // Slices of no frames, with and without a moving horizon.
  std::vector<Request> with_empty;
  for (const Request& r : requests) {
    Request empty = r;
    empty.end = empty.begin;
    empty.req.final = false;
    empty.req.bound = r.req.run_start ? 0 : with_empty.back().req.bound;
    if (!r.req.run_start) with_empty.push_back(empty);
    with_empty.push_back(r);
  }
  for (std::size_t i = 0; i < with_empty.size(); ++i) with_empty[i].req.slice_id = i;
  const Totals t = expect_same(s, cal, frames, with_empty);
  EXPECT_GT(t.slices, requests.size());
}

TEST_F(GpuBackendTest, CarryOverflowResolvesTheSlice) {
  const TestScanner sc;
  Settings s = small_scanner(sc);
  s.stream.max_carry_singles = 40;
  s.coincidence.delayed.enabled = true;
  const Calibration cal = random_calibration(sc, false, 10);
  StreamShape shape;
  shape.frames = 20'000;
  shape.mean_gap_ticks = 30;  // the delayed reach holds ~100 singles back: more than 40
  const auto frames = make_stream(sc.geometry(), shape, 18);
  const auto requests = cut_slices(frames, 2000, 0, 19);
  const Totals t = expect_same(s, cal, frames, requests);
  EXPECT_GT(t.carry_overflows, 0u);
}

TEST_F(GpuBackendTest, RecordOverflowKeepsTheFirstRecords) {
  const TestScanner sc;
  Settings s = small_scanner(sc);
  s.stream.max_records_per_single = 1;
  s.coincidence.policy = Policy::take_all_goods;
  const Calibration cal = random_calibration(sc, false, 12);
  StreamShape shape;
  shape.frames = 20'000;
  shape.mean_gap_ticks = 8;  // ~30-member windows: hundreds of pairs per window
  const auto frames = make_stream(sc.geometry(), shape, 20);
  const auto requests = cut_slices(frames, 4096, 0, 21);
  const Totals t = expect_same(s, cal, frames, requests);
  EXPECT_GT(t.records_overflow, 0u);
}

// Long runs of equal times (a board whose clock stopped) and of equal (time, crystal) with
// different energies: the tie pass after the radix sort, insertion sort and heapsort.
TEST_F(GpuBackendTest, StuckClockRunsOfEqualTimes) {
  const TestScanner sc;
  Settings s = small_scanner(sc);
  s.coincidence.policy = Policy::take_winner_if_all_good;
  s.coincidence.window_mode = WindowMode::every_single;
  const Calibration cal = random_calibration(sc, false, 14);
  StreamShape shape;
  shape.frames = 6000;
  shape.tie_fraction = 0.99;
  shape.exact_w_fraction = 0.0;
  shape.crystal_pool = 2;
  const auto frames = make_stream(sc.geometry(), shape, 26);
  const auto requests = cut_slices(frames, 4096, 0, 27);
  const Totals t = expect_same(s, cal, frames, requests);
  EXPECT_GT(t.multiples, 0u);
}

// A slice whose times span more than the relative sort key holds (2^57 ticks here): the
// backend orders by time alone and completes the order in the tie pass.
TEST_F(GpuBackendTest, SliceSpanningMoreThanTheSortKeyHolds) {
  const TestScanner sc;
  Settings s = small_scanner(sc);
  const Calibration cal = random_calibration(sc, true, 15);
  StreamShape shape;
  shape.frames = 3000;
  shape.tie_fraction = 0.3;
  shape.bad_fraction = 0.0;
  shape.start_ticks = 1000;
  std::vector<RawFrame> frames = make_stream(sc.geometry(), shape, 28);
  shape.start_ticks = 1ull << 62;
  const auto late = make_stream(sc.geometry(), shape, 29);
  frames.insert(frames.end(), late.begin(), late.end());
  // Slices of 2000 frames: the second one holds both ends of the jump.
  const auto requests = cut_slices(frames, 0, cal.min_time_offset, 30, 2000);
  const Totals t = expect_same(s, cal, frames, requests);
  EXPECT_GT(t.prompts, 0u);
}

// Frames far earlier than the bound of the slice before (which core/backend.h rules out):
// the sort orders fewer key bits than such a slice needs, the keys of the later singles
// saturate, and the tie pass orders them. The records stay the CPU's.
TEST_F(GpuBackendTest, FramesBelowThePreviousBoundStayExact) {
  const TestScanner sc;
  Settings s = small_scanner(sc);
  const Calibration cal = random_calibration(sc, true, 41);
  StreamShape shape;
  shape.frames = 3000;
  shape.start_ticks = 1ull << 41;
  const auto stream = make_stream(sc.geometry(), shape, 42);
  shape.frames = 300;
  shape.start_ticks = 1ull << 40;  // 2^40 ticks before the rest
  const auto early = make_stream(sc.geometry(), shape, 43);
  std::vector<RawFrame> frames(stream.begin(), stream.begin() + 1500);
  frames.insert(frames.end(), early.begin(), early.end());
  frames.insert(frames.end(), stream.begin() + 1500, stream.end());
  // Slices of 1000 frames: the second holds the early frames and the stream's next ones.
  const auto requests = cut_slices(frames, 0, cal.min_time_offset, 44, 1000);
  const Totals t = expect_same(s, cal, frames, requests);
  EXPECT_GT(t.prompts, 0u);
}

TEST_F(GpuBackendTest, TwoRunsWithAClockReset) {
  const TestScanner sc;
  Settings s = small_scanner(sc);
  const Calibration cal = random_calibration(sc, true, 13);
  StreamShape shape;
  shape.frames = 6000;
  shape.start_ticks = 1'000'000'000;
  const auto first = make_stream(sc.geometry(), shape, 22);
  shape.start_ticks = 10;  // negative corrected times at the start: bad_time
  const auto second = make_stream(sc.geometry(), shape, 23);
  std::vector<RawFrame> frames = first;
  frames.insert(frames.end(), second.begin(), second.end());
  std::vector<Request> requests = cut_slices(first, 1000, cal.min_time_offset, 24);
  std::vector<RawFrame> tail(frames.begin() + first.size(), frames.end());
  for (Request r : cut_slices(tail, 1000, cal.min_time_offset, 25)) {
    r.begin += first.size();
    r.end += first.size();
    r.req.slice_id += requests.size();
    requests.push_back(r);
  }
  expect_same(s, cal, frames, requests);
}

// The host waits of submit(): none while at most max_slice_frames are staged (the
// partition's count comes back with it and is read once it is there: here the device is
// let finish before each next call, so no call finds it missing), a count before the
// partition when more are staged, and the bisection's counts when the slice splits. The
// results stay the CPU's.
TEST_F(GpuBackendTest, HostWaitsOnlyWhereTheCountIsUnknown) {
  const TestScanner sc;
  Settings s = small_scanner(sc);  // max_slice_frames 4096
  const Calibration cal = random_calibration(sc, true, 31);
  StreamShape shape;
  shape.frames = 10'000;
  const auto frames = make_stream(sc.geometry(), shape, 32);
  // The bound before frame i: the earliest time from there on (corrupt times aside).
  auto bound_at = [&](std::size_t i) {
    std::uint64_t b = kMaxTime;
    for (std::size_t k = i; k < frames.size(); ++k)
      if (frame_time(frames[k].bytes) <= kMaxTime) b = std::min(b, frame_time(frames[k].bytes));
    return b;
  };
  struct Step {
    std::size_t begin, end;  // frames staged before the submit
    std::uint64_t bound;
    bool final;
  };
  // At most max_slice_frames staged between two submits (core/backend.h); what a slice
  // leaves staged adds up.
  const Step steps[] = {
      {0, 1000, bound_at(1000), false},     // 1 000 staged: partition at once, one wait
      {1000, 4000, bound_at(1500), false},  // 3 000 staged: the same; ~2 500 stay
      {4000, 7000, bound_at(3000), false},  // ~5 500 staged, ~1 500 below: count, partition
      {7000, 9000, bound_at(9000), false},  // ~6 000 staged, all below: count and bisection
      {9000, 10'000, 0, true},              // ~3 000 staged, no bound: no wait
  };
  const std::uint32_t bdm_count = Geometry::from(s.scanner).bdm_count();
  std::vector<std::uint64_t> partition_waits_after, count_waits_after;
  auto run = [&](Backend& backend, PhaseTimer* timer, std::size_t& splits) {
    std::vector<SliceOut> out;
    auto collect_one = [&] {
      const SliceResult& r = backend.collect();
      splits += r.split ? 1 : 0;
      out.push_back(copy_result(r, bdm_count));
    };
    std::uint64_t id = 0;
    for (const Step& st : steps) {
      if (backend.in_flight() == backend.max_in_flight()) collect_one();
      if (timer) {
        EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      }
      backend.wait_staged(backend.stage(frames.data() + st.begin, st.end - st.begin));
      SliceRequest r;
      r.slice_id = id++;
      r.bound = st.bound;
      r.final = st.final;
      r.run_start = r.slice_id == 0;
      backend.submit(r);
      if (timer) {
        partition_waits_after.push_back(timer->stats(Phase::partition_wait).calls);
        count_waits_after.push_back(timer->stats(Phase::count_wait).calls);
      }
    }
    while (backend.in_flight() > 0) collect_one();
    return out;
  };
  CpuBackend cpu(s, cal);
  const auto gpu = make_gpu_backend(s, cal);
  PhaseTimer timer;
  gpu->set_phase_timer(&timer);
  std::size_t cpu_splits = 0, gpu_splits = 0;
  const auto want = run(cpu, nullptr, cpu_splits);
  const auto got = run(*gpu, &timer, gpu_splits);
  EXPECT_EQ(gpu_splits, cpu_splits);
  ASSERT_EQ(partition_waits_after.size(), 5u);
  ASSERT_EQ(count_waits_after.size(), 5u);
  // Partition waits: none (each count was in by the next call); count waits: the third
  // (one), the fourth (a count, the bisection's counts, the count at the new bound); the
  // last slice: none.
  const std::vector<std::uint64_t> partition_want = {0, 0, 0, 0, 0};
  EXPECT_EQ(partition_waits_after, partition_want);
  EXPECT_EQ(count_waits_after[0], 0u);
  EXPECT_EQ(count_waits_after[1], 0u);
  EXPECT_EQ(count_waits_after[2], 1u);
  EXPECT_GT(count_waits_after[3], 3u);
  EXPECT_EQ(count_waits_after[4], count_waits_after[3]);
  EXPECT_EQ(timer.stats(Phase::collect_wait).calls, 5u);
  EXPECT_EQ(timer.stats(Phase::copy_out_wait).calls, 5u);
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE("slice " + std::to_string(i));
    EXPECT_EQ(got[i].t_begin, want[i].t_begin);
    EXPECT_EQ(got[i].t_end, want[i].t_end);
    EXPECT_EQ(got[i].carry, want[i].carry);
    EXPECT_EQ(got[i].prompts, want[i].prompts);
    EXPECT_EQ(got[i].delayed, want[i].delayed);
    for (std::size_t c = 0; c < kCounterCount; ++c)
      EXPECT_EQ(got[i].counters.value[c], want[i].counters.value[c])
          << counter_name(static_cast<Counter>(c));
  }
  // The cases were met: the fourth slice split, the last one took everything left.
  ASSERT_EQ(want.size(), 5u);
  EXPECT_EQ(cpu_splits, 1u);
}

}  // namespace
}  // namespace petdaq

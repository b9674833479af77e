// CpuBackend: counters equal a direct conversion, run_start and final, the carry-over across
// a slice cut, t_begin/t_end, and the carry-overflow rule of core/backend.h.
#include "core/cpu_backend.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "core/frame_source.h"
#include "test_scanner.h"

namespace petdaq {
namespace {

using test::TestScanner;

const SliceResult& run_slice(CpuBackend& backend, const std::vector<RawFrame>& frames,
                             std::uint64_t horizon, bool final, bool run_start,
                             std::uint64_t slice_id = 0) {
  backend.stage(frames.data(), frames.size());
  SliceRequest r;
  r.slice_id = slice_id;
  r.bound = horizon;
  r.final = final;
  r.run_start = run_start;
  backend.submit(r);
  EXPECT_EQ(backend.in_flight(), 1u);
  const SliceResult& out = backend.collect();
  EXPECT_EQ(backend.in_flight(), 0u);
  return out;
}

TEST(CpuBackend, CountersEqualADirectConvert) {
  std::mt19937_64 rng(3);
  TestScanner scanner;
  test::AcquisitionOptions o;
  o.events = 500;
  o.bad_fraction = 0.2;
  const auto frames = test::random_acquisition(scanner, rng, o);
  scanner.settings.stream.max_slice_frames = frames.size();
  CpuBackend backend(scanner.settings, scanner.calibration);
  EXPECT_STREQ(backend.name(), "cpu");
  EXPECT_EQ(backend.max_slice_frames(), frames.size());
  const SliceResult& r = run_slice(backend, frames, 0, true, true, 42);

  const test::BatchResult want = test::batch_process(scanner, frames);
  EXPECT_EQ(r.slice_id, 42u);
  for (Counter k : {Counter::frame_bad_marker, Counter::frame_bad_bdm, Counter::frame_bad_du,
                    Counter::frame_bad_position, Counter::frame_no_crystal, Counter::frame_bad_time,
                    Counter::single_accepted, Counter::single_energy_rejected}) {
    EXPECT_EQ(r.counters[k], want.counters[k]) << counter_name(k);
  }
  EXPECT_GT(r.counters[Counter::frame_bad_marker], 0u);
  EXPECT_GT(r.counters[Counter::frame_no_crystal], 0u);
  EXPECT_GT(r.counters[Counter::single_energy_rejected], 0u);
  for (std::uint32_t b = 0; b < 4; ++b) {
    EXPECT_EQ(r.bdm_singles[b], want.bdm_singles[b]);
    EXPECT_EQ(r.bdm_energy_rejected[b], want.bdm_energy_rejected[b]);
  }
  EXPECT_EQ(r.counters[Counter::coinc_prompts], want.counts.prompts);
  EXPECT_EQ(r.counters[Counter::coinc_delayed], want.counts.delayed);
  EXPECT_EQ(r.counters[Counter::coinc_multiples], want.counts.multiples);
  ASSERT_EQ(r.prompt_count, want.prompts.size());
  ASSERT_EQ(r.delayed_count, want.delayed.size());
  for (std::size_t i = 0; i < r.prompt_count; ++i) EXPECT_TRUE(r.prompts[i] == want.prompts[i]);
  for (std::size_t i = 0; i < r.delayed_count; ++i) EXPECT_TRUE(r.delayed[i] == want.delayed[i]);
  // A final slice ends after its last single.
  EXPECT_EQ(r.t_begin, 0u);
  EXPECT_EQ(r.t_end, want.singles.back().time + 1);
  EXPECT_EQ(r.carry_count, 0u);
}

TEST(CpuBackend, AWindowCutByTheSliceBoundaryIsCarriedOver) {
  TestScanner scanner(false);
  Settings& s = scanner.settings;
  s.coincidence.delayed.enabled = false;
  s.stream.max_slice_frames = 16;
  CpuBackend backend(s, scanner.calibration);
  const std::uint64_t w = scanner.ticks(s.coincidence.window_ps);  // 256 ticks

  // Slice 1: a lone single, then a single that opens a window reaching past the horizon.
  const std::vector<RawFrame> first = {scanner.frame(0, 0, 1, 1000, 500),
                                       scanner.frame(1, 0, 2, 5000, 500)};
  const std::uint64_t horizon = 5000 + w;  // the window at 5000 is not resolvable yet
  const SliceResult& r1 = run_slice(backend, first, horizon, false, true, 1);
  EXPECT_EQ(r1.prompt_count, 0u);
  EXPECT_EQ(r1.carry_count, 1u);
  EXPECT_EQ(r1.t_begin, 0u);
  EXPECT_EQ(r1.t_end, 5000u);  // min(first carried single, horizon)

  // Slice 2: its partner arrives, inside the window; the pair is emitted now.
  const std::vector<RawFrame> second = {scanner.frame(2, 1, 3, 5000 + w, 500),
                                        scanner.frame(3, 0, 4, 20000, 500)};
  const SliceResult& r2 = run_slice(backend, second, 19000, false, false, 2);
  EXPECT_EQ(r2.t_begin, 5000u);
  ASSERT_EQ(r2.prompt_count, 1u);
  EXPECT_EQ(r2.prompts[0].time_a, 5000u);
  EXPECT_EQ(r2.prompts[0].dt, static_cast<std::int32_t>(w));
  EXPECT_EQ(r2.counters[Counter::coinc_prompts], 1u);
  EXPECT_EQ(r2.frames_taken, 1u);  // the frame at 20000 is past the bound: it stays staged
  EXPECT_EQ(r2.carry_count, 0u);
  EXPECT_EQ(r2.t_end, 19000u);     // the horizon

  // Final: it takes the staged frame; the batch ends after it.
  const SliceResult& r3 = run_slice(backend, {}, 19000, true, false, 3);
  EXPECT_EQ(r3.t_begin, 19000u);
  EXPECT_EQ(r3.t_end, 20001u);
  EXPECT_EQ(r3.prompt_count, 0u);
  EXPECT_EQ(r3.carry_count, 0u);

  // A new run starts from 0 with no carry-over.
  const SliceResult& r4 = run_slice(backend, {scanner.frame(0, 0, 0, 70, 500)}, 71, false, true, 4);
  EXPECT_EQ(r4.t_begin, 0u);
  EXPECT_EQ(r4.carry_count, 1u);
  EXPECT_EQ(r4.t_end, 70u);
}

TEST(CpuBackend, RunStartDropsACarryOverLeftByAnUnfinishedRun) {
  TestScanner scanner(false);
  scanner.settings.stream.max_slice_frames = 8;
  CpuBackend backend(scanner.settings, scanner.calibration);
  const SliceResult& r1 =
      run_slice(backend, {scanner.frame(0, 0, 1, 1000, 500)}, 1001, false, true);
  EXPECT_EQ(r1.carry_count, 1u);
  const SliceResult& r2 =
      run_slice(backend, {scanner.frame(1, 0, 1, 1010, 500)}, 0, true, true);
  EXPECT_EQ(r2.t_begin, 0u);
  EXPECT_EQ(r2.prompt_count, 0u);  // the old single at 1000 is gone: no pair
  EXPECT_EQ(r2.t_end, 1011u);
}

TEST(CpuBackend, StagingMoreThanMaxPendingFramesIsRefused) {
  TestScanner scanner(false);
  scanner.settings.stream.max_slice_frames = 2;
  scanner.settings.stream.max_pending_frames = 3;
  CpuBackend backend(scanner.settings, scanner.calibration);
  const std::vector<RawFrame> frames = {scanner.frame(0, 0, 1, 1000, 500),
                                        scanner.frame(1, 0, 1, 1001, 500),
                                        scanner.frame(2, 0, 1, 1002, 500),
                                        scanner.frame(3, 0, 1, 1003, 500)};
  EXPECT_THROW(backend.stage(frames.data(), 4), std::invalid_argument);
  backend.stage(frames.data(), 3);
  EXPECT_THROW(backend.stage(frames.data(), 1), std::invalid_argument);
  SliceRequest r;
  r.bound = 1002;
  r.run_start = true;
  backend.submit(r);
  const SliceResult& out = backend.collect();
  EXPECT_EQ(out.frames_taken, 2u);
  EXPECT_FALSE(out.split);
  EXPECT_EQ(out.counters[Counter::single_accepted], 2u);
}

TEST(CpuBackend, MoreFramesBelowTheBoundThanASliceTakesSplitAtTheEarliest) {
  TestScanner scanner(false);
  scanner.settings.stream.max_slice_frames = 3;
  scanner.settings.stream.max_pending_frames = 16;
  CpuBackend backend(scanner.settings, scanner.calibration);
  // Five frames below the bound, one without a source: the slice takes the sourceless one
  // and the two earliest, and its bound is the third-earliest time.
  std::vector<RawFrame> frames = {scanner.frame(0, 0, 1, 40000, 500), scanner.frame(1, 0, 1, 10000, 500),
                                  scanner.frame(2, 0, 1, 30000, 500), scanner.frame(3, 0, 1, 20000, 500)};
  RawFrame sourceless = scanner.frame(4, 0, 1, 5, 500);
  sourceless.bytes[frame_offset::bdm] = 0xFF;
  frames.push_back(sourceless);
  const SliceResult& a = run_slice(backend, frames, 100000, true, true);
  EXPECT_TRUE(a.split);
  EXPECT_EQ(a.bound, 30000u);
  EXPECT_EQ(a.frames_taken, 3u);
  EXPECT_EQ(a.counters[Counter::frame_bad_bdm], 1u);
  EXPECT_EQ(a.counters[Counter::single_accepted], 2u);
  EXPECT_EQ(a.t_end, 30000u);  // not final: the split slice resolves up to its own bound
  const SliceResult& b = run_slice(backend, {}, 100000, true, false);
  EXPECT_FALSE(b.split);
  EXPECT_EQ(b.frames_taken, 2u);
  EXPECT_EQ(b.t_begin, 30000u);
  EXPECT_EQ(b.t_end, 40001u);
}

TEST(CpuBackend, MoreFramesWithOneTimeThanASliceTakesAreDroppedAndCounted) {
  TestScanner scanner(false);
  scanner.settings.stream.max_slice_frames = 2;
  scanner.settings.stream.max_pending_frames = 8;
  CpuBackend backend(scanner.settings, scanner.calibration);
  const std::vector<RawFrame> frames = {scanner.frame(0, 0, 1, 1000, 500), scanner.frame(1, 0, 1, 1000, 500),
                                        scanner.frame(2, 0, 1, 1000, 500), scanner.frame(3, 0, 1, 1005, 500)};
  const SliceResult& a = run_slice(backend, frames, kNoBound, true, true);
  EXPECT_TRUE(a.split);
  EXPECT_EQ(a.frames_taken, 0u);
  EXPECT_EQ(a.frames_dropped, 3u);
  EXPECT_EQ(a.counters[Counter::stream_pending_full], 3u);
  const SliceResult& b = run_slice(backend, {}, kNoBound, true, false);
  EXPECT_FALSE(b.split);
  EXPECT_EQ(b.frames_taken, 1u);
  EXPECT_EQ(b.counters[Counter::single_accepted], 1u);
}

TEST(CpuBackend, CarryOverflowResolvesTheSliceAsFinalAndIsCounted) {
  TestScanner scanner(false);
  Settings& s = scanner.settings;
  s.coincidence.delayed.enabled = false;
  s.stream.max_slice_frames = 16;
  s.stream.max_carry_singles = 2;
  CpuBackend backend(s, scanner.calibration);
  // Three singles inside one window, all after the horizon's reach: a carry of 3 > 2.
  const std::vector<RawFrame> frames = {scanner.frame(0, 0, 1, 1000, 500),
                                        scanner.frame(1, 0, 1, 1010, 500),
                                        scanner.frame(2, 0, 1, 1020, 500)};
  const SliceResult& r = run_slice(backend, frames, 1021, false, true);
  EXPECT_EQ(r.counters[Counter::stream_carry_overflow], 1u);
  EXPECT_EQ(r.carry_count, 0u);
  EXPECT_EQ(r.counters[Counter::coinc_multiples], 1u);  // resolved as if final
  EXPECT_EQ(r.t_end, 1021u);
  // The run goes on from there.
  const SliceResult& next = run_slice(backend, {scanner.frame(3, 0, 1, 3000, 500)}, 2000, false, false);
  EXPECT_EQ(next.t_begin, 1021u);
  EXPECT_EQ(next.counters[Counter::stream_carry_overflow], 0u);
}

TEST(CpuBackend, RecordOverflowIsCounted) {
  TestScanner scanner(false);
  Settings& s = scanner.settings;
  s.coincidence.delayed.enabled = false;
  s.coincidence.policy = Policy::take_all_goods;
  s.stream.max_slice_frames = 8;
  s.stream.max_carry_singles = 0;
  s.stream.max_records_per_single = 1;
  CpuBackend backend(s, scanner.calibration);
  // Eight singles in one window: 28 good pairs, room for 8 records.
  std::vector<RawFrame> frames;
  for (std::uint32_t i = 0; i < 8; ++i) frames.push_back(scanner.frame(i % 4, i / 4, i, 1000 + i, 500));
  const SliceResult& r = run_slice(backend, frames, 0, true, true);
  EXPECT_EQ(r.prompt_count, 8u);
  EXPECT_EQ(r.counters[Counter::coinc_records_overflow], 20u);
}

}  // namespace
}  // namespace petdaq

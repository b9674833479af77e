// The slicer + CpuBackend against the batch definition (DESIGN section 6): same records,
// same order, whatever the slicing, chunking and source interleaving; batches tile time;
// late frames, time jumps, idle sources and clock resets are counted and change nothing else.
#include "core/slicer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <random>
#include <tuple>
#include <vector>

#include "core/cpu_backend.h"
#include "test_scanner.h"
#include "tests/support/later_backend.h"
#include "tests/support/slicer_rig.h"

namespace petdaq {
namespace {

using test::AcquisitionOptions;
using test::BatchResult;
using test::RecordedSlice;
using test::SlicerRig;
using test::TestScanner;
using test::expect_counters_equal_batch;
using test::expect_run_equals_batch;

// Pushes `arrival` in random chunks with a fake clock that advances `step` per chunk; now
// and then jumps past max_slice_ms so slices are also cut by time.
struct Streamer {
  TestScanner& scanner;
  std::mt19937_64& rng;
  Slicer::Clock::time_point now{};
  std::chrono::microseconds step{1};
  std::size_t max_chunk = 64;
  bool time_cuts = true;

  void push_all(Slicer& slicer, const std::vector<RawFrame>& arrival) {
    std::uniform_int_distribution<std::size_t> chunk(1, max_chunk);
    std::uniform_real_distribution<double> u(0, 1);
    const auto slice_time = std::chrono::duration_cast<Slicer::Clock::duration>(
        std::chrono::duration<double, std::milli>(scanner.settings.stream.max_slice_ms * 1.5));
    for (std::size_t i = 0; i < arrival.size();) {
      const std::size_t n = std::min(chunk(rng), arrival.size() - i);
      slicer.push(arrival.data() + i, n, now);
      i += n;
      now += step;
      if (time_cuts && u(rng) < 0.05) now += slice_time;
      slicer.poll(now);
    }
  }
};

using test::small_stream_settings;

// The clock-reset cases with idle sources: a wide time-jump limit, a 20 ms confirmation,
// sources idle after 50 ms of wall clock.
void reset_case_settings(Settings& s) {
  small_stream_settings(s);
  s.stream.max_future_ps = 1'000'000 * s.scanner.tick_ps;
  s.stream.reset_confirm_ms = 20;
  s.stream.source_idle_ms = 50;
}

// Pushes frames one by one through the rig's slicer on a fake wall clock that follows
// acquisition time (1 tick = 1 µs), polling after each, then finishes.
void run_on_acquisition_clock(SlicerRig& rig, const std::vector<RawFrame>& arrival) {
  const Slicer::Clock::time_point epoch{};
  for (const RawFrame& f : arrival) {
    const Slicer::Clock::time_point now = epoch + std::chrono::microseconds(frame_time(f.bytes));
    rig.slicer.push(&f, 1, now);
    rig.slicer.poll(now);
  }
  rig.slicer.finish();
}

TEST(Slicer, StreamingEqualsBatchOverRandomSlicingChunkingAndInterleaving) {
  std::mt19937_64 rng(20240611);
  for (int iteration = 0; iteration < 48; ++iteration) {
    SCOPED_TRACE("iteration " + std::to_string(iteration));
    TestScanner scanner(iteration % 3 != 2);
    Settings& s = scanner.settings;
    small_stream_settings(s);
    std::uniform_int_distribution<int> pick(0, 5);
    s.coincidence.window_mode = iteration % 2 ? WindowMode::every_single : WindowMode::first_open;
    s.coincidence.policy = static_cast<Policy>(pick(rng));
    s.coincidence.window_edge = iteration % 4 < 2 ? WindowEdge::closed : WindowEdge::half_open;
    s.coincidence.delayed.enabled = iteration % 5 != 4;
    s.coincidence.delayed.offset_ps = 1600 * s.scanner.tick_ps;
    s.coincidence.min_sector_difference = iteration % 7 == 3 ? 1 : 0;
    const std::uint64_t disorder_ticks = std::array<std::uint64_t, 4>{0, 50, 700, 5000}[iteration % 4];
    s.stream.max_disorder_ps = static_cast<double>(disorder_ticks) * s.scanner.tick_ps;
    s.stream.max_slice_frames = std::uniform_int_distribution<std::uint64_t>(3, 80)(rng);

    AcquisitionOptions o;
    o.events = 1500;
    const auto frames = test::random_acquisition(scanner, rng, o);
    const BatchResult want = test::batch_process(scanner, frames);
    ASSERT_EQ(want.records_overflow, 0u);
    ASSERT_GT(want.prompts.size(), 10u);
    const auto arrival = test::arrival_order(frames, disorder_ticks, rng);

    SlicerRig rig(s, scanner.calibration);
    Streamer streamer{scanner, rng};
    streamer.max_chunk = iteration % 3 == 0 ? 4 : 300;
    streamer.push_all(rig.slicer, arrival);
    rig.slicer.finish();

    expect_run_equals_batch(rig.sink, 0, want);
    expect_counters_equal_batch(rig.counters, want);
    EXPECT_EQ(rig.counters.get(Counter::stream_late), 0u);
    EXPECT_EQ(rig.counters.get(Counter::stream_time_jump), 0u);
    EXPECT_EQ(rig.counters.get(Counter::stream_pending_full), 0u);
    EXPECT_EQ(rig.counters.get(Counter::stream_carry_overflow), 0u);
    EXPECT_EQ(rig.counters.get(Counter::stream_runs), 0u);
    EXPECT_EQ(rig.counters.get(Counter::stream_slices), rig.sink.batches.size());
    EXPECT_GT(rig.sink.batches.size(), 5u);
    EXPECT_EQ(rig.sink.run_ends, std::vector<std::uint64_t>{0});
    EXPECT_EQ(rig.slicer.pending_frames(), 0u);
  }
}

// Left to itself the slicer cuts at half of max_slice_frames whatever the backend and its
// threads, so petdaq-offline writes the same slices (and file) on 1 thread as on 3; asked
// for the CPU backend's preferred size (petdaqd), it cuts more often, with the same records.
TEST(Slicer, SlicesDependOnTheBackendOnlyWhenAsked) {
  std::mt19937_64 rng(99);
  TestScanner scanner;
  Settings& s = scanner.settings;
  s.stream.max_slice_frames = 1u << 19;
  s.stream.max_pending_frames = 1u << 21;
  s.stream.max_carry_singles = 1u << 18;
  AcquisitionOptions o;
  o.events = 180000;
  o.mean_gap_ticks = 200;
  const auto frames = test::random_acquisition(scanner, rng, o);
  const BatchResult want = test::batch_process(scanner, frames);
  ASSERT_GT(frames.size(), 4 * CpuBackend::kCacheSliceFrames);
  const auto run = [&](unsigned threads, bool preferred) {
    Settings t = s;
    t.backend_threads = threads;
    SlicerRig rig(t, scanner.calibration,
                  preferred ? SlicerRig::Cuts::backend_preferred : SlicerRig::Cuts::slicer_default);
    const Slicer::Clock::time_point now{};  // no time cuts
    for (std::size_t i = 0; i < frames.size(); i += 8192)
      rig.slicer.push(frames.data() + i, std::min<std::size_t>(8192, frames.size() - i), now);
    rig.slicer.finish();
    expect_run_equals_batch(rig.sink, 0, want);
    return std::move(rig.sink.batches);
  };
  const std::vector<RecordedSlice> one = run(1, false);
  const std::vector<RecordedSlice> three = run(3, false);
  ASSERT_EQ(one.size(), three.size());
  for (std::size_t i = 0; i < one.size(); ++i) {
    EXPECT_EQ(one[i].t_begin, three[i].t_begin) << i;
    EXPECT_EQ(one[i].t_end, three[i].t_end) << i;
  }
  const std::vector<RecordedSlice> asked = run(1, true);
  EXPECT_GE(asked.size(), 2 * one.size());
}

// A slice cut because max_slice_ms passed: petdaqd (Delivery::latency) collects every slice
// in flight there, so that none waits for the slices behind it; petdaq-offline
// (Delivery::throughput) leaves them in flight, so that a device backend always has the
// next slices queued. The slices and their records are the same.
TEST(Slicer, ThroughputDeliveryKeepsSlicesInFlightAtTimedCutsWithTheSameSlices) {
  std::mt19937_64 rng(2611);
  TestScanner scanner;
  Settings& s = scanner.settings;
  small_stream_settings(s);
  s.stream.max_slice_frames = 1u << 16;  // no cut for size: every cut is a timed one
  AcquisitionOptions o;
  o.events = 3000;
  const auto frames = test::random_acquisition(scanner, rng, o);
  const BatchResult want = test::batch_process(scanner, frames);
  ASSERT_GT(want.prompts.size(), 10u);
  const auto run = [&](Slicer::Delivery delivery) {
    auto backend = std::make_unique<test::LaterBackend>(s, scanner.calibration, 3);
    const test::LaterBackend& later = *backend;
    SlicerRig rig(s, std::move(backend), SlicerRig::Cuts::slicer_default, delivery);
    Slicer::Clock::time_point now{};
    std::size_t most_after_poll = 0;
    for (std::size_t i = 0; i < frames.size(); i += 100) {
      rig.slicer.push(frames.data() + i, std::min<std::size_t>(100, frames.size() - i), now);
      now += std::chrono::milliseconds(2);  // past max_slice_ms: each poll cuts
      rig.slicer.poll(now);
      most_after_poll = std::max(most_after_poll, rig.backend->in_flight());
    }
    rig.slicer.finish();
    EXPECT_EQ(rig.backend->in_flight(), 0u);
    expect_run_equals_batch(rig.sink, 0, want);
    expect_counters_equal_batch(rig.counters, want);
    EXPECT_GT(rig.sink.batches.size(), 20u);
    return std::tuple{std::move(rig.sink.batches), later.most_in_flight(), most_after_poll};
  };
  const auto [latency, latency_most, latency_after_poll] = run(Slicer::Delivery::latency);
  const auto [throughput, throughput_most, throughput_after_poll] =
      run(Slicer::Delivery::throughput);
  EXPECT_EQ(latency_most, 1u);
  EXPECT_EQ(latency_after_poll, 0u);
  EXPECT_EQ(throughput_most, 3u);
  EXPECT_EQ(throughput_after_poll, 3u);
  ASSERT_EQ(latency.size(), throughput.size());
  for (std::size_t i = 0; i < latency.size(); ++i) {
    EXPECT_EQ(latency[i].t_begin, throughput[i].t_begin) << i;
    EXPECT_EQ(latency[i].t_end, throughput[i].t_end) << i;
  }
}

// A receiving socket's losses (DESIGN section 6, "Losses at a socket"): the frames of a dead
// range that are staged already, and those that come later, are dropped for every board.
TEST(Slicer, ADeadRangeDropsTheFramesOfItThatItHoldsOnEveryBoard) {
  for (const std::uint64_t seed : {31u, 32u, 33u}) {
    TestScanner scanner;
    test::expect_dead_range_drops_what_it_holds(
        scanner, [&](const Settings& s) { return std::make_unique<CpuBackend>(s, scanner.calibration); },
        seed);
    scanner.settings.backend_threads = 3;  // the threaded stages drop the same frames
    test::expect_dead_range_drops_what_it_holds(
        scanner, [&](const Settings& s) { return std::make_unique<CpuBackend>(s, scanner.calibration); },
        seed);
  }
}

// The slicer holds at most DeadRanges::kMax disjoint dead ranges: one that meets others is
// merged with them, a disjoint one past the limit is refused (never made dead together with
// the time between), and a range below the published horizon is left out.
TEST(Slicer, DeadRangesMergeWhereTheyMeetAndAreRefusedPastTheLimit) {
  TestScanner scanner;
  SlicerRig rig(scanner.settings, scanner.calibration);
  for (std::uint64_t k = 0; k < DeadRanges::kMax; ++k) {
    const auto r = rig.slicer.add_dead_range(1000 + 100 * k, 1050 + 100 * k);
    EXPECT_EQ(r.first, 1000 + 100 * k);
    EXPECT_EQ(r.second, 1050 + 100 * k);
  }
  EXPECT_EQ(rig.slicer.add_dead_range(5000, 5010), (std::pair<std::uint64_t, std::uint64_t>{0, 0}));
  // Meeting the first two: one range from 1000 to 1150.
  EXPECT_EQ(rig.slicer.add_dead_range(1040, 1120), (std::pair<std::uint64_t, std::uint64_t>{1000, 1150}));
  // Now there is room again.
  EXPECT_EQ(rig.slicer.add_dead_range(5000, 5010), (std::pair<std::uint64_t, std::uint64_t>{5000, 5010}));
  rig.slicer.finish();
}

TEST(Slicer, LateFramesAreCountedAndDropped) {
  std::mt19937_64 rng(7);
  TestScanner scanner;
  Settings& s = scanner.settings;
  small_stream_settings(s);
  s.stream.max_disorder_ps = 100 * s.scanner.tick_ps;
  s.stream.max_slice_frames = 40;
  const auto frames = test::random_acquisition(scanner, rng, {});
  const BatchResult want = test::batch_process(scanner, frames);
  const auto arrival = test::arrival_order(frames, 100, rng);

  SlicerRig rig(s, scanner.calibration);
  Slicer::Clock::time_point now{};
  std::uint64_t injected = 0;
  for (std::size_t i = 0; i < arrival.size(); ++i) {
    rig.slicer.push(&arrival[i], 1, now);
    if (i % 97 == 50 && rig.slicer.horizon() > 10) {
      // A good frame from an attributable source, older than the published horizon.
      const RawFrame late = scanner.frame(static_cast<std::uint32_t>(i % 4), 1, 5,
                                          rig.slicer.horizon() - 1 - i % 7, 500);
      rig.slicer.push(&late, 1, now);
      ++injected;
    }
    rig.slicer.poll(now);
  }
  rig.slicer.finish();
  ASSERT_GT(injected, 10u);
  EXPECT_EQ(rig.counters.get(Counter::stream_late), injected);
  EXPECT_EQ(rig.counters.get(Counter::stream_time_jump), 0u);
  expect_run_equals_batch(rig.sink, 0, want);
  expect_counters_equal_batch(rig.counters, want);
}

// One source drifts ahead of the others until it runs more than twice stream.max_future_ps
// ahead of the horizon they hold (another receiver's chunks lag, a sender drifts): its frames
// go on from its own latest time, so none is a time jump, none is late, and the records are
// the batch's, whether the frames come one by one or in chunks.
TEST(Slicer, ASourceRunningFarAheadOfTheOthersLosesNothing) {
  std::mt19937_64 rng(31);
  TestScanner scanner;
  Settings& s = scanner.settings;
  small_stream_settings(s);
  s.stream.max_disorder_ps = 100 * s.scanner.tick_ps;
  s.stream.max_future_ps = 50'000 * s.scanner.tick_ps;
  AcquisitionOptions o;
  o.events = 3000;  // about 900 000 ticks
  const auto frames = test::random_acquisition(scanner, rng, o);
  const BatchResult want = test::batch_process(scanner, frames);
  // BDM 0's frames arrive early by a lead that grows to 120 000 ticks over the first
  // 450 000: its own order is kept (the lead grows slower than time).
  constexpr std::uint64_t kLead = 120'000, kRamp = 450'000;
  std::vector<std::pair<std::uint64_t, std::size_t>> arrival;
  for (std::size_t i = 0; i < frames.size(); ++i) {
    const std::uint64_t t = frame_time(frames[i].bytes);
    const std::uint64_t lead = frames[i].bytes[frame_offset::bdm] == 0 ? std::min(kLead, t * kLead / kRamp) : 0;
    arrival.emplace_back(t - lead, i);
  }
  std::stable_sort(arrival.begin(), arrival.end());
  for (const std::size_t chunk : {std::size_t{1}, std::size_t{64}}) {
    SlicerRig rig(s, scanner.calibration);
    const Slicer::Clock::time_point now{};  // no wall time passes: no source goes idle
    std::vector<RawFrame> block;
    for (std::size_t k = 0; k < arrival.size(); ++k) {
      block.push_back(frames[arrival[k].second]);
      if (block.size() == chunk || k + 1 == arrival.size()) {
        rig.slicer.push(block.data(), block.size(), now);
        block.clear();
        rig.slicer.poll(now);
      }
    }
    rig.slicer.finish();
    SCOPED_TRACE(testing::Message() << "frames per push " << chunk);
    EXPECT_EQ(rig.counters.get(Counter::stream_time_jump), 0u);
    EXPECT_EQ(rig.counters.get(Counter::stream_late), 0u);
    expect_run_equals_batch(rig.sink, 0, want);
    expect_counters_equal_batch(rig.counters, want);
  }
}

TEST(Slicer, TimeJumpsAreCountedAndDroppedIncludingAWildFirstFrame) {
  std::mt19937_64 rng(11);
  TestScanner scanner;
  Settings& s = scanner.settings;
  small_stream_settings(s);
  s.stream.max_disorder_ps = 100 * s.scanner.tick_ps;
  s.stream.max_future_ps = 150'000 * s.scanner.tick_ps;
  s.stream.max_slice_frames = 64;
  AcquisitionOptions o;
  o.events = 3000;
  const auto frames = test::random_acquisition(scanner, rng, o);
  const BatchResult want = test::batch_process(scanner, frames);
  const auto arrival = test::arrival_order(frames, 100, rng);

  SlicerRig rig(s, scanner.calibration);
  Slicer::Clock::time_point now{};
  // The very first frame carries a corrupt timestamp: it must not become the reference.
  const RawFrame wild_first = scanner.frame(2, 0, 3, 1ull << 40, 500);
  rig.slicer.push(&wild_first, 1, now);
  std::uint64_t injected = 1;
  for (std::size_t i = 0; i < arrival.size(); ++i) {
    rig.slicer.push(&arrival[i], 1, now);
    if (i % 101 == 7) {
      const std::uint64_t t = frame_time(arrival[i].bytes) + 400'000 + i;
      const RawFrame jump = scanner.frame(static_cast<std::uint32_t>(i % 4), 2, 9, t, 480);
      rig.slicer.push(&jump, 1, now);
      ++injected;
    }
    rig.slicer.poll(now);
  }
  rig.slicer.finish();
  EXPECT_EQ(rig.counters.get(Counter::stream_time_jump), injected);
  EXPECT_EQ(rig.counters.get(Counter::stream_late), 0u);
  EXPECT_EQ(rig.counters.get(Counter::stream_runs), 0u);
  expect_run_equals_batch(rig.sink, 0, want);
  expect_counters_equal_batch(rig.counters, want);
}

TEST(Slicer, AnIdleSourceStopsHoldingTheHorizonAndRejoins) {
  std::mt19937_64 rng(13);
  TestScanner scanner;
  Settings& s = scanner.settings;
  small_stream_settings(s);
  s.stream.max_disorder_ps = 100 * s.scanner.tick_ps;
  // Without the idle rule, the others would run past max_future while BDM 3 is silent.
  s.stream.max_future_ps = 50'000 * s.scanner.tick_ps;
  s.stream.source_idle_ms = 20.0;
  s.stream.max_slice_ms = 1e6;  // only size cuts
  s.stream.max_slice_frames = 50;
  AcquisitionOptions o;
  o.events = 4000;
  auto frames = test::random_acquisition(scanner, rng, o);
  // BDM 3 is silent over the middle third of the acquisition.
  const std::uint64_t t0 = frame_time(frames.front().bytes);
  const std::uint64_t span = frame_time(frames.back().bytes) - t0;
  const std::uint64_t quiet_from = t0 + span / 3, quiet_to = t0 + 2 * span / 3;
  ASSERT_GT(quiet_to - quiet_from, 2 * 50'000u);
  std::erase_if(frames, [&](const RawFrame& f) {
    const std::uint64_t t = frame_time(f.bytes);
    return f.bytes[frame_offset::bdm] == 3 && t >= quiet_from && t < quiet_to;
  });
  const BatchResult want = test::batch_process(scanner, frames);
  const auto arrival = test::arrival_order(frames, 100, rng);

  SlicerRig rig(s, scanner.calibration);
  // 20 ms idle = 20 000 ticks of the acquisition clock.
  run_on_acquisition_clock(rig, arrival);
  EXPECT_EQ(rig.counters.get(Counter::stream_source_idle), 1u);
  EXPECT_EQ(rig.counters.get(Counter::stream_late), 0u);
  EXPECT_EQ(rig.counters.get(Counter::stream_time_jump), 0u);
  expect_run_equals_batch(rig.sink, 0, want);
  expect_counters_equal_batch(rig.counters, want);
}

// The scanner pauses for longer than max_future_ps while its clock runs on: the data after
// the pause is the same run, not a stream of time jumps.
std::vector<RawFrame> with_pause(const std::vector<RawFrame>& frames, std::uint64_t gap_ticks) {
  const std::uint64_t t0 = frame_time(frames.front().bytes);
  const std::uint64_t mid = t0 + (frame_time(frames.back().bytes) - t0) / 2;
  std::vector<RawFrame> out = frames;
  for (RawFrame& f : out) {
    const std::uint64_t t = frame_time(f.bytes);
    if (t >= mid) bytes::store_be64(f.bytes + frame_offset::time, t + gap_ticks);
  }
  return out;
}

TEST(Slicer, APauseLongerThanMaxFutureAfterTheSourcesWentIdleLosesNothing) {
  std::mt19937_64 rng(17);
  TestScanner scanner;
  Settings& s = scanner.settings;
  small_stream_settings(s);
  s.stream.max_disorder_ps = 100 * s.scanner.tick_ps;
  s.stream.max_future_ps = 50'000 * s.scanner.tick_ps;
  s.stream.source_idle_ms = 20.0;
  s.stream.max_slice_frames = 64;
  AcquisitionOptions o;
  o.events = 3000;
  const auto frames = with_pause(test::random_acquisition(scanner, rng, o), 10'000'000);
  const BatchResult want = test::batch_process(scanner, frames);
  const auto arrival = test::arrival_order(frames, 100, rng);

  SlicerRig rig(s, scanner.calibration);
  // Every source is idle in the pause.
  run_on_acquisition_clock(rig, arrival);
  EXPECT_EQ(rig.counters.get(Counter::stream_time_jump), 0u);
  EXPECT_EQ(rig.counters.get(Counter::stream_late), 0u);
  EXPECT_EQ(rig.counters.get(Counter::stream_runs), 0u);
  EXPECT_GE(rig.counters.get(Counter::stream_source_idle), 1u);
  expect_run_equals_batch(rig.sink, 0, want);
  expect_counters_equal_batch(rig.counters, want);
}

// Every source goes idle in a pause; BDM 0 resumes first and alone for a few slices of wall
// clock, the others after it with frames older than its latest. They hold the horizon again
// from the moment BDM 0 resumes, so nothing of theirs is late. With `absent` = 3, BDM 3 never
// comes back: it is idle again after source_idle_ms and the horizon goes on without it.
void resume_apart(std::uint8_t absent) {
  SCOPED_TRACE(testing::Message() << "absent after the pause: " << int{absent});
  std::mt19937_64 rng(23);
  TestScanner scanner;
  Settings& s = scanner.settings;
  small_stream_settings(s);
  s.stream.max_disorder_ps = 100 * s.scanner.tick_ps;
  s.stream.max_future_ps = 1e9 * s.scanner.tick_ps;
  s.stream.source_idle_ms = 20.0;
  s.stream.max_slice_ms = 1.0;
  s.stream.max_slice_frames = 64;
  AcquisitionOptions o;
  o.events = 3000;
  auto frames = test::random_acquisition(scanner, rng, o);
  const std::uint64_t t0 = frame_time(frames.front().bytes);
  const std::uint64_t mid = t0 + (frame_time(frames.back().bytes) - t0) / 2;
  std::erase_if(frames, [&](const RawFrame& f) {
    return f.bytes[frame_offset::bdm] == absent && frame_time(f.bytes) >= mid;
  });
  const BatchResult want = test::batch_process(scanner, frames);
  const auto arrival = test::arrival_order(frames, 100, rng);
  std::vector<RawFrame> before, first, rest;
  for (const RawFrame& f : arrival) {
    if (frame_time(f.bytes) < mid) before.push_back(f);
    else if (f.bytes[frame_offset::bdm] == 0 && first.size() < 300) first.push_back(f);
    else rest.push_back(f);
  }
  ASSERT_EQ(first.size(), 300u);

  SlicerRig rig(s, scanner.calibration);
  Slicer::Clock::time_point now{};
  const auto push_each = [&](const std::vector<RawFrame>& list, std::chrono::microseconds step) {
    for (const RawFrame& f : list) {
      rig.slicer.push(&f, 1, now);
      now += step;
      rig.slicer.poll(now);
    }
  };
  push_each(before, std::chrono::microseconds(1));
  now += std::chrono::milliseconds(50);  // the pause: every source goes idle
  rig.slicer.poll(now);
  ASSERT_EQ(rig.counters.get(Counter::stream_source_idle), 4u);
  // BDM 0 alone for 300 frames over 6 ms of wall clock: slices are cut meanwhile.
  const std::size_t slices_before = rig.sink.batches.size();
  push_each(first, std::chrono::microseconds(20));
  EXPECT_GT(rig.sink.batches.size(), slices_before) << "no slice cut while BDM 0 was alone";
  // The others follow over 30 ms of wall clock; an absent source is idle again after 20.
  push_each(rest, std::chrono::microseconds(30'000 / rest.size() + 1));
  if (absent < 4) {
    EXPECT_EQ(rig.counters.get(Counter::stream_source_idle), 5u);
    std::uint64_t latest = 0;
    for (const RecordedSlice& b : rig.sink.batches)
      for (const CoincRecord& r : b.prompts) latest = std::max(latest, r.time_a);
    EXPECT_GT(latest, mid + (frame_time(rest.back().bytes) - mid) / 2)
        << "the horizon waited for the absent source";
  }
  rig.slicer.finish();
  EXPECT_EQ(rig.counters.get(Counter::stream_late), 0u);
  EXPECT_EQ(rig.counters.get(Counter::stream_time_jump), 0u);
  expect_run_equals_batch(rig.sink, 0, want);
  expect_counters_equal_batch(rig.counters, want);
}

TEST(Slicer, SourcesResumingApartAfterAPauseLoseNothing) {
  resume_apart(4);  // every source comes back
  resume_apart(3);
}

TEST(Slicer, APauseSeenBeforeAnySourceWentIdleCostsAFewCountedFramesPerSource) {
  std::mt19937_64 rng(19);
  TestScanner scanner;
  Settings& s = scanner.settings;
  small_stream_settings(s);
  s.stream.max_disorder_ps = 100 * s.scanner.tick_ps;
  s.stream.max_future_ps = 50'000 * s.scanner.tick_ps;
  s.stream.max_slice_frames = 64;
  AcquisitionOptions o;
  o.events = 3000;
  const auto frames = with_pause(test::random_acquisition(scanner, rng, o), 10'000'000);
  const auto arrival = test::arrival_order(frames, 100, rng);

  SlicerRig rig(s, scanner.calibration);
  const Slicer::Clock::time_point now{};  // no wall time passes: no source ever goes idle
  for (const RawFrame& f : arrival) {
    rig.slicer.push(&f, 1, now);
    rig.slicer.poll(now);
  }
  rig.slicer.finish();
  // Up to three far-ahead frames per source are taken for corrupt stamps before the
  // source's new time is believed; everything else after the pause is processed.
  const std::uint64_t jumps = rig.counters.get(Counter::stream_time_jump);
  EXPECT_GE(jumps, 1u);
  EXPECT_LE(jumps, 3u * scanner.geometry().bdm_count());
  EXPECT_EQ(rig.counters.get(Counter::stream_late), 0u);
  EXPECT_EQ(rig.counters.get(Counter::stream_runs), 0u);
  std::uint64_t converted = 0;
  for (Counter c : {Counter::single_accepted, Counter::single_energy_rejected,
                    Counter::frame_bad_marker, Counter::frame_bad_bdm, Counter::frame_bad_du,
                    Counter::frame_bad_position, Counter::frame_no_crystal,
                    Counter::frame_bad_time, Counter::stream_pending_full})
    converted += rig.counters.get(c);
  EXPECT_EQ(converted + jumps, frames.size());
  EXPECT_EQ(rig.counters.get(Counter::stream_pending_full), 0u);
}

TEST(Slicer, AClockResetEndsTheRunAndStartsANewOne) {
  std::mt19937_64 rng(17);
  TestScanner scanner;
  Settings& s = scanner.settings;
  small_stream_settings(s);
  const std::uint64_t disorder = 200;
  s.stream.max_disorder_ps = static_cast<double>(disorder) * s.scanner.tick_ps;
  s.stream.max_future_ps = 100'000 * s.scanner.tick_ps;
  s.stream.max_slice_frames = 64;
  s.stream.reset_confirm_ms = 0;  // this test's clock stands still

  AcquisitionOptions first;
  first.events = 2500;
  first.start_ticks = 5'000'000;
  auto run_a = test::random_acquisition(scanner, rng, first);
  AcquisitionOptions second;
  second.events = 2000;
  second.start_ticks = 2000;
  const auto run_b = test::random_acquisition(scanner, rng, second);

  // Each source stops its old run at its own time; its new-run frames arrive right after its
  // own last old frame, interleaved with the other sources' old-run tails.
  const std::uint64_t a_end = frame_time(run_a.back().bytes);
  std::uint64_t source_end[256];
  for (int b = 0; b < 256; ++b) source_end[b] = a_end - static_cast<std::uint64_t>(b % 4) * 3000;
  std::erase_if(run_a, [&](const RawFrame& f) {
    return frame_time(f.bytes) > source_end[f.bytes[frame_offset::bdm]];
  });
  std::uniform_int_distribution<std::uint64_t> delay(0, disorder - 1);
  std::vector<std::pair<std::uint64_t, RawFrame>> keyed;
  for (const RawFrame& f : run_a) keyed.push_back({frame_time(f.bytes) + delay(rng), f});
  const std::uint64_t b0 = frame_time(run_b.front().bytes);
  for (const RawFrame& f : run_b) {
    const std::uint64_t resume = source_end[f.bytes[frame_offset::bdm]] + disorder;
    keyed.push_back({resume + (frame_time(f.bytes) - b0) + delay(rng), f});
  }
  std::stable_sort(keyed.begin(), keyed.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });

  SlicerRig rig(s, scanner.calibration);
  Slicer::Clock::time_point now{};
  for (const auto& [key, f] : keyed) {
    rig.slicer.push(&f, 1, now);
    rig.slicer.poll(now);
  }
  EXPECT_EQ(rig.slicer.run_id(), 1u);
  rig.slicer.finish();

  EXPECT_EQ(rig.counters.get(Counter::stream_runs), 1u);
  EXPECT_EQ(rig.counters.get(Counter::stream_late), 0u);
  EXPECT_EQ(rig.counters.get(Counter::stream_time_jump), 0u);
  EXPECT_EQ(rig.sink.run_ends, (std::vector<std::uint64_t>{0, 1}));
  EXPECT_EQ(rig.sink.reasons, (std::vector<RunEnd>{RunEnd::clock_reset, RunEnd::finished}));
  expect_run_equals_batch(rig.sink, 0, test::batch_process(scanner, run_a));
  expect_run_equals_batch(rig.sink, 1, test::batch_process(scanner, run_b));
}

// Forged frames far in the past from every source (a burst of a few datagrams) do not end
// the run: a reset needs every live source to send nothing else for
// stream.reset_confirm_ms, and the genuine sources go on. The forged frames count as late.
TEST(Slicer, AForgedBurstOfPastFramesDoesNotEndTheRun) {
  std::mt19937_64 rng(23);
  TestScanner scanner;
  Settings& s = scanner.settings;
  small_stream_settings(s);
  s.stream.max_future_ps = 1'000'000 * s.scanner.tick_ps;
  s.stream.reset_confirm_ms = 20;
  AcquisitionOptions o;
  o.events = 3000;
  o.start_ticks = 5'000'000;
  const auto frames = test::random_acquisition(scanner, rng, o);
  const BatchResult want = test::batch_process(scanner, frames);
  SlicerRig rig(s, scanner.calibration);
  Slicer::Clock::time_point now{};
  std::uint64_t forged = 0;
  for (std::size_t i = 0; i < frames.size(); ++i) {
    rig.slicer.push(&frames[i], 1, now);
    if (i == frames.size() / 2) {
      // Four frames per BDM with tiny time stamps, all at once.
      std::vector<RawFrame> burst;
      for (std::uint32_t b = 0; b < scanner.geometry().bdm_count(); ++b)
        for (std::uint64_t k = 0; k < 4; ++k) burst.push_back(scanner.frame(b, 0, 1, 10 + k, 500));
      rig.slicer.push(burst.data(), burst.size(), now);
      forged = burst.size();
    }
    now += std::chrono::microseconds(10);  // 30 ms in all: longer than the confirmation
    rig.slicer.poll(now);
  }
  rig.slicer.finish();
  EXPECT_EQ(rig.counters.get(Counter::stream_runs), 0u);
  EXPECT_EQ(rig.sink.run_ends, std::vector<std::uint64_t>{0});
  EXPECT_EQ(rig.sink.reasons, std::vector<RunEnd>{RunEnd::finished});
  EXPECT_EQ(rig.counters.get(Counter::stream_late), forged);
  EXPECT_EQ(rig.counters.get(Counter::stream_time_jump), 0u);
  EXPECT_EQ(rig.counters.get(Counter::single_accepted), want.counters[Counter::single_accepted]);
  expect_run_equals_batch(rig.sink, 0, want);
}

// The same while the scanner pauses: every source idle, then 96 forged frames of one board
// with times near 0, left for far longer than the confirmation. The idle sources made no
// reset, so no run starts: the forged frames count as late, and the genuine sources resume
// their run losing nothing.
TEST(Slicer, ForgedPastFramesWhileEverySourceIsIdleDoNotEndTheRun) {
  std::mt19937_64 rng(29);
  TestScanner scanner;
  Settings& s = scanner.settings;
  reset_case_settings(s);
  AcquisitionOptions o;
  o.events = 3000;
  o.start_ticks = 5'000'000;
  const auto frames = test::random_acquisition(scanner, rng, o);
  const BatchResult want = test::batch_process(scanner, frames);
  SlicerRig rig(s, scanner.calibration);
  Slicer::Clock::time_point now{};
  std::vector<RawFrame> burst;
  for (std::uint64_t k = 0; k < 96; ++k) burst.push_back(scanner.frame(0, 0, 1, 10 + k, 500));
  for (std::size_t i = 0; i < frames.size(); ++i) {
    rig.slicer.push(&frames[i], 1, now);
    now += std::chrono::microseconds(10);
    rig.slicer.poll(now);
    if (i == frames.size() / 2) {
      // A pause: every source goes idle; then the forged frames, and a long wait.
      for (int k = 0; k < 20; ++k) {
        now += std::chrono::milliseconds(10);
        rig.slicer.poll(now);
      }
      rig.slicer.push(burst.data(), burst.size(), now);
      for (int k = 0; k < 20; ++k) {
        now += std::chrono::milliseconds(10);
        rig.slicer.poll(now);
      }
    }
  }
  rig.slicer.finish();
  EXPECT_EQ(rig.counters.get(Counter::stream_runs), 0u);
  EXPECT_EQ(rig.sink.reasons, std::vector<RunEnd>{RunEnd::finished});
  EXPECT_EQ(rig.counters.get(Counter::stream_late), burst.size());
  EXPECT_EQ(rig.counters.get(Counter::single_accepted), want.counters[Counter::single_accepted]);
  expect_run_equals_batch(rig.sink, 0, want);
}

// Past-time frames of one board at the end of the stream, the sources then idle for a
// while before the end: the stream is not split into a second run; the frames count as late.
TEST(Slicer, PastFramesAtTheEndOfTheStreamDoNotSplitTheRun) {
  std::mt19937_64 rng(31);
  TestScanner scanner;
  Settings& s = scanner.settings;
  reset_case_settings(s);
  AcquisitionOptions o;
  o.events = 2000;
  o.start_ticks = 5'000'000;
  const auto frames = test::random_acquisition(scanner, rng, o);
  const BatchResult want = test::batch_process(scanner, frames);
  SlicerRig rig(s, scanner.calibration);
  Slicer::Clock::time_point now{};
  for (const RawFrame& f : frames) {
    rig.slicer.push(&f, 1, now);
    now += std::chrono::microseconds(10);
    rig.slicer.poll(now);
  }
  std::vector<RawFrame> past;
  for (std::uint64_t k = 0; k < 20; ++k) past.push_back(scanner.frame(1, 0, 2, 100 + 7 * k, 500));
  rig.slicer.push(past.data(), past.size(), now);
  for (int k = 0; k < 100; ++k) {  // 1 s: every source idle, the confirmation long passed
    now += std::chrono::milliseconds(10);
    rig.slicer.poll(now);
  }
  rig.slicer.finish();
  EXPECT_EQ(rig.counters.get(Counter::stream_runs), 0u);
  EXPECT_EQ(rig.sink.reasons, std::vector<RunEnd>{RunEnd::finished});
  EXPECT_EQ(rig.counters.get(Counter::stream_late), past.size());
  expect_run_equals_batch(rig.sink, 0, want);
}

TEST(Slicer, BadFramesGoStraightIntoTheNextSliceAndNeverMoveTheHorizon) {
  TestScanner scanner;
  Settings& s = scanner.settings;
  small_stream_settings(s);
  s.stream.max_disorder_ps = 0;
  SlicerRig rig(s, scanner.calibration);
  std::vector<RawFrame> frames;
  for (std::uint32_t b = 0; b < 4; ++b) frames.push_back(scanner.frame(b, 0, 0, 1000 + b, 500));
  RawFrame bad_bdm = scanner.frame(0, 0, 0, 1ull << 50, 500);
  bad_bdm.bytes[frame_offset::bdm] = 9;
  RawFrame bad_marker = scanner.frame(1, 0, 0, 1ull << 51, 500);
  bad_marker.bytes[frame_offset::temp_frac_tail] = 0x40;
  frames.push_back(bad_bdm);
  frames.push_back(bad_marker);
  rig.slicer.push(frames.data(), frames.size(), {});
  rig.slicer.finish();
  EXPECT_EQ(rig.counters.get(Counter::frame_bad_bdm), 1u);
  EXPECT_EQ(rig.counters.get(Counter::frame_bad_marker), 1u);
  EXPECT_EQ(rig.counters.get(Counter::stream_time_jump), 0u);
  EXPECT_EQ(rig.counters.get(Counter::single_accepted) + rig.counters.get(Counter::single_energy_rejected), 4u);
  ASSERT_FALSE(rig.sink.batches.empty());
  EXPECT_LT(rig.sink.batches.back().t_end, 2000u);
}

TEST(Slicer, PendingFullIsCountedAndDropsOnlyTheOverflow) {
  TestScanner scanner;
  Settings& s = scanner.settings;
  small_stream_settings(s);
  s.stream.max_pending_frames = 8;
  s.stream.max_disorder_ps = 1e9;  // the horizon stays far behind: everything waits
  SlicerRig rig(s, scanner.calibration);
  std::vector<RawFrame> frames;
  for (std::uint32_t i = 0; i < 12; ++i) frames.push_back(scanner.frame(i % 4, 0, i % 16, 1000 + i, 500));
  rig.slicer.push(frames.data(), frames.size(), {});
  EXPECT_EQ(rig.counters.get(Counter::stream_pending_full), 4u);
  EXPECT_EQ(rig.slicer.pending_frames(), 8u);
  rig.slicer.finish();
  EXPECT_EQ(rig.counters.get(Counter::single_accepted) + rig.counters.get(Counter::single_energy_rejected), 8u);
}

// One source holds the horizon (it sent once and is not idle yet) while another goes on far
// ahead: the stage fills. What does not fit is counted and dropped, without a slice cut for
// every block or frame that finds no room; once the lagging source goes on, so does the stream.
TEST(Slicer, AFullStageWaitingForALaggingSourceDropsWithoutASlicePerBlock) {
  TestScanner scanner;
  Settings& s = scanner.settings;
  small_stream_settings(s);
  s.stream.max_disorder_ps = 10 * s.scanner.tick_ps;
  s.stream.max_future_ps = 1e9 * s.scanner.tick_ps;
  s.stream.max_slice_frames = 1024;
  s.stream.max_pending_frames = 4096;
  s.stream.max_slice_ms = 1e6;
  // The lag rules off: the full stage itself is under test (tests/core/slicer_lag_test.cpp
  // has the rule that declares BDM 0 lagging instead).
  s.stream.max_lag_ms = 0;
  s.stream.lag_stage_fraction = 0;
  SlicerRig rig(s, scanner.calibration);
  const Slicer::Clock::time_point now{};
  std::vector<RawFrame> warm;
  for (std::uint32_t i = 0; i < 64; ++i) warm.push_back(scanner.frame(i % 2, 0, i % 16, 100 + i, 500));
  rig.slicer.push(warm.data(), warm.size(), now);
  // BDM 1 alone: 100 blocks of 256 frames, 25 600 frames for a stage of 4 096.
  std::uint64_t t = 1000;
  for (int b = 0; b < 100; ++b) {
    std::vector<RawFrame> block;
    for (int i = 0; i < 256; ++i) block.push_back(scanner.frame(1, 0, i % 16, t += 10, 500));
    rig.slicer.push(block.data(), block.size(), now);
  }
  const std::uint64_t dropped = rig.counters.get(Counter::stream_pending_full);
  EXPECT_GE(dropped, 25600u - 4096u);
  EXPECT_LE(dropped, 25600u);
  EXPECT_LT(rig.sink.batches.size(), 20u) << "a slice for every block (or frame) that found no room";
  EXPECT_LE(rig.slicer.pending_frames(), 4096u);
  // BDM 0 goes on: its first block still finds the stage full, but it moves the horizon,
  // the staged frames go out, and the blocks after it lose nothing.
  const auto both_on = [&] {
    std::vector<RawFrame> on;
    for (int i = 0; i < 64; ++i) {
      on.push_back(scanner.frame(0, 0, i % 16, t += 10, 500));
      on.push_back(scanner.frame(1, 0, i % 16, t += 10, 500));
    }
    rig.slicer.push(on.data(), on.size(), now);
  };
  both_on();
  const std::uint64_t after_first = rig.counters.get(Counter::stream_pending_full);
  for (int b = 0; b < 10; ++b) both_on();
  rig.slicer.finish();
  EXPECT_EQ(rig.counters.get(Counter::stream_pending_full), after_first);
  EXPECT_EQ(rig.counters.get(Counter::stream_late), 0u);
  EXPECT_EQ(rig.counters.get(Counter::single_accepted) + rig.counters.get(Counter::single_energy_rejected) +
                rig.counters.get(Counter::frame_no_crystal),
            64u + 25600u + 11 * 128u - after_first);
}

TEST(Slicer, OnePushSpanningMoreThanMaxFutureLosesNothing) {
  // A receiver hands over large chunks: the horizon must follow inside one push().
  std::mt19937_64 rng(23);
  TestScanner scanner;
  Settings& s = scanner.settings;
  small_stream_settings(s);
  s.stream.max_disorder_ps = 100 * s.scanner.tick_ps;
  s.stream.max_future_ps = 20'000 * s.scanner.tick_ps;
  s.stream.max_slice_frames = 1000;
  AcquisitionOptions o;
  o.events = 20000;  // about 5 M ticks, far more than max_future
  const auto frames = test::random_acquisition(scanner, rng, o);
  const BatchResult want = test::batch_process(scanner, frames);
  const auto arrival = test::arrival_order(frames, 100, rng);
  SlicerRig rig(s, scanner.calibration);
  rig.slicer.push(arrival.data(), arrival.size(), {});
  rig.slicer.finish();
  EXPECT_EQ(rig.counters.get(Counter::stream_time_jump), 0u);
  EXPECT_EQ(rig.counters.get(Counter::stream_late), 0u);
  expect_run_equals_batch(rig.sink, 0, want);
  expect_counters_equal_batch(rig.counters, want);
}

TEST(Slicer, LargePushesIntoTinySlicesWithBadFramesEqualBatch) {
  // Slices fill inside one push, both from frames already below the horizon and from those
  // the horizon frees, while sourceless frames are mixed in: every cut must raise what
  // counts as late exactly as frame-by-frame handling would, so nothing is lost.
  std::mt19937_64 rng(31);
  for (const std::size_t slice_frames : {std::size_t{7}, std::size_t{64}, std::size_t{1000}}) {
    TestScanner scanner;
    Settings& s = scanner.settings;
    small_stream_settings(s);
    s.stream.max_disorder_ps = 200 * s.scanner.tick_ps;
    s.stream.max_future_ps = 1e6 * s.scanner.tick_ps;
    s.stream.max_slice_frames = slice_frames;
    AcquisitionOptions o;
    o.events = 6000;
    auto frames = test::random_acquisition(scanner, rng, o);
    // Frames no source owns: a BDM past the scanner's.
    for (std::size_t i = 0; i < frames.size(); i += 97) {
      RawFrame bad = frames[i];
      bad.bytes[frame_offset::bdm] = 0xFF;
      frames.push_back(bad);
    }
    const BatchResult want = test::batch_process(scanner, frames);
    const auto arrival = test::arrival_order(frames, 150, rng);
    SlicerRig rig(s, scanner.calibration);
    Streamer streamer{scanner, rng};
    streamer.max_chunk = 9000;
    streamer.push_all(rig.slicer, arrival);
    rig.slicer.finish();
    EXPECT_EQ(rig.counters.get(Counter::stream_time_jump), 0u) << slice_frames;
    EXPECT_EQ(rig.counters.get(Counter::stream_late), 0u) << slice_frames;
    EXPECT_EQ(rig.counters.get(Counter::stream_pending_full), 0u) << slice_frames;
    EXPECT_GT(rig.counters.get(Counter::frame_bad_bdm), 0u) << slice_frames;
    expect_run_equals_batch(rig.sink, 0, want);
    expect_counters_equal_batch(rig.counters, want);
  }
}

TEST(Slicer, PollDeliversWithoutFinishOnceTimeAndIdleSourcesAllowIt) {
  TestScanner scanner(false);
  Settings& s = scanner.settings;
  small_stream_settings(s);
  s.stream.max_disorder_ps = 1000 * s.scanner.tick_ps;
  s.stream.source_idle_ms = 50.0;
  s.stream.max_slice_ms = 5.0;
  s.coincidence.delayed.enabled = false;
  SlicerRig rig(s, scanner.calibration);
  // A pair, then one more single far enough on for the pair's window to be resolvable once
  // the horizon passes it.
  const std::vector<RawFrame> frames = {scanner.frame(0, 0, 1, 10'000, 500),
                                        scanner.frame(2, 0, 1, 10'050, 500),
                                        scanner.frame(1, 0, 1, 30'000, 500)};
  const Slicer::Clock::time_point t0{};
  rig.slicer.push(frames.data(), frames.size(), t0);
  rig.slicer.poll(t0 + std::chrono::milliseconds(1));
  EXPECT_TRUE(rig.sink.batches.empty());  // no time cut yet
  // Sources 0 and 2 hold the horizon at 10 000 - 1000: the pair is not resolvable.
  rig.slicer.poll(t0 + std::chrono::milliseconds(6));
  std::size_t delivered = 0;
  for (const RecordedSlice& b : rig.sink.batches) delivered += b.prompts.size();
  EXPECT_EQ(delivered, 0u);
  EXPECT_EQ(rig.slicer.horizon(), 9'000u);
  // Every source idle: what was received is complete, and the pair reaches the rig.sink.
  rig.slicer.poll(t0 + std::chrono::milliseconds(60));
  EXPECT_EQ(rig.counters.get(Counter::stream_source_idle), 3u);
  delivered = 0;
  for (const RecordedSlice& b : rig.sink.batches) delivered += b.prompts.size();
  EXPECT_EQ(delivered, 1u);
  EXPECT_EQ(rig.slicer.horizon(), 30'001u);
  EXPECT_TRUE(rig.sink.run_ends.empty());
  rig.slicer.finish();
  EXPECT_EQ(rig.sink.run_ends, std::vector<std::uint64_t>{0});
}

TEST(Slicer, APushAfterFinishStartsTheNextRun) {
  TestScanner scanner(false);
  Settings& s = scanner.settings;
  small_stream_settings(s);
  SlicerRig rig(s, scanner.calibration);
  const RawFrame a = scanner.frame(0, 0, 1, 5000, 500), b = scanner.frame(1, 0, 1, 5010, 500);
  rig.slicer.push(&a, 1, {});
  rig.slicer.push(&b, 1, {});
  rig.slicer.finish();
  rig.slicer.finish();  // nothing left: no slice, no second run end
  EXPECT_EQ(rig.slicer.run_id(), 0u);
  rig.slicer.push(&a, 1, {});
  rig.slicer.push(&b, 1, {});
  EXPECT_EQ(rig.slicer.run_id(), 1u);
  rig.slicer.finish();
  EXPECT_EQ(rig.sink.run_ends, (std::vector<std::uint64_t>{0, 1}));
  ASSERT_EQ(rig.sink.batches.size(), 2u);
  EXPECT_EQ(rig.sink.batches[0].run, 0u);
  EXPECT_EQ(rig.sink.batches[1].run, 1u);
  EXPECT_EQ(rig.sink.batches[1].t_begin, 0u);
  EXPECT_EQ(rig.sink.batches[0].prompts.size(), 1u);
  EXPECT_EQ(rig.sink.batches[1].prompts.size(), 1u);
  EXPECT_EQ(rig.counters.get(Counter::stream_runs), 0u);  // not a clock reset
}

}  // namespace
}  // namespace petdaq

namespace petdaq {
namespace {

// The daemon's path: blocks with the receivers' summaries (push_block), in many random
// chunkings of one arrival order, blocks larger and smaller than a slice, slices small
// enough that the backend splits them: every chunking gives the batch result and the same
// counters.
TEST(Slicer, ChunkLevelSlicingGivesIdenticalRecordsAndCountersForEveryChunking) {
  std::mt19937_64 rng(2024);
  std::uint64_t total_splits = 0;
  for (int acquisition = 0; acquisition < 4; ++acquisition) {
    TestScanner scanner;
    Settings& s = scanner.settings;
    small_stream_settings(s);
    s.coincidence.window_mode = acquisition % 2 ? WindowMode::every_single : WindowMode::first_open;
    s.coincidence.policy = static_cast<Policy>(acquisition + 1);
    s.coincidence.delayed.enabled = true;
    s.coincidence.delayed.offset_ps = 1600 * s.scanner.tick_ps;
    const std::uint64_t disorder_ticks = std::array<std::uint64_t, 4>{0, 50, 700, 5000}[acquisition];
    s.stream.max_disorder_ps = static_cast<double>(disorder_ticks) * s.scanner.tick_ps;
    AcquisitionOptions o;
    o.events = 2000;
    const auto frames = test::random_acquisition(scanner, rng, o);
    const BatchResult want = test::batch_process(scanner, frames);
    ASSERT_GT(want.prompts.size(), 10u);
    const auto arrival = test::arrival_order(frames, disorder_ticks, rng);
    const SourceRule rule = make_source_rule(s);

    std::vector<std::uint64_t> first_counters;
    for (int chunking = 0; chunking < 6; ++chunking) {
      Settings cs = s;
      cs.stream.max_slice_frames = std::uniform_int_distribution<std::uint64_t>(8, 400)(rng);
      cs.stream.max_pending_frames = 1 << 14;
      SlicerRig rig(cs, scanner.calibration);
      std::vector<RawFrame> work = arrival;  // blocks are rewritten in place
      std::uniform_int_distribution<std::size_t> size(1, chunking % 2 ? 16 : 600);
      Slicer::Clock::time_point now{};
      ChunkSummary summary;
      for (std::size_t i = 0; i < work.size();) {
        const std::size_t n = std::min(size(rng), work.size() - i);
        summary.clear();
        summary.add(work.data() + i, n, 0, rule);
        rig.slicer.wait_staged(rig.slicer.push_block(work.data() + i, n, summary, now));
        i += n;
        now += std::chrono::microseconds(1);
        if (rng() % 16 == 0) now += std::chrono::milliseconds(2);  // a cut by time
        rig.slicer.poll(now);
      }
      rig.slicer.finish();
      SCOPED_TRACE(testing::Message() << "acquisition " << acquisition << " chunking " << chunking
                                      << " max_slice_frames " << cs.stream.max_slice_frames);
      expect_run_equals_batch(rig.sink, 0, want);
      expect_counters_equal_batch(rig.counters, want);
      EXPECT_EQ(rig.counters.get(Counter::stream_late), 0u);
      EXPECT_EQ(rig.counters.get(Counter::stream_pending_full), 0u);
      EXPECT_EQ(rig.slicer.pending_frames(), 0u);
      total_splits += rig.counters.get(Counter::stream_split_slices);
      std::vector<std::uint64_t> values;
      for (std::size_t k = 0; k < kCounterCount; ++k)
        if (static_cast<Counter>(k) != Counter::stream_slices &&
            static_cast<Counter>(k) != Counter::stream_split_slices &&
            static_cast<Counter>(k) != Counter::stream_exact_blocks)
          values.push_back(rig.counters.get(static_cast<Counter>(k)));
      if (chunking == 0)
        first_counters = values;
      else
        EXPECT_EQ(values, first_counters);
    }
  }
  EXPECT_GT(total_splits, 0u) << "no slice had to split: the test no longer covers that";
}

}  // namespace
}  // namespace petdaq

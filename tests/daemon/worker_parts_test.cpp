// The worker's parts that hold state of their own (daemon/worker_*.h) and the dead-time
// interval rings (daemon/dead_time.h): chunks staged with the backend go back in order once
// their copies are done, a chunk's latency is sampled once the horizon passes it, the
// published run ids and span, and the memory each output reports for the start-up check.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <set>
#include <vector>

#include "backends/select_backend.h"
#include "core/cpu_backend.h"
#include "core/message_arena.h"
#include "core/slicer.h"
#include "daemon/dead_time.h"
#include "daemon/file_sink.h"
#include "daemon/preflight.h"
#include "daemon/publisher.h"
#include "daemon/raw_sink.h"
#include "daemon/worker_latency.h"
#include "daemon/worker_overload.h"
#include "daemon/worker_run.h"
#include "daemon/worker_staging.h"
#include "daemon/worker_views.h"

namespace petdaq::daemon {
namespace {

using Clock = std::chrono::steady_clock;

// Gives back the staged chunks whose tickets are in `done`, recording the order.
std::vector<Chunk*> release(ChunkStaging& staging, const std::set<std::uint64_t>& done) {
  std::vector<Chunk*> given;
  staging.release([&](std::uint64_t t) { return done.count(t) > 0; },
                  [&](Chunk* c) { given.push_back(c); });
  return given;
}

// The ring rule's test of a backlog (DESIGN section 6): a board is released as lagging only
// while most chunks in use wait for the horizon; chunks sealed and waiting for the worker are
// an overload, shed as dead time for every board.
TEST(RingBacklog, ABoardIsReleasedOnlyWhileMostChunksWaitForTheHorizon) {
  EXPECT_TRUE(backlog_waits_for_horizon(32, 0));    // the worker keeps up: a board holds them
  EXPECT_TRUE(backlog_waits_for_horizon(32, 15));
  EXPECT_FALSE(backlog_waits_for_horizon(32, 16));  // half wait for the worker
  EXPECT_FALSE(backlog_waits_for_horizon(64, 61));  // the worker is behind: an overload
}

TEST(ChunkStaging, GivesChunksBackOldestFirstUpToTheFirstCopyNotDone) {
  std::array<Chunk, 5> chunks;
  ChunkStaging staging(3);
  staging.stage(&chunks[0], 1);
  staging.stage(&chunks[1], 2);
  staging.stage(&chunks[2], 3);
  // Copy 3 is done, but 2 is not: only the oldest goes back.
  EXPECT_EQ(release(staging, {1, 3}), std::vector<Chunk*>{&chunks[0]});
  EXPECT_EQ(staging.count(), 2u);
  // Around the ring's end: the order holds.
  staging.stage(&chunks[3], 4);
  EXPECT_EQ(staging.take_staging_high(), 3u);
  EXPECT_EQ(release(staging, {2, 3}), (std::vector<Chunk*>{&chunks[1], &chunks[2]}));
  staging.stage(&chunks[4], 5);
  EXPECT_EQ(release(staging, {4, 5}), (std::vector<Chunk*>{&chunks[3], &chunks[4]}));
  EXPECT_EQ(staging.count(), 0u);
  // The mark restarted from the three staged when it was taken, and went no higher.
  EXPECT_EQ(staging.take_staging_high(), 3u);
  EXPECT_EQ(staging.take_staging_high(), 0u);
  EXPECT_TRUE(release(staging, {1, 2, 3}).empty());
}

TEST(ChunkStaging, SealedHighWaterMarkRestartsAtEachTake) {
  ChunkStaging staging(4);
  staging.note_sealed(2);
  staging.note_sealed(5);
  staging.note_sealed(3);
  EXPECT_EQ(staging.take_sealed_high(), 5u);
  EXPECT_EQ(staging.take_sealed_high(), 0u);
}

TEST(ChunkLatency, SamplesAChunkOnceTheHorizonPassesItsLatestFrame) {
  ChunkLatency latency(8);
  const auto now = Clock::now();
  latency.pushed(now - std::chrono::milliseconds(40), 100);
  latency.pushed(now - std::chrono::milliseconds(20), 200);
  latency.retire(now, 150, 1'000'000, false);
  EXPECT_EQ(latency.pending(), 1u);
  const LatencyWindow::Stats first = latency.take();
  EXPECT_EQ(first.samples, 1u);
  EXPECT_NEAR(first.max_ms, 40.0, 1.0);
  // A run that ends samples every chunk left.
  latency.retire(now, 150, 1'000'000, true);
  EXPECT_EQ(latency.pending(), 0u);
  EXPECT_EQ(latency.take().samples, 1u);
}

TEST(ChunkLatency, AWildTimestampIsSampledAtOnce) {
  ChunkLatency latency(8);
  const auto now = Clock::now();
  latency.pushed(now, 5'000'000);  // past the horizon plus the time-jump limit
  latency.pushed(now, 1'500);      // ahead of the horizon, but not wild
  latency.retire(now, 1'000, 100'000, false);
  EXPECT_EQ(latency.pending(), 1u);
  EXPECT_EQ(latency.take().samples, 1u);
  // No horizon yet: nothing is wild.
  ChunkLatency early(8);
  early.pushed(now, 5'000'000);
  early.retire(now, 0, 100'000, false);
  EXPECT_EQ(early.pending(), 1u);
}

TEST(ChunkLatency, WhenFullTheNewestJoinsTheLastEntry) {
  ChunkLatency latency(2);
  const auto now = Clock::now();
  latency.pushed(now - std::chrono::milliseconds(30), 10);
  latency.pushed(now - std::chrono::milliseconds(20), 20);
  latency.pushed(now - std::chrono::milliseconds(10), 30);
  EXPECT_EQ(latency.pending(), 2u);
  // The joined entry waits for the newest chunk's time, and keeps the older arrival.
  latency.retire(now, 25, 1'000'000, false);
  EXPECT_EQ(latency.pending(), 1u);
  latency.take();
  latency.retire(now, 31, 1'000'000, false);
  const LatencyWindow::Stats s = latency.take();
  EXPECT_EQ(s.samples, 1u);
  EXPECT_NEAR(s.max_ms, 20.0, 1.0);
}

SliceResult slice(const std::vector<CoincRecord>& prompts, std::uint64_t t_end) {
  SliceResult r;
  r.prompts = prompts.data();
  r.prompt_count = prompts.size();
  r.t_end = t_end;
  return r;
}

TEST(RunState, RunIdsGoOnAcrossEnginesAndTheSpanStartsAtTheFirstPrompt) {
  RunState run;
  const std::uint64_t base = run.published(0);
  EXPECT_EQ(run.published(3), base + 3);
  const std::vector<CoincRecord> none;
  run.slice(run.published(1), slice(none, 500));
  EXPECT_FALSE(run.first_prompt());
  const std::vector<CoincRecord> prompts{{1'000, 2, 0, 1, 511, 511, 0},
                                         {1'200, 2, 0, 1, 511, 511, 0}};
  run.slice(run.published(1), slice(prompts, 2'000));
  const std::vector<CoincRecord> later{{2'100, 2, 0, 1, 511, 511, 0}};
  run.slice(run.published(1), slice(later, 3'000));
  EXPECT_EQ(run.first_prompt(), 1'000u);
  EXPECT_EQ(run.slice_end(), 3'000u);
  EXPECT_EQ(run.last(), base + 1);
  // 500 dead ticks of 2000 since the first prompt; 1000 ps a tick.
  run.note_dead_time(3'000, 500, 1'000.0);
  EXPECT_DOUBLE_EQ(run.live_fraction(), 0.75);
  EXPECT_DOUBLE_EQ(run.dead_s(), 500 * 1'000.0 * 1e-12);
  run.note_dead_time(900, 10, 1'000.0);  // before the first prompt: kept as it was
  EXPECT_DOUBLE_EQ(run.live_fraction(), 0.75);
  run.end_span();
  EXPECT_FALSE(run.first_prompt());
  EXPECT_EQ(run.slice_end(), 0u);
  // The dead time stays for the rates documents until the next run has a prompt.
  run.note_dead_time(5'000, 0, 1'000.0);
  EXPECT_DOUBLE_EQ(run.live_fraction(), 0.75);
  // A new engine's slicer counts its runs from 0 again: published after the last.
  const std::uint64_t next = run.next_engine();
  EXPECT_EQ(next, base + 2);
  EXPECT_EQ(run.published(0), next);
  EXPECT_EQ(run.last(), next);
}

TEST(RunState, RestartingTheOutputsTakesTheCountersAndForgetsTheFile) {
  RunState run;
  CounterBase counters{};
  counters[0] = 7;
  run.note_file(nullptr);
  EXPECT_TRUE(run.file_stem().empty());
  run.restart_outputs(counters);
  EXPECT_EQ(run.counter_base()[0], 7u);
  EXPECT_TRUE(run.file_stem().empty());
}

TEST(DeadTimeIntervals, RecentOnesAreKeptTheTotalOfAll) {
  RunIntervals run;
  for (std::uint64_t i = 0; i <= RunIntervals::kRecent; ++i) run.add({100 * i, 100 * i + 10, i});
  EXPECT_EQ(run.size(), RunIntervals::kRecent);
  EXPECT_EQ(run.total_ticks(), 10 * (RunIntervals::kRecent + 1));
  EXPECT_EQ(run.last_end(), 100 * RunIntervals::kRecent + 10);
  // The oldest was overwritten by the newest.
  EXPECT_EQ(run[0].t_begin, 100 * RunIntervals::kRecent);
  run.clear();
  EXPECT_EQ(run.size(), 0u);
  EXPECT_EQ(run.total_ticks(), 0u);
  EXPECT_EQ(run.last_end(), 0u);
}

TEST(DeadTimeIntervals, UnpublishedQueueDropsTheOldestWhenFull) {
  IntervalQueue queue;
  DeadInterval d{};
  EXPECT_FALSE(queue.pop(d));
  for (std::uint64_t i = 0; i < IntervalQueue::kCapacity + 1; ++i) queue.push({i, i + 1, 0});
  std::vector<std::uint64_t> begins;
  while (queue.pop(d)) begins.push_back(d.t_begin);
  ASSERT_EQ(begins.size(), IntervalQueue::kCapacity);
  EXPECT_EQ(begins.front(), 1u);
  EXPECT_EQ(begins.back(), IntervalQueue::kCapacity);
}

// The start-up memory check adds what each output reports for itself.
TEST(MemoryPlan, SumsWhatEachOutputReports) {
  Settings s;
  s.output.raw.enabled = false;
  s.output.file.enabled = false;
  s.output.histograms.enabled = false;
  s.output.image.enabled = false;
  const MemoryPlan off = memory_plan(s);
  EXPECT_EQ(off.output_bytes, 0u);
  EXPECT_EQ(off.output_bytes, LiveHistograms::memory_bytes(s) + LiveImage::memory_bytes(s) +
                                  RawSink::memory_bytes(s) + FileSink::memory_bytes(s));
  EXPECT_EQ(off.message_bytes, MessageArena::memory_bytes(s));
  EXPECT_EQ(off.held_bytes, Publisher::memory_bytes(s));
  s.output.raw.enabled = true;
  s.output.file.enabled = true;
  s.output.histograms.enabled = true;
  s.output.image.enabled = true;
  const MemoryPlan on = memory_plan(s);
  EXPECT_EQ(RawSink::memory_bytes(s), RawSink::kBufferBytes);
  EXPECT_EQ(FileSink::memory_bytes(s), FileSink::kWriterBufferBytes);
  EXPECT_GT(LiveHistograms::memory_bytes(s), make_histogram_layout(s).bytes);
  // The image's window holds at least its snapshots and the window, the body both images.
  const std::size_t image = make_image_layout(s).voxel_count * sizeof(std::int32_t);
  EXPECT_GE(LiveImage::memory_bytes(s), 5 * image);
  EXPECT_EQ(on.output_bytes, off.output_bytes + RawSink::kBufferBytes +
                                 FileSink::kWriterBufferBytes + LiveHistograms::memory_bytes(s) +
                                 LiveImage::memory_bytes(s));
}

// The engine's share is what the backend the machine would run reports, and the slicer's.
TEST(MemoryPlan, TheEngineIsWhatTheBackendAndTheSlicerReport) {
  Settings s;
  const std::size_t slicer = Slicer::memory_bytes(s, s.stream.max_slice_frames);
  EXPECT_EQ(memory_plan(s, BackendKind::cpu).engine_bytes, CpuBackend::memory_bytes(s) + slicer);
  EXPECT_EQ(memory_plan(s, BackendKind::auto_select).engine_bytes,
            backend_host_bytes(BackendKind::auto_select, s) + slicer);
  // More records per single: more record memory on either backend.
  Settings more = s;
  more.stream.max_records_per_single *= 2;
  for (BackendKind k : {BackendKind::cpu, BackendKind::auto_select})
    EXPECT_GT(backend_host_bytes(k, more), backend_host_bytes(k, s));
}

}  // namespace
}  // namespace petdaq::daemon

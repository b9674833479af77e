// The slicer's small parts on their own: HeldFrames (frames held for the next run),
// StageAccount (what the backend holds, and when a cut is due), WarmupFrames (a run's first
// time reference), RunTrack (run and slice ids, the final slice) and ChunkSummary (what the
// slicer knows of a chunk without reading its frames).
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <vector>

#include "core/chunk_summary.h"
#include "core/held_frames.h"
#include "core/run_track.h"
#include "core/stage_account.h"
#include "core/warmup_frames.h"

namespace petdaq {
namespace {

RawFrame frame(std::uint8_t bdm, std::uint64_t time) {
  RawFrame f{};
  FrameFields fields{};
  fields.head_marker = 0xA;
  fields.tail_marker = 0x5;
  fields.bdm = bdm;
  fields.time_ticks = time;
  encode_frame(fields, f.bytes);
  return f;
}

TEST(HeldFrames, HoldsInOrderUpToItsCapacity) {
  HeldFrames h(3);
  EXPECT_TRUE(h.add(frame(1, 10)));
  EXPECT_TRUE(h.add(frame(2, 20)));
  EXPECT_TRUE(h.add(frame(1, 30)));
  EXPECT_TRUE(h.full());
  EXPECT_FALSE(h.add(frame(3, 40))) << "full: nothing held";
  EXPECT_EQ(h.count(), 3u);
  EXPECT_EQ(h.drop_source(1), 2u);
  ASSERT_EQ(h.count(), 1u);
  EXPECT_EQ(frame_time(h.data()[0].bytes), 20u);
  EXPECT_TRUE(h.add(frame(4, 50)));
  EXPECT_EQ(frame_time(h.data()[1].bytes), 50u) << "the others keep their order";
  EXPECT_EQ(h.release(), 2u);
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(frame_time(h.data()[1].bytes), 50u) << "readable until the next add";
}

TEST(StageAccount, CountsStagedAndCollectedFrames) {
  StageAccount s(100, 60, 250);
  EXPECT_EQ(s.room(500), 100u);
  s.staged(40, 7);
  EXPECT_EQ(s.last_ticket(), 7u);
  EXPECT_FALSE(s.cut_due());
  EXPECT_FALSE(s.cut_before(20));
  EXPECT_TRUE(s.cut_before(21)) << "40 + 21 frames pass the cut at 60";
  s.staged(30, 8);
  EXPECT_TRUE(s.cut_due());
  EXPECT_EQ(s.room(500), 30u) << "the slice's capacity bounds it";
  s.cut();
  EXPECT_EQ(s.since_cut(), 0u);
  EXPECT_FALSE(s.cut_before(1000)) << "nothing staged since the cut";
  EXPECT_EQ(s.held(), 70u);
  s.staged(100, 9);
  s.cut();
  s.staged(60, 10);
  EXPECT_EQ(s.held(), 230u);
  EXPECT_EQ(s.room(500), 20u) << "the stage bounds it";
  EXPECT_TRUE(s.over_stage(21));
  EXPECT_FALSE(s.over_stage(20));
  EXPECT_TRUE(s.over(200, 0));
  EXPECT_TRUE(s.room_for_one(19));
  EXPECT_FALSE(s.room_for_one(20));
  s.collected(100);
  EXPECT_EQ(s.held(), 130u);
  s.collected(1000);
  EXPECT_EQ(s.held(), 0u) << "an upper bound never goes below 0";
}

TEST(StageAccount, ABlockedCutWaitsForTheHorizonOrASplit) {
  StageAccount s(10, 10, 20);
  EXPECT_FALSE(s.blocked(5));
  s.block_at(5);
  EXPECT_TRUE(s.blocked(5));
  EXPECT_FALSE(s.blocked(6)) << "the horizon moved";
  s.note_split();
  EXPECT_FALSE(s.blocked(5)) << "a split slice left frames below its bound";
  s.clear_split();
  EXPECT_TRUE(s.blocked(5));
  s.unblock();
  EXPECT_FALSE(s.blocked(5));
}

TEST(WarmupFrames, TheMedianSetsTheReferenceAndAWildStampIsDropped) {
  using Clock = WarmupFrames::Clock;
  const Clock::time_point t0{};
  WarmupFrames w;
  EXPECT_EQ(w.median(), 0u);
  w.add(frame(0, 1'000'000'000), 1'000'000'000, t0 + std::chrono::seconds(1));  // corrupt
  EXPECT_EQ(w.since(), t0 + std::chrono::seconds(1));
  for (std::uint64_t i = 0; i < 10; ++i)
    w.add(frame(1, 1000 + i), 1000 + i, t0 + std::chrono::seconds(2));
  EXPECT_EQ(w.since(), t0 + std::chrono::seconds(1)) << "the first frame's wall clock";
  EXPECT_EQ(w.count(), 11u);
  EXPECT_EQ(w.median(), 1005u);
  std::vector<std::uint64_t> seen;
  const std::size_t kept = w.end(100, [&](const RawFrame& f, std::uint64_t key) {
    EXPECT_EQ(frame_time(f.bytes), key);
    seen.push_back(key);
  });
  ASSERT_EQ(kept, 10u);
  EXPECT_EQ(w.count(), 0u);
  for (std::size_t i = 0; i < kept; ++i) {
    EXPECT_EQ(seen[i], 1000 + i);
    EXPECT_EQ(frame_time(w.frames()[i].bytes), 1000 + i) << "kept in order at frames()";
  }
}

TEST(WarmupFrames, FillsAndRestarts) {
  WarmupFrames w;
  const WarmupFrames::Clock::time_point t{std::chrono::seconds(3)};
  for (std::size_t i = 0; i < WarmupFrames::kFrames; ++i) {
    EXPECT_FALSE(w.full());
    w.add(frame(0, i), i, t);
  }
  EXPECT_TRUE(w.full());
  EXPECT_EQ(w.end(0, [](const RawFrame&, std::uint64_t) {}), 1u)
      << "max_future 0 keeps the frames at the median only";
  w.restart(t + std::chrono::seconds(1));
  EXPECT_EQ(w.since(), t + std::chrono::seconds(1));
  EXPECT_EQ(w.count(), 0u);
}

TEST(RunTrack, SliceIdsAndTheRunsFirstSlice) {
  RunTrack r;
  EXPECT_FALSE(r.delivered());
  const SliceRequest a = r.next(100, false);
  EXPECT_EQ(a.slice_id, 0u);
  EXPECT_EQ(a.bound, 100u);
  EXPECT_TRUE(a.run_start);
  EXPECT_FALSE(a.final);
  EXPECT_TRUE(r.delivered());
  const SliceRequest b = r.next(200, true);
  EXPECT_EQ(b.slice_id, 1u);
  EXPECT_EQ(b.bound, kNoBound) << "a final slice takes everything";
  EXPECT_FALSE(b.run_start);
  EXPECT_FALSE(r.has_slices()) << "the next slice starts a run";
  r.split(0);
  EXPECT_FALSE(r.final_split()) << "slice 0 was not final";
  r.split(1);
  EXPECT_TRUE(r.final_split());
  EXPECT_TRUE(r.has_slices()) << "a final slice that split leaves the run going on";
  EXPECT_FALSE(r.next(300, false).run_start);
  r.clear_final_split();
  EXPECT_FALSE(r.final_split());
}

TEST(RunTrack, RunIds) {
  RunTrack r;
  r.finish();
  r.push(10);
  EXPECT_EQ(r.id(), 0u) << "a run that delivered nothing is not finished";
  r.next(0, true);
  r.finish();
  r.start();
  EXPECT_EQ(r.id(), 0u) << "the finished run keeps its id until the next push";
  r.push(0);
  EXPECT_EQ(r.id(), 0u) << "an empty push starts nothing";
  r.push(5);
  EXPECT_EQ(r.id(), 1u);
  r.push(5);
  EXPECT_EQ(r.id(), 1u);
  r.set_warm();
  EXPECT_TRUE(r.warm());
  r.next_run();
  r.start();
  EXPECT_EQ(r.id(), 2u);
  EXPECT_FALSE(r.warm());
  EXPECT_FALSE(r.delivered());
}

// The summary frame by frame, the way core/frame_source.h defines a frame's source: the
// reference ChunkSummary::add (runs, four frames at a time) must equal.
ChunkSummary summary_by_frame(const std::vector<RawFrame>& frames, std::size_t group,
                              const SourceRule& rule) {
  ChunkSummary out;
  for (std::size_t i = 0; i < frames.size(); ++i) {
    out.frames += i % group == 0 ? std::min(group, frames.size() - i) : 0;
    const int src = rule.source_of(frames[i].bytes);
    if (src < 0) {
      ++out.sourceless;
      continue;
    }
    const std::uint64_t t = frame_time(frames[i].bytes);
    SourceSpan& s = out.sources[static_cast<std::size_t>(src)];
    if (s.frames == 0) {
      out.present[out.present_count++] = static_cast<std::uint8_t>(src);
      s.min_time = s.max_time = t;
      s.first_index = static_cast<std::uint32_t>(i);
    }
    s.min_time = std::min(s.min_time, t);
    s.max_time = std::max(s.max_time, t);
    ++s.frames;
    out.min_time = std::min(out.min_time, t);
    out.max_time = std::max(out.max_time, t);
  }
  return out;
}

TEST(ChunkSummary, RunsOfASourceGiveWhatEachFrameAloneGives) {
  std::mt19937_64 rng(11);
  for (const bool check_markers : {true, false}) {
    SourceRule rule;
    rule.check_markers = check_markers;
    rule.bdm_count = 20;
    for (int trial = 0; trial < 50; ++trial) {
      // Runs of 1 to 70 frames of one BDM (some BDMs past the scanner's), a frame now and
      // then with a bad head or tail marker, times in any order.
      std::vector<RawFrame> frames;
      const std::size_t n = 1 + rng() % 3000;
      while (frames.size() < n) {
        const auto bdm = static_cast<std::uint8_t>(rng() % 24);
        const std::size_t run = 1 + rng() % 70;
        for (std::size_t k = 0; k < run && frames.size() < n; ++k) {
          RawFrame f = frame(bdm, 1'000'000 + rng() % 100'000);
          if (rng() % 40 == 0) f.bytes[frame_offset::head_du] ^= 0x30;
          if (rng() % 40 == 0) f.bytes[frame_offset::temp_frac_tail] ^= 0x06;
          if (rng() % 40 == 0) f.bytes[frame_offset::temp_frac_tail] ^= 0x50;  // not a marker
          frames.push_back(f);
        }
      }
      const std::size_t group = 1 + rng() % 600;
      ChunkSummary got;
      for (std::size_t at = 0; at < n; at += group)
        got.add(frames.data() + at, std::min(group, n - at), static_cast<std::uint32_t>(at), rule);
      const ChunkSummary want = summary_by_frame(frames, group, rule);
      ASSERT_EQ(got.frames, want.frames);
      ASSERT_EQ(got.sourceless, want.sourceless);
      ASSERT_EQ(got.min_time, want.min_time);
      ASSERT_EQ(got.max_time, want.max_time);
      ASSERT_EQ(got.present_count, want.present_count);
      for (std::uint32_t p = 0; p < want.present_count; ++p) {
        ASSERT_EQ(got.present[p], want.present[p]);
        const SourceSpan& g = got.sources[got.present[p]];
        const SourceSpan& w = want.sources[want.present[p]];
        EXPECT_EQ(g.frames, w.frames);
        EXPECT_EQ(g.min_time, w.min_time);
        EXPECT_EQ(g.max_time, w.max_time);
        EXPECT_EQ(g.first_index, w.first_index);
      }
      if (check_markers) EXPECT_GT(want.sourceless, 0u);  // bad markers and BDMs were there
    }
  }
}

}  // namespace
}  // namespace petdaq

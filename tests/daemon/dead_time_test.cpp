// The worker's dead-time shedding (daemon/dead_time.h, DESIGN section 6 "Overload"): an
// interval opens above the high mark at the latest time taken, drops every board's frames
// from it on (whole chunks from their summaries, mixed chunks frame by frame), closes below
// the low mark after the latest time it dropped, and keeps dropping its late arrivals.
#include "daemon/dead_time.h"
#include "daemon/loss_budget.h"
#include "daemon/loss_conversion.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/chunk_summary.h"
#include "core/test_scanner.h"
#include "support/slicer_rig.h"

namespace petdaq::daemon {
namespace {

constexpr std::uint64_t kFuture = 1'000'000;  // the time-jump limit, ticks

struct TestChunk {
  std::vector<std::uint8_t> bytes;
  Chunk chunk;
  TestChunk(const std::vector<RawFrame>& frames, const SourceRule& rule)
      : bytes(frames.size() * kFrameBytes + kFrameBytes) {
    chunk.h_bytes = bytes.data();
    chunk.capacity_bytes = bytes.size();
    std::memcpy(bytes.data(), frames.data(), frames.size() * kFrameBytes);
    chunk.frame_count = frames.size();
    chunk.used_bytes = frames.size() * kFrameBytes;
    chunk.summary.add(chunk.frames(), frames.size(), 0, rule);
  }
  std::vector<std::uint64_t> times() const {
    std::vector<std::uint64_t> out;
    for (std::size_t i = 0; i < chunk.frame_count; ++i) out.push_back(frame_time(chunk.frames()[i].bytes));
    return out;
  }
};

TEST(DeadTime, ShedsScannerWideIntervalsBetweenTheMarks) {
  test::TestScanner sc;
  const SourceRule rule = make_source_rule(sc.settings);
  Counters counters(4);
  DeadTime dead(0.5, 0.25, 8, rule, counters);  // open at 4 chunks in use, close at 2
  auto frames = [&](std::uint64_t from, std::uint64_t to, std::uint64_t step) {
    std::vector<RawFrame> out;
    for (std::uint64_t t = from; t < to; t += step)
      out.push_back(sc.frame(static_cast<std::uint32_t>(t / step % 4), 0, 1, t, 500));
    return out;
  };

  TestChunk a(frames(100, 200, 1), rule);
  dead.filter(a.chunk, 1, 1, 0, kFuture);
  EXPECT_EQ(a.chunk.frame_count, 100u);
  EXPECT_FALSE(dead.shedding());

  TestChunk b(frames(200, 300, 1), rule);  // the ring fills: the interval opens at 200
  dead.filter(b.chunk, 5, 4, 199, kFuture);  // the slicer took up to 199
  EXPECT_TRUE(dead.shedding());
  EXPECT_EQ(b.chunk.frame_count, 0u) << "a chunk inside dead time goes whole";

  TestChunk c(frames(150, 350, 2), rule);  // another receiver's chunk across the boundary
  dead.filter(c.chunk, 3, 2, 199, kFuture);
  EXPECT_TRUE(dead.shedding());
  for (std::uint64_t t : c.times()) EXPECT_LT(t, 200u);
  EXPECT_EQ(c.chunk.frame_count, 25u);
  EXPECT_EQ(c.chunk.summary.frames, 25u);
  EXPECT_EQ(c.chunk.summary.max_time, 198u);

  TestChunk d(frames(400, 450, 1), rule);  // below the low mark: the interval closes
  dead.filter(d.chunk, 2, 1, 199, kFuture);
  EXPECT_EQ(d.chunk.frame_count, 0u);
  EXPECT_FALSE(dead.shedding());
  DeadInterval di{};
  ASSERT_TRUE(dead.take_closed(di));
  EXPECT_EQ(di.t_begin, 200u);
  EXPECT_EQ(di.t_end, 450u);
  EXPECT_EQ(di.frames_dropped, 100u + 75u + 50u);
  EXPECT_FALSE(dead.take_closed(di));
  EXPECT_EQ(dead.last_end(), 450u);
  EXPECT_EQ(dead.run_dead_ticks(), 250u);

  TestChunk e(frames(300, 500, 1), rule);  // late arrivals of the closed interval still go
  dead.filter(e.chunk, 1, 1, 198, kFuture);
  for (std::uint64_t t : e.times()) EXPECT_GE(t, 450u);
  EXPECT_EQ(e.chunk.frame_count, 50u);

  const std::uint64_t dropped = 100 + 75 + 50 + 150;
  EXPECT_EQ(counters.get(Counter::stream_dead_frames), dropped);
  EXPECT_EQ(counters.get(Counter::stream_dead_intervals), 1u);
  std::uint64_t per_board = 0;
  for (std::uint32_t bdm = 0; bdm < 4; ++bdm) {
    EXPECT_GT(counters.bdm_dead(bdm), 0u) << "bdm " << bdm;
    per_board += counters.bdm_dead(bdm);
  }
  EXPECT_EQ(per_board, dropped);
  EXPECT_EQ(dead.take_interval_dead_ticks(), 250u);
  EXPECT_EQ(dead.take_interval_dead_ticks(), 0u);

  // A new run (clock reset): the old intervals no longer apply.
  dead.new_run();
  TestChunk f(frames(300, 320, 1), rule);
  dead.filter(f.chunk, 1, 1, 0, kFuture);
  EXPECT_EQ(f.chunk.frame_count, 20u);
  EXPECT_EQ(dead.run_dead_ticks(), 0u);
}

TEST(DeadTime, AShedThatDroppedNothingPublishesNoInterval) {
  test::TestScanner sc;
  const SourceRule rule = make_source_rule(sc.settings);
  Counters counters(4);
  DeadTime dead(0.5, 0.25, 8, rule, counters);
  std::vector<RawFrame> early;
  for (std::uint64_t t = 100; t < 200; ++t) early.push_back(sc.frame(0, 0, 1, t, 500));
  TestChunk a(early, rule);
  dead.filter(a.chunk, 1, 1, 0, kFuture);
  std::vector<RawFrame> disordered;
  for (std::uint64_t t = 50; t < 100; ++t) disordered.push_back(sc.frame(1, 0, 1, t, 500));
  TestChunk b(disordered, rule);
  dead.filter(b.chunk, 5, 0, 199, kFuture);  // opens and, with nothing waiting, closes
  EXPECT_EQ(b.chunk.frame_count, 50u) << "frames before the interval are kept";
  EXPECT_FALSE(dead.shedding());
  DeadInterval di{};
  EXPECT_FALSE(dead.take_closed(di));
  EXPECT_EQ(counters.get(Counter::stream_dead_intervals), 0u);
}

// The frames a chunk loses to dead time tell how far each board's clock went (for the
// slicer); a board with none dropped shows 0 and keeps holding the horizon where it is.
TEST(DeadTime, ReportsHowFarEachBoardsShedFramesReached) {
  test::TestScanner sc;
  const SourceRule rule = make_source_rule(sc.settings);
  Counters counters(4);
  DeadTime dead(0.5, 0.25, 8, rule, counters);
  std::vector<RawFrame> v;
  std::vector<std::uint64_t> want(4, 0);
  for (std::uint64_t t = 200; t < 300; ++t) {
    const auto b = static_cast<std::uint32_t>(t % 3);
    v.push_back(sc.frame(b, 0, 1, t, 500));
    want[b] = t + 1;
  }
  v.push_back(sc.frame(3, 0, 1, 150, 500));  // board 3 is behind the interval
  TestChunk a(v, rule);
  EXPECT_TRUE(dead.filter(a.chunk, 5, 4, 199, kFuture));
  ASSERT_EQ(a.chunk.frame_count, 1u);
  EXPECT_EQ(frame_time(a.chunk.frames()[0].bytes), 150u);
  EXPECT_EQ(dead.last_reached(), want);
  TestChunk b(std::vector<RawFrame>{sc.frame(1, 0, 1, 310, 500)}, rule);
  EXPECT_TRUE(dead.filter(b.chunk, 1, 0, 199, kFuture));  // drops it, then closes
  EXPECT_FALSE(dead.shedding());
  EXPECT_EQ(dead.last_reached(), (std::vector<std::uint64_t>{0, 311, 0, 0}));
  TestChunk c(std::vector<RawFrame>{sc.frame(3, 0, 1, 160, 500)}, rule);
  EXPECT_FALSE(dead.filter(c.chunk, 1, 0, 199, kFuture));  // before the interval: kept
  EXPECT_EQ(c.chunk.frame_count, 1u);
  EXPECT_EQ(dead.last_reached(), (std::vector<std::uint64_t>(4, 0)));
}

// A shed in a run that has taken nothing yet (just after a reload or a clock reset) begins at
// the first frame it drops, not at time 0, so the dead time it reports is what it dropped.
TEST(DeadTime, AShedBeforeAnythingWasTakenBeginsAtItsFirstDrop) {
  test::TestScanner sc;
  const SourceRule rule = make_source_rule(sc.settings);
  Counters counters(4);
  DeadTime dead(0.5, 0.25, 8, rule, counters);
  std::vector<RawFrame> v;
  for (std::uint64_t t = 5'000'000; t < 5'000'100; ++t) v.push_back(sc.frame(static_cast<std::uint32_t>(t % 4), 0, 1, t, 500));
  TestChunk a(v, rule);
  dead.filter(a.chunk, 5, 0, 0, kFuture);
  EXPECT_EQ(a.chunk.frame_count, 0u);
  DeadInterval di{};
  ASSERT_TRUE(dead.take_closed(di));
  EXPECT_EQ(di.t_begin, 5'000'000u);
  EXPECT_EQ(di.t_end, 5'000'100u);
  EXPECT_EQ(dead.run_dead_ticks(), 100u);
}

// A wild stamp (past the time-jump limit) during a shed is not dead time: it is kept for the
// slicer's time-jump rule and does not stretch the interval.
TEST(DeadTime, AWildStampIsNotDeadTime) {
  test::TestScanner sc;
  const SourceRule rule = make_source_rule(sc.settings);
  Counters counters(4);
  DeadTime dead(0.5, 0.25, 8, rule, counters);
  std::vector<RawFrame> v;
  for (std::uint64_t t = 200; t < 210; ++t) v.push_back(sc.frame(0, 0, 1, t, 500));
  const std::uint64_t wild = 210 + kFuture + 5;  // past the limit from the last drop
  v.push_back(sc.frame(1, 0, 1, wild, 500));
  TestChunk a(v, rule);
  dead.filter(a.chunk, 5, 0, 199, kFuture);
  ASSERT_EQ(a.chunk.frame_count, 1u);
  EXPECT_EQ(frame_time(a.chunk.frames()[0].bytes), wild);
  DeadInterval di{};
  ASSERT_TRUE(dead.take_closed(di));
  EXPECT_EQ(di.t_begin, 200u);
  EXPECT_EQ(di.t_end, 210u);
  EXPECT_EQ(di.frames_dropped, 10u);
}

// An overload lasts as long as it lasts: an interval goes on over many times the time-jump
// limit as long as the frames it drops come in continuity.
TEST(DeadTime, AnIntervalLongerThanTheTimeJumpLimitKeepsShedding) {
  test::TestScanner sc;
  const SourceRule rule = make_source_rule(sc.settings);
  Counters counters(4);
  DeadTime dead(0.5, 0.25, 8, rule, counters);
  constexpr std::uint64_t kStep = kFuture / 4;
  std::uint64_t dropped = 0;
  for (std::uint64_t k = 0; k < 20; ++k) {  // 5 x the limit
    std::vector<RawFrame> v;
    for (std::uint64_t i = 0; i < 4; ++i)
      v.push_back(sc.frame(static_cast<std::uint32_t>(i), 0, 1, 200 + k * kStep + i, 500));
    TestChunk c(v, rule);
    dead.filter(c.chunk, 6, 3, 199, kFuture);
    EXPECT_EQ(c.chunk.frame_count, 0u) << "chunk " << k;
    dropped += 4;
  }
  EXPECT_TRUE(dead.shedding());
  EXPECT_EQ(counters.get(Counter::stream_dead_frames), dropped);
  EXPECT_EQ(dead.run_dead_ticks(), 19 * kStep + 4);
}

// A receiving socket's losses (DESIGN section 6, "Losses at a socket"): the parts of the
// stretch not dead already become closed intervals, published and counted as loss intervals
// (none overlapping another), and the frames of them that come later are dropped.
TEST(DeadTime, ASocketsLossesBecomeIntervalsThatDoNotOverlapTheOthers) {
  test::TestScanner sc;
  const SourceRule rule = make_source_rule(sc.settings);
  Counters counters(4);
  DeadTime dead(0.5, 0.25, 8, rule, counters);
  auto frames = [&](std::uint64_t from, std::uint64_t to) {
    std::vector<RawFrame> out;
    for (std::uint64_t t = from; t < to; ++t)
      out.push_back(sc.frame(static_cast<std::uint32_t>(t % 4), 0, 1, t, 500));
    return out;
  };
  // An overload interval [200, 300).
  TestChunk a(frames(100, 200), rule);
  dead.filter(a.chunk, 5, 4, 199, kFuture);
  TestChunk b(frames(200, 300), rule);
  dead.filter(b.chunk, 5, 4, 199, kFuture);
  TestChunk c(frames(300, 310), rule);
  dead.filter(c.chunk, 1, 0, 299, kFuture);  // dropped, then below the low mark: it closes
  ASSERT_FALSE(dead.shedding());
  DeadInterval d;
  ASSERT_TRUE(dead.take_closed(d));
  ASSERT_EQ(d.t_begin, 200u);
  ASSERT_EQ(d.t_end, 310u);

  // A loss across it: [150, 200) and [310, 350) are new.
  EXPECT_EQ(dead.add_loss(150, 350), 2u);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> made;
  while (dead.take_closed(d)) made.emplace_back(d.t_begin, d.t_end);
  EXPECT_EQ(made, (std::vector<std::pair<std::uint64_t, std::uint64_t>>{{150, 200}, {310, 350}}));
  EXPECT_EQ(counters.get(Counter::stream_loss_intervals), 2u);
  EXPECT_EQ(counters.get(Counter::stream_dead_intervals), 3u);
  // One inside what is dead already makes nothing.
  EXPECT_EQ(dead.add_loss(160, 340), 0u);
  EXPECT_FALSE(dead.take_closed(d));
  // The run's dead time counts each tick once: 110 + 50 + 40.
  EXPECT_EQ(dead.run_dead_ticks(), 200u);
  // Frames of a loss interval that come later are dropped, per board.
  TestChunk e(frames(340, 360), rule);
  EXPECT_TRUE(dead.filter(e.chunk, 1, 0, 310, kFuture));
  EXPECT_EQ(e.chunk.frame_count, 10u);
  EXPECT_EQ(counters.get(Counter::stream_dead_frames), 100u + 10u + 10u);
  // An overload interval opens after the last one closed, not inside a loss interval.
  TestChunk f(frames(360, 370), rule);
  dead.filter(f.chunk, 5, 4, 345, kFuture);
  EXPECT_TRUE(dead.shedding());
  TestChunk g(frames(370, 380), rule);
  dead.filter(g.chunk, 1, 0, 345, kFuture);
  ASSERT_TRUE(dead.take_closed(d));
  EXPECT_GE(d.t_begin, 350u);
}

// The budget of dead time for socket losses: full at the start (one second's share), spent
// by what is made dead, topped up by its share of the acquisition time that passes, never
// past the cap; a new run's clock (time going back) counts on from there; 0 allows nothing.
TEST(LossBudget, AShareOfTheAcquisitionTimeUpToOneSecondsShare) {
  const double tick_ps = 1000;                 // 10^9 ticks a second
  LossBudget b(0.01, tick_ps);                 // cap: 10^7 ticks
  b.advance(5'000'000'000);
  EXPECT_TRUE(b.allows(10'000'000));
  EXPECT_FALSE(b.allows(10'000'001));
  b.spend(8'000'000);
  EXPECT_FALSE(b.allows(2'000'001));
  b.advance(5'000'000'000 + 100'000'000);      // 0.1 s later: 10^6 more
  EXPECT_TRUE(b.allows(3'000'000));
  EXPECT_FALSE(b.allows(3'000'001));
  b.advance(5'000'000'000 + 10'000'000'000);   // long after: the cap, not more
  EXPECT_TRUE(b.allows(10'000'000));
  EXPECT_FALSE(b.allows(10'000'001));
  b.spend(10'000'000);
  b.advance(1'000);                            // a new run: nothing grows from the old clock
  EXPECT_FALSE(b.allows(1));
  b.advance(1'000 + 100'000'000);              // 0.1 s into it
  EXPECT_TRUE(b.allows(1'000'000));
  EXPECT_FALSE(b.allows(1'000'001));
  LossBudget off(0, tick_ps);
  off.advance(1);
  EXPECT_FALSE(off.allows(0));
}

// Worker::note_loss's rule on its own: a loss's stretch with the disorder margin, made dead in
// the slicer and as intervals within the budget; past the budget, or with the slicer full, the
// socket's boards keep the loss.
TEST(LossConversion, AStretchWithinTheBudgetAndTheSlicersRoomBecomesDeadForEveryBoard) {
  // The stretch: [from − d, to + d + 1), `from` 0 taken as `to`, held within the clock.
  EXPECT_EQ(loss_stretch(1000, 1200, 50).begin, 950u);
  EXPECT_EQ(loss_stretch(1000, 1200, 50).end, 1251u);
  EXPECT_EQ(loss_stretch(0, 1200, 50).begin, 1150u);
  EXPECT_EQ(loss_stretch(1240, 1200, 50).begin, 1150u);  // a from past to, within the margin
  EXPECT_TRUE(loss_stretch(1250, 1200, 50).known);
  // Past it (the receiver's latest time was wild): where the loss begins is not known.
  EXPECT_FALSE(loss_stretch(1251, 1200, 50).known);
  EXPECT_FALSE(loss_stretch(~std::uint64_t{0}, 1200, 50).known);
  EXPECT_EQ(loss_stretch(20, 30, 50).begin, 0u);
  EXPECT_EQ(loss_stretch(5, ~std::uint64_t{0} - 10, 50).end, ~std::uint64_t{0});

  test::TestScanner sc;
  const SourceRule rule = make_source_rule(sc.settings);
  test::SlicerRig rig(sc.settings, sc.calibration);
  Counters counters(4);
  DeadTime dead(0.5, 0.25, 8, rule, counters);
  // A budget of 1 % of the time, capped at a second's share: 1e10 ps / tick_ps ticks.
  LossBudget budget(0.01, sc.settings.scanner.tick_ps);
  const auto cap = static_cast<std::uint64_t>(budget.ticks());
  ASSERT_GT(cap, 1000u);

  const LossConversion a = convert_loss({1000, 1100}, 500, budget, rig.slicer, dead);
  EXPECT_EQ(a.fate, LossFate::dead);
  EXPECT_EQ(a.held.begin, 1000u);
  EXPECT_EQ(a.held.end, 1100u);
  EXPECT_DOUBLE_EQ(budget.ticks(), static_cast<double>(cap - 100));
  DeadInterval d;
  ASSERT_TRUE(dead.take_closed(d));
  EXPECT_EQ(d.t_begin, 1000u);
  EXPECT_EQ(d.t_end, 1100u);
  EXPECT_EQ(counters.get(Counter::stream_loss_intervals), 1u);

  // Across the first: the slicer's range grows to [1000, 1150), the budget pays for it all,
  // and only [1100, 1150) is a new interval.
  const LossConversion b = convert_loss({1050, 1150}, 500, budget, rig.slicer, dead);
  EXPECT_EQ(b.fate, LossFate::dead);
  EXPECT_EQ(b.held.begin, 1000u);
  EXPECT_EQ(b.held.end, 1150u);
  ASSERT_TRUE(dead.take_closed(d));
  EXPECT_EQ(d.t_begin, 1100u);
  EXPECT_EQ(d.t_end, 1150u);
  EXPECT_DOUBLE_EQ(budget.ticks(), static_cast<double>(cap - 250));
  // Inside what is dead: held, nothing new.
  EXPECT_EQ(convert_loss({1010, 1020}, 500, budget, rig.slicer, dead).fate, LossFate::dead_already);
  EXPECT_FALSE(dead.take_closed(d));

  // Past the budget: left to the socket's boards, nothing held, nothing spent.
  const double left = budget.ticks();
  const auto big = static_cast<std::uint64_t>(left) + 1;
  EXPECT_EQ(convert_loss({100'000, 100'000 + big}, 500, budget, rig.slicer, dead).fate,
            LossFate::unconverted);
  EXPECT_DOUBLE_EQ(budget.ticks(), left);
  EXPECT_FALSE(dead.take_closed(d));
  // A stretch whose beginning is not known: left to the socket's boards, nothing spent.
  EXPECT_EQ(convert_loss(loss_stretch(~std::uint64_t{0} / 2, 2000, 50), 500, budget, rig.slicer, dead).fate,
            LossFate::unconverted);
  EXPECT_DOUBLE_EQ(budget.ticks(), left);
  EXPECT_FALSE(dead.take_closed(d));

  // The slicer's ranges full (it holds DeadRanges::kMax): refused, nothing spent.
  for (std::uint64_t k = 1; k < DeadRanges::kMax; ++k)
    EXPECT_EQ(convert_loss({10'000 * k, 10'000 * k + 10}, 500, budget, rig.slicer, dead).fate,
              LossFate::dead);
  const double before_full = budget.ticks();
  EXPECT_EQ(convert_loss({900'000, 900'010}, 500, budget, rig.slicer, dead).fate,
            LossFate::unconverted);
  EXPECT_DOUBLE_EQ(budget.ticks(), before_full);
  EXPECT_EQ(counters.get(Counter::stream_loss_intervals), 2u + (DeadRanges::kMax - 1));
  rig.slicer.finish();
}

}  // namespace
}  // namespace petdaq::daemon

// The CPU backend's parts on their own: StagedStore (staging, tickets, deferred blocks),
// SliceTake (a slice's frames by its bound, on one thread and in pieces, the split and its
// drop) and SinglesBuffers (the merge with the carry-over, the next carry-over).
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "core/cpu_stages.h"
#include "core/cpu_store.h"
#include "core/cpu_take.h"
#include "core/order.h"
#include "core/parallel_engine.h"

namespace petdaq {
namespace {

constexpr std::uint32_t kBdms = 4;
const SourceRule kRule{true, 0xA, 0x5, kBdms};

RawFrame frame(std::uint8_t bdm, std::uint64_t time) {
  FrameFields fields{};
  fields.head_marker = 0xA;
  fields.tail_marker = 0x5;
  fields.bdm = bdm;
  fields.time_ticks = time;
  RawFrame f{};
  encode_frame(fields, f.bytes);
  return f;
}

std::vector<std::uint64_t> times(const RawFrame* f, std::size_t n) {
  std::vector<std::uint64_t> t;
  for (std::size_t i = 0; i < n; ++i) t.push_back(frame_time(f[i].bytes));
  return t;
}

std::vector<std::uint64_t> sorted(std::vector<std::uint64_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

std::unique_ptr<ParallelEngine> engine_of(unsigned threads) {
  ParallelEngine::Sizes s;
  s.threads = threads;
  s.bdm_count = kBdms;
  s.min_parallel = 4;  // small, so that pieces happen
  s.record_capacity = 16;
  return std::make_unique<ParallelEngine>(s);
}

TEST(StagedStore, StagesInOrderAndRefusesWhatDoesNotFit) {
  StagedStore store(4, nullptr);
  const std::vector<RawFrame> f = {frame(0, 1), frame(1, 2), frame(2, 3)};
  const std::uint64_t t1 = store.stage(f.data(), 2);
  const std::uint64_t t2 = store.stage(f.data() + 2, 1);
  EXPECT_LT(t1, t2);
  EXPECT_TRUE(store.staged(t2)) << "copied at once";
  EXPECT_EQ(times(store.frames(), store.count()), (std::vector<std::uint64_t>{1, 2, 3}));
  EXPECT_THROW(store.stage(f.data(), 2), std::invalid_argument);
  EXPECT_EQ(store.held(), 3u);
  store.defer(true);  // no engine: no effect
  const std::uint64_t t3 = store.stage(f.data(), 1);
  EXPECT_TRUE(store.staged(t3));
  EXPECT_EQ(store.deferred_count(), 0u);
}

TEST(StagedStore, DeferredBlocksWaitUntilCopied) {
  auto engine = engine_of(2);
  StagedStore store(64, engine.get());
  store.defer(true);
  std::vector<RawFrame> a, b;
  for (std::uint64_t i = 0; i < 5; ++i) a.push_back(frame(0, 10 + i));
  for (std::uint64_t i = 0; i < 7; ++i) b.push_back(frame(1, 20 + i));
  const std::uint64_t ta = store.stage(a.data(), a.size());
  const std::uint64_t tb = store.stage(b.data(), b.size());
  EXPECT_FALSE(store.staged(ta));
  EXPECT_EQ(store.count(), 0u);
  EXPECT_EQ(store.held(), 12u);
  EXPECT_EQ(store.deferred_first(1), 5u);
  EXPECT_EQ(store.deferred_block_at(4), 0u);
  EXPECT_EQ(store.deferred_block_at(5), 1u);
  EXPECT_EQ(store.deferred_block_at(11), 1u);
  EXPECT_THROW(store.stage(a.data(), 53), std::invalid_argument) << "deferred frames count";
  store.copy_deferred();
  EXPECT_TRUE(store.staged(tb));
  EXPECT_EQ(store.count(), 12u);
  EXPECT_EQ(store.deferred_count(), 0u);
  std::vector<std::uint64_t> want;
  for (std::uint64_t i = 0; i < 5; ++i) want.push_back(10 + i);
  for (std::uint64_t i = 0; i < 7; ++i) want.push_back(20 + i);
  EXPECT_EQ(times(store.frames(), store.count()), want);
}

TEST(SliceTake, TakesTheFramesBelowTheBoundAndKeepsTheRestInOrder) {
  StagedStore store(16, nullptr);
  SliceTake take(8, kRule, store, nullptr);
  std::vector<RawFrame> f = {frame(0, 50), frame(1, 10), frame(9, 99), frame(2, 70), frame(3, 20)};
  store.stage(f.data(), f.size());
  take.take(60);
  EXPECT_FALSE(take.pending());
  const SliceTake::Outcome& o = take.outcome();
  EXPECT_EQ(o.taken, 4u) << "three below the bound and the frame with no source (BDM 9)";
  EXPECT_EQ(o.bound, 60u);
  EXPECT_FALSE(o.split);
  EXPECT_EQ(times(take.input(), o.taken), (std::vector<std::uint64_t>{50, 10, 99, 20}));
  EXPECT_EQ(times(store.frames(), store.count()), (std::vector<std::uint64_t>{70}));
  take.take(kNoBound);
  EXPECT_EQ(take.outcome().taken, 1u);
  EXPECT_EQ(store.count(), 0u);
}

TEST(SliceTake, SplitsWhenMoreThanASliceIsBelowTheBound) {
  StagedStore store(16, nullptr);
  SliceTake take(3, kRule, store, nullptr);
  std::vector<RawFrame> f = {frame(0, 40), frame(1, 10), frame(2, 30), frame(3, 20), frame(0, 90)};
  store.stage(f.data(), f.size());
  take.take(60);
  const SliceTake::Outcome& o = take.outcome();
  EXPECT_TRUE(o.split);
  EXPECT_EQ(o.bound, 40u) << "the 4th smallest time below the bound";
  EXPECT_EQ(o.taken, 3u);
  EXPECT_EQ(o.dropped, 0u);
  // A split reorders the staged frames (the stages sort the slice's singles).
  EXPECT_EQ(sorted(times(take.input(), o.taken)), (std::vector<std::uint64_t>{10, 20, 30}));
  EXPECT_EQ(sorted(times(store.frames(), store.count())), (std::vector<std::uint64_t>{40, 90}));
}

TEST(SliceTake, DropsFramesThatShareAnEarliestTimeNoSliceHolds) {
  StagedStore store(16, nullptr);
  SliceTake take(2, kRule, store, nullptr);
  std::vector<RawFrame> f = {frame(0, 5), frame(1, 5), frame(2, 5), frame(3, 8)};
  store.stage(f.data(), f.size());
  take.take(kNoBound);
  const SliceTake::Outcome& o = take.outcome();
  EXPECT_TRUE(o.split);
  EXPECT_EQ(o.taken, 0u);
  EXPECT_EQ(o.dropped, 3u);
  EXPECT_EQ(times(store.frames(), store.count()), (std::vector<std::uint64_t>{8}));
}

// The take on threads gives the frames of the one-thread take, whichever way it runs.
TEST(SliceTake, InPiecesAndPlannedTakesMatchTheOneThreadTake) {
  std::vector<RawFrame> f;
  for (std::uint64_t i = 0; i < 40; ++i) f.push_back(frame(static_cast<std::uint8_t>(i % 5), (i * 37) % 100));
  const std::uint64_t bound = 50;

  StagedStore ref_store(64, nullptr);
  SliceTake ref(64, kRule, ref_store, nullptr);
  ref_store.stage(f.data(), f.size());
  ref.take(bound);
  const auto want_taken = times(ref.input(), ref.outcome().taken);
  const auto want_kept = times(ref_store.frames(), ref_store.count());
  ASSERT_GT(want_taken.size(), 4u);
  ASSERT_GT(want_kept.size(), 4u);

  for (const bool deferred : {false, true}) {
    for (const std::size_t max_slice : {std::size_t{64}, want_taken.size()}) {
      auto engine = engine_of(2);
      StagedStore store(64, engine.get());
      SliceTake take(max_slice, kRule, store, engine.get());
      store.defer(deferred);
      store.stage(f.data(), 15);
      store.stage(f.data() + 15, f.size() - 15);
      take.take(bound);
      if (take.pending()) take.complete();
      EXPECT_FALSE(take.pending());
      EXPECT_FALSE(take.outcome().split);
      ASSERT_EQ(take.outcome().taken, want_taken.size());
      take.join_pieces();
      EXPECT_EQ(times(take.input(), take.outcome().taken), want_taken)
          << "deferred " << deferred << ", max_slice " << max_slice;
      EXPECT_EQ(times(store.frames(), store.count()), want_kept);
      EXPECT_EQ(store.deferred_count(), 0u);
    }
  }
}

Single single(std::uint64_t time, std::uint32_t crystal) {
  Single s{};
  s.time = time;
  s.crystal = crystal;
  return s;
}

TEST(SinglesBuffers, MergesTheNewSinglesWithTheCarryOverAndKeepsTheNext) {
  SinglesBuffers b(8);
  b.singles()[0] = single(10, 1);
  b.singles()[1] = single(30, 2);
  b.carry_from(0, 2);
  EXPECT_EQ(b.carry(), 2u);
  EXPECT_EQ(b.fresh(), b.singles() + 2);
  b.fresh()[0] = single(20, 3);  // overlaps the carry-over
  b.fresh()[1] = single(40, 4);
  ASSERT_EQ(b.merge(2), 4u);
  std::vector<std::uint64_t> t;
  for (std::size_t i = 0; i < 4; ++i) t.push_back(b.singles()[i].time);
  EXPECT_EQ(t, (std::vector<std::uint64_t>{10, 20, 30, 40}));
  b.carry_from(3, 4);
  EXPECT_EQ(b.carry(), 1u);
  EXPECT_EQ(b.singles()[0].time, 40u) << "the carried single moves to the front";
  b.clear();
  EXPECT_EQ(b.carry(), 0u);
}

}  // namespace
}  // namespace petdaq

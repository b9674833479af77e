#include "core/phase_timer.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

using namespace petdaq;
using namespace std::chrono_literals;

namespace {
using TP = PhaseTimer::Clock::time_point;
constexpr TP t0{};
}  // namespace

TEST(PhaseTimer, BucketsAreLog2Microseconds) {
  EXPECT_EQ(PhaseTimer::bucket_of(0), 0u);
  EXPECT_EQ(PhaseTimer::bucket_of(999), 0u);      // under 1 µs
  EXPECT_EQ(PhaseTimer::bucket_of(1000), 1u);     // [1, 2) µs
  EXPECT_EQ(PhaseTimer::bucket_of(1999), 1u);
  EXPECT_EQ(PhaseTimer::bucket_of(2000), 2u);     // [2, 4) µs
  EXPECT_EQ(PhaseTimer::bucket_of(1'024'000), 11u);  // 1024 µs in [1024, 2048)
  EXPECT_EQ(PhaseTimer::bucket_of(1'023'999), 10u);
  EXPECT_EQ(PhaseTimer::bucket_of(3'600'000'000'000), PhaseTimer::kBuckets - 1);  // an hour
  EXPECT_EQ(PhaseTimer::bucket_of(-5), 0u);
}

// Nested phases are charged their exclusive time; a phase entered twice adds up; the
// phases and the time outside them add up to the wall time.
TEST(PhaseTimer, NestedPhasesAreChargedExclusiveTime) {
  PhaseTimer t(t0);
  t.enter(Phase::loop, t0 + 1ms);            // 1 ms outside every phase
  t.enter(Phase::slicer_push, t0 + 2ms);     // loop: 1 ms
  t.enter(Phase::submit, t0 + 5ms);          // slicer_push: 3 ms
  t.enter(Phase::count_wait, t0 + 6ms);      // submit: 1 ms
  t.leave(t0 + 16ms);                        // count_wait: 10 ms
  t.leave(t0 + 17ms);                        // submit: 1 ms more
  t.enter(Phase::collect, t0 + 18ms);        // slicer_push: 1 ms more
  t.leave(t0 + 20ms);                        // collect: 2 ms
  t.leave(t0 + 21ms);                        // slicer_push: 1 ms more
  t.leave(t0 + 22ms);                        // loop: 1 ms more
  t.enter(Phase::loop, t0 + 22ms);
  t.enter(Phase::submit, t0 + 22ms);
  t.leave(t0 + 22ms + 300us);                // submit: a second call of 0.3 ms
  t.leave(t0 + 23ms);                        // loop: 0.7 ms

  auto ms = [&](Phase p) { return static_cast<double>(t.stats(p).total_ns) * 1e-6; };
  EXPECT_DOUBLE_EQ(ms(Phase::loop), 2.7);
  EXPECT_DOUBLE_EQ(ms(Phase::slicer_push), 5.0);
  EXPECT_DOUBLE_EQ(ms(Phase::submit), 2.3);
  EXPECT_DOUBLE_EQ(ms(Phase::count_wait), 10.0);
  EXPECT_DOUBLE_EQ(ms(Phase::collect), 2.0);
  EXPECT_EQ(t.stats(Phase::loop).calls, 2u);
  EXPECT_EQ(t.stats(Phase::submit).calls, 2u);
  EXPECT_EQ(t.stats(Phase::count_wait).calls, 1u);
  EXPECT_EQ(t.stats(Phase::wait_chunk).calls, 0u);
  // The longest call is the longest exclusive one: submit's first call was 2 ms.
  EXPECT_EQ(t.stats(Phase::submit).max_ns, 2'000'000);
  EXPECT_EQ(t.stats(Phase::submit).log2_us[11], 1u);  // 2000 µs in [1024, 2048)
  EXPECT_EQ(t.stats(Phase::submit).log2_us[9], 1u);   // 300 µs in [256, 512)
  EXPECT_DOUBLE_EQ(t.unattributed_seconds(), 0.001);
  EXPECT_DOUBLE_EQ(t.wall_seconds(t0 + 23ms), 0.023);
}

TEST(PhaseTimer, IntervalMaximumStartsAgain) {
  PhaseTimer t(t0);
  t.enter(Phase::publish, t0);
  t.leave(t0 + 7ms);
  EXPECT_EQ(t.stats(Phase::publish).interval_max_ns, 7'000'000);
  t.take_interval_max();
  EXPECT_EQ(t.stats(Phase::publish).interval_max_ns, 0);
  t.enter(Phase::publish, t0 + 8ms);
  t.leave(t0 + 10ms);
  EXPECT_EQ(t.stats(Phase::publish).interval_max_ns, 2'000'000);
  EXPECT_EQ(t.stats(Phase::publish).max_ns, 7'000'000);
}

// Nesting deeper than the stack charges the extra levels to the deepest phase kept; the
// books still balance.
TEST(PhaseTimer, TooDeepNestingIsChargedToTheDeepestPhase) {
  PhaseTimer t(t0);
  for (std::size_t i = 0; i < PhaseTimer::kMaxDepth + 3; ++i)
    t.enter(i % 2 ? Phase::submit : Phase::collect, t0 + std::chrono::milliseconds(i));
  for (std::size_t i = 0; i < PhaseTimer::kMaxDepth + 3; ++i)
    t.leave(t0 + std::chrono::milliseconds(PhaseTimer::kMaxDepth + 3 + i));
  const auto& s = t.stats(Phase::submit);
  const auto& c = t.stats(Phase::collect);
  EXPECT_EQ(s.calls + c.calls, PhaseTimer::kMaxDepth);
  EXPECT_EQ(s.total_ns + c.total_ns + static_cast<std::int64_t>(t.unattributed_seconds() * 1e9),
            static_cast<std::int64_t>(2 * (PhaseTimer::kMaxDepth + 3) - 1) * 1'000'000);
  t.leave(t0 + 1s);  // one leave too many: ignored
  EXPECT_EQ(s.calls + c.calls, PhaseTimer::kMaxDepth);
}

// Random nestings against a reference that charges each millisecond tick to the phase on
// top of a stack of its own.
TEST(PhaseTimer, RandomNestingMatchesAReference) {
  std::mt19937 rng(7);
  PhaseTimer t(t0);
  std::vector<Phase> stack;
  std::vector<std::int64_t> ref(kPhaseCount, 0);
  std::vector<std::uint64_t> calls(kPhaseCount, 0);
  std::int64_t outside = 0;
  auto at = t0;
  for (int step = 0; step < 5000; ++step) {
    const auto dt = std::chrono::microseconds(rng() % 3000);
    if (stack.empty()) outside += dt.count() * 1000;
    else ref[static_cast<std::size_t>(stack.back())] += dt.count() * 1000;
    at += dt;
    if (!stack.empty() && (stack.size() >= 8 || rng() % 2)) {
      ++calls[static_cast<std::size_t>(stack.back())];
      stack.pop_back();
      t.leave(at);
    } else {
      const auto p = static_cast<Phase>(rng() % kPhaseCount);
      stack.push_back(p);
      t.enter(p, at);
    }
  }
  while (!stack.empty()) {
    ++calls[static_cast<std::size_t>(stack.back())];
    stack.pop_back();
    t.leave(at);
  }
  std::int64_t sum = 0;
  for (std::size_t i = 0; i < kPhaseCount; ++i) {
    const auto& s = t.stats(static_cast<Phase>(i));
    EXPECT_EQ(s.total_ns, ref[i]) << phase_name(static_cast<Phase>(i));
    EXPECT_EQ(s.calls, calls[i]) << phase_name(static_cast<Phase>(i));
    std::uint64_t in_buckets = 0;
    for (auto n : s.log2_us) in_buckets += n;
    EXPECT_EQ(in_buckets, s.calls);
    sum += s.total_ns;
  }
  EXPECT_DOUBLE_EQ(t.unattributed_seconds(), static_cast<double>(outside) * 1e-9);
  EXPECT_EQ(sum + outside, std::chrono::duration_cast<std::chrono::nanoseconds>(at - t0).count());
}

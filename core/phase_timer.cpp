#include "core/phase_timer.h"

#include <algorithm>
#include <bit>

namespace petdaq {

std::size_t PhaseTimer::bucket_of(std::int64_t ns) {
  const auto us = static_cast<std::uint64_t>(std::max<std::int64_t>(0, ns) / 1000);
  // us = 0 -> 0; [2^(k-1), 2^k) -> k.
  return std::min<std::size_t>(kBuckets - 1, static_cast<std::size_t>(std::bit_width(us)));
}

void PhaseTimer::charge(Clock::time_point now) {
  const std::int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now - last_).count();
  last_ = now;
  if (depth_ == 0) {
    outside_ns_ += ns;
    return;
  }
  Frame& top = stack_[depth_ - 1];
  top.exclusive_ns += ns;
  stats_[static_cast<std::size_t>(top.phase)].total_ns += ns;
}

void PhaseTimer::enter(Phase p, Clock::time_point now) {
  if (depth_ == kMaxDepth) {
    ++overflow_;
    return;
  }
  charge(now);
  stack_[depth_++] = {p, 0};
}

void PhaseTimer::leave(Clock::time_point now) {
  if (overflow_ > 0) {
    --overflow_;
    return;
  }
  if (depth_ == 0) return;
  charge(now);
  const Frame f = stack_[--depth_];
  Stats& s = stats_[static_cast<std::size_t>(f.phase)];
  ++s.calls;
  s.max_ns = std::max(s.max_ns, f.exclusive_ns);
  s.interval_max_ns = std::max(s.interval_max_ns, f.exclusive_ns);
  ++s.log2_us[bucket_of(f.exclusive_ns)];
}

double PhaseTimer::wall_seconds(Clock::time_point now) const {
  return std::chrono::duration<double>(now - start_).count();
}

void PhaseTimer::take_interval_max() {
  for (Stats& s : stats_) s.interval_max_ns = 0;
}

}  // namespace petdaq

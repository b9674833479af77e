// Where one thread's wall time goes, phase by phase (docs/daemon.md, "Worker phases"): the
// daemon's worker thread marks each phase of its loop, the backend marks its host waits.
// Phases nest; each is charged its *exclusive* time (a submit that waits on the device is
// charged to `submit` for its own work and to `count_wait` for the wait), so the phases of a
// thread add up to its wall time. Per phase: total seconds, calls, the longest call (over the
// whole run and since the last take_interval_max()) and a histogram of call durations in
// log2 µs buckets. One steady_clock read per enter and per leave, nothing per frame; no
// allocation; one thread only (readers on the same thread, or after it was joined).
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace petdaq {

// id, published name. The meaning of each is in docs/daemon.md ("Worker phases").
#define PETDAQ_PHASES(X)                                                            \
  X(wait_chunk, "wait_chunk") X(chunk_scan, "chunk_scan") X(raw_capture, "raw_capture") \
  X(slicer_push, "slicer_push") X(backend_stage, "backend_stage")                   \
  X(release, "release") X(staged_poll, "staged_poll") X(stage_wait, "stage_wait")   \
  X(slicer_poll, "slicer_poll") X(latency, "latency") X(submit, "submit")           \
  X(count_wait, "count_wait") X(partition_wait, "partition_wait")                   \
  X(collect, "collect") X(collect_wait, "collect_wait")                             \
  X(copy_out_wait, "copy_out_wait") X(publish, "publish")                           \
  X(histograms_copy, "histograms_copy") X(histograms, "histograms") X(rates, "rates") \
  X(tick, "tick") X(reload, "reload") X(finish, "finish") X(run_end, "run_end")     \
  X(loop, "loop")

enum class Phase : std::uint8_t {
#define PETDAQ_PHASE_ENUM(id, name) id,
  PETDAQ_PHASES(PETDAQ_PHASE_ENUM)
#undef PETDAQ_PHASE_ENUM
};

inline constexpr std::size_t kPhaseCount = 0
#define PETDAQ_PHASE_COUNT(id, name) +1
    PETDAQ_PHASES(PETDAQ_PHASE_COUNT)
#undef PETDAQ_PHASE_COUNT
    ;

constexpr std::string_view phase_name(Phase p) {
  constexpr std::string_view names[] = {
#define PETDAQ_PHASE_NAME(id, name) name,
      PETDAQ_PHASES(PETDAQ_PHASE_NAME)
#undef PETDAQ_PHASE_NAME
  };
  return names[static_cast<std::size_t>(p)];
}

class PhaseTimer {
 public:
  using Clock = std::chrono::steady_clock;
  // Bucket 0: calls under 1 µs; bucket k: [2^(k-1), 2^k) µs; the last also takes every
  // longer call (2^(kBuckets-2) µs = 8.4 s and up).
  static constexpr std::size_t kBuckets = 25;
  // Deeper nesting than this is charged to the phase at this depth.
  static constexpr std::size_t kMaxDepth = 16;

  struct Stats {
    std::int64_t total_ns = 0;
    std::uint64_t calls = 0;
    std::int64_t max_ns = 0;           // longest call since construction
    std::int64_t interval_max_ns = 0;  // longest call since the last take_interval_max()
    std::array<std::uint64_t, kBuckets> log2_us{};
  };

  explicit PhaseTimer(Clock::time_point start = Clock::now()) : start_(start), last_(start) {}

  void enter(Phase p, Clock::time_point now = Clock::now());
  // Ends the phase entered last.
  void leave(Clock::time_point now = Clock::now());

  const Stats& stats(Phase p) const { return stats_[static_cast<std::size_t>(p)]; }
  // Wall time since construction, and the part of it outside every phase.
  double wall_seconds(Clock::time_point now = Clock::now()) const;
  double unattributed_seconds() const { return static_cast<double>(outside_ns_) * 1e-9; }
  // Starts a new interval for Stats::interval_max_ns (once per published document).
  void take_interval_max();

  static std::size_t bucket_of(std::int64_t ns);

 private:
  struct Frame {
    Phase phase;
    std::int64_t exclusive_ns;
  };
  void charge(Clock::time_point now);

  Clock::time_point start_;
  Clock::time_point last_;
  std::array<Frame, kMaxDepth> stack_{};
  std::size_t depth_ = 0;
  std::size_t overflow_ = 0;  // enters beyond kMaxDepth not yet left
  std::int64_t outside_ns_ = 0;
  std::array<Stats, kPhaseCount> stats_{};
};

// Enters a phase for its scope; does nothing without a timer.
class PhaseScope {
 public:
  PhaseScope(PhaseTimer* timer, Phase p) : timer_(timer) {
    if (timer_) timer_->enter(p);
  }
  ~PhaseScope() {
    if (timer_) timer_->leave();
  }
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  PhaseTimer* timer_;
};

}  // namespace petdaq

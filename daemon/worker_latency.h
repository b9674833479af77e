// The worker's latency room (docs/daemon.md, "Ring, worker, backend"; `latency_ms` of
// `rates`): per ring chunk pushed to the slicer, when it arrived and the latest raw time in
// it, until the published horizon passes that time; then the chunk's latency is a sample.
// Fixed capacity (nothing allocates after construction).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/stream_limits.h"
#include "daemon/rates.h"

namespace petdaq::daemon {

class ChunkLatency {
 public:
  using Clock = std::chrono::steady_clock;

  // `capacity`: chunks followed at once (the worker keeps four per ring chunk).
  explicit ChunkLatency(std::size_t capacity) : pending_(capacity) {}

  // A chunk that arrived at `rx` with frames up to raw time `last_time` went to the slicer.
  void pushed(Clock::time_point rx, std::uint64_t last_time) {
    if (count_ == pending_.size()) {
      // More chunks in the slicer than entries (it is far behind): the newest joins the last
      // entry, whose older arrival time makes its sample an upper bound.
      Pending& last = pending_[count_ - 1];
      last.last_time = std::max(last.last_time, last_time);
    } else {
      pending_[count_++] = {rx, last_time};
    }
  }
  // Samples, at `now`, the chunks the published `horizon` has passed (every chunk when
  // `all`: a run ended). A latest time past the time-jump limit is a wild timestamp the
  // slicer drops: the horizon will never pass it, so it is sampled now.
  void retire(Clock::time_point now, std::uint64_t horizon, std::uint64_t max_future_ticks,
              bool all) {
    const auto wild = [&](std::uint64_t t) {
      return horizon > 0 && is_time_jump(t, horizon, max_future_ticks);
    };
    std::size_t kept = 0;
    for (std::size_t i = 0; i < count_; ++i) {
      if (all || pending_[i].last_time < horizon || wild(pending_[i].last_time))
        window_.add(std::chrono::duration<double, std::milli>(now - pending_[i].rx).count());
      else
        pending_[kept++] = pending_[i];
    }
    count_ = kept;
  }
  // Chunks not yet sampled.
  std::size_t pending() const { return count_; }
  // The percentiles of the samples since the last call.
  LatencyWindow::Stats take() { return window_.take(); }

 private:
  struct Pending {
    Clock::time_point rx;
    std::uint64_t last_time;
  };
  std::vector<Pending> pending_;
  std::size_t count_ = 0;
  LatencyWindow window_;
};

}  // namespace petdaq::daemon

// The first frames of a run (DESIGN section 6): their median time fixes the reference for
// time jumps before the run has a horizon, so that one corrupt first timestamp does not
// become the reference.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>

#include "core/stream_limits.h"
#include "proto/frame.h"

namespace petdaq {

class WarmupFrames {
 public:
  using Clock = std::chrono::steady_clock;
  // Few, so that they span far less than stream.max_future_ps at any real rate.
  static constexpr std::size_t kFrames = 64;

  std::size_t count() const { return count_; }
  bool full() const { return count_ == kFrames; }
  // Wall clock of the run's start or of its first frame (max_slice_ms after it, the warm-up
  // ends with the frames it has).
  Clock::time_point since() const { return since_; }
  void restart(Clock::time_point now) {
    count_ = 0;
    since_ = now;
  }

  // Adds a frame (the caller checks full() first).
  void add(const RawFrame& f, std::uint64_t key, Clock::time_point now) {
    if (count_ == 0) since_ = now;
    frames_[count_] = f;
    keys_[count_++] = key;
  }

  // The upper median of the keys (0: none).
  std::uint64_t median() const {
    if (count_ == 0) return 0;
    std::array<std::uint64_t, kFrames> keys = keys_;
    std::nth_element(keys.begin(), keys.begin() + count_ / 2, keys.begin() + count_);
    return keys[count_ / 2];
  }

  // Keeps, in order at frames(), the frames within max_future of the median, calling
  // on_kept(frame, key) for each; returns how many it kept. The rest are time jumps. Empties
  // the warm-up (the frames stay readable until the next add()).
  template <class OnKept>
  std::size_t end(std::uint64_t max_future_ticks, OnKept&& on_kept) {
    const std::uint64_t m = median();
    const std::uint64_t hi = time_jump_limit(m, max_future_ticks);
    const std::uint64_t lo = far_back_limit(m, max_future_ticks);
    std::size_t kept = 0;
    for (std::size_t i = 0; i < count_; ++i) {
      const RawFrame f = frames_[i];
      const std::uint64_t key = keys_[i];
      if (key > hi || key < lo) continue;
      on_kept(f, key);
      frames_[kept++] = f;
    }
    count_ = 0;
    return kept;
  }
  RawFrame* frames() { return frames_.data(); }

 private:
  std::array<RawFrame, kFrames> frames_{};
  std::array<std::uint64_t, kFrames> keys_{};
  std::size_t count_ = 0;
  Clock::time_point since_{};
};

}  // namespace petdaq

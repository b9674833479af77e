// When each datagram may leave. Three modes: as fast as possible; a fixed frame rate (a token
// bucket on the monotonic clock, so short stalls are caught up within the bucket's depth
// and longer ones show up as "behind"); or the input's own time line scaled by a speed factor.
// Waiting is a sleep to an absolute deadline, never a spin.
#pragma once

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace petdaq::replay {

using Clock = std::chrono::steady_clock;

inline void sleep_until(Clock::time_point t) {
  // steady_clock is CLOCK_MONOTONIC on Linux.
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch());
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(ns.count() / 1'000'000'000);
  ts.tv_nsec = static_cast<long>(ns.count() % 1'000'000'000);
  while (::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) != 0) {
  }
}

enum class PaceMode { max, rate, speed };

class Pacer {
 public:
  // rate: frames per second; bucket_frames: how many frames may go out back to back after a
  // stall. speed: input seconds per wall second; input time is given in ns.
  static Pacer max() { return Pacer(PaceMode::max); }
  static Pacer rate(double frames_per_s, double bucket_frames) {
    Pacer p(PaceMode::rate);
    p.frames_per_s_ = frames_per_s;
    p.bucket_frames_ = bucket_frames;
    return p;
  }
  static Pacer speed(double factor) {
    Pacer p(PaceMode::speed);
    p.speed_ = factor;
    return p;
  }

  PaceMode mode() const { return mode_; }

  // Starts the clock; the bucket starts empty so the first second is not a burst.
  void start(Clock::time_point now) {
    start_ = now;
    last_refill_ = now;
    tokens_ = 0;
  }

  // The earliest time a datagram of `frames` frames whose input time is `input_ns` (from the
  // start of the input) may be sent. Call commit() once it is sent (or queued).
  Clock::time_point due(std::uint32_t frames, std::int64_t input_ns, Clock::time_point now) {
    switch (mode_) {
      case PaceMode::max:
        return now;
      case PaceMode::rate: {
        refill(now);
        if (tokens_ >= frames) return now;
        const double wait_s = (frames - tokens_) / frames_per_s_;
        return now + std::chrono::nanoseconds(static_cast<std::int64_t>(wait_s * 1e9) + 1);
      }
      case PaceMode::speed:
        return start_ + std::chrono::nanoseconds(
                            static_cast<std::int64_t>(static_cast<double>(input_ns) / speed_));
    }
    return now;
  }

  // The datagram goes out at `now`; `scheduled` is what due() said.
  void commit(std::uint32_t frames, Clock::time_point scheduled, Clock::time_point now) {
    frames_ += frames;
    double behind_s = 0;
    if (mode_ == PaceMode::rate) {
      refill(now);
      tokens_ -= frames;
      // How far the frames sent so far trail the ideal line frames = rate * elapsed.
      const double elapsed_s = std::chrono::duration<double>(now - start_).count();
      behind_s = elapsed_s - static_cast<double>(frames_) / frames_per_s_;
    } else if (mode_ == PaceMode::speed) {
      behind_s = std::chrono::duration<double>(now - scheduled).count();
    }
    behind_s = std::max(0.0, behind_s);
    behind_last_s_ = behind_s;
    behind_max_s_ = std::max(behind_max_s_, behind_s);
  }

  double behind_max_s() const { return behind_max_s_; }
  double behind_last_s() const { return behind_last_s_; }

 private:
  explicit Pacer(PaceMode m) : mode_(m) {}

  void refill(Clock::time_point now) {
    const double dt_s = std::chrono::duration<double>(now - last_refill_).count();
    last_refill_ = now;
    tokens_ = std::min(bucket_frames_, tokens_ + dt_s * frames_per_s_);
  }

  PaceMode mode_;
  double frames_per_s_ = 0;
  double bucket_frames_ = 0;
  double speed_ = 1;
  double tokens_ = 0;
  std::uint64_t frames_ = 0;
  Clock::time_point start_{};
  Clock::time_point last_refill_{};
  double behind_max_s_ = 0;
  double behind_last_s_ = 0;
};

}  // namespace petdaq::replay

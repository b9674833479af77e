// How much acquisition time a receiving socket's losses may still make dead for every board
// (DESIGN section 6, "Losses at a socket"): input.loss_dead_fraction of the acquisition time
// that passes, up to one second's share, full at the start. Receivers that cannot keep up at
// all lose datagrams all along; making all of that dead for every board would cost the other
// boards far more than the datagrams lost, so past the budget a loss stays its socket's
// boards'.
#pragma once

#include <algorithm>
#include <cstdint>

namespace petdaq::daemon {

class LossBudget {
 public:
  LossBudget(double fraction, double tick_ps)
      : fraction_(fraction), cap_(fraction * 1e12 / tick_ps), ticks_(cap_) {}

  // The acquisition has reached raw time `now`: the budget grows by the fraction of the
  // time since the last call, up to its cap. A clock that went back (a new run) counts on
  // from there.
  void advance(std::uint64_t now) {
    if (started_ && now > at_)
      ticks_ = std::min(cap_, ticks_ + fraction_ * static_cast<double>(now - at_));
    at_ = now;
    started_ = true;
  }
  // May a stretch of `ticks` be made dead?
  bool allows(std::uint64_t ticks) const {
    return fraction_ > 0 && static_cast<double>(ticks) <= ticks_;
  }
  void spend(std::uint64_t ticks) { ticks_ = std::max(0.0, ticks_ - static_cast<double>(ticks)); }
  double ticks() const { return ticks_; }

 private:
  double fraction_;
  double cap_;
  double ticks_;
  std::uint64_t at_ = 0;
  bool started_ = false;
};

}  // namespace petdaq::daemon

// What becomes of a receiving socket's loss (DESIGN section 6, "Losses at a socket";
// docs/daemon.md): the stretch of acquisition time its frames may have held, and the rule by
// which that stretch becomes dead time for every board, within the budget of
// input.loss_dead_fraction and while the slicer has room. The worker applies it to each loss
// a chunk records (Worker::note_loss); its counters, log line and messages stay there.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/slicer.h"
#include "daemon/dead_time.h"
#include "daemon/loss_budget.h"

namespace petdaq::daemon {

// [begin, end) in raw ticks; `known` false: where the stretch begins is not known.
struct TimeStretch {
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  bool known = true;
};

// A loss's frames lie between the receiver's latest frame time before them (`from`; 0: none
// known, then `to`) and the earliest of the datagram that showed the loss (`to`), each give or
// take the disorder margin `disorder` (stream.max_disorder_ps in ticks): [from − disorder,
// to + disorder + 1), held within the clock's range. A `from` past `to` by more than the
// margin (the receiver's latest time was a wild time stamp) says nothing of where the lost
// frames begin: the stretch is not known.
inline TimeStretch loss_stretch(std::uint64_t from, std::uint64_t to, std::uint64_t disorder) {
  if (from > to && from - to > disorder) return {0, 0, false};
  const std::uint64_t first = from != 0 ? std::min(from, to) : to;
  const std::uint64_t top = ~std::uint64_t{0};
  return {first > disorder ? first - disorder : 0,
          to > top - disorder - 1 ? top : to + disorder + 1};
}

enum class LossFate {
  dead,          // dead intervals made: the caller publishes them
  dead_already,  // the slicer holds it, and it was all dead time already
  unconverted,   // past the budget, or no room in the slicer: its socket's boards' loss
};

struct LossConversion {
  LossFate fate = LossFate::unconverted;
  TimeStretch held;  // what the slicer holds for it (dead or dead_already)
};

// The budget grows to the acquisition's raw time `now` (Slicer::latest_time()); a stretch it
// allows becomes a dead range of the slicer (frames of it already staged are dropped as the
// backends convert them) and the parts of that range not dead yet become dead intervals
// (frames of it that come later are dropped). The budget pays for the range the slicer holds,
// which may be wider where it met another. A stretch not known, one past the budget, or one
// the slicer refuses (no room, or all of it below the published horizon), is left as it is.
inline LossConversion convert_loss(TimeStretch stretch, std::uint64_t now, LossBudget& budget,
                                   Slicer& slicer, DeadTime& dead) {
  budget.advance(now);
  if (!stretch.known || !budget.allows(stretch.end - stretch.begin)) return {};
  const auto [begin, end] = slicer.add_dead_range(stretch.begin, stretch.end);
  if (end <= begin) return {};
  budget.spend(end - begin);
  const LossFate fate = dead.add_loss(begin, end) == 0 ? LossFate::dead_already : LossFate::dead;
  return {fate, {begin, end}};
}

}  // namespace petdaq::daemon

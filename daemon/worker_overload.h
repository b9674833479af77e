// The worker's overload room (DESIGN section 6, "Overload"; docs/daemon.md, "Overload: dead
// time"): the dead time it sheds, whether a lagging board was already released for the ring
// backlog at hand, and the `deadtime` messages' ids.
#pragma once

#include <cstdint>
#include <memory>

#include "daemon/dead_time.h"

namespace petdaq::daemon {

struct Overload {
  std::unique_ptr<DeadTime> dead;
  // A board was declared lagging for this ring backlog: a backlog that remains is shed
  // (cleared once the ring is at or below the low mark).
  bool ring_release_used = false;
  std::uint64_t message_id = 0;  // of `deadtime`
};

}  // namespace petdaq::daemon

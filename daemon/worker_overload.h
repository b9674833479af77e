// The worker's overload room (DESIGN section 6, "Overload"; docs/daemon.md, "Overload: dead
// time"): the dead time it sheds and the `deadtime` messages' ids.
#pragma once

#include <cstdint>
#include <memory>

#include "daemon/dead_time.h"

namespace petdaq::daemon {

struct Overload {
  std::unique_ptr<DeadTime> dead;
  std::uint64_t message_id = 0;  // of `deadtime`
  bool lag_released = false;     // a board was declared lagging for this ring backlog
};

}  // namespace petdaq::daemon

// The worker's overload room (DESIGN section 6, "Overload"; docs/daemon.md, "Overload: dead
// time"): the dead time it sheds and the `deadtime` messages' ids.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "daemon/dead_time.h"

namespace petdaq::daemon {

struct Overload {
  std::unique_ptr<DeadTime> dead;
  std::uint64_t message_id = 0;  // of `deadtime`
  bool lag_released = false;     // a board was declared lagging for this ring backlog
};

// Whose is a ring backlog of `in_use` chunks, `waiting` of them sealed and waiting for the
// worker? A board's that holds the horizon when most of the chunks wait for that horizon (the
// CPU backend reads its slices' frames where they lie in the ring); the worker's when most
// wait for it: an overload, which releasing a board would not relieve and would make that
// board alone lose its frames behind the horizon.
inline bool backlog_waits_for_horizon(std::size_t in_use, std::size_t waiting) {
  return 2 * waiting < in_use;
}

}  // namespace petdaq::daemon

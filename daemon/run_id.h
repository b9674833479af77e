// The first run_id of a daemon's life: its start time in microseconds since 1970, so a
// run_id names one run across restarts (the runs of one life count up from it).
#pragma once

#include <chrono>
#include <cstdint>

namespace petdaq::daemon {

inline std::uint64_t first_run_id() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

}  // namespace petdaq::daemon

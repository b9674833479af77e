// How an acquisition is cut into blocks of simulated time, and the bounds that ordering
// frames across blocks relies on; worked out once from the settings and the options.
#pragma once

#include <cstdint>

#include "core/settings.h"
#include "tools/sim/detector.h"
#include "tools/sim/sim.h"

namespace petdaq::sim {

struct Plan {
  double tick_ps = 1;
  std::uint64_t origin_ticks = 0;
  std::uint64_t block_ticks = 1;
  std::uint64_t total_ticks = 0;  // 0: open-ended (stop by frame count)
  double decay_mean_ps = 0;       // mean time between decays (inf: none)
  double background_mean_ps = 0;
  std::uint64_t disorder_ticks = 0;
  std::uint64_t guard_ticks = 0;  // how far a frame's key can fall before its event's block

  // Blocks to generate (the last one may be short); unbounded when the frame count ends it.
  std::uint64_t block_limit() const;
};

// Whether a water cylinder surrounds the source (`automatic`: for a cylinder source).
bool has_phantom(const SimOptions& options);

// Checks the options against the detector (std::invalid_argument naming the option) and
// makes the plan.
Plan make_plan(const Settings& settings, const SimOptions& options, const DetectorModel& model);

}  // namespace petdaq::sim

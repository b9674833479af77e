// truth.json: how an acquisition was made and what a perfect sorter could see in it
// (docs/simulator.md).
#pragma once

#include <filesystem>

#include "core/settings.h"
#include "tools/sim/sim.h"

namespace petdaq::sim {

void write_truth_json(const std::filesystem::path& file, const SimSummary& s,
                      const SimOptions& o, const Settings& settings);

}  // namespace petdaq::sim

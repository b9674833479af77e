// petdaq-top's crystals view: per-DU singles and hot/dead crystals from the `histograms`
// message (DESIGN section 7), by the rule of core/crystal_health.h over the accepted singles
// since the run started.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/crystal_health.h"
#include "core/histograms.h"

namespace petdaq::top {

struct CrystalView {
  std::uint64_t run_id = 0;
  std::uint64_t created_unix_ns = 0;
  std::vector<DuSingles> dus;  // [bdm * du_per_bdm + du]
  std::vector<FlaggedCrystal> flagged;
};

// Reads the geometry from the message's JSON document and the crystal_singles histogram;
// throws HistogramFileError or std::runtime_error on a message it cannot use.
CrystalView analyse_crystals(const HistogramFile& histograms);

}  // namespace petdaq::top

// petdaq-top's crystals view: per-DU singles and hot/dead crystals from the `histograms`
// message (DESIGN section 7). A crystal is flagged when its accepted singles since the run
// started are far from its DU's median: more than kHotDeadFactor times the median (hot), or
// less than the median divided by it (dead or weak). DUs whose median is below
// kMinMedianCounts are not judged: too few counts to tell noise from a fault.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/histograms.h"

namespace petdaq::top {

inline constexpr double kHotDeadFactor = 3.0;
inline constexpr double kMinMedianCounts = 20.0;

struct DuSingles {
  std::uint32_t bdm = 0;
  std::uint32_t du = 0;
  std::uint64_t singles = 0;      // accepted, since the run started
  double median_crystal = 0;      // median over the DU's crystals
  std::uint32_t hot = 0;
  std::uint32_t dead = 0;
  bool judged = false;            // median >= kMinMedianCounts
};

struct FlaggedCrystal {
  std::uint32_t crystal = 0;  // global id
  std::uint32_t bdm = 0;
  std::uint32_t du = 0;
  std::uint32_t local = 0;
  std::uint64_t singles = 0;
  double median = 0;  // of its DU
  bool hot = false;   // else dead or weak
};

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

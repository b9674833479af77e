// Hot and dead crystals: one rule for petdaq-top's crystals view and petdaqd's alarms. A
// crystal is flagged when its accepted singles are far from its DU's median: more than
// `factor` times the median (hot), or less than the median divided by it (dead or weak). A
// DU whose median is below `min_median` is not judged: too few counts to tell noise from a
// fault.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/geometry.h"

namespace petdaq {

inline constexpr double kHotDeadFactor = 3.0;
inline constexpr double kMinMedianCounts = 20.0;

struct DuSingles {
  std::uint32_t bdm = 0;
  std::uint32_t du = 0;
  std::uint64_t singles = 0;  // accepted
  double median_crystal = 0;  // median over the DU's crystals
  std::uint32_t hot = 0;
  std::uint32_t dead = 0;
  bool judged = false;  // median >= min_median
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

struct CrystalHealth {
  std::vector<DuSingles> dus;  // [bdm * du_per_bdm + du]
  std::vector<FlaggedCrystal> flagged;
  std::uint32_t hot = 0;
  std::uint32_t dead = 0;
};

// `singles(c)`: the accepted singles of global crystal c.
CrystalHealth judge_crystals(const Geometry& g,
                             const std::function<std::uint64_t(std::uint32_t)>& singles,
                             double factor = kHotDeadFactor,
                             double min_median = kMinMedianCounts);

}  // namespace petdaq

// The signed time of flight of a coincidence (DESIGN section 5, "Signed Δt"): one convention
// for every histogram, report, export and image.
//
//   signed Δt = t(lower global crystal id) − t(higher global crystal id)
//
// A record stores the earlier single first (dt = time_b − time_a ≥ 0), so its sign says only
// which single came first; ordering by crystal id instead makes a positive Δt mean "the
// annihilation was nearer the higher-id crystal", which is what a TOF histogram, a CTR fit and
// a TOF reconstruction need. For a record whose two crystals are equal, signed Δt = −dt.
#pragma once

#include <cstdint>

#include "proto/host_device.h"
#include "proto/records.h"

namespace petdaq {

// Crystal id of the lower and of the higher end, and the signed Δt in ticks.
PETDAQ_HD std::uint32_t tof_lower_crystal(const CoincRecord& r) {
  return r.crystal_a <= r.crystal_b ? r.crystal_a : r.crystal_b;
}
PETDAQ_HD std::uint32_t tof_higher_crystal(const CoincRecord& r) {
  return r.crystal_a <= r.crystal_b ? r.crystal_b : r.crystal_a;
}
// A time difference `dt` of r taken in arrival order (time_b − time_a, or for a delayed record
// time_b − time_a − D), signed by crystal order instead.
PETDAQ_HD std::int64_t sign_by_crystal_order(const CoincRecord& r, std::int64_t dt) {
  return r.crystal_a <= r.crystal_b ? -dt : dt;
}
PETDAQ_HD std::int64_t signed_dt_ticks(const CoincRecord& r) {
  return sign_by_crystal_order(r, r.dt);
}

}  // namespace petdaq

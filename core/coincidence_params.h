// The coincidence window rules of DESIGN section 5 in ticks (window edge, delayed window,
// when a window is resolved, good pairs), from the settings once: compiled for the host
// and the device, shared by core/coincidence.cpp, core/window_policy.h and the CUDA kernels.
#pragma once

#include <cstdint>

#include "core/geometry.h"
#include "core/settings.h"
#include "proto/host_device.h"

namespace petdaq {

struct CoincidenceParams {
  std::uint64_t window_ticks = 0;          // W
  bool closed = true;                      // window_edge: closed = t_open + W is inside
  WindowMode mode = WindowMode::first_open;
  Policy policy = Policy::kill_multiples;
  std::uint32_t min_sector_difference = 0;
  bool delayed = false;
  std::uint64_t delayed_offset_ticks = 0;  // D
  std::uint32_t crystals_per_ring = 1;
  std::uint32_t crystals_per_sector = 1;   // crystals of one BDM across the ring
  std::uint32_t sectors = 1;               // bdm_transaxial

  static CoincidenceParams from(const Settings& s);

  // Is a single at time t inside the window opened at t_open (t >= t_open)?
  PETDAQ_HD bool within(std::uint64_t t_open, std::uint64_t t) const {
    const std::uint64_t d = t - t_open;
    return closed ? d <= window_ticks : d < window_ticks;
  }
  // Is t inside the delayed window [t_open + D, t_open + D + W] (same edge rule)?
  PETDAQ_HD bool within_delayed(std::uint64_t t_open, std::uint64_t t) const {
    const std::uint64_t start = t_open + delayed_offset_ticks;
    return t >= start && within(start, t);
  }
  // How far after its opener a window's outcome can still change.
  PETDAQ_HD std::uint64_t reach_ticks() const {
    return delayed ? delayed_offset_ticks + window_ticks : window_ticks;
  }
  // A window opened at t_open is resolved when t_open + reach < horizon: every single not
  // yet seen has time >= horizon, so none can join it. The same rule on every backend
  // fixes where slices end.
  PETDAQ_HD bool resolvable(std::uint64_t t_open, std::uint64_t horizon) const {
    return t_open + reach_ticks() < horizon;
  }
  PETDAQ_HD bool good_pair(std::uint32_t crystal_a, std::uint32_t crystal_b) const {
    if (crystal_a == crystal_b) return false;
    if (min_sector_difference == 0) return true;
    const std::uint32_t sa = (crystal_a % crystals_per_ring) / crystals_per_sector;
    const std::uint32_t sb = (crystal_b % crystals_per_ring) / crystals_per_sector;
    return sector_distance(sa, sb, sectors) >= min_sector_difference;
  }
};

}  // namespace petdaq

// The coincidence window rules of DESIGN section 5 in ticks (window edge, delayed window,
// when a window is resolved, good pairs), from the settings once: compiled for the host
// and the device, shared by core/coincidence.cpp, core/window_policy.h and the CUDA kernels.
#pragma once

#include <cstdint>

#include "core/coincidence_modes.h"
#include "core/geometry.h"
#include "proto/host_device.h"

namespace petdaq {

struct Settings;

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

  // The first time past a window that starts at t_start (the closed window holds
  // t_start + W itself). Saturates instead of wrapping; times are below 2^63 (convert_frame
  // rejects the others), so a saturated end admits them all.
  PETDAQ_HD std::uint64_t window_past(std::uint64_t t_start) const {
    const std::uint64_t reach = window_ticks + (closed ? 1 : 0);
    return t_start > UINT64_MAX - reach ? UINT64_MAX : t_start + reach;
  }
  // Is a single at time t inside the window opened at t_open?
  PETDAQ_HD bool within(std::uint64_t t_open, std::uint64_t t) const {
    return t >= t_open && t < window_past(t_open);
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

// The coincidence engine's contract (DESIGN section 5), shared by the CPU reference and the
// GPU backend. The CPU implementation is core/coincidence.cpp; the per-window policy
// decisions live in core/window_policy.h so both backends compile the same code.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/geometry.h"
#include "core/settings.h"
#include "proto/records.h"

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

// A fixed-capacity output array (no allocation in the data path). Records past the
// capacity are counted in `overflow` and dropped; the first `capacity` records, in order,
// are kept.
struct RecordBuffer {
  CoincRecord* data = nullptr;
  std::size_t capacity = 0;
  std::size_t size = 0;
  std::uint64_t overflow = 0;

  void push(const CoincRecord& r) {
    if (size < capacity)
      data[size++] = r;
    else
      ++overflow;
  }
  void clear() {
    size = 0;
    overflow = 0;
  }
};

struct CoincidenceCounts {
  std::uint64_t prompts = 0;
  std::uint64_t delayed = 0;
  std::uint64_t multiples = 0;          // prompt windows with k >= 3
  std::uint64_t delayed_multiples = 0;  // delayed windows with k >= 3
};

// Resolves the windows of `singles` (sorted in the order of DESIGN section 5, starting at a
// window-chain start: the first single opens a window) whose outcome can no longer change:
// all of them when `final`, otherwise those with resolvable(t_open, horizon). Every single
// not yet seen has time >= horizon. Appends the prompt and delayed records in their output
// order, adds to `counts`, and returns the index of the first single to carry over to the
// next slice (n when none): the first unresolved opener.
std::size_t find_coincidences(const Single* singles, std::size_t n, const CoincidenceParams& p,
                              std::uint64_t horizon, bool final, RecordBuffer& prompts,
                              RecordBuffer& delayed, CoincidenceCounts& counts);

// The two halves of find_coincidences(), for a caller that walks pieces of the singles on
// several threads (core/parallel_engine.h). resolvable_end(): the index of the first opener
// that may not be resolved (n when final). walk_windows(): walks the openers before
// `resolved_end`, the first single opening a window, reading the singles up to n for the
// windows; returns the first opener at or after `resolved_end` (n when none).
std::size_t resolvable_end(const Single* singles, std::size_t n, const CoincidenceParams& p,
                           std::uint64_t horizon, bool final);
std::size_t walk_windows(const Single* singles, std::size_t n, const CoincidenceParams& p,
                         std::size_t resolved_end, RecordBuffer& prompts, RecordBuffer& delayed,
                         CoincidenceCounts& counts);

// Sorts singles into the (time, crystal, energy) order. `scratch` has room for n singles.
// Fast on the usual input (a few nearly-ordered runs), correct on any order.
void sort_singles(Single* singles, std::size_t n, Single* scratch);

}  // namespace petdaq

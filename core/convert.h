// Raw frame -> single (DESIGN sections 2-4). convert_frame() is the one definition of the
// per-frame conversion: the CPU stage calls it here, the GPU backend compiles the same
// function into its fused convert kernel. No STL inside, raw pointers to the tables.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/counters.h"
#include "core/geometry.h"
#include "proto/frame.h"
#include "proto/records.h"

namespace petdaq {

struct Settings;
struct Calibration;

// Outcome of one frame, in the order the checks are made (a bad frame is counted under the
// first reason that applies).
enum class FrameStatus : std::uint8_t {
  single = 0,       // converted, inside the energy window
  energy_rejected,  // converted, outside the energy window (or NaN energy)
  bad_marker,
  bad_bdm,
  bad_du,
  bad_position,
  no_crystal,
  bad_time,
};
inline constexpr int kFrameStatusCount = 8;

// The counter each status is counted under.
constexpr Counter counter_of(FrameStatus s) {
  switch (s) {
    case FrameStatus::single: return Counter::single_accepted;
    case FrameStatus::energy_rejected: return Counter::single_energy_rejected;
    case FrameStatus::bad_marker: return Counter::frame_bad_marker;
    case FrameStatus::bad_bdm: return Counter::frame_bad_bdm;
    case FrameStatus::bad_du: return Counter::frame_bad_du;
    case FrameStatus::bad_position: return Counter::frame_bad_position;
    case FrameStatus::no_crystal: return Counter::frame_no_crystal;
    case FrameStatus::bad_time: return Counter::frame_bad_time;
  }
  return Counter::frame_bad_marker;
}

// Everything convert_frame() reads, as plain values and raw pointers (host or device).
struct ConvertTables {
  Geometry geometry;
  const std::uint8_t* position_lut = nullptr;  // [bdm][du][y][x]
  const float* energy_correction = nullptr;    // [bdm][du][local crystal][bins]
  const std::int32_t* time_offsets = nullptr;  // [crystal] or null
  std::uint32_t energy_bins = 1;
  std::uint32_t energy_bin_width = 1;
  bool check_markers = true;
  std::uint8_t head_marker = 0xA;
  std::uint8_t tail_marker = 0x5;
  float low_keV = 0;   // inclusive bounds, rounded to float once
  float high_keV = 0;
};

// Host tables built from settings and a loaded calibration (pointers into `cal`).
ConvertTables make_convert_tables(const Settings& settings, const Calibration& cal);

PETDAQ_HD FrameStatus convert_frame(const std::uint8_t* f, const ConvertTables& t, Single& out) {
  const std::uint8_t head_du = f[frame_offset::head_du];
  const std::uint8_t frac_tail = f[frame_offset::temp_frac_tail];
  if (t.check_markers && ((head_du >> 4) != t.head_marker || (frac_tail & 0x0F) != t.tail_marker))
    return FrameStatus::bad_marker;
  const Geometry& g = t.geometry;
  const std::uint32_t bdm = f[frame_offset::bdm];
  if (bdm >= g.bdm_count()) return FrameStatus::bad_bdm;
  const std::uint32_t du = head_du & 0x0Fu;
  if (du >= g.du_per_bdm()) return FrameStatus::bad_du;
  const std::uint32_t x = f[frame_offset::x];
  const std::uint32_t y = f[frame_offset::y];
  if (x >= g.position_size || y >= g.position_size) return FrameStatus::bad_position;
  const std::uint32_t bdm_du = bdm * g.du_per_bdm() + du;
  const std::uint32_t label =
      t.position_lut[(std::size_t{bdm_du} * g.position_size + y) * g.position_size + x];
  if (label >= g.crystals_per_du()) return FrameStatus::no_crystal;
  const std::uint32_t local = g.local_crystal_of_label(label);
  const std::uint32_t crystal = g.crystal_id(bdm, du, local);

  std::uint64_t time = bytes::load_be64(f + frame_offset::time);
  // Times are signed 64-bit after correction; a raw time past INT64_MAX is a corrupt stamp.
  if (time > 0x7FFF'FFFF'FFFF'FFFFull) return FrameStatus::bad_time;
  if (t.time_offsets) {
    const std::int64_t offset = t.time_offsets[crystal];
    // A correction carrying the time past INT64_MAX is as corrupt as a raw time there.
    if (offset > 0 && time > static_cast<std::uint64_t>(0x7FFF'FFFF'FFFF'FFFFll - offset))
      return FrameStatus::bad_time;
    const std::int64_t corrected = static_cast<std::int64_t>(time) + offset;
    if (corrected < 0) return FrameStatus::bad_time;
    time = static_cast<std::uint64_t>(corrected);
  }

  const std::uint32_t raw = bytes::load_be16(f + frame_offset::energy);
  std::uint32_t bin = raw / t.energy_bin_width;
  if (bin >= t.energy_bins) bin = t.energy_bins - 1;
  const float gain =
      t.energy_correction[(std::size_t{bdm_du} * g.crystals_per_du() + local) * t.energy_bins + bin];
  // + 0.0f turns -0 into +0, so equal energies have equal bits on every backend.
  const float energy = static_cast<float>(raw) * gain + 0.0f;

  out.time = time;
  out.crystal = crystal;
  out.energy = energy;
  // NaN fails both comparisons: outside every window.
  return (energy >= t.low_keV && energy <= t.high_keV) ? FrameStatus::single
                                                       : FrameStatus::energy_rejected;
}

// Converts `n` frames; writes the singles inside the energy window to `out` (capacity n) in
// frame order and returns how many. Counts every status into `delta` and the per-BDM
// accepted / energy-rejected singles into the two arrays (bdm_count entries each).
std::size_t convert_frames(const RawFrame* frames, std::size_t n, const ConvertTables& t,
                           Single* out, CounterDelta& delta, std::uint64_t* bdm_singles,
                           std::uint64_t* bdm_energy_rejected);

}  // namespace petdaq

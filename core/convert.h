// Raw frame -> single (DESIGN sections 2-4). convert_frame() is the one definition of the
// per-frame conversion: the CPU stage calls it here, the GPU backend compiles the same
// function into its fused convert kernel. No STL inside, raw pointers to the tables.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/counters.h"
#include "core/dead_ranges.h"
#include "core/frame_source.h"
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
  // In a range of DeadRanges (core/dead_ranges.h); checked right after the BDM, as the frames
  // of a dead interval are those with a source (DESIGN section 6).
  dead,
};
inline constexpr int kFrameStatusCount = 9;

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
    case FrameStatus::dead: return Counter::stream_dead_frames;
  }
  return Counter::frame_bad_marker;
}

// Division by a divisor fixed at start-up, exact for numerators below 256 (the byte fields of
// a frame): (n * m) >> 16 with m = ceil(2^16 / d). With e = m * d - 2^16 < d, the error term
// n * e / (d * 2^16) stays below 1 / d when n * e < 2^16, which n < 256 and e < d <= 256
// guarantee; for d > 256, n * m < 2^16 and the quotient is 0, as it should be. A multiply
// costs a cycle, a run-time divide tens.
struct ByteDivisor {
  std::uint32_t divisor = 1;
  std::uint32_t multiplier = 1u << 16;

  static constexpr ByteDivisor of(std::uint32_t d) {
    ByteDivisor b;
    b.divisor = d == 0 ? 1 : d;
    b.multiplier = static_cast<std::uint32_t>(((std::uint64_t{1} << 16) + b.divisor - 1) / b.divisor);
    return b;
  }
  PETDAQ_HD std::uint32_t quotient(std::uint32_t n) const { return (n * multiplier) >> 16; }
};

// Everything convert_frame() reads, as plain values and raw pointers (host or device). Build it
// with make_convert_tables(); after changing the geometry or the energy binning of a copy, call
// derive() so the values worked out from them follow.
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
  // The slice's dead ranges (set per slice by the backends; none by default).
  DeadRanges dead;

  // Derived from the above by derive(), so that a frame costs no division. The global crystal
  // id (Geometry::crystal_id) is linear in its parts:
  //   crystal = b_axial * bdm_axial_stride + b_trans * bdm_trans_stride
  //           + d_axial * du_axial_stride + d_trans * crystal_transaxial
  //           + c_axial * crystals_per_ring + c_trans
  // with b_axial = bdm / bdm_transaxial, d_trans = du / du_axial, row = label / crystal_axial.
  std::uint32_t bdm_count = 0;
  std::uint32_t du_per_bdm = 0;
  std::uint32_t crystals_per_du = 0;
  std::uint32_t crystals_per_ring = 0;
  std::uint32_t bdm_axial_stride = 0;  // du_axial * crystal_axial * crystals_per_ring
  std::uint32_t bdm_trans_stride = 0;  // du_transaxial * crystal_transaxial
  std::uint32_t du_axial_stride = 0;   // crystal_axial * crystals_per_ring
  ByteDivisor by_bdm_transaxial;
  ByteDivisor by_du_axial;
  ByteDivisor by_crystal_axial;
  // bin = min(raw / energy_bin_width, energy_bins - 1) as (raw * energy_bin_multiplier) >> 32,
  // m = ceil(2^32 / width): exact for the 16-bit raw value when width <= 2^16 (raw * e < 2^32
  // with e = m * width - 2^32 < width); a wider bin holds every raw value in bin 0 (m = 0).
  std::uint64_t energy_bin_multiplier = 0;

  void derive() {
    const Geometry& g = geometry;
    bdm_count = g.bdm_count();
    du_per_bdm = g.du_per_bdm();
    crystals_per_du = g.crystals_per_du();
    crystals_per_ring = g.crystals_per_ring();
    du_axial_stride = g.crystal_axial * crystals_per_ring;
    bdm_axial_stride = g.du_axial * du_axial_stride;
    bdm_trans_stride = g.du_transaxial * g.crystal_transaxial;
    by_bdm_transaxial = ByteDivisor::of(g.bdm_transaxial);
    by_du_axial = ByteDivisor::of(g.du_axial);
    by_crystal_axial = ByteDivisor::of(g.crystal_axial);
    const std::uint64_t w = energy_bin_width;
    energy_bin_multiplier = w == 0 || w > (1u << 16) ? 0 : ((std::uint64_t{1} << 32) + w - 1) / w;
  }
};

// Host tables built from settings and a loaded calibration (pointers into `cal`).
ConvertTables make_convert_tables(const Settings& settings, const Calibration& cal);

// The steps of convert_frame(), which the CPU stage runs ahead of the conversion to find the
// addresses it prefetches. check_frame: single for a frame whose markers, BDM, DU and
// position are valid; otherwise the status that rejects it.
PETDAQ_HD FrameStatus check_frame(const std::uint8_t* f, const ConvertTables& t) {
  if (!markers_ok(f, t.check_markers, t.head_marker, t.tail_marker)) return FrameStatus::bad_marker;
  if (f[frame_offset::bdm] >= t.bdm_count) return FrameStatus::bad_bdm;
  if (t.dead.count != 0 && t.dead.contains(frame_time(f))) return FrameStatus::dead;
  if ((f[frame_offset::head_du] & 0x0Fu) >= t.du_per_bdm) return FrameStatus::bad_du;
  const std::uint32_t ps = t.geometry.position_size;
  if (f[frame_offset::x] >= ps || f[frame_offset::y] >= ps) return FrameStatus::bad_position;
  return FrameStatus::single;
}
// The frame's (BDM, DU) pair as one number, bdm * du_per_bdm + du (valid after check_frame
// passed): the first index of both tables.
PETDAQ_HD std::uint32_t unit_of(const std::uint8_t* f, const ConvertTables& t) {
  return f[frame_offset::bdm] * t.du_per_bdm + (f[frame_offset::head_du] & 0x0Fu);
}
// Index of the frame's flood-map pixel in position_lut (valid after check_frame passed).
PETDAQ_HD std::size_t position_index(const std::uint8_t* f, const ConvertTables& t) {
  const std::size_t ps = t.geometry.position_size;
  return (unit_of(f, t) * ps + f[frame_offset::y]) * ps + f[frame_offset::x];
}
// Local crystal of a flood-map label below crystals_per_du (Geometry::local_crystal_of_label).
PETDAQ_HD std::uint32_t local_of_label(std::uint32_t label, const ConvertTables& t) {
  const std::uint32_t row = t.by_crystal_axial.quotient(label);
  const std::uint32_t col = label - row * t.geometry.crystal_axial;
  return (t.geometry.crystal_transaxial - 1 - row) * t.geometry.crystal_axial + col;
}
// The gain's index in energy_correction is the sum of three parts: the (BDM, DU) pair's rows,
// the local crystal's row in them and the raw energy's bin.
PETDAQ_HD std::size_t unit_gain_index(std::uint32_t unit, const ConvertTables& t) {
  return std::size_t{unit} * (std::size_t{t.crystals_per_du} * t.energy_bins);
}
PETDAQ_HD std::size_t local_gain_index(std::uint32_t local, const ConvertTables& t) {
  return std::size_t{local} * t.energy_bins;
}
PETDAQ_HD std::uint32_t energy_bin(std::uint32_t raw, const ConvertTables& t) {
  const auto bin = static_cast<std::uint32_t>((raw * t.energy_bin_multiplier) >> 32);
  return bin < t.energy_bins ? bin : t.energy_bins - 1;
}
// Index of the gain for a frame's crystal and raw energy in energy_correction.
PETDAQ_HD std::size_t energy_index(const std::uint8_t* f, std::uint32_t local,
                                   const ConvertTables& t) {
  return unit_gain_index(unit_of(f, t), t) + local_gain_index(local, t) +
         energy_bin(bytes::load_be16(f + frame_offset::energy), t);
}

// The global crystal id is the sum of two parts: one set by the BDM and DU, one by the
// flood-map label (below crystals_per_du).
PETDAQ_HD std::uint32_t unit_crystal(std::uint32_t bdm, std::uint32_t du, const ConvertTables& t) {
  const Geometry& g = t.geometry;
  const std::uint32_t b_axial = t.by_bdm_transaxial.quotient(bdm);
  const std::uint32_t b_trans = bdm - b_axial * g.bdm_transaxial;
  const std::uint32_t d_trans = t.by_du_axial.quotient(du);
  const std::uint32_t d_axial = du - d_trans * g.du_axial;
  return b_axial * t.bdm_axial_stride + b_trans * t.bdm_trans_stride +
         d_axial * t.du_axial_stride + d_trans * g.crystal_transaxial;
}
PETDAQ_HD std::uint32_t label_crystal(std::uint32_t label, const ConvertTables& t) {
  const std::uint32_t row = t.by_crystal_axial.quotient(label);
  const std::uint32_t c_axial = label - row * t.geometry.crystal_axial;
  const std::uint32_t c_trans = t.geometry.crystal_transaxial - 1 - row;
  return c_axial * t.crystals_per_ring + c_trans;
}

// A raw time corrected by a crystal's offset (0 without time offsets); false when the result
// is corrupt. Times are signed 64-bit after correction: a raw time past INT64_MAX is a corrupt
// stamp, and so is a correction carrying the time past INT64_MAX or below 0. With
// |offset| < 2^31, the unsigned sum of a raw time <= INT64_MAX lands past INT64_MAX in exactly
// those two cases (below 0 wraps to near 2^64): one test of the top bits of both, and no
// branch on the offset's sign, which is random from crystal to crystal.
PETDAQ_HD bool correct_time(std::uint64_t raw, std::int32_t offset, std::uint64_t& time) {
  time = raw + static_cast<std::uint64_t>(std::int64_t{offset});
  return ((raw | time) >> 63) == 0;
}
// The corrected energy; + 0.0f turns -0 into +0, so equal energies have equal bits on every
// backend.
PETDAQ_HD float corrected_energy(std::uint32_t raw, float gain) {
  return static_cast<float>(raw) * gain + 0.0f;
}
// Inside the energy window (inclusive bounds); NaN fails both comparisons: outside every window.
// Both compares are made (&, not &&): inside or outside alternates at random, a branch there
// would be mispredicted often.
PETDAQ_HD bool in_window(float energy, const ConvertTables& t) {
  return (energy >= t.low_keV) & (energy <= t.high_keV);
}

// The rest of the conversion once a frame has passed check_frame() and its flood-map label
// (below crystals_per_du) and gain are known: crystal id, corrected time, energy and the
// energy window.
PETDAQ_HD FrameStatus finish_frame(const std::uint8_t* f, const ConvertTables& t,
                                   std::uint32_t label, float gain, Single& out) {
  const std::uint32_t crystal =
      unit_crystal(f[frame_offset::bdm], f[frame_offset::head_du] & 0x0Fu, t) + label_crystal(label, t);
  const std::int32_t offset = t.time_offsets ? t.time_offsets[crystal] : 0;
  std::uint64_t time;
  if (!correct_time(bytes::load_be64(f + frame_offset::time), offset, time)) return FrameStatus::bad_time;
  const float energy = corrected_energy(bytes::load_be16(f + frame_offset::energy), gain);
  out.time = time;
  out.crystal = crystal;
  out.energy = energy;
  return in_window(energy, t) ? FrameStatus::single : FrameStatus::energy_rejected;
}

// The conversion of one frame (DESIGN sections 2-4): the checks, the two look-ups, the rest.
PETDAQ_HD FrameStatus convert_frame(const std::uint8_t* f, const ConvertTables& t, Single& out) {
  const FrameStatus checked = check_frame(f, t);
  if (checked != FrameStatus::single) return checked;
  const std::uint32_t label = t.position_lut[position_index(f, t)];
  if (label >= t.crystals_per_du) return FrameStatus::no_crystal;
  const float gain = t.energy_correction[energy_index(f, local_of_label(label, t), t)];
  return finish_frame(f, t, label, gain, out);
}

// Each frame status's count added to its counter (both backends).
inline void add_status_counts(CounterDelta& delta,
                              const std::uint64_t (&by_status)[kFrameStatusCount]) {
  for (int s = 0; s < kFrameStatusCount; ++s)
    delta[counter_of(static_cast<FrameStatus>(s))] += by_status[s];
}

// How many frames ahead convert_frames() requests a frame's flood-map pixel and its gain. The
// two look-ups are random reads in tables of megabytes (6 MiB and 65 MiB for the default
// scanner) and the second depends on the first: without prefetching, a frame waits for
// memory twice in a row. The best distances depend on the machine's memory latency
// (petdaq-bench-convert measures a few; at 10 ns per frame, 32 / 16 came too late on the
// 2-core VM of docs/engine.md, 64 / 32 did not). position 0 turns prefetching off; position is
// capped at 512, and an energy distance not below it turns the gain's prefetch off.
struct PrefetchDistance {
  std::size_t position = 64;
  std::size_t energy = 32;
};

// Converts `n` frames; writes the singles inside the energy window to `out` (capacity n) in
// frame order and returns how many. Counts every status into `delta` and the per-BDM
// accepted / energy-rejected singles into the two arrays (bdm_count entries each).
std::size_t convert_frames(const RawFrame* frames, std::size_t n, const ConvertTables& t,
                           Single* out, CounterDelta& delta, std::uint64_t* bdm_singles,
                           std::uint64_t* bdm_energy_rejected, PrefetchDistance ahead = {});

}  // namespace petdaq

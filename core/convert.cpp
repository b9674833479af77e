#include "core/convert.h"

#include <algorithm>
#include <atomic>
#include <climits>

#include "core/calibration.h"
#include "core/settings.h"

namespace petdaq {

ConvertTables make_convert_tables(const Settings& settings, const Calibration& cal) {
  ConvertTables t;
  t.geometry = Geometry::from(settings.scanner);
  t.position_lut = cal.position_lut.data();
  t.energy_correction = cal.energy_correction.data();
  t.time_offsets = cal.time_offsets.empty() ? nullptr : cal.time_offsets.data();
  t.energy_bins = cal.energy_bins;
  t.energy_bin_width = cal.energy_bin_width;
  t.check_markers = settings.frame.check_markers;
  t.head_marker = settings.frame.head_marker;
  t.tail_marker = settings.frame.tail_marker;
  // The window bounds are rounded to float once (DESIGN section 4).
  t.low_keV = static_cast<float>(settings.energy_window.low_keV);
  t.high_keV = static_cast<float>(settings.energy_window.high_keV);
  t.derive();
  return t;
}

namespace {

// Frames per block of the main loop, and the ring sizes (powers of two): a staged frame is
// read fewer than 512 + kBlock frames after it is written, a located one fewer than that too.
constexpr std::size_t kBlock = 16;
constexpr std::size_t kMaxAhead = 512;
constexpr std::size_t kStagedMask = 2 * kMaxAhead - 1;
constexpr std::size_t kLocatedMask = 2 * kMaxAhead - 1;
// (BDM, DU) pairs: a BDM byte and a DU nibble.
constexpr std::size_t kMaxUnits = 256 * 16;
constexpr std::uint32_t kRejected = UINT32_MAX - kFrameStatusCount;

// The parts of a frame's crystal id and gain index that depend on its flood-map label, for
// every label below crystals_per_du.
struct LabelParts {
  std::size_t gain[256];       // local_gain_index(local_of_label(label))
  std::uint32_t crystal[256];  // label_crystal(label)
};

// For each byte of a frame that check_frame() reads (markers and DU in byte 0, BDM in byte 1,
// x and y in bytes 10 and 11, the tail marker in byte 15) and each of its 256 values, what the
// byte adds to the frame's position_index() (low 32 bits) and unit_of() (high 32 bits), or
// kFails when check_frame() refuses it: found by check_frame(), position_index() and unit_of()
// themselves on a valid frame with that one byte changed. Each test of check_frame() reads one
// of these bytes and both indices are sums of terms of one byte each, so the five parts of a
// frame add up to its pixel and unit when it passes, and the low half to kFails or more when
// it does not. The loop adds five look-ups instead of making the tests and the indices'
// multiplications, and calls check_frame() only for a frame that fails, to learn why (which
// also keeps the result exact whatever the tables say no to).
struct ByteParts {
  static constexpr std::size_t kOffsets[5] = {frame_offset::head_du, frame_offset::bdm, frame_offset::x,
                                              frame_offset::y, frame_offset::temp_frac_tail};
  // Above every pixel index the loop takes this way; five of it stay below 2^32, so the low
  // half never carries into the high one.
  static constexpr std::uint32_t kFails = 1u << 29;
  std::uint64_t part[5][256];

  explicit ByteParts(const ConvertTables& t) {
    RawFrame valid{};
    valid.bytes[frame_offset::head_du] = static_cast<std::uint8_t>(t.head_marker << 4);
    valid.bytes[frame_offset::temp_frac_tail] = t.tail_marker & 0x0Fu;
    const bool any = check_frame(valid.bytes, t) == FrameStatus::single;
    const std::uint64_t base = any ? both(valid.bytes, t) : 0;
    for (int b = 0; b < 5; ++b) {
      RawFrame probe = valid;
      for (unsigned v = 0; v < 256; ++v) {
        probe.bytes[kOffsets[b]] = static_cast<std::uint8_t>(v);
        const bool passes = any && check_frame(probe.bytes, t) == FrameStatus::single;
        // The valid frame's own indices are counted once, in byte 0's parts.
        part[b][v] = passes ? both(probe.bytes, t) - (b == 0 ? 0 : base) : kFails;
      }
    }
  }
  static std::uint64_t both(const std::uint8_t* f, const ConvertTables& t) {
    return std::uint64_t{unit_of(f, t)} << 32 | static_cast<std::uint32_t>(position_index(f, t));
  }
  // The pixel index in the low half, the unit in the high half, for a frame that passes.
  std::uint64_t sum(const std::uint8_t* f) const {
    return part[0][f[kOffsets[0]]] + part[1][f[kOffsets[1]]] + part[2][f[kOffsets[2]]] +
           part[3][f[kOffsets[3]]] + part[4][f[kOffsets[4]]];
  }
};

// What the first step (check) hands on: the pixel index, or kRejected + the status.
struct Staged {
  std::uint32_t pixel;
  std::uint32_t unit;
};
// The first step for a frame whose bytes the tables refuse: check_frame() says why. Out of
// the loop, which then holds no byte of the frame for it.
[[gnu::noinline, gnu::cold]] Staged stage_failed(const std::uint8_t* p, const ConvertTables& t) {
  const FrameStatus status = check_frame(p, t);
  if (status != FrameStatus::single) return {kRejected + static_cast<std::uint32_t>(status), 0};
  return {static_cast<std::uint32_t>(position_index(p, t)), unit_of(p, t)};
}

// What the second step (locate) hands on: the gain's index, the crystal and the raw energy,
// or kNotConverted + the status in place of the index.
struct Located {
  std::size_t gain;
  std::uint32_t crystal;
  std::uint32_t raw_energy;
};
constexpr std::size_t kNotConverted = SIZE_MAX - kFrameStatusCount;

// convert_frames() for one choice of time offsets and prefetches, which are then constants of
// the loop. `unit_crystals` and `labels` are unit_crystal() and the LabelParts of every
// (BDM, DU) pair and label, worked out once per call by the functions that convert_frame()
// uses: the loop adds them up instead of dividing and multiplying for each frame.
template <bool kOffsets, bool kPrefetchPixel, bool kPrefetchGain>
std::size_t convert_loop(const RawFrame* frames, std::size_t n, const ConvertTables& tables,
                         const ByteParts& parts, const std::uint32_t* unit_crystals,
                         const LabelParts& labels, Single* out, std::uint64_t (&by_status)[kFrameStatusCount],
                         std::uint64_t* bdm_accepted, std::uint64_t* bdm_converted,
                         std::size_t pos_ahead, std::size_t energy_ahead) {
  // A local copy: the stores to `out` cannot alias it, so its values stay in registers.
  const ConvertTables t = tables;
  Staged staged[kStagedMask + 1];
  Located located[kLocatedMask + 1];
  Single* o = out;
  // Written out here rather than in helpers: GCC deems a function whose only effect is a
  // prefetch free of side effects and drops the call.
  const auto check = [&](std::size_t j) {
    const std::uint8_t* p = frames[j].bytes;
    Staged& s = staged[j & kStagedMask];
    const std::uint64_t sum = parts.sum(p);
    s.pixel = static_cast<std::uint32_t>(sum);
    s.unit = static_cast<std::uint32_t>(sum >> 32);
    if (s.pixel >= ByteParts::kFails) [[unlikely]] {
      s = stage_failed(p, t);
      if (s.pixel >= kRejected) return;
    }
    if (kPrefetchPixel) __builtin_prefetch(t.position_lut + s.pixel);
  };
  const auto locate = [&](std::size_t k) {
    const Staged s = staged[k & kStagedMask];
    Located& l = located[k & kLocatedMask];
    if (s.pixel >= kRejected) [[unlikely]] {
      l.gain = kNotConverted + (s.pixel - kRejected);
      return;
    }
    const std::uint32_t label = t.position_lut[s.pixel];
    if (label >= t.crystals_per_du) [[unlikely]] {
      l.gain = kNotConverted + static_cast<std::size_t>(FrameStatus::no_crystal);
      return;
    }
    l.crystal = unit_crystals[s.unit] + labels.crystal[label];
    l.raw_energy = bytes::load_be16(frames[k].bytes + frame_offset::energy);
    l.gain = unit_gain_index(s.unit, t) + labels.gain[label] + energy_bin(l.raw_energy, t);
    if (kPrefetchGain) __builtin_prefetch(t.energy_correction + l.gain);
  };
  // finish_frame() from the located crystal and gain. Frames that are not converted (a few)
  // are counted by status here; the converted ones per BDM, from which the caller's counts of
  // both statuses follow.
  const auto finish = [&](std::size_t i) {
    const Located& l = located[i & kLocatedMask];
    if (l.gain >= kNotConverted) [[unlikely]] {
      ++by_status[l.gain - kNotConverted];
      return;
    }
    const std::uint8_t* f = frames[i].bytes;
    const float gain = t.energy_correction[l.gain];
    const std::int32_t offset = kOffsets ? t.time_offsets[l.crystal] : 0;
    std::uint64_t time;
    if (!correct_time(bytes::load_be64(f + frame_offset::time), offset, time)) [[unlikely]] {
      ++by_status[static_cast<int>(FrameStatus::bad_time)];
      return;
    }
    const float energy = corrected_energy(l.raw_energy, gain);
    // Written unconditionally and kept only when accepted: inside or outside the energy
    // window alternates at random, so that part is arithmetic rather than a branch.
    o->time = time;
    o->crystal = l.crystal;
    o->energy = energy;
    const bool accepted = in_window(energy, t);
    o += accepted;
    const std::uint32_t bdm = f[frame_offset::bdm];
    bdm_accepted[bdm] += accepted;
    ++bdm_converted[bdm];
  };
  // The steps at their distances: frame i + pos_ahead is checked and its pixel requested,
  // frame i + energy_ahead (energy_ahead < pos_ahead, or both 0) is located and its gain
  // requested, frame i is finished. The main loop makes each step for a block of frames in a
  // loop of its own, which holds fewer values than the three together and tests no end; the
  // end of the stream goes frame by frame.
  for (std::size_t j = 0; j < std::min(pos_ahead, n); ++j) check(j);
  for (std::size_t k = 0; k < std::min(energy_ahead, n); ++k) locate(k);
  std::size_t i = 0;
  for (; i + pos_ahead + kBlock <= n; i += kBlock) {
    for (std::size_t j = i + pos_ahead; j < i + pos_ahead + kBlock; ++j) check(j);
    for (std::size_t k = i + energy_ahead; k < i + energy_ahead + kBlock; ++k) locate(k);
    for (std::size_t m = i; m < i + kBlock; ++m) finish(m);
  }
  for (; i < n; ++i) {
    if (i + pos_ahead < n) check(i + pos_ahead);
    if (i + energy_ahead < n) locate(i + energy_ahead);
    finish(i);
  }
  return static_cast<std::size_t>(o - out);
}

using ConvertLoop = std::size_t (*)(const RawFrame*, std::size_t, const ConvertTables&,
                                    const ByteParts&, const std::uint32_t*, const LabelParts&, Single*,
                                    std::uint64_t (&)[kFrameStatusCount], std::uint64_t*,
                                    std::uint64_t*, std::size_t, std::size_t);

template <bool kOffsets>
ConvertLoop pick_loop(bool prefetch_pixel, bool prefetch_gain) {
  if (!prefetch_pixel) return convert_loop<kOffsets, false, false>;
  return prefetch_gain ? convert_loop<kOffsets, true, true> : convert_loop<kOffsets, true, false>;
}

}  // namespace

std::size_t convert_frames(const RawFrame* frames, std::size_t n, const ConvertTables& tables,
                           Single* out, CounterDelta& delta, std::uint64_t* bdm_singles,
                           std::uint64_t* bdm_energy_rejected, PrefetchDistance ahead) {
  // A local copy: the stores to `out` cannot alias it, so its values stay in registers.
  const ConvertTables t = tables;
  std::uint64_t by_status[kFrameStatusCount] = {};
  const std::uint32_t bdms = std::min<std::uint32_t>(t.bdm_count, 256);
  const std::uint32_t dus = std::min<std::uint32_t>(t.du_per_bdm, 16);
  const std::size_t units = bdms == 0 || dus == 0 ? 0 : std::size_t{bdms - 1} * t.du_per_bdm + dus;
  std::size_t kept = 0;
  const std::size_t ps = t.geometry.position_size;
  if (units > kMaxUnits || units * ps * ps > ByteParts::kFails || t.dead.count != 0) {
    // Only a scanner no configuration passes (more DUs per BDM than the nibble holds), flood
    // maps of 512 MB, or a slice with dead ranges (rare: a socket lost datagrams): the
    // frame-by-frame conversion.
    for (std::size_t i = 0; i < n; ++i) {
      const FrameStatus s = convert_frame(frames[i].bytes, t, out[kept]);
      ++by_status[static_cast<int>(s)];
      const std::uint8_t bdm = frames[i].bytes[frame_offset::bdm];
      if (s == FrameStatus::single) ++bdm_singles[bdm], ++kept;
      if (s == FrameStatus::energy_rejected) ++bdm_energy_rejected[bdm];
      if (s == FrameStatus::dead && t.dead.bdm_frames)
        std::atomic_ref<std::uint64_t>(t.dead.bdm_frames[bdm]).fetch_add(1, std::memory_order_relaxed);
    }
    add_status_counts(delta, by_status);
    return kept;
  }
  const ByteParts parts(t);
  std::uint32_t unit_crystals[kMaxUnits];
  for (std::uint32_t bdm = 0; bdm < bdms; ++bdm)
    for (std::uint32_t du = 0; du < dus; ++du) unit_crystals[bdm * t.du_per_bdm + du] = unit_crystal(bdm, du, t);
  LabelParts labels;
  for (std::uint32_t label = 0; label < std::min<std::uint32_t>(t.crystals_per_du, 256); ++label) {
    labels.gain[label] = local_gain_index(local_of_label(label, t), t);
    labels.crystal[label] = label_crystal(label, t);
  }
  std::uint64_t bdm_accepted[256] = {};
  std::uint64_t bdm_converted[256] = {};

  const std::size_t pos_ahead = std::min(ahead.position, kMaxAhead);
  const std::size_t energy_ahead = ahead.energy < pos_ahead ? ahead.energy : 0;
  const ConvertLoop loop = t.time_offsets ? pick_loop<true>(pos_ahead > 0, energy_ahead > 0)
                                          : pick_loop<false>(pos_ahead > 0, energy_ahead > 0);
  kept = loop(frames, n, t, parts, unit_crystals, labels, out, by_status, bdm_accepted, bdm_converted,
              pos_ahead, energy_ahead);
  std::uint64_t converted = 0;
  for (std::uint32_t b = 0; b < bdms; ++b) {
    bdm_singles[b] += bdm_accepted[b];
    bdm_energy_rejected[b] += bdm_converted[b] - bdm_accepted[b];
    converted += bdm_converted[b];
  }
  by_status[static_cast<int>(FrameStatus::single)] = kept;
  by_status[static_cast<int>(FrameStatus::energy_rejected)] = converted - kept;
  add_status_counts(delta, by_status);
  return kept;
}

}  // namespace petdaq

#include "core/convert.h"

#include <algorithm>
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

std::size_t convert_frames(const RawFrame* frames, std::size_t n, const ConvertTables& tables,
                           Single* out, CounterDelta& delta, std::uint64_t* bdm_singles,
                           std::uint64_t* bdm_energy_rejected, PrefetchDistance ahead) {
  // A local copy: the stores to `out` cannot alias it, so its values stay in registers.
  const ConvertTables t = tables;
  std::uint64_t by_status[kFrameStatusCount] = {};
  std::size_t kept = 0;
  // convert_frame() in three steps, each run on its own frame: frame i + ahead.position is
  // checked and its flood-map pixel requested; frame i + ahead.energy reads its label, which
  // has arrived by then, and requests its gain; frame i is finished from the label and gain.
  // Two rings carry what the earlier steps found, so no frame is checked or indexed twice.
  // Prefetches never fault and the steps are those of convert_frame(), so the result is that
  // of the plain loop.
  // Ring sizes, powers of two: a pixel is read up to 512 frames after it is written, a
  // located frame fewer than 512.
  constexpr std::size_t kMaxAhead = 512;
  constexpr std::size_t kPixelMask = 2 * kMaxAhead - 1;
  constexpr std::size_t kLocatedMask = kMaxAhead - 1;
  struct Located {
    FrameStatus status;  // single: label and gain index are valid
    std::uint32_t label;
    std::size_t gain;
  };
  std::uint32_t pixel[2 * kMaxAhead];      // pixel index, or kRejected + status
  Located located[kMaxAhead];
  constexpr std::uint32_t kRejected = UINT32_MAX - kFrameStatusCount;
  const std::size_t pos_ahead = std::min(ahead.position, kMaxAhead);
  const std::size_t energy_ahead = ahead.energy < pos_ahead ? ahead.energy : 0;
  // Written out here rather than in helpers: GCC deems a function whose only effect is a
  // prefetch free of side effects and drops the call.
  const auto check = [&](std::size_t j) {
    const std::uint8_t* p = frames[j].bytes;
    const FrameStatus s = check_frame(p, t);
    std::uint32_t index = kRejected + static_cast<std::uint32_t>(s);
    if (s == FrameStatus::single) {
      index = static_cast<std::uint32_t>(position_index(p, t));
      if (pos_ahead > 0) __builtin_prefetch(t.position_lut + index);
    }
    pixel[j & kPixelMask] = index;
  };
  const auto locate = [&](std::size_t k) {
    const std::uint32_t index = pixel[k & kPixelMask];
    Located& l = located[k & kLocatedMask];
    if (index >= kRejected) {
      l.status = static_cast<FrameStatus>(index - kRejected);
      return;
    }
    l.label = t.position_lut[index];
    if (l.label >= t.crystals_per_du) {
      l.status = FrameStatus::no_crystal;
      return;
    }
    l.status = FrameStatus::single;
    l.gain = energy_index(frames[k].bytes, local_of_label(l.label, t), t);
    if (energy_ahead > 0) __builtin_prefetch(t.energy_correction + l.gain);
  };
  for (std::size_t j = 0; j < std::min(pos_ahead, n); ++j) check(j);
  for (std::size_t k = 0; k < std::min(energy_ahead, n); ++k) locate(k);
  for (std::size_t i = 0; i < n; ++i) {
    if (i + pos_ahead < n) check(i + pos_ahead);
    if (i + energy_ahead < n) locate(i + energy_ahead);
    const std::uint8_t* f = frames[i].bytes;
    const Located& l = located[i & kLocatedMask];
    // Written unconditionally and kept only when accepted: no branch on the common path.
    FrameStatus s = l.status;
    if (s == FrameStatus::single) s = finish_frame(f, t, l.label, t.energy_correction[l.gain], out[kept]);
    ++by_status[static_cast<int>(s)];
    // Converted frames (nearly all) have a valid BDM; inside or outside the energy window
    // alternates at random, so that part is arithmetic rather than a branch.
    if (s <= FrameStatus::energy_rejected) {
      const bool accepted = s == FrameStatus::single;
      const std::uint32_t bdm = f[frame_offset::bdm];
      bdm_singles[bdm] += accepted;
      bdm_energy_rejected[bdm] += !accepted;
      kept += accepted;
    }
  }
  add_status_counts(delta, by_status);
  return kept;
}

}  // namespace petdaq

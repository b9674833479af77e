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
  // While frame i converts, the pixel of frame i + ahead.position is requested and its index
  // kept in a ring, and the gain of frame i + ahead.energy, whose pixel has arrived by then,
  // is requested from the label at the kept index. Prefetches never fault and convert_frame()
  // alone decides every outcome, so the result is that of the plain loop.
  constexpr std::size_t kRing = 512;
  constexpr std::uint32_t kNoPixel = UINT32_MAX;  // the frame never reaches the tables
  std::uint32_t pixel[kRing];
  const std::size_t pos_ahead = std::min(ahead.position, kRing);
  const std::size_t energy_ahead = ahead.energy < pos_ahead ? ahead.energy : 0;
  // Written out here rather than in a helper: GCC deems a function whose only effect is a
  // prefetch free of side effects and drops the call.
  const auto request_pixel = [&](std::size_t j) {
    const std::uint8_t* p = frames[j].bytes;
    std::uint32_t index = kNoPixel;
    if (check_frame(p, t) == FrameStatus::single) {
      index = static_cast<std::uint32_t>(position_index(p, t));
      __builtin_prefetch(t.position_lut + index);
    }
    pixel[j % kRing] = index;
  };
  if (pos_ahead > 0)
    for (std::size_t j = 0; j < std::min(pos_ahead, n); ++j) request_pixel(j);
  for (std::size_t i = 0; i < n; ++i) {
    if (pos_ahead > 0 && i + pos_ahead < n) request_pixel(i + pos_ahead);
    if (energy_ahead > 0 && i + energy_ahead < n) {
      const std::size_t k = i + energy_ahead;
      const std::uint32_t index = pixel[k % kRing];
      if (index != kNoPixel) {
        const std::uint32_t label = t.position_lut[index];
        if (label < t.crystals_per_du)
          __builtin_prefetch(t.energy_correction +
                             energy_index(frames[k].bytes, local_of_label(label, t), t));
      }
    }
    const std::uint8_t* f = frames[i].bytes;
    // Written unconditionally and kept only when accepted: no branch on the common path.
    const FrameStatus s = convert_frame(f, t, out[kept]);
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
  for (int s = 0; s < kFrameStatusCount; ++s)
    delta[counter_of(static_cast<FrameStatus>(s))] += by_status[s];
  return kept;
}

}  // namespace petdaq

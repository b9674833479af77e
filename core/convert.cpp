#include "core/convert.h"

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
  // While frame i converts, the pixel of frame i + ahead.position is requested, and the gain
  // of frame i + ahead.energy, whose pixel has arrived by then. Prefetches never fault and
  // convert_frame() alone decides every outcome, so the result is that of the plain loop.
  for (std::size_t i = 0; i < n; ++i) {
    // Written out here rather than in helpers: GCC deems a function whose only effect is a
    // prefetch free of side effects and drops the call.
    if (ahead.position > 0 && i + ahead.position < n) {
      const std::uint8_t* p = frames[i + ahead.position].bytes;
      if (check_frame(p, t) == FrameStatus::single)
        __builtin_prefetch(t.position_lut + position_index(p, t));
    }
    if (ahead.energy > 0 && i + ahead.energy < n) {
      const std::uint8_t* e = frames[i + ahead.energy].bytes;
      if (check_frame(e, t) == FrameStatus::single) {
        const std::uint32_t label = t.position_lut[position_index(e, t)];
        if (label < t.crystals_per_du)
          __builtin_prefetch(t.energy_correction + energy_index(e, local_of_label(label, t), t));
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

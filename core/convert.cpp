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
  return t;
}

std::size_t convert_frames(const RawFrame* frames, std::size_t n, const ConvertTables& t,
                           Single* out, CounterDelta& delta, std::uint64_t* bdm_singles,
                           std::uint64_t* bdm_energy_rejected) {
  std::uint64_t by_status[kFrameStatusCount] = {};
  std::size_t kept = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint8_t* f = frames[i].bytes;
    // Written unconditionally and kept only when accepted: no branch on the common path.
    const FrameStatus s = convert_frame(f, t, out[kept]);
    ++by_status[static_cast<int>(s)];
    if (s == FrameStatus::single) {
      ++bdm_singles[f[frame_offset::bdm]];
      ++kept;
    } else if (s == FrameStatus::energy_rejected) {
      ++bdm_energy_rejected[f[frame_offset::bdm]];
    }
  }
  for (int s = 0; s < kFrameStatusCount; ++s)
    delta[counter_of(static_cast<FrameStatus>(s))] += by_status[s];
  return kept;
}

}  // namespace petdaq

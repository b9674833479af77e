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

namespace {

void prefetch_position(const std::uint8_t* f, const ConvertTables& t) {
  if (check_frame(f, t) == FrameStatus::single)
    __builtin_prefetch(t.position_lut + position_index(f, t));
}

void prefetch_energy(const std::uint8_t* f, const ConvertTables& t) {
  if (check_frame(f, t) != FrameStatus::single) return;
  const std::uint32_t label = t.position_lut[position_index(f, t)];
  if (label < t.crystals_per_du)
    __builtin_prefetch(t.energy_correction + energy_index(f, local_of_label(label, t), t));
}

}  // namespace

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
    if (ahead.position > 0 && i + ahead.position < n)
      prefetch_position(frames[i + ahead.position].bytes, t);
    if (ahead.energy > 0 && i + ahead.energy < n) prefetch_energy(frames[i + ahead.energy].bytes, t);
    const std::uint8_t* f = frames[i].bytes;
    // Written unconditionally and kept only when accepted: no branch on the common path.
    const FrameStatus s = convert_frame(f, t, out[kept]);
    ++by_status[static_cast<int>(s)];
    // Branch-free: in and out of the energy window alternate at random. A frame that was not
    // converted may carry any BDM byte, so it adds its zeros to BDM 0.
    const bool accepted = s == FrameStatus::single;
    const bool rejected = s == FrameStatus::energy_rejected;
    const std::uint32_t bdm = accepted || rejected ? f[frame_offset::bdm] : 0;
    bdm_singles[bdm] += accepted;
    bdm_energy_rejected[bdm] += rejected;
    kept += accepted;
  }
  for (int s = 0; s < kFrameStatusCount; ++s)
    delta[counter_of(static_cast<FrameStatus>(s))] += by_status[s];
  return kept;
}

}  // namespace petdaq

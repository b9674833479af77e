// The table of live histograms (DESIGN section 7): each one's name, unit, shape and bin
// edges, and the layout of all of them in one block of bins.
#include <algorithm>
#include <cstring>
#include <string_view>

#include "core/coincidence.h"
#include "core/histograms.h"
#include "core/settings.h"

namespace petdaq {

namespace {

// The Δt axis spans the window [0, W] in at most this many bins of whole ticks.
constexpr std::uint64_t kMaxDtBins = 1024;
// The per-DU-pair signed Δt axis has at most this many bins each side of 0.
constexpr std::uint64_t kMaxDuTofHalfBins = 64;

struct HistInfo {
  const char* name;
  const char* unit;  // of the last axis
};
// Names below 32 bytes, units below 16 (checked at compile time below).
constexpr HistInfo kInfo[kHistCount] = {
    {"crystal_singles", "crystal"},
    {"crystal_energy_rejected", "crystal"},
    {"dt_prompt", "ps"},
    {"dt_delayed", "ps"},
    {"bdm_pair_prompt", "bdm"},
    {"bdm_pair_delayed", "bdm"},
    {"rate_singles", "s"},
    {"rate_prompts", "s"},
    {"rate_delayed", "s"},
    {"tof_prompt", "ps"},
    {"tof_delayed", "ps"},
    {"bdm_pair_randoms_singles_rate", "bdm"},
    {"energy_keV", "keV"},
    {"energy_raw", "ADC"},
    {"flood", "pixel"},
    {"du_pair_tof_prompt", "ps"},
    {"du_pair_tof_delayed", "ps"},
};

consteval bool names_fit() {
  for (const HistInfo& i : kInfo)
    if (std::string_view(i.name).size() >= kHistNameBytes || std::string_view(i.unit).size() >= kHistUnitBytes)
      return false;
  return true;
}
static_assert(names_fit());

// Shape (C order) of each histogram, and its last axis's bin edges.
struct Shape {
  std::uint32_t rank = 1;
  std::uint32_t dims[kHistMaxRank] = {1, 1, 1, 1};
  double lo = 0;
  double width = 1;
};

Shape shape_of(Hist h, const HistogramLayout& l, double tick_ps) {
  const Geometry& g = l.geometry;
  Shape s;
  switch (h) {
    case Hist::crystal_singles:
    case Hist::crystal_energy_rejected: s.dims[0] = l.crystal_count; break;
    case Hist::dt_prompt:
    case Hist::dt_delayed:
      s.dims[0] = l.dt_bins;
      s.width = l.dt_bin_ticks * tick_ps;
      break;
    case Hist::tof_prompt:
    case Hist::tof_delayed:
      // Bin i holds the integer ticks [(i - half) w, (i - half + 1) w): its edges in ps lie
      // half a tick below, so that a tick's value sits inside its bin, not on an edge.
      s.dims[0] = l.tof_bins;
      s.width = l.dt_bin_ticks * tick_ps;
      s.lo = (-static_cast<double>(l.tof_half) * l.dt_bin_ticks - 0.5) * tick_ps;
      break;
    case Hist::du_pair_tof_prompt:
    case Hist::du_pair_tof_delayed:
      s.rank = 3;
      s.dims[0] = s.dims[1] = l.du_count;
      s.dims[2] = l.du_tof_bins;
      s.width = l.du_tof_bin_ticks * tick_ps;
      s.lo = (-static_cast<double>(l.du_tof_half) * l.du_tof_bin_ticks - 0.5) * tick_ps;
      break;
    case Hist::bdm_pair_prompt:
    case Hist::bdm_pair_delayed:
    case Hist::bdm_pair_randoms_singles_rate:
      s.rank = 2;
      s.dims[0] = s.dims[1] = l.bdm_count;
      break;
    case Hist::rate_singles:
    case Hist::rate_prompts:
    case Hist::rate_delayed:
      s.dims[0] = l.rate_bins;
      // ticks × ps ÷ 1e12 (not × 1e-12): a rate bin of 100 ms reads 0.1 s, not 0.09999999999999999
      s.width = static_cast<double>(l.rate_bin_ticks) * tick_ps / 1e12;
      break;
    case Hist::energy_keV:
      s.rank = 2;
      s.dims[0] = l.crystal_count;
      s.dims[1] = l.energy_bins;
      s.width = l.energy_bin_keV;
      break;
    case Hist::energy_raw:
      s.rank = 2;
      s.dims[0] = l.crystal_count;
      s.dims[1] = l.raw_bins;
      s.width = l.raw_bin_adc;
      break;
    case Hist::flood:
      s.rank = 4;
      s.dims[0] = g.bdm_count();
      s.dims[1] = g.du_per_bdm();
      s.dims[2] = s.dims[3] = g.position_size;
      break;
    case Hist::count_: break;
  }
  return s;
}

}  // namespace

const char* hist_name(Hist h) { return kInfo[static_cast<int>(h)].name; }

HistDescriptor hist_descriptor(Hist h, const HistogramLayout& l, double tick_ps) {
  const int i = static_cast<int>(h);
  const Shape sh = shape_of(h, l, tick_ps);
  HistDescriptor d;
  std::memcpy(d.name, kInfo[i].name, std::strlen(kInfo[i].name));  // names fit, NUL-padded
  std::memcpy(d.unit, kInfo[i].unit, std::strlen(kInfo[i].unit));
  d.element_bytes = hist_is_32bit(h) ? 4 : 8;
  d.element_type = hist_is_real(h) ? kHistReal : kHistUnsigned;
  d.rank = sh.rank;
  for (int k = 0; k < kHistMaxRank; ++k) d.shape[k] = sh.dims[k];
  d.lo = sh.lo;
  d.width = sh.width;
  d.data_offset = l.offset[i];
  return d;
}

HistogramLayout make_histogram_layout(const Settings& s) {
  const HistogramSettings& hs = s.output.histograms;
  HistogramLayout l;
  l.geometry = Geometry::from(s.scanner);
  l.crystal_count = l.geometry.crystal_count();
  l.bdm_count = l.geometry.bdm_count();
  l.energy_bins = hs.energy_bins;
  l.energy_bin_keV = static_cast<float>(hs.energy_max_keV / hs.energy_bins);
  l.raw_bins = hs.raw_bins;
  l.raw_bin_adc = hs.raw_bin_adc;
  const CoincidenceParams p = CoincidenceParams::from(s);
  const std::uint64_t span = p.window_ticks + 1;  // dt in [0, W]
  l.dt_bin_ticks = static_cast<std::uint32_t>(std::max<std::uint64_t>(1, (span + kMaxDtBins - 1) / kMaxDtBins));
  l.dt_bins = static_cast<std::uint32_t>((span + l.dt_bin_ticks - 1) / l.dt_bin_ticks);
  l.delayed_offset_ticks = static_cast<std::int64_t>(p.delayed_offset_ticks);
  l.tof_half = l.dt_bins;  // dt_bins * dt_bin_ticks > W: [-W, W] inside
  l.tof_bins = 2 * l.tof_half;
  l.du_tof_bin_ticks = static_cast<std::uint32_t>(
      std::max<std::uint64_t>(1, (span + kMaxDuTofHalfBins - 1) / kMaxDuTofHalfBins));
  l.du_tof_half = static_cast<std::uint32_t>((span + l.du_tof_bin_ticks - 1) / l.du_tof_bin_ticks);
  l.du_tof_bins = 2 * l.du_tof_half;
  l.du_count = l.bdm_count * l.geometry.du_per_bdm();
  l.rate_bins = hs.rate_bins;
  l.rate_bin_ticks = std::max<std::uint64_t>(1, ps_to_ticks(hs.rate_bin_ms * 1e9, s.scanner.tick_ps));
  std::uint64_t offset = 0;
  for (int i = 0; i < kHistCount; ++i) {
    const Shape sh = shape_of(static_cast<Hist>(i), l, s.scanner.tick_ps);
    std::uint64_t n = 1;
    for (std::uint32_t d = 0; d < sh.rank; ++d) n *= sh.dims[d];
    l.count[i] = n;
    l.offset[i] = offset;
    offset += n * (hist_is_32bit(static_cast<Hist>(i)) ? 4 : 8);
    offset = (offset + 7) / 8 * 8;
  }
  l.bytes = offset;
  return l;
}

}  // namespace petdaq

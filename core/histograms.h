// Live histograms (DESIGN section 7, "Histograms"): the binning rules, written once as
// host/device functions that the CPU backend (core/histograms.cpp) and the GPU backend
// (gpu/histogram_kernels.cuh) both compile, so the two fill the same bins.
//
// All bins of one acquisition run live in one byte block ("the bins"): the 64-bit
// histograms first, then the 32-bit ones (the big per-crystal spectra and the flood maps,
// where 32 bits per bin keep the block small), each at HistogramLayout::offset. The block is
// what a backend copies back, what the `histograms` message carries and what the file holds.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/convert.h"
#include "core/geometry.h"
#include "proto/records.h"
#include "proto/signed_tof.h"

namespace petdaq {

struct Settings;

enum class Hist : std::uint8_t {
  // 64-bit bins
  crystal_singles = 0,      // [crystal]: accepted singles
  crystal_energy_rejected,  // [crystal]: converted singles outside the energy window
  dt_prompt,                // [dt_bins]: time_b - time_a of prompt records
  dt_delayed,               // [dt_bins]: time_b - time_a - D of delayed records
  bdm_pair_prompt,          // [bdm][bdm]: prompt records by (lower BDM, higher BDM)
  bdm_pair_delayed,         // [bdm][bdm]
  rate_singles,             // [rate_bins]: accepted singles by acquisition time
  rate_prompts,             // [rate_bins]: prompt records by time_a
  rate_delayed,             // [rate_bins]: delayed records by time_a
  tof_prompt,               // [tof_bins]: signed Δt (proto/signed_tof.h) of prompt records
  tof_delayed,              // [tof_bins]: signed Δt of delayed records, D taken off
  // Derived at publish time from the ones above (derive_histograms()); no backend fills it.
  bdm_pair_randoms_singles_rate,  // [bdm][bdm]: singles-rate randoms over the run (f64)
  // 32-bit bins
  energy_keV,               // [crystal][energy_bins]: every converted single with a number as energy
  energy_raw,               // [crystal][raw_bins]: the same singles' raw ADC value
  flood,                    // [bdm][du][y][x]: every frame whose position is valid
  du_pair_tof_prompt,       // [du][du][du_tof_bins]: signed Δt of prompts by (DU of the lower
                            //   crystal, DU of the higher crystal), DU = bdm * du_per_bdm + du
  du_pair_tof_delayed,      // [du][du][du_tof_bins]: the same for delayed records
  count_
};
inline constexpr int kHistCount = static_cast<int>(Hist::count_);
inline constexpr int kFirst32BitHist = static_cast<int>(Hist::energy_keV);

PETDAQ_HD constexpr bool hist_is_32bit(Hist h) { return static_cast<int>(h) >= kFirst32BitHist; }
// Estimates, not counts: 8-byte IEEE doubles (derived at publish time; 0.0 is all zero bytes).
PETDAQ_HD constexpr bool hist_is_real(Hist h) { return h == Hist::bdm_pair_randoms_singles_rate; }

struct HistogramLayout {
  Geometry geometry;
  std::uint32_t crystal_count = 0;
  std::uint32_t bdm_count = 0;
  std::uint32_t energy_bins = 1;
  float energy_bin_keV = 1;  // bin i holds [i, i + 1) * energy_bin_keV
  std::uint32_t raw_bins = 1;
  std::uint32_t raw_bin_adc = 1;
  std::uint32_t dt_bins = 1;
  std::uint32_t dt_bin_ticks = 1;
  std::int64_t delayed_offset_ticks = 0;  // D
  // Signed Δt axes (DESIGN section 7): tof_bins bins of dt_bin_ticks from -tof_half *
  // dt_bin_ticks, and du_tof_bins coarser bins of du_tof_bin_ticks from -du_tof_half *
  // du_tof_bin_ticks; both cover [-W, W].
  std::uint32_t tof_half = 1;
  std::uint32_t tof_bins = 2;
  std::uint32_t du_tof_half = 1;
  std::uint32_t du_tof_bins = 2;
  std::uint32_t du_tof_bin_ticks = 1;
  std::uint32_t du_count = 1;  // DUs in the scanner
  std::uint32_t rate_bins = 1;
  std::uint64_t rate_bin_ticks = 1;
  std::uint64_t offset[kHistCount] = {};  // bytes from the start of the bins
  std::uint64_t count[kHistCount] = {};   // bins of each histogram
  std::uint64_t bytes = 0;                // the whole block

  PETDAQ_HD unsigned long long* u64(std::uint8_t* bins, Hist h) const {
    return reinterpret_cast<unsigned long long*>(bins + offset[static_cast<int>(h)]);
  }
  PETDAQ_HD unsigned int* u32(std::uint8_t* bins, Hist h) const {
    return reinterpret_cast<unsigned int*>(bins + offset[static_cast<int>(h)]);
  }

  // Bin of a corrected energy; energy_bins (no bin) for a NaN. Below 0 counts in the first
  // bin, from energy_bins * energy_bin_keV up in the last.
  PETDAQ_HD std::uint32_t energy_bin(float keV) const {
    if (!(keV == keV)) return energy_bins;
    if (!(keV >= 0.0f)) return 0;
    const float b = keV / energy_bin_keV;
    return b >= static_cast<float>(energy_bins - 1) ? energy_bins - 1
                                                    : static_cast<std::uint32_t>(b);
  }
  // Bin of a raw ADC value; the last bin also holds everything above.
  PETDAQ_HD std::uint32_t raw_bin(std::uint32_t raw) const {
    const std::uint32_t b = raw / raw_bin_adc;
    return b < raw_bins ? b : raw_bins - 1;
  }
  // Bin of a time difference in ticks (prompts: dt; delayed: dt - D); below 0 counts in the
  // first bin, past the range in the last.
  PETDAQ_HD std::uint32_t dt_bin(std::int64_t dt_ticks) const {
    if (dt_ticks < 0) return 0;
    const std::uint64_t b = static_cast<std::uint64_t>(dt_ticks) / dt_bin_ticks;
    return b < dt_bins ? static_cast<std::uint32_t>(b) : dt_bins - 1;
  }
  // Bin of a signed Δt in ticks on an axis of `half` bins of `w` ticks each side of 0 (bin
  // half holds [0, w)); below the axis counts in the first bin, past it in the last.
  PETDAQ_HD static std::uint32_t signed_bin(std::int64_t dt, std::uint32_t w, std::uint32_t half) {
    const std::int64_t lo = -static_cast<std::int64_t>(half) * w;
    if (dt < lo) return 0;
    const std::uint64_t b = static_cast<std::uint64_t>(dt - lo) / w;
    return b < 2u * half ? static_cast<std::uint32_t>(b) : 2 * half - 1;
  }
  PETDAQ_HD std::uint32_t tof_bin(std::int64_t dt) const { return signed_bin(dt, dt_bin_ticks, tof_half); }
  PETDAQ_HD std::uint32_t du_tof_bin(std::int64_t dt) const {
    return signed_bin(dt, du_tof_bin_ticks, du_tof_half);
  }
  // Global DU index (bdm * du_per_bdm + du) of a crystal.
  PETDAQ_HD std::uint32_t du_of(std::uint32_t crystal) const {
    const CrystalAddress a = geometry.address_of(crystal);
    return a.bdm * geometry.du_per_bdm() + a.du;
  }
  // Bin of a signed Δt in du_pair_tof_*: [DU of the lower crystal][DU of the higher][Δt].
  PETDAQ_HD std::size_t du_pair_tof_index(const CoincRecord& r, std::int64_t signed_dt) const {
    return (std::size_t{du_of(tof_lower_crystal(r))} * du_count + du_of(tof_higher_crystal(r))) *
               du_tof_bins + du_tof_bin(signed_dt);
  }
  // Bin of an acquisition time in ticks; the last bin also holds everything later.
  PETDAQ_HD std::uint32_t rate_bin(std::uint64_t time) const {
    const std::uint64_t b = time / rate_bin_ticks;
    return b < rate_bins ? static_cast<std::uint32_t>(b) : rate_bins - 1;
  }
  // Index of the pair of BDMs of two crystals in a [bdm][bdm] matrix: row = the lower BDM.
  PETDAQ_HD std::uint32_t bdm_pair(std::uint32_t crystal_a, std::uint32_t crystal_b) const {
    const std::uint32_t a = geometry.address_of(crystal_a).bdm;
    const std::uint32_t b = geometry.address_of(crystal_b).bdm;
    return a < b ? a * bdm_count + b : b * bdm_count + a;
  }
};

// The layout for these settings (output.histograms.*, the geometry, the coincidence window).
HistogramLayout make_histogram_layout(const Settings& settings);

// How a backend adds one to a bin: plainly on the CPU, atomically on the GPU.
struct PlainIncrement {
  PETDAQ_HD void operator()(unsigned int* bin) const { ++*bin; }
  PETDAQ_HD void operator()(unsigned long long* bin) const { ++*bin; }
};

// The convert stage's histograms of one raw frame whose position is valid (check_frame
// passed, whether or not the table names a crystal there) and whose conversion gave
// `status` and `s`: the flood map for every such frame, the per-crystal counts and spectra
// for every converted single, the singles rate for the accepted ones.
template <class Increment>
PETDAQ_HD void histogram_converted(const std::uint8_t* f, const ConvertTables& t,
                                   const HistogramLayout& l, std::uint8_t* bins,
                                   FrameStatus status, const Single& s, Increment inc) {
  inc(l.u32(bins, Hist::flood) + position_index(f, t));
  if (status == FrameStatus::single) {
    inc(l.u64(bins, Hist::crystal_singles) + s.crystal);
    inc(l.u64(bins, Hist::rate_singles) + l.rate_bin(s.time));
  } else if (status == FrameStatus::energy_rejected) {
    inc(l.u64(bins, Hist::crystal_energy_rejected) + s.crystal);
  } else {
    return;
  }
  const std::uint32_t e = l.energy_bin(s.energy);
  if (e < l.energy_bins)
    inc(l.u32(bins, Hist::energy_keV) + std::size_t{s.crystal} * l.energy_bins + e);
  const std::uint32_t raw = bytes::load_be16(f + frame_offset::energy);
  inc(l.u32(bins, Hist::energy_raw) + std::size_t{s.crystal} * l.raw_bins + l.raw_bin(raw));
}

// The convert stage's histograms of one raw frame (frames with an invalid position count
// nowhere).
template <class Increment>
PETDAQ_HD void histogram_frame(const std::uint8_t* f, const ConvertTables& t,
                               const HistogramLayout& l, std::uint8_t* bins, Increment inc) {
  if (check_frame(f, t) != FrameStatus::single) return;
  Single s;
  const FrameStatus status = convert_frame(f, t, s);
  histogram_converted(f, t, l, bins, status, s, inc);
}

// The coincidence stage's histograms of one published record.
template <class Increment>
PETDAQ_HD void histogram_record(const CoincRecord& r, bool delayed, const HistogramLayout& l,
                                std::uint8_t* bins, Increment inc) {
  const std::int64_t dt = delayed ? std::int64_t{r.dt} - l.delayed_offset_ticks : r.dt;
  inc(l.u64(bins, delayed ? Hist::dt_delayed : Hist::dt_prompt) + l.dt_bin(dt));
  inc(l.u64(bins, delayed ? Hist::bdm_pair_delayed : Hist::bdm_pair_prompt) +
      l.bdm_pair(r.crystal_a, r.crystal_b));
  inc(l.u64(bins, delayed ? Hist::rate_delayed : Hist::rate_prompts) + l.rate_bin(r.time_a));
  // Signed Δt (proto/signed_tof.h); a delayed record's is signed the same way, D taken off
  // its dt first, so that its flat spread matches the prompts' randoms floor.
  const std::int64_t sdt = sign_by_crystal_order(r, dt);
  inc(l.u64(bins, delayed ? Hist::tof_delayed : Hist::tof_prompt) + l.tof_bin(sdt));
  inc(l.u32(bins, delayed ? Hist::du_pair_tof_delayed : Hist::du_pair_tof_prompt) +
      l.du_pair_tof_index(r, sdt));
}

}  // namespace petdaq

// ---- host side: the CPU's accumulation, the file and message body, and their reader ----

#include <array>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "core/counters.h"
#include "proto/histogram_file.h"

namespace petdaq {

class Counters;

// Name and unit of each histogram, as the file's descriptors give them.
const char* hist_name(Hist h);
// The file's descriptor of a histogram (proto/histogram_file.h): name, unit, element type,
// shape and the last axis's bin edges; data_offset from the start of the layout's bins.
HistDescriptor hist_descriptor(Hist h, const HistogramLayout& layout, double tick_ps);

// One run's bins, owned on the host: the CPU backend fills them; a GPU backend copies its
// device bins here on request. Sized and zeroed at construction; nothing allocates after.
class HistogramSet {
 public:
  explicit HistogramSet(const HistogramLayout& layout);

  const HistogramLayout& layout() const { return layout_; }
  std::uint8_t* bins() { return bins_.get(); }
  const std::uint8_t* bins() const { return bins_.get(); }
  void reset();

  // The convert-stage and coincidence-stage rules of histogram_frame / histogram_record.
  void add_frames(const RawFrame* frames, std::size_t n, const ConvertTables& tables);
  void add_records(const CoincRecord* records, std::size_t n, bool delayed);

  // Bin i of histogram h (either width) and the sum of all of h's bins. The derived
  // histograms are filled only in encoded files; here they stay 0.
  std::uint64_t at(Hist h, std::size_t i) const;
  std::uint64_t sum(Hist h) const;

 private:
  struct FreeDeleter {
    void operator()(void* p) const;
  };
  HistogramLayout layout_;
  // On transparent huge pages where the kernel allows them: the bins are tens of MB written
  // at random, and with 4 KiB pages nearly every increment would also miss the TLB.
  std::unique_ptr<std::uint8_t[], FreeDeleter> bins_;
};

// Every counter's value at the start of a run: a run's histogram file carries the run's own
// counts (the counters minus these), so that its sums match its bins (DESIGN section 7).
using CounterBase = std::array<std::uint64_t, kCounterCount>;
CounterBase counter_base(const Counters& counters);

// The JSON document of a histogram file: run, backend, geometry, windows, bin settings,
// the position table's path and, when given, every counter: with `run_base`, `counters`
// holds the run's counts (each counter minus its value at the run's start) and
// `counters_since_start` the totals; without, `counters` holds the totals.
std::string histogram_metadata_json(const Settings& settings, std::uint64_t run_id,
                                    std::string_view backend, const Counters* counters,
                                    const CounterBase* run_base = nullptr);

// The acquisition time that bins cover, in ticks: [first_tick, end_tick); empty when the
// caller does not know it.
struct HistogramSpan {
  std::uint64_t first_tick = 0;
  std::uint64_t end_tick = 0;
  bool empty() const { return end_tick <= first_tick; }
};

// ∫ S(t)² dt over the run, in singles² per second, from the `rate_singles` bins n_t of
// width w (docs/randoms.md, "In the histograms"): Σ n_t² / w over the bins between the
// first and the last non-empty one; those two (and the last bin, which also holds
// everything later) at the rate of their inner neighbour, n · max(n_next / w, n / w)
// (n_next / w alone for the open-ended last bin). A run of fewer than three bins: N² / T
// with T the span's length, or without a span the whole bins' (an under-estimate).
double singles_rate_squared_integral(const HistogramLayout& l, const std::uint8_t* bins,
                                     double tick_ps, HistogramSpan span);

// Fills the derived histograms of `bins` (a copy laid out by l, its other histograms
// accumulated) from the others: bdm_pair_randoms_singles_rate[a][b] (a <= b) = the
// singles-rate randoms of the crystal pairs of BDMs a and b over the run, τ G_ab(N) / N² ·
// ∫ S² dt with G_ab(N) the good-pair sum of the per-crystal singles N_i
// (singles_rate_randoms_by_bdm_pair(), core/randoms.h), as doubles.
void derive_histograms(const HistogramLayout& l, const Settings& settings, std::uint8_t* bins,
                       HistogramSpan span);

// Encodes the file (= the `histograms` message body) into `out`, reusing its capacity; the
// file's derived histograms are filled by derive_histograms() with `span`.
void encode_histogram_file(const HistogramSet& set, const Settings& settings,
                           std::uint64_t run_id, std::string_view metadata_json,
                           std::vector<std::uint8_t>& out, HistogramSpan span = {});

// A refused histogram file or message: what() says what is wrong with it.
class HistogramFileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Writes encoded bytes to `file`; throws HistogramFileError naming the file.
void write_histogram_file(const std::filesystem::path& file, const std::vector<std::uint8_t>& bytes);
// Reads a whole file; throws HistogramFileError naming the file.
std::vector<std::uint8_t> read_histogram_file(const std::filesystem::path& file);

// A parsed file or message body (views into the caller's bytes, which must outlive it).
struct HistogramFile {
  HistFileHeader header;
  std::vector<HistDescriptor> descriptors;
  std::string_view metadata;
  const std::uint8_t* data = nullptr;

  const HistDescriptor* find(std::string_view name) const;
  // A bin's count; for a real histogram (an estimate) the value rounded, 0 below 0.
  std::uint64_t value(const HistDescriptor& d, std::uint64_t index) const;
  // A bin's value as a number, whatever the element type.
  double number(const HistDescriptor& d, std::uint64_t index) const;
};
// Checks magic, version, sizes, every descriptor's shape and that every bin lies inside the
// bytes; throws HistogramFileError.
HistogramFile parse_histogram_file(const std::uint8_t* bytes, std::size_t size);

}  // namespace petdaq

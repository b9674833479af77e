// Live TOF back-positioned image (DESIGN section 7, "Image"): a histo-image in which every
// prompt adds one to the voxel at its most likely position along its line of response, and,
// with output.image.subtract_delayed, every delayed-window record subtracts one; plus the
// sums of a centroid trace by acquisition time. Not a reconstruction: no attenuation,
// scatter or normalisation correction.
//
// The rule is written once, in integers, as host/device functions that the CPU backend
// (core/image.cpp) and the GPU backend (gpu/image_kernels.cuh) both compile: GPU = CPU voxel
// for voxel, whatever the order in which records are added.
//
// Position of a record (DESIGN section 5, "Signed Δt"): with L the lower-id crystal's centre,
// H the higher one's and Δt = t(L) − t(H) (signed_dt_ticks), the point is the midpoint moved
// by c·Δt/2 towards H, clamped to the segment [L, H]:  p = (L + H)/2 + (H − L)/|H − L| · c·Δt/2.
// A delayed record's Δt is taken after removing the delay D, as the histograms do.
#pragma once

#include <cstddef>
#include <cstdint>

#include "proto/host_device.h"
#include "proto/records.h"
#include "proto/signed_tof.h"

#if defined(__CUDACC__)
#include <math.h>
#else
#include <cmath>
#endif

namespace petdaq {

struct Settings;

// Sums of one centroid-trace bin, all 64-bit integers (two's complement for the signed ones).
// w = +1 for a prompt, −1 for a subtracted delayed record; positions in µm, squares in
// (10 µm)².
enum class TraceSum : std::uint8_t {
  weight = 0,     // Σ w
  events,         // Σ w² (prompts + subtracted delayed)
  wx, wy, wz,     // Σ w·x
  x, y, z,        // Σ w²·x
  xx, yy, zz,     // Σ w²·x²
  count_
};
inline constexpr int kTraceSums = static_cast<int>(TraceSum::count_);

// Tallies of the records the image saw.
enum class ImageTally : std::uint8_t {
  prompts_in = 0,    // prompts in a voxel
  prompts_out,       // prompts whose point lies outside the field of view
  delayed_in,        // subtracted delayed records in a voxel
  delayed_out,
  count_
};
inline constexpr int kImageTallies = static_cast<int>(ImageTally::count_);

// c/2 in µm per ps.
inline constexpr double kHalfLightUmPerPs = 0.299792458e3 / 2;

struct ImageLayout {
  std::uint32_t nx = 1, ny = 1, nz = 1;
  std::int32_t voxel_um = 1;
  std::int32_t origin_um[3] = {};  // low corner of voxel (0, 0, 0)
  // c/2 × one tick, in µm × 2^16.
  std::int64_t shift_q16_per_tick = 0;
  std::int64_t delayed_offset_ticks = 0;  // D
  bool subtract_delayed = false;
  std::uint32_t trace_bins = 1;
  std::uint64_t trace_bin_ticks = 1;
  // Crystal centres, x y z in µm per crystal (this side's copy: host or device memory).
  const std::int32_t* crystal_um = nullptr;
  std::uint32_t crystal_count = 0;
  // The bins: the voxels (int32, [z][y][x]), then the trace (int64 [bin][kTraceSums]), then
  // the tallies (uint64), then the trace's reach (uint64: the highest bin + 1 and trace_bins
  // minus the lowest bin that took a record, each 0 while none did), so that a reader scans
  // only the bins in use.
  std::uint64_t voxel_count = 0;
  std::uint64_t trace_offset = 0;
  std::uint64_t tally_offset = 0;
  std::uint64_t reach_offset = 0;
  std::uint64_t bytes = 0;

  PETDAQ_HD int* voxels(std::uint8_t* bins) const { return reinterpret_cast<int*>(bins); }
  PETDAQ_HD unsigned long long* trace(std::uint8_t* bins) const {
    return reinterpret_cast<unsigned long long*>(bins + trace_offset);
  }
  PETDAQ_HD unsigned long long* tallies(std::uint8_t* bins) const {
    return reinterpret_cast<unsigned long long*>(bins + tally_offset);
  }
  PETDAQ_HD unsigned long long* reach(std::uint8_t* bins) const {
    return reinterpret_cast<unsigned long long*>(bins + reach_offset);
  }
  PETDAQ_HD std::uint32_t trace_bin(std::uint64_t time) const {
    const std::uint64_t b = time / trace_bin_ticks;
    return b < trace_bins ? static_cast<std::uint32_t>(b) : trace_bins - 1;
  }
};

// The layout for these settings (output.image.*, the scanner, the delayed window); the
// crystal table is left null (make_crystal_table fills one).
ImageLayout make_image_layout(const Settings& settings);

// floor(sqrt(v)) exactly, for 0 <= v < 2^62: the correctly rounded double square root
// (IEEE on both sides), then corrected in integers.
PETDAQ_HD std::int64_t image_isqrt(std::int64_t v) {
  std::int64_t r = static_cast<std::int64_t>(sqrt(static_cast<double>(v)));
  while (r > 0 && r * r > v) --r;
  while ((r + 1) * (r + 1) <= v) ++r;
  return r;
}

// floor(a / b) for b > 0.
PETDAQ_HD std::int64_t image_floor_div(std::int64_t a, std::int64_t b) {
  const std::int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

// The most likely point of a record, in µm; false when a crystal id is out of range.
PETDAQ_HD bool image_point(const CoincRecord& r, bool delayed, const ImageLayout& l,
                                  std::int64_t p[3]) {
  const std::uint32_t lo = tof_lower_crystal(r);
  const std::uint32_t hi = tof_higher_crystal(r);
  if (hi >= l.crystal_count) return false;
  std::int64_t dt = signed_dt_ticks(r);
  if (delayed) dt += r.crystal_a <= r.crystal_b ? l.delayed_offset_ticks : -l.delayed_offset_ticks;
  const std::int32_t* a = l.crystal_um + 3 * std::size_t{lo};
  const std::int32_t* b = l.crystal_um + 3 * std::size_t{hi};
  std::int64_t d[3];
  std::int64_t len2 = 0;
  for (int k = 0; k < 3; ++k) {
    d[k] = std::int64_t{b[k]} - a[k];
    len2 += d[k] * d[k];
  }
  const std::int64_t len = image_isqrt(len2);
  // Shift towards H in µm × 2^16, clamped to half the segment (dt is bounded by the
  // coincidence window, so the product cannot overflow).
  std::int64_t s = dt * l.shift_q16_per_tick;
  const std::int64_t half = len * 32768;
  if (s > half) s = half;
  if (s < -half) s = -half;
  for (int k = 0; k < 3; ++k) {
    const std::int64_t mid_q16 = (std::int64_t{a[k]} + b[k]) * 32768;
    const std::int64_t off_q16 = len > 0 ? d[k] * s / len : 0;
    p[k] = image_floor_div(mid_q16 + off_q16, 65536);
  }
  return true;
}

// Voxel index of a point in µm, or voxel_count when it lies outside the field of view.
PETDAQ_HD std::uint64_t image_voxel(const ImageLayout& l, const std::int64_t p[3]) {
  const std::int64_t ix = image_floor_div(p[0] - l.origin_um[0], l.voxel_um);
  const std::int64_t iy = image_floor_div(p[1] - l.origin_um[1], l.voxel_um);
  const std::int64_t iz = image_floor_div(p[2] - l.origin_um[2], l.voxel_um);
  if (ix < 0 || iy < 0 || iz < 0 || ix >= l.nx || iy >= l.ny || iz >= l.nz) return l.voxel_count;
  return (static_cast<std::uint64_t>(iz) * l.ny + static_cast<std::uint64_t>(iy)) * l.nx +
         static_cast<std::uint64_t>(ix);
}

// How a backend adds to a bin (and raises the trace's reach): plainly on the CPU,
// atomically on the GPU.
struct PlainImageAdd {
  PETDAQ_HD void operator()(int* v, int w) const { *v += w; }
  PETDAQ_HD void operator()(unsigned long long* v, unsigned long long x) const { *v += x; }
  PETDAQ_HD void max(unsigned long long* v, unsigned long long x) const {
    if (x > *v) *v = x;
  }
};

// What one record adds: its tally, and when its point lies in the field, its voxel and its
// trace bin's sums (TraceSum order). A delayed record counts only with subtract_delayed; a
// record whose point lies outside the field of view counts only in a tally (not in the
// trace either).
struct ImageHit {
  int tally = -1;                   // ImageTally index; -1: the record adds nothing
  std::uint64_t voxel = 0;          // voxel_count: outside the field
  int weight = 0;                   // +1 prompt, −1 subtracted delayed
  std::uint32_t trace_bin = 0;
  std::int64_t sums[kTraceSums] = {};
};

PETDAQ_HD void image_hit(const CoincRecord& r, bool delayed, const ImageLayout& l, ImageHit& h) {
  h.tally = -1;
  h.voxel = l.voxel_count;
  if (delayed && !l.subtract_delayed) return;
  std::int64_t p[3];
  if (!image_point(r, delayed, l, p)) return;
  h.voxel = image_voxel(l, p);
  if (h.voxel == l.voxel_count) {
    h.tally = static_cast<int>(delayed ? ImageTally::delayed_out : ImageTally::prompts_out);
    return;
  }
  h.tally = static_cast<int>(delayed ? ImageTally::delayed_in : ImageTally::prompts_in);
  const int w = delayed ? -1 : 1;
  h.weight = w;
  h.trace_bin = l.trace_bin(r.time_a);
  h.sums[static_cast<int>(TraceSum::weight)] = w;
  h.sums[static_cast<int>(TraceSum::events)] = 1;
  for (int k = 0; k < 3; ++k) {
    h.sums[static_cast<int>(TraceSum::wx) + k] = w * p[k];
    h.sums[static_cast<int>(TraceSum::x) + k] = p[k];
    const std::int64_t q = p[k] / 10;
    h.sums[static_cast<int>(TraceSum::xx) + k] = q * q;
  }
}

// The sums of one trace bin (the GPU adds a warp's sums at once when its records share a bin).
template <class Add>
PETDAQ_HD void image_add_trace(const ImageLayout& l, std::uint8_t* bins, std::uint32_t bin,
                               const std::int64_t* sums, Add add) {
  unsigned long long* t = l.trace(bins) + std::size_t{bin} * kTraceSums;
  for (int k = 0; k < kTraceSums; ++k) add(t + k, static_cast<unsigned long long>(sums[k]));
  add.max(l.reach(bins), bin + 1ull);
  add.max(l.reach(bins) + 1, std::uint64_t{l.trace_bins} - bin);
}

// One record into the image, the trace and the tallies.
template <class Add>
PETDAQ_HD void image_record(const CoincRecord& r, bool delayed, const ImageLayout& l,
                            std::uint8_t* bins, Add add) {
  ImageHit h;
  image_hit(r, delayed, l, h);
  if (h.tally < 0) return;
  add(l.tallies(bins) + h.tally, 1ull);
  if (h.voxel == l.voxel_count) return;
  add(l.voxels(bins) + h.voxel, h.weight);
  image_add_trace(l, bins, h.trace_bin, h.sums, add);
}

}  // namespace petdaq

// ---- host side: the CPU's accumulation, the window, the file and message body, the reader --

#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace petdaq {

// Crystal points in µm, x y z per crystal: the centre of core/crystal_position.h moved along
// the panel's normal to output.image.depth_fraction of the crystal's depth, rounded.
std::vector<std::int32_t> make_crystal_table(const Settings& settings);

// One run's image bins, owned on the host: the CPU backend fills them; a GPU backend copies
// its device bins here on request. Sized and zeroed at construction; nothing allocates after.
class ImageSet {
 public:
  explicit ImageSet(const Settings& settings);

  const ImageLayout& layout() const { return layout_; }
  const std::vector<std::int32_t>& crystal_table() const { return crystals_; }
  std::uint8_t* bins() { return bins_.data(); }
  const std::uint8_t* bins() const { return bins_.data(); }
  void reset();
  void add_records(const CoincRecord* records, std::size_t n, bool delayed);

  const std::int32_t* voxels() const { return reinterpret_cast<const std::int32_t*>(bins_.data()); }
  std::int64_t trace_sum(std::uint32_t bin, TraceSum s) const;
  std::uint64_t tally(ImageTally t) const;
  // The trace bins that took a record: [first, end); first == end while none did.
  std::uint32_t trace_first() const;
  std::uint32_t trace_end() const;

 private:
  std::vector<std::int32_t> crystals_;
  ImageLayout layout_;
  std::vector<std::uint8_t> bins_;
};

// One centroid-trace sample: acquisition time of the bin's centre (s), the weighted mean
// point (mm), its statistical error (mm, the standard error of the mean) and the weight.
struct TraceSample {
  double t_s = 0;
  double mean_mm[3] = {};
  double error_mm[3] = {};
  double weight = 0;
};
// The sample of one bin; false for a bin with Σw <= 0.
bool trace_sample(const ImageLayout& l, double tick_ps, const std::int64_t* sums,
                  std::uint32_t bin, TraceSample& out);

// The sliding-window image: snapshots of the run image at each publication, tagged with the
// acquisition time they reached; the window is the run image minus the latest snapshot at
// least window_s older. Its memory is allocated at construction (ceil(window / interval) + 2
// images).
class ImageWindow {
 public:
  ImageWindow(const Settings& settings, const ImageLayout& layout);
  // A run starts: every snapshot is forgotten.
  void reset();
  // Takes a snapshot of `run` reaching acquisition time `end_tick` and computes the window
  // into window(); its acquisition span is [window_first_tick(), end_tick).
  void update(const std::int32_t* run, std::uint64_t first_tick, std::uint64_t end_tick);
  const std::int32_t* window() const { return window_.data(); }
  std::uint64_t window_first_tick() const { return window_first_; }

 private:
  std::uint64_t window_ticks_;
  std::size_t voxels_;
  std::vector<std::int32_t> snapshots_;  // [slot][voxel]
  std::vector<std::uint64_t> ticks_;     // end tick of each slot
  std::size_t head_ = 0, count_ = 0;
  std::vector<std::int32_t> window_;
  std::uint64_t window_first_ = 0;
};

// The acquisition span of an image message: the run's and the window's [first, end) ticks.
struct ImageSpan {
  std::uint64_t run_first_tick = 0, run_end_tick = 0;
  std::uint64_t window_first_tick = 0, window_end_tick = 0;
};

// Encodes the image file (= the `image` message body, DESIGN section 7) into `out`, reusing
// its capacity; `window` null: the run image is also the window.
void encode_image_file(const ImageSet& set, const Settings& settings, std::uint64_t run_id,
                       const std::int32_t* window, const ImageSpan& span,
                       std::vector<std::uint8_t>& out);

class ImageFileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A parsed image file or message body (views into the caller's bytes).
struct ImageFile {
  std::uint64_t run_id = 0;
  std::uint32_t dims[3] = {};
  float voxel_mm = 0;
  float origin_mm[3] = {};
  std::uint32_t flags = 0;
  double tick_ps = 0;
  ImageSpan span;
  std::uint64_t tallies[kImageTallies] = {};
  std::uint32_t trace_count = 0;
  float trace_bin_ms = 0;
  const std::uint8_t* run_image = nullptr;     // int32 LE [z][y][x]
  const std::uint8_t* window_image = nullptr;  // int32 LE
  const std::uint8_t* axial_run = nullptr;     // f64 LE [z]
  const std::uint8_t* axial_window = nullptr;  // f64 LE [z]
  const std::uint8_t* trace = nullptr;         // f64 LE [sample][8]

  std::int32_t run_voxel(std::uint64_t i) const;
  std::int32_t window_voxel(std::uint64_t i) const;
  TraceSample sample(std::uint32_t i) const;
  std::uint64_t voxel_count() const { return std::uint64_t{dims[0]} * dims[1] * dims[2]; }
};
ImageFile parse_image_file(const std::uint8_t* bytes, std::size_t size);

void write_image_file(const std::filesystem::path& file, const std::vector<std::uint8_t>& bytes);
std::vector<std::uint8_t> read_image_file(const std::filesystem::path& file);

inline constexpr std::uint32_t kImageMagic = 0x4D494450;  // "PDIM" little-endian
inline constexpr std::uint16_t kImageVersion = 1;
inline constexpr std::size_t kImageHeaderBytes = 160;
inline constexpr std::uint32_t kImageFlagSubtractDelayed = 1;
inline constexpr std::size_t kTraceSampleDoubles = 8;

}  // namespace petdaq

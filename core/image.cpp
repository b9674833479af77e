// Live TOF back-positioned image (DESIGN section 7, "Image"): the layout, the crystal table,
// the CPU's accumulation, the sliding window, the file and message body and its reader.
#include "core/image.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "core/coincidence_params.h"
#include "core/crystal_position.h"
#include "core/geometry.h"
#include "core/settings.h"
#include "proto/bytes.h"

namespace petdaq {

static_assert(std::endian::native == std::endian::little,
              "image voxels are written straight from memory (little-endian)");

ImageLayout make_image_layout(const Settings& s) {
  const ImageSettings& is = s.output.image;
  ImageLayout l;
  l.nx = is.dim_x;
  l.ny = is.dim_y;
  l.nz = is.dim_z;
  l.voxel_um = static_cast<std::int32_t>(std::llround(is.voxel_mm * 1000.0));
  const std::uint32_t dims[3] = {l.nx, l.ny, l.nz};
  for (int k = 0; k < 3; ++k)  // centred on the scanner's centre
    l.origin_um[k] = -static_cast<std::int32_t>((std::int64_t{dims[k]} * l.voxel_um) / 2);
  l.shift_q16_per_tick =
      static_cast<std::int64_t>(std::llround(kHalfLightUmPerPs * s.scanner.tick_ps * 65536.0));
  l.delayed_offset_ticks =
      static_cast<std::int64_t>(CoincidenceParams::from(s).delayed_offset_ticks);
  l.subtract_delayed = is.subtract_delayed && s.coincidence.delayed.enabled;
  l.trace_bins = is.trace_bins;
  l.trace_bin_ticks = std::max<std::uint64_t>(1, ps_to_ticks(is.trace_bin_ms * 1e9, s.scanner.tick_ps));
  l.crystal_count = Geometry::from(s.scanner).crystal_count();
  l.voxel_count = std::uint64_t{l.nx} * l.ny * l.nz;
  l.trace_offset = (l.voxel_count * sizeof(std::int32_t) + 7) / 8 * 8;
  l.tally_offset = l.trace_offset + std::uint64_t{l.trace_bins} * kTraceSums * 8;
  l.reach_offset = l.tally_offset + kImageTallies * 8;
  l.bytes = l.reach_offset + 2 * 8;
  return l;
}

std::vector<std::int32_t> make_crystal_table(const Settings& s) {
  const std::uint32_t n = Geometry::from(s.scanner).crystal_count();
  std::vector<std::int32_t> t(std::size_t{n} * 3);
  for (std::uint32_t c = 0; c < n; ++c) {
    const CrystalPlace p = crystal_place(s.scanner, c);
    // From the centre (half the depth) to depth_fraction of the depth, along the panel's normal.
    const double out_mm = (s.output.image.depth_fraction - 0.5) * s.scanner.crystal_depth_mm;
    for (int k = 0; k < 3; ++k)
      t[std::size_t{c} * 3 + k] =
          static_cast<std::int32_t>(std::llround((p.centre_mm[k] + out_mm * p.outward[k]) * 1000.0));
  }
  return t;
}

ImageSet::ImageSet(const Settings& settings)
    : crystals_(make_crystal_table(settings)), layout_(make_image_layout(settings)) {
  layout_.crystal_um = crystals_.data();
  bins_.assign(layout_.bytes, 0);
}

void ImageSet::reset() { std::fill(bins_.begin(), bins_.end(), std::uint8_t{0}); }

void ImageSet::add_records(const CoincRecord* records, std::size_t n, bool delayed) {
  std::uint8_t* b = bins_.data();
  for (std::size_t i = 0; i < n; ++i) image_record(records[i], delayed, layout_, b, PlainImageAdd{});
}

std::int64_t ImageSet::trace_sum(std::uint32_t bin, TraceSum s) const {
  std::int64_t v;
  std::memcpy(&v, bins_.data() + layout_.trace_offset +
                      (std::size_t{bin} * kTraceSums + static_cast<int>(s)) * 8,
              8);
  return v;
}

std::uint64_t ImageSet::tally(ImageTally t) const {
  std::uint64_t v;
  std::memcpy(&v, bins_.data() + layout_.tally_offset + static_cast<int>(t) * 8, 8);
  return v;
}

std::uint32_t ImageSet::trace_end() const {
  std::uint64_t v;
  std::memcpy(&v, bins_.data() + layout_.reach_offset, 8);
  return static_cast<std::uint32_t>(std::min<std::uint64_t>(v, layout_.trace_bins));
}

std::uint32_t ImageSet::trace_first() const {
  std::uint64_t v;
  std::memcpy(&v, bins_.data() + layout_.reach_offset + 8, 8);
  if (v == 0) return trace_end();
  return static_cast<std::uint32_t>(layout_.trace_bins - std::min<std::uint64_t>(v, layout_.trace_bins));
}

bool trace_sample(const ImageLayout& l, double tick_ps, const std::int64_t* sums,
                  std::uint32_t bin, TraceSample& out) {
  const double w = static_cast<double>(sums[static_cast<int>(TraceSum::weight)]);
  if (!(w > 0)) return false;
  const double n = static_cast<double>(sums[static_cast<int>(TraceSum::events)]);
  out.t_s = (static_cast<double>(bin) + 0.5) * static_cast<double>(l.trace_bin_ticks) * tick_ps * 1e-12;
  out.weight = w;
  for (int k = 0; k < 3; ++k) {
    const double m_um = static_cast<double>(sums[static_cast<int>(TraceSum::wx) + k]) / w;
    const double s1 = static_cast<double>(sums[static_cast<int>(TraceSum::x) + k]);
    const double s2 = static_cast<double>(sums[static_cast<int>(TraceSum::xx) + k]) * 100.0;
    // Var(mean) = Σ w² (x − m)² / (Σ w)²
    const double var = std::max(0.0, s2 - 2 * m_um * s1 + m_um * m_um * n) / (w * w);
    out.mean_mm[k] = m_um * 1e-3;
    out.error_mm[k] = std::sqrt(var) * 1e-3;
  }
  return true;
}

// ---- the window ----

ImageWindow::ImageWindow(const Settings& s, const ImageLayout& layout)
    : window_ticks_(ps_to_ticks(s.output.image.window_s * 1e12, s.scanner.tick_ps)),
      voxels_(layout.voxel_count) {
  const auto slots = static_cast<std::size_t>(
      std::ceil(s.output.image.window_s * 1000.0 / s.output.image.interval_ms)) + 2;
  snapshots_.assign(slots * voxels_, 0);
  ticks_.assign(slots, 0);
  window_.assign(voxels_, 0);
}

void ImageWindow::reset() {
  head_ = count_ = 0;
  window_first_ = 0;
}

void ImageWindow::update(const std::int32_t* run, std::uint64_t first_tick, std::uint64_t end_tick) {
  // The base: the latest snapshot that ends at least a window before end_tick.
  const std::uint64_t limit = end_tick > window_ticks_ ? end_tick - window_ticks_ : 0;
  const std::size_t slots = ticks_.size();
  const std::int32_t* base = nullptr;
  std::uint64_t base_tick = first_tick;
  std::size_t keep_from = 0;  // snapshots older than the base are no longer needed
  for (std::size_t i = 0; i < count_; ++i) {  // oldest first
    const std::size_t slot = (head_ + slots - count_ + i) % slots;
    if (ticks_[slot] <= limit) {
      base = snapshots_.data() + slot * voxels_;
      base_tick = ticks_[slot];
      keep_from = i;
    }
  }
  window_first_ = std::max(base_tick, first_tick);
  count_ -= keep_from;
  if (count_ == slots) --count_;  // full: the oldest goes (the window then grows a little)
  // One pass over the run image: the window and the new snapshot. In a full ring the head
  // slot may be the base: each voxel's base is read before its snapshot overwrites it.
  std::int32_t* snapshot = snapshots_.data() + head_ * voxels_;
  if (base)
    for (std::size_t v = 0; v < voxels_; ++v) {
      const std::int32_t r = run[v];
      window_[v] = r - base[v];
      snapshot[v] = r;
    }
  else
    for (std::size_t v = 0; v < voxels_; ++v) window_[v] = snapshot[v] = run[v];
  ticks_[head_] = end_tick;
  head_ = (head_ + 1) % slots;
  ++count_;
}

// ---- the file ----

namespace {

void put32(std::vector<std::uint8_t>& out, std::size_t at, std::uint32_t v) {
  bytes::store_le32(out.data() + at, v);
}
void put64(std::vector<std::uint8_t>& out, std::size_t at, std::uint64_t v) {
  bytes::store_le64(out.data() + at, v);
}
void putf(std::vector<std::uint8_t>& out, std::size_t at, float v) {
  put32(out, at, std::bit_cast<std::uint32_t>(v));
}
void putd(std::vector<std::uint8_t>& out, std::size_t at, double v) {
  put64(out, at, std::bit_cast<std::uint64_t>(v));
}

void axial_profile(const std::int32_t* img, const ImageLayout& l, std::vector<std::uint8_t>& out,
                   std::size_t at) {
  const std::size_t plane = std::size_t{l.nx} * l.ny;
  for (std::uint32_t z = 0; z < l.nz; ++z) {
    double sum = 0;
    for (std::size_t i = 0; i < plane; ++i) sum += img[z * plane + i];
    putd(out, at + z * 8, sum);
  }
}

}  // namespace

void encode_image_file(const ImageSet& set, const Settings& s, std::uint64_t run_id,
                       const std::int32_t* window, const ImageSpan& span,
                       std::vector<std::uint8_t>& out) {
  const ImageLayout& l = set.layout();
  const std::int32_t* run = set.voxels();
  if (!window) window = run;
  // The trace: the bins with Σw > 0, from the first to the last (only the bins that took a
  // record are read: a run uses a few of the trace's bins per second).
  std::uint32_t samples = 0;
  const auto* sums = reinterpret_cast<const std::int64_t*>(set.bins() + l.trace_offset);
  const std::uint32_t trace_first = set.trace_first(), trace_end = set.trace_end();
  TraceSample t;
  for (std::uint32_t b = trace_first; b < trace_end; ++b)
    samples += trace_sample(l, s.scanner.tick_ps, sums + std::size_t{b} * kTraceSums, b, t);
  const std::size_t vbytes = l.voxel_count * 4;
  const std::size_t total = kImageHeaderBytes + 2 * vbytes + 2 * std::size_t{l.nz} * 8 +
                            std::size_t{samples} * kTraceSampleDoubles * 8;
  // Every byte past the header is written below: only the header is cleared (its reserved
  // bytes are zeros), not the megabytes of the images again.
  out.resize(total);
  std::fill_n(out.begin(), kImageHeaderBytes, std::uint8_t{0});
  put32(out, 0, kImageMagic);
  out[4] = kImageVersion & 0xFF;
  out[5] = kImageVersion >> 8;
  out[6] = kImageHeaderBytes & 0xFF;
  out[7] = kImageHeaderBytes >> 8;
  put64(out, 8, run_id);
  put32(out, 16, l.nx);
  put32(out, 20, l.ny);
  put32(out, 24, l.nz);
  putf(out, 28, static_cast<float>(l.voxel_um * 1e-3));
  for (int k = 0; k < 3; ++k) putf(out, 32 + 4 * k, static_cast<float>(l.origin_um[k] * 1e-3));
  put32(out, 44, l.subtract_delayed ? kImageFlagSubtractDelayed : 0);
  putd(out, 48, s.scanner.tick_ps);
  put64(out, 56, span.run_first_tick);
  put64(out, 64, span.run_end_tick);
  put64(out, 72, span.window_first_tick);
  put64(out, 80, span.window_end_tick);
  for (int k = 0; k < kImageTallies; ++k) put64(out, 88 + 8 * k, set.tally(static_cast<ImageTally>(k)));
  put32(out, 120, samples);
  putf(out, 124, static_cast<float>(s.output.image.trace_bin_ms));
  putd(out, 128, s.output.image.window_s);
  std::size_t at = kImageHeaderBytes;
  std::memcpy(out.data() + at, run, vbytes);
  at += vbytes;
  std::memcpy(out.data() + at, window, vbytes);
  at += vbytes;
  axial_profile(run, l, out, at);
  at += std::size_t{l.nz} * 8;
  axial_profile(window, l, out, at);
  at += std::size_t{l.nz} * 8;
  for (std::uint32_t b = trace_first; b < trace_end; ++b) {
    if (!trace_sample(l, s.scanner.tick_ps, sums + std::size_t{b} * kTraceSums, b, t)) continue;
    const double v[kTraceSampleDoubles] = {t.t_s,         t.mean_mm[0],  t.mean_mm[1],
                                           t.mean_mm[2],  t.error_mm[0], t.error_mm[1],
                                           t.error_mm[2], t.weight};
    for (double d : v) {
      putd(out, at, d);
      at += 8;
    }
  }
}

ImageFile parse_image_file(const std::uint8_t* p, std::size_t size) {
  if (size < kImageHeaderBytes)
    throw ImageFileError("not an image file: " + std::to_string(size) + " bytes, shorter than its header");
  ImageFile f;
  if (bytes::load_le32(p) != kImageMagic) throw ImageFileError("not an image file: bad magic");
  const std::uint32_t version = p[4] | (p[5] << 8);
  const std::uint32_t header = p[6] | (p[7] << 8);
  if (version != kImageVersion)
    throw ImageFileError("image file version " + std::to_string(version) + ", this reader knows " +
                         std::to_string(kImageVersion));
  if (header < kImageHeaderBytes || header > size)
    throw ImageFileError("image file: bad header size " + std::to_string(header));
  f.run_id = bytes::load_le64(p + 8);
  for (int k = 0; k < 3; ++k) f.dims[k] = bytes::load_le32(p + 16 + 4 * k);
  f.voxel_mm = std::bit_cast<float>(bytes::load_le32(p + 28));
  for (int k = 0; k < 3; ++k) f.origin_mm[k] = std::bit_cast<float>(bytes::load_le32(p + 32 + 4 * k));
  f.flags = bytes::load_le32(p + 44);
  f.tick_ps = std::bit_cast<double>(bytes::load_le64(p + 48));
  f.span = {bytes::load_le64(p + 56), bytes::load_le64(p + 64), bytes::load_le64(p + 72),
            bytes::load_le64(p + 80)};
  for (int k = 0; k < kImageTallies; ++k) f.tallies[k] = bytes::load_le64(p + 88 + 8 * k);
  f.trace_count = bytes::load_le32(p + 120);
  f.trace_bin_ms = std::bit_cast<float>(bytes::load_le32(p + 124));
  for (int k = 0; k < 3; ++k)
    if (f.dims[k] == 0 || f.dims[k] > 1024)
      throw ImageFileError("image file: dimension " + std::to_string(f.dims[k]) + " out of range");
  const std::uint64_t v = f.voxel_count();
  const std::uint64_t need = std::uint64_t{header} + 8 * v + 16ull * f.dims[2] +
                             std::uint64_t{f.trace_count} * kTraceSampleDoubles * 8;
  if (need != size)
    throw ImageFileError("image file: " + std::to_string(size) + " bytes, its header says " +
                         std::to_string(need));
  f.run_image = p + header;
  f.window_image = f.run_image + 4 * v;
  f.axial_run = f.window_image + 4 * v;
  f.axial_window = f.axial_run + 8ull * f.dims[2];
  f.trace = f.axial_window + 8ull * f.dims[2];
  return f;
}

std::int32_t ImageFile::run_voxel(std::uint64_t i) const {
  return static_cast<std::int32_t>(bytes::load_le32(run_image + 4 * i));
}
std::int32_t ImageFile::window_voxel(std::uint64_t i) const {
  return static_cast<std::int32_t>(bytes::load_le32(window_image + 4 * i));
}
TraceSample ImageFile::sample(std::uint32_t i) const {
  const std::uint8_t* q = trace + std::size_t{i} * kTraceSampleDoubles * 8;
  const auto d = [&](int k) { return std::bit_cast<double>(bytes::load_le64(q + 8 * k)); };
  TraceSample t;
  t.t_s = d(0);
  for (int k = 0; k < 3; ++k) {
    t.mean_mm[k] = d(1 + k);
    t.error_mm[k] = d(4 + k);
  }
  t.weight = d(7);
  return t;
}

void write_image_file(const std::filesystem::path& file, const std::vector<std::uint8_t>& bytes) {
  std::FILE* f = std::fopen(file.c_str(), "wb");
  if (!f) throw ImageFileError(file.string() + ": cannot create: " + std::strerror(errno));
  bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  ok = std::fclose(f) == 0 && ok;
  if (!ok) throw ImageFileError(file.string() + ": write failed: " + std::strerror(errno));
}

std::vector<std::uint8_t> read_image_file(const std::filesystem::path& file) {
  std::FILE* f = std::fopen(file.c_str(), "rb");
  if (!f) throw ImageFileError(file.string() + ": cannot open: " + std::strerror(errno));
  std::vector<std::uint8_t> out;
  std::uint8_t buffer[1 << 16];
  for (std::size_t got; (got = std::fread(buffer, 1, sizeof buffer, f)) > 0;)
    out.insert(out.end(), buffer, buffer + got);
  const bool failed = std::ferror(f);
  std::fclose(f);
  if (failed) throw ImageFileError(file.string() + ": read failed");
  return out;
}

}  // namespace petdaq

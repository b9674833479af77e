// Live histograms (DESIGN section 7): the table of histograms, their layout, filling from
// frames and records, the JSON header and the histogram file. One file because the table
// (names, units, shapes) is read by all of them.
#include "core/histograms.h"

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/coincidence.h"
#include "core/counters.h"
#include "core/randoms.h"
#include "core/settings.h"

namespace petdaq {

static_assert(std::endian::native == std::endian::little,
              "histogram bins are written straight from memory (little-endian)");

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

void json_string(std::string& out, std::string_view s) {
  out += '"';
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  out += '"';
}

void json_number(std::string& out, double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  out += buf;
}

}  // namespace

const char* hist_name(Hist h) { return kInfo[static_cast<int>(h)].name; }

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

void HistogramSet::FreeDeleter::operator()(void* p) const { std::free(p); }

HistogramSet::HistogramSet(const HistogramLayout& layout) : layout_(layout) {
  constexpr std::size_t kHugePageBytes = 2u << 20;
  const std::size_t bytes =
      std::max<std::size_t>(1, (layout.bytes + kHugePageBytes - 1) / kHugePageBytes) * kHugePageBytes;
  void* p = std::aligned_alloc(kHugePageBytes, bytes);
  if (!p) throw std::bad_alloc();
  ::madvise(p, bytes, MADV_HUGEPAGE);  // a hint: without huge pages it works all the same
  bins_.reset(static_cast<std::uint8_t*>(p));
  reset();
}

void HistogramSet::reset() { std::memset(bins_.get(), 0, layout_.bytes); }

// The rule is histogram_frame(); this loop only requests memory ahead, the way
// convert_frames() does: the bins (tens of MB) and the tables are read at random, and each
// frame would otherwise wait for memory several times in a row. Frame i + kPixelAhead has
// its pixel and flood bin requested, frame i + kGainAhead its gain (its label has arrived),
// frame i + kBinsAhead is converted and its spectrum bins requested; frame i is counted.
// The first kGainAhead frames convert without their gain requested: a few misses per slice.
void HistogramSet::add_frames(const RawFrame* frames, std::size_t n, const ConvertTables& tables) {
  constexpr std::size_t kPixelAhead = 48, kGainAhead = 24, kBinsAhead = 8, kRing = 64;
  constexpr std::uint32_t kNoPixel = UINT32_MAX;
  const ConvertTables t = tables;
  const HistogramLayout& l = layout_;
  std::uint8_t* const bins = bins_.get();
  std::uint32_t pixel[kRing];
  Single single[kRing];
  FrameStatus status[kRing];
  const auto request_pixel = [&](std::size_t j) {
    const std::uint8_t* f = frames[j].bytes;
    std::uint32_t index = kNoPixel;
    if (check_frame(f, t) == FrameStatus::single) {
      index = static_cast<std::uint32_t>(position_index(f, t));
      __builtin_prefetch(t.position_lut + index);
      __builtin_prefetch(l.u32(bins, Hist::flood) + index, 1);
    }
    pixel[j % kRing] = index;
  };
  const auto convert_and_request_bins = [&](std::size_t j) {
    if (pixel[j % kRing] == kNoPixel) return;
    const std::uint8_t* f = frames[j].bytes;
    Single& s = single[j % kRing];
    const FrameStatus st = convert_frame(f, t, s);
    status[j % kRing] = st;
    if (st > FrameStatus::energy_rejected) return;
    const std::uint32_t e = l.energy_bin(s.energy);
    if (e < l.energy_bins)
      __builtin_prefetch(l.u32(bins, Hist::energy_keV) + std::size_t{s.crystal} * l.energy_bins + e, 1);
    const std::uint32_t raw = bytes::load_be16(f + frame_offset::energy);
    __builtin_prefetch(l.u32(bins, Hist::energy_raw) + std::size_t{s.crystal} * l.raw_bins + l.raw_bin(raw), 1);
  };
  for (std::size_t j = 0; j < std::min(n, kPixelAhead); ++j) request_pixel(j);
  for (std::size_t j = 0; j < std::min(n, kBinsAhead); ++j) convert_and_request_bins(j);
  for (std::size_t i = 0; i < n; ++i) {
    if (i + kPixelAhead < n) request_pixel(i + kPixelAhead);
    // Written out here rather than in a helper: GCC deems a function whose only effect is a
    // prefetch free of side effects and drops the call (as in convert_frames()).
    if (i + kGainAhead < n && pixel[(i + kGainAhead) % kRing] != kNoPixel) {
      const std::size_t k = i + kGainAhead;
      const std::uint32_t label = t.position_lut[pixel[k % kRing]];
      if (label < t.crystals_per_du)
        __builtin_prefetch(t.energy_correction + energy_index(frames[k].bytes, local_of_label(label, t), t));
    }
    if (i + kBinsAhead < n) convert_and_request_bins(i + kBinsAhead);
    if (pixel[i % kRing] != kNoPixel)
      histogram_converted(frames[i].bytes, t, l, bins, status[i % kRing], single[i % kRing],
                          PlainIncrement{});
  }
}

void HistogramSet::add_records(const CoincRecord* records, std::size_t n, bool delayed) {
  for (std::size_t i = 0; i < n; ++i)
    histogram_record(records[i], delayed, layout_, bins_.get(), PlainIncrement{});
}

std::uint64_t HistogramSet::at(Hist h, std::size_t i) const {
  const std::uint8_t* p = bins_.get() + layout_.offset[static_cast<int>(h)];
  if (hist_is_32bit(h)) {
    std::uint32_t v;
    std::memcpy(&v, p + 4 * i, 4);
    return v;
  }
  std::uint64_t v;
  std::memcpy(&v, p + 8 * i, 8);
  return v;
}

std::uint64_t HistogramSet::sum(Hist h) const {
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < layout_.count[static_cast<int>(h)]; ++i) total += at(h, i);
  return total;
}

CounterBase counter_base(const Counters& counters) {
  CounterBase base{};
  for (std::size_t i = 0; i < kCounterCount; ++i) base[i] = counters.get(static_cast<Counter>(i));
  return base;
}

std::string histogram_metadata_json(const Settings& s, std::uint64_t run_id,
                                    std::string_view backend, const Counters* counters,
                                    const CounterBase* run_base) {
  const ScannerSettings& sc = s.scanner;
  std::string o = "{\"run_id\":" + std::to_string(run_id) + ",\"backend\":";
  json_string(o, backend);
  o += ",\"tick_ps\":";
  json_number(o, sc.tick_ps);
  o += ",\"scanner\":{";
  const std::pair<const char*, std::uint32_t> dims[] = {
      {"bdm_transaxial", sc.bdm_transaxial}, {"bdm_axial", sc.bdm_axial},
      {"du_transaxial", sc.du_transaxial},   {"du_axial", sc.du_axial},
      {"crystal_transaxial", sc.crystal_transaxial}, {"crystal_axial", sc.crystal_axial},
      {"position_size", sc.position_size}};
  bool first = true;
  for (const auto& [k, v] : dims) {
    o += first ? "\"" : ",\"";
    o += k;
    o += "\":" + std::to_string(v);
    first = false;
  }
  o += "},\"energy_window_keV\":[";
  json_number(o, s.energy_window.low_keV);
  o += ",";
  json_number(o, s.energy_window.high_keV);
  o += "],\"window_ps\":";
  json_number(o, s.coincidence.window_ps);
  o += ",\"delayed_offset_ps\":";
  json_number(o, s.coincidence.delayed.enabled ? s.coincidence.delayed.offset_ps : 0.0);
  o += ",\"position_lut\":";
  // Absolute: the file is read later, from anywhere.
  std::error_code ec;
  const std::filesystem::path lut = std::filesystem::absolute(s.calibration.position_lut, ec);
  json_string(o, (ec ? s.calibration.position_lut : lut).string());
  auto write_counters = [&](const char* key, const CounterBase* base) {
    o += ",\"";
    o += key;
    o += "\":{";
    for (std::size_t i = 0; i < kCounterCount; ++i) {
      const auto c = static_cast<Counter>(i);
      if (i) o += ',';
      json_string(o, counter_name(c));
      const std::uint64_t v = counters->get(c);
      o += ':' + std::to_string(base ? v - std::min(v, (*base)[i]) : v);
    }
    o += '}';
  };
  if (counters) {
    write_counters("counters", run_base);
    if (run_base) write_counters("counters_since_start", nullptr);
  }
  o += '}';
  return o;
}

double singles_rate_squared_integral(const HistogramLayout& l, const std::uint8_t* bins,
                                     double tick_ps, HistogramSpan span) {
  const std::uint8_t* p = bins + l.offset[static_cast<int>(Hist::rate_singles)];
  const auto n = [&](std::size_t i) {
    std::uint64_t v;
    std::memcpy(&v, p + 8 * i, 8);
    return static_cast<double>(v);
  };
  std::size_t first = l.rate_bins, last = 0;
  double total = 0;
  for (std::size_t i = 0; i < l.rate_bins; ++i) {
    if (n(i) == 0) continue;
    first = std::min(first, i);
    last = i;
    total += n(i);
  }
  if (total == 0) return 0;
  const double tick_s = tick_ps * 1e-12;
  const double w = static_cast<double>(l.rate_bin_ticks) * tick_s;
  if (last - first < 2) {
    const double t = span.empty() ? static_cast<double>(last - first + 1) * w
                                  : static_cast<double>(span.end_tick - span.first_tick) * tick_s;
    return total * total / t;
  }
  double sum = 0;
  for (std::size_t i = first + 1; i < last; ++i) sum += n(i) * n(i) / w;
  sum += n(first) * std::max(n(first + 1), n(first)) / w;
  const bool open_ended = last + 1 == l.rate_bins;
  sum += n(last) * (open_ended ? n(last - 1) : std::max(n(last - 1), n(last))) / w;
  return sum;
}

void derive_histograms(const HistogramLayout& l, const Settings& settings, std::uint8_t* bins,
                       HistogramSpan span) {
  const std::size_t pairs = l.count[static_cast<int>(Hist::bdm_pair_randoms_singles_rate)];
  std::vector<double> crystal(l.crystal_count), matrix(pairs);
  double total = 0;
  const std::uint8_t* singles = bins + l.offset[static_cast<int>(Hist::crystal_singles)];
  for (std::size_t i = 0; i < crystal.size(); ++i) {
    std::uint64_t v;
    std::memcpy(&v, singles + 8 * i, 8);
    crystal[i] = static_cast<double>(v);
    total += crystal[i];
  }
  // τ G(N) / N² · ∫ S² dt: the singles' share of each crystal times the run's rate curve.
  const double scale =
      total > 0
          ? singles_rate_squared_integral(l, bins, settings.scanner.tick_ps, span) / (total * total)
          : 0;
  singles_rate_randoms_by_bdm_pair(RandomsSettings::from(settings), l.geometry, crystal, matrix);
  std::uint8_t* out = bins + l.offset[static_cast<int>(Hist::bdm_pair_randoms_singles_rate)];
  for (std::size_t i = 0; i < pairs; ++i) {
    const double v = matrix[i] * scale;
    std::memcpy(out + 8 * i, &v, 8);
  }
}

void encode_histogram_file(const HistogramSet& set, const Settings& settings,
                           std::uint64_t run_id, std::string_view metadata_json,
                           std::vector<std::uint8_t>& out, HistogramSpan span) {
  const HistogramLayout& l = set.layout();
  const std::size_t bins_at = kHistHeaderBytes + kHistCount * kHistDescriptorBytes;
  const std::size_t meta_at = bins_at + l.bytes;
  out.resize(meta_at + metadata_json.size());
  HistFileHeader h;
  h.histogram_count = kHistCount;
  h.run_id = run_id;
  h.created_unix_ns = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count());
  h.metadata_offset = meta_at;
  h.metadata_bytes = metadata_json.size();
  h.file_bytes = out.size();
  h.tick_ps = settings.scanner.tick_ps;
  encode_hist_header(h, out.data());
  for (int i = 0; i < kHistCount; ++i) {
    const Hist id = static_cast<Hist>(i);
    const Shape sh = shape_of(id, l, settings.scanner.tick_ps);
    HistDescriptor d;
    std::memcpy(d.name, kInfo[i].name, std::strlen(kInfo[i].name));  // names fit, NUL-padded
    std::memcpy(d.unit, kInfo[i].unit, std::strlen(kInfo[i].unit));
    d.element_bytes = hist_is_32bit(id) ? 4 : 8;
    d.element_type = hist_is_real(id) ? kHistReal : kHistUnsigned;
    d.rank = sh.rank;
    for (int k = 0; k < kHistMaxRank; ++k) d.shape[k] = sh.dims[k];
    d.lo = sh.lo;
    d.width = sh.width;
    d.data_offset = bins_at + l.offset[i];
    encode_hist_descriptor(d, out.data() + kHistHeaderBytes + i * kHistDescriptorBytes);
  }
  std::memcpy(out.data() + bins_at, set.bins(), l.bytes);
  derive_histograms(l, settings, out.data() + bins_at, span);
  std::memcpy(out.data() + meta_at, metadata_json.data(), metadata_json.size());
}

void write_histogram_file(const std::filesystem::path& file, const std::vector<std::uint8_t>& bytes) {
  std::FILE* f = std::fopen(file.c_str(), "wb");
  if (!f) throw HistogramFileError(file.string() + ": cannot create: " + std::strerror(errno));
  bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  ok = std::fclose(f) == 0 && ok;
  if (!ok) throw HistogramFileError(file.string() + ": write failed: " + std::strerror(errno));
}

std::vector<std::uint8_t> read_histogram_file(const std::filesystem::path& file) {
  std::FILE* f = std::fopen(file.c_str(), "rb");
  if (!f) throw HistogramFileError(file.string() + ": cannot open: " + std::strerror(errno));
  std::vector<std::uint8_t> bytes;
  std::uint8_t buffer[1 << 16];
  for (std::size_t got; (got = std::fread(buffer, 1, sizeof buffer, f)) > 0;)
    bytes.insert(bytes.end(), buffer, buffer + got);
  const bool failed = std::ferror(f);
  std::fclose(f);
  if (failed) throw HistogramFileError(file.string() + ": read failed");
  return bytes;
}

const HistDescriptor* HistogramFile::find(std::string_view name) const {
  for (const HistDescriptor& d : descriptors)
    if (d.name_view() == name) return &d;
  return nullptr;
}

std::uint64_t HistogramFile::value(const HistDescriptor& d, std::uint64_t index) const {
  if (d.is_real()) {
    const double v = number(d, index);
    return v > 0 ? static_cast<std::uint64_t>(std::llround(v)) : 0;
  }
  const std::uint8_t* p = data + d.data_offset + index * d.element_bytes;
  return d.element_bytes == 4 ? bytes::load_le32(p) : bytes::load_le64(p);
}

double HistogramFile::number(const HistDescriptor& d, std::uint64_t index) const {
  const std::uint8_t* p = data + d.data_offset + index * d.element_bytes;
  if (!d.is_real())
    return static_cast<double>(d.element_bytes == 4 ? bytes::load_le32(p) : bytes::load_le64(p));
  const std::uint64_t bits = bytes::load_le64(p);
  double v;
  std::memcpy(&v, &bits, 8);
  return v;
}

HistogramFile parse_histogram_file(const std::uint8_t* bytes, std::size_t size) {
  auto fail = [](const std::string& why) { throw HistogramFileError(why); };
  if (size < kHistHeaderBytes)
    fail("truncated: " + std::to_string(size) + " bytes, shorter than the 64-byte header");
  HistogramFile f;
  f.header = decode_hist_header(bytes);
  f.data = bytes;
  const HistFileHeader& h = f.header;
  if (h.magic != kHistMagic) fail("not a petdaq histogram file (bad magic)");
  if (h.version < kHistOldestVersion || h.version > kHistVersion)
    fail("version " + std::to_string(h.version) + ", this reader knows versions " +
         std::to_string(kHistOldestVersion) + " to " + std::to_string(kHistVersion));
  if (h.header_size != kHistHeaderBytes || h.descriptor_size != kHistDescriptorBytes)
    fail("unexpected header or descriptor size");
  if (h.file_bytes != size)
    fail("truncated or padded: the header says " + std::to_string(h.file_bytes) +
         " bytes, found " + std::to_string(size));
  if (h.histogram_count > 4096 ||
      kHistHeaderBytes + std::uint64_t{h.histogram_count} * kHistDescriptorBytes > size)
    fail("descriptor table past the end");
  if (h.metadata_offset > size || h.metadata_bytes > size - h.metadata_offset)
    fail("metadata past the end");
  f.metadata = std::string_view(reinterpret_cast<const char*>(bytes) + h.metadata_offset,
                                h.metadata_bytes);
  for (std::uint32_t i = 0; i < h.histogram_count; ++i) {
    const HistDescriptor d =
        decode_hist_descriptor(bytes + kHistHeaderBytes + i * kHistDescriptorBytes);
    const std::string name(d.name_view());
    if (d.element_bytes != 4 && d.element_bytes != 8)
      fail("histogram " + name + ": element size " + std::to_string(d.element_bytes));
    if (d.element_type > kHistReal || (d.is_real() && d.element_bytes != 8))
      fail("histogram " + name + ": element type " + std::to_string(d.element_type) +
           " of " + std::to_string(d.element_bytes) + " bytes");
    if (d.rank < 1 || d.rank > kHistMaxRank) fail("histogram " + name + ": bad rank");
    std::uint64_t n = 1;
    for (std::uint32_t k = 0; k < d.rank; ++k) {
      n *= d.shape[k];
      if (n > size) fail("histogram " + name + ": shape larger than the file");
    }
    if (d.data_offset > size || n * d.element_bytes > size - d.data_offset)
      fail("histogram " + name + ": bins past the end");
    f.descriptors.push_back(d);
  }
  return f;
}

}  // namespace petdaq

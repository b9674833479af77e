// The histogram file and `histograms` message body (DESIGN section 7, proto/histogram_file.h):
// its JSON document, writing it, and reading it back with every size checked.
#include <algorithm>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>

#include <nlohmann/json.hpp>

#include "core/counters.h"
#include "core/histograms.h"
#include "core/settings.h"

namespace petdaq {

static_assert(std::endian::native == std::endian::little,
              "histogram bins are written straight from memory (little-endian)");

namespace {

using Json = nlohmann::ordered_json;

// A number in its shortest form that reads back the same (nlohmann-json), integral values
// without a fraction ("4000", not "4000.0") as the document has always written them.
Json json_number(double v) {
  constexpr double kExactIntegers = 9007199254740992.0;  // 2^53
  if (std::isfinite(v) && v == std::trunc(v) && std::fabs(v) < kExactIntegers)
    return static_cast<std::int64_t>(v);
  return v;
}

Json counters_object(const Counters& counters, const CounterBase* base) {
  Json o = Json::object();
  for (std::size_t i = 0; i < kCounterCount; ++i) {
    const auto c = static_cast<Counter>(i);
    const std::uint64_t v = counters.get(c);
    o[std::string(counter_name(c))] = base ? v - std::min(v, (*base)[i]) : v;
  }
  return o;
}

}  // namespace

std::string histogram_metadata_json(const Settings& s, std::uint64_t run_id,
                                    std::string_view backend, const Counters* counters,
                                    const CounterBase* run_base) {
  const ScannerSettings& sc = s.scanner;
  // Absolute: the file is read later, from anywhere.
  std::error_code ec;
  const std::filesystem::path lut = std::filesystem::absolute(s.calibration.position_lut, ec);
  Json doc = {
      {"run_id", run_id},
      {"backend", backend},
      {"tick_ps", json_number(sc.tick_ps)},
      {"scanner",
       {{"bdm_transaxial", sc.bdm_transaxial},
        {"bdm_axial", sc.bdm_axial},
        {"du_transaxial", sc.du_transaxial},
        {"du_axial", sc.du_axial},
        {"crystal_transaxial", sc.crystal_transaxial},
        {"crystal_axial", sc.crystal_axial},
        {"position_size", sc.position_size}}},
      {"energy_window_keV",
       Json::array({json_number(s.energy_window.low_keV), json_number(s.energy_window.high_keV)})},
      {"window_ps", json_number(s.coincidence.window_ps)},
      {"delayed_offset_ps",
       json_number(s.coincidence.delayed.enabled ? s.coincidence.delayed.offset_ps : 0.0)},
      {"position_lut", (ec ? s.calibration.position_lut : lut).string()}};
  if (counters) {
    doc["counters"] = counters_object(*counters, run_base);
    if (run_base) doc["counters_since_start"] = counters_object(*counters, nullptr);
  }
  // A path that is not UTF-8 is written with U+FFFD in place of its bad bytes.
  return doc.dump(-1, ' ', false, Json::error_handler_t::replace);
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
    HistDescriptor d = hist_descriptor(static_cast<Hist>(i), l, settings.scanner.tick_ps);
    d.data_offset += bins_at;
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

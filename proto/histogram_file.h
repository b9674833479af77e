// The histogram file and `histograms` message body (DESIGN section 7, "Histograms"): a
// 64-byte header, one 96-byte descriptor per histogram (name, unit, shape, bin edges, where
// its bins are), the bins, and a JSON document (run, geometry, windows, counters).
// Little-endian throughout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "proto/bytes.h"

namespace petdaq {

inline constexpr std::uint32_t kHistMagic = 0x48514450;  // "PDQH"
// Version 2 added the element type (version 1 files, all unsigned, read the same); version 3
// the signed Δt histograms tof_* and du_pair_tof_* (older files lack them; the rest is alike).
inline constexpr std::uint16_t kHistVersion = 3;
inline constexpr std::uint16_t kHistOldestVersion = 1;
inline constexpr std::size_t kHistHeaderBytes = 64;
inline constexpr std::size_t kHistDescriptorBytes = 96;
inline constexpr std::size_t kHistNameBytes = 32;
inline constexpr std::size_t kHistUnitBytes = 16;
inline constexpr int kHistMaxRank = 4;

struct HistFileHeader {
  std::uint32_t magic = kHistMagic;
  std::uint16_t version = kHistVersion;
  std::uint16_t header_size = kHistHeaderBytes;
  std::uint32_t histogram_count = 0;
  std::uint32_t descriptor_size = kHistDescriptorBytes;
  std::uint64_t run_id = 0;
  std::uint64_t created_unix_ns = 0;
  std::uint64_t metadata_offset = 0;  // the JSON document, from the start of the file
  std::uint64_t metadata_bytes = 0;
  std::uint64_t file_bytes = 0;       // the whole file: a shorter one is truncated
  double tick_ps = 0;
};

// What a histogram's elements are.
inline constexpr std::uint16_t kHistUnsigned = 0;  // unsigned counts (4 or 8 bytes)
inline constexpr std::uint16_t kHistReal = 1;      // IEEE-754 binary64 (8 bytes): estimates

struct HistDescriptor {
  char name[kHistNameBytes] = {};  // NUL-padded
  char unit[kHistUnitBytes] = {};  // of the last axis's bin edges
  std::uint16_t element_bytes = 0;  // 4 or 8
  std::uint16_t element_type = 0;   // HistElement
  std::uint32_t rank = 0;           // 1 ... 4
  std::uint32_t shape[kHistMaxRank] = {1, 1, 1, 1};  // C order; unused axes 1
  double lo = 0;     // lower edge of the last axis's first bin, in `unit`
  double width = 1;  // bin width of the last axis, in `unit`
  std::uint64_t data_offset = 0;  // from the start of the file

  std::uint64_t elements() const {
    std::uint64_t n = 1;
    for (std::uint32_t i = 0; i < rank && i < kHistMaxRank; ++i) n *= shape[i];
    return n;
  }
  bool is_real() const { return element_type == kHistReal; }
  std::string_view name_view() const { return {name, strnlen(name, kHistNameBytes)}; }
  std::string_view unit_view() const { return {unit, strnlen(unit, kHistUnitBytes)}; }
};

inline void encode_hist_header(const HistFileHeader& h, std::uint8_t* p) {
  std::memset(p, 0, kHistHeaderBytes);
  bytes::store_le32(p + 0, h.magic);
  bytes::store_le16(p + 4, h.version);
  bytes::store_le16(p + 6, h.header_size);
  bytes::store_le32(p + 8, h.histogram_count);
  bytes::store_le32(p + 12, h.descriptor_size);
  bytes::store_le64(p + 16, h.run_id);
  bytes::store_le64(p + 24, h.created_unix_ns);
  bytes::store_le64(p + 32, h.metadata_offset);
  bytes::store_le64(p + 40, h.metadata_bytes);
  bytes::store_le64(p + 48, h.file_bytes);
  std::uint64_t tick;
  std::memcpy(&tick, &h.tick_ps, 8);
  bytes::store_le64(p + 56, tick);
}

inline HistFileHeader decode_hist_header(const std::uint8_t* p) {
  HistFileHeader h;
  h.magic = bytes::load_le32(p + 0);
  h.version = bytes::load_le16(p + 4);
  h.header_size = bytes::load_le16(p + 6);
  h.histogram_count = bytes::load_le32(p + 8);
  h.descriptor_size = bytes::load_le32(p + 12);
  h.run_id = bytes::load_le64(p + 16);
  h.created_unix_ns = bytes::load_le64(p + 24);
  h.metadata_offset = bytes::load_le64(p + 32);
  h.metadata_bytes = bytes::load_le64(p + 40);
  h.file_bytes = bytes::load_le64(p + 48);
  const std::uint64_t tick = bytes::load_le64(p + 56);
  std::memcpy(&h.tick_ps, &tick, 8);
  return h;
}

inline void encode_hist_descriptor(const HistDescriptor& d, std::uint8_t* p) {
  std::memset(p, 0, kHistDescriptorBytes);
  std::memcpy(p, d.name, kHistNameBytes);
  std::memcpy(p + 32, d.unit, kHistUnitBytes);
  bytes::store_le16(p + 48, d.element_bytes);
  bytes::store_le16(p + 50, d.element_type);
  bytes::store_le32(p + 52, d.rank);
  for (int i = 0; i < kHistMaxRank; ++i) bytes::store_le32(p + 56 + 4 * i, d.shape[i]);
  std::uint64_t v;
  std::memcpy(&v, &d.lo, 8);
  bytes::store_le64(p + 72, v);
  std::memcpy(&v, &d.width, 8);
  bytes::store_le64(p + 80, v);
  bytes::store_le64(p + 88, d.data_offset);
}

inline HistDescriptor decode_hist_descriptor(const std::uint8_t* p) {
  HistDescriptor d;
  std::memcpy(d.name, p, kHistNameBytes);
  std::memcpy(d.unit, p + 32, kHistUnitBytes);
  d.element_bytes = bytes::load_le16(p + 48);
  d.element_type = bytes::load_le16(p + 50);
  d.rank = bytes::load_le32(p + 52);
  for (int i = 0; i < kHistMaxRank; ++i) d.shape[i] = bytes::load_le32(p + 56 + 4 * i);
  std::uint64_t v = bytes::load_le64(p + 72);
  std::memcpy(&d.lo, &v, 8);
  v = bytes::load_le64(p + 80);
  std::memcpy(&d.width, &v, 8);
  d.data_offset = bytes::load_le64(p + 88);
  return d;
}

}  // namespace petdaq

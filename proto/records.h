// Singles, coincidence records, the published message header and the list-mode file header
// (DESIGN sections 4, 5 and 7). All little-endian on the wire.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "proto/bytes.h"

namespace petdaq {

// The in-memory single is also its wire form on a little-endian host (16 bytes, no padding).
struct Single {
  std::uint64_t time;     // ticks, corrected
  std::uint32_t crystal;  // global crystal id (DESIGN section 3)
  float energy;           // keV
};
static_assert(sizeof(Single) == 16);
static_assert(offsetof(Single, time) == 0 && offsetof(Single, crystal) == 8 &&
              offsetof(Single, energy) == 12);

// The (time, crystal, energy) order of DESIGN section 5. Energies reaching the engine are
// never NaN and never -0 (the convert stage normalises -0 to +0).
PETDAQ_HD bool single_less(const Single& a, const Single& b) {
  if (a.time != b.time) return a.time < b.time;
  if (a.crystal != b.crystal) return a.crystal < b.crystal;
  return a.energy < b.energy;
}

namespace coinc_flag {
inline constexpr std::uint32_t delayed = 1u << 0;
inline constexpr std::uint32_t from_multiple = 1u << 1;
inline constexpr unsigned multiplicity_shift = 8;  // bits 8-15: min(k, 255)
}  // namespace coinc_flag

struct CoincRecord {
  std::uint64_t time_a;  // earlier single (the opener for delayed)
  std::int32_t dt;       // time_b - time_a, ticks
  std::uint32_t crystal_a;
  std::uint32_t crystal_b;
  float energy_a;
  float energy_b;
  std::uint32_t flags;
};
static_assert(sizeof(CoincRecord) == 32);
static_assert(offsetof(CoincRecord, time_a) == 0 && offsetof(CoincRecord, dt) == 8 &&
              offsetof(CoincRecord, crystal_a) == 12 && offsetof(CoincRecord, crystal_b) == 16 &&
              offsetof(CoincRecord, energy_a) == 20 && offsetof(CoincRecord, energy_b) == 24 &&
              offsetof(CoincRecord, flags) == 28);

inline bool operator==(const CoincRecord& a, const CoincRecord& b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

PETDAQ_HD std::uint32_t record_multiplicity(const CoincRecord& r) {
  return (r.flags >> coinc_flag::multiplicity_shift) & 0xFFu;
}

// Records and singles are published straight from memory on little-endian hosts; the
// encode/decode functions below are the portable definition of the same bytes.
inline constexpr bool kHostIsLittleEndian = std::endian::native == std::endian::little;

inline void encode_single(const Single& s, std::uint8_t* p) {
  bytes::store_le64(p, s.time);
  bytes::store_le32(p + 8, s.crystal);
  bytes::store_le32(p + 12, std::bit_cast<std::uint32_t>(s.energy));
}
inline Single decode_single(const std::uint8_t* p) {
  return {bytes::load_le64(p), bytes::load_le32(p + 8),
          std::bit_cast<float>(bytes::load_le32(p + 12))};
}

inline void encode_record(const CoincRecord& r, std::uint8_t* p) {
  bytes::store_le64(p, r.time_a);
  bytes::store_le32(p + 8, static_cast<std::uint32_t>(r.dt));
  bytes::store_le32(p + 12, r.crystal_a);
  bytes::store_le32(p + 16, r.crystal_b);
  bytes::store_le32(p + 20, std::bit_cast<std::uint32_t>(r.energy_a));
  bytes::store_le32(p + 24, std::bit_cast<std::uint32_t>(r.energy_b));
  bytes::store_le32(p + 28, r.flags);
}
inline CoincRecord decode_record(const std::uint8_t* p) {
  CoincRecord r;
  r.time_a = bytes::load_le64(p);
  r.dt = static_cast<std::int32_t>(bytes::load_le32(p + 8));
  r.crystal_a = bytes::load_le32(p + 12);
  r.crystal_b = bytes::load_le32(p + 16);
  r.energy_a = std::bit_cast<float>(bytes::load_le32(p + 20));
  r.energy_b = std::bit_cast<float>(bytes::load_le32(p + 24));
  r.flags = bytes::load_le32(p + 28);
  return r;
}

// ---- published message header (DESIGN section 7) ----

inline constexpr std::uint32_t kMessageMagic = 0x31514450;  // "PDQ1"
// Version 2 fills the last field with the publisher's instance id; readers also take 1 (the
// field was 0 there).
inline constexpr std::uint16_t kMessageVersion = 2;
inline constexpr std::uint16_t kOldestMessageVersion = 1;
inline constexpr std::size_t kMessageHeaderBytes = 64;
inline constexpr bool message_version_supported(std::uint16_t v) {
  return v >= kOldestMessageVersion && v <= kMessageVersion;
}

// histograms: the body is a histogram file (proto/histogram_file.h), record_count 1.
// deadtime: the body is DeadInterval records (DESIGN section 6, "Overload").
enum class MessageKind : std::uint16_t {
  prompts = 1,
  delayed = 2,
  singles = 3,
  histograms = 4,
  deadtime = 5,
  image = 6,  // the body is an image file (core/image.h, DESIGN section 7), record_count 1
  acquisition = 7,  // the open acquisition as JSON (docs/operations.md), record_count 1
};

// An interval of acquisition time in which the daemon kept no frame of any source (an
// overload shed as scanner-wide dead time), 24 bytes little-endian.
struct DeadInterval {
  std::uint64_t t_begin;          // ticks, raw time, inclusive
  std::uint64_t t_end;            // ticks, raw time, exclusive
  std::uint64_t frames_dropped;   // frames of every source with a time in [t_begin, t_end)
};
static_assert(sizeof(DeadInterval) == 24);

struct MessageHeader {
  std::uint32_t magic = kMessageMagic;
  std::uint16_t version = kMessageVersion;
  std::uint16_t kind = 0;
  std::uint64_t message_id = 0;
  std::uint64_t run_id = 0;
  std::uint64_t slice_id = 0;
  std::uint64_t t_begin = 0;
  std::uint64_t t_end = 0;
  std::uint32_t record_count = 0;
  std::uint32_t record_size = 0;
  std::uint32_t flags = 0;
  // A random nonzero number drawn when the publisher starts (0 in version 1): a subscriber
  // that sees it change is talking to another publisher (a restart, or another process).
  std::uint32_t publisher_id = 0;
};

inline void encode_message_header(const MessageHeader& h, std::uint8_t* p) {
  bytes::store_le32(p + 0, h.magic);
  bytes::store_le16(p + 4, h.version);
  bytes::store_le16(p + 6, h.kind);
  bytes::store_le64(p + 8, h.message_id);
  bytes::store_le64(p + 16, h.run_id);
  bytes::store_le64(p + 24, h.slice_id);
  bytes::store_le64(p + 32, h.t_begin);
  bytes::store_le64(p + 40, h.t_end);
  bytes::store_le32(p + 48, h.record_count);
  bytes::store_le32(p + 52, h.record_size);
  bytes::store_le32(p + 56, h.flags);
  bytes::store_le32(p + 60, h.publisher_id);
}

inline MessageHeader decode_message_header(const std::uint8_t* p) {
  MessageHeader h;
  h.magic = bytes::load_le32(p + 0);
  h.version = bytes::load_le16(p + 4);
  h.kind = bytes::load_le16(p + 6);
  h.message_id = bytes::load_le64(p + 8);
  h.run_id = bytes::load_le64(p + 16);
  h.slice_id = bytes::load_le64(p + 24);
  h.t_begin = bytes::load_le64(p + 32);
  h.t_end = bytes::load_le64(p + 40);
  h.record_count = bytes::load_le32(p + 48);
  h.record_size = bytes::load_le32(p + 52);
  h.flags = bytes::load_le32(p + 56);
  h.publisher_id = bytes::load_le32(p + 60);
  return h;
}

// ---- list-mode file header (DESIGN section 7) ----

inline constexpr std::uint32_t kPlmMagic = 0x4C514450;  // "PDQL"
inline constexpr std::uint16_t kPlmVersion = 1;
inline constexpr std::size_t kPlmHeaderBytes = 64;

struct PlmHeader {
  std::uint32_t magic = kPlmMagic;
  std::uint16_t version = kPlmVersion;
  std::uint16_t header_size = kPlmHeaderBytes;
  double tick_ps = 0;
  std::uint32_t crystal_count = 0;
  std::uint32_t crystals_per_ring = 0;
  std::uint64_t settings_hash = 0;
  std::uint64_t created_unix_ns = 0;
};

inline void encode_plm_header(const PlmHeader& h, std::uint8_t* p) {
  std::memset(p, 0, kPlmHeaderBytes);
  bytes::store_le32(p + 0, h.magic);
  bytes::store_le16(p + 4, h.version);
  bytes::store_le16(p + 6, h.header_size);
  bytes::store_le64(p + 8, std::bit_cast<std::uint64_t>(h.tick_ps));
  bytes::store_le32(p + 16, h.crystal_count);
  bytes::store_le32(p + 20, h.crystals_per_ring);
  bytes::store_le64(p + 24, h.settings_hash);
  bytes::store_le64(p + 32, h.created_unix_ns);
}

inline PlmHeader decode_plm_header(const std::uint8_t* p) {
  PlmHeader h;
  h.magic = bytes::load_le32(p + 0);
  h.version = bytes::load_le16(p + 4);
  h.header_size = bytes::load_le16(p + 6);
  h.tick_ps = std::bit_cast<double>(bytes::load_le64(p + 8));
  h.crystal_count = bytes::load_le32(p + 16);
  h.crystals_per_ring = bytes::load_le32(p + 20);
  h.settings_hash = bytes::load_le64(p + 24);
  h.created_unix_ns = bytes::load_le64(p + 32);
  return h;
}

}  // namespace petdaq

// Singles, coincidence records, message and list-mode headers (DESIGN sections 4, 5, 7):
// encode to literal little-endian bytes at the documented offsets, and back.
#include "proto/records.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace petdaq {
namespace {

template <std::size_t N>
void expect_bytes(const std::uint8_t (&got)[N], const std::uint8_t (&want)[N]) {
  for (std::size_t i = 0; i < N; ++i) EXPECT_EQ(got[i], want[i]) << "byte " << i;
}

TEST(Single, EncodesToDocumentedBytes) {
  const Single s{0x0102030405060708ull, 0x0A0B0C0Du, 511.0f};
  std::uint8_t p[16] = {};
  encode_single(s, p);
  const std::uint8_t want[16] = {
      0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,  // time, u64 LE
      0x0D, 0x0C, 0x0B, 0x0A,                          // crystal, u32 LE
      0x00, 0x80, 0xFF, 0x43,                          // energy 511.0f = 0x43FF8000, LE
  };
  expect_bytes(p, want);
  const Single back = decode_single(want);
  EXPECT_EQ(back.time, s.time);
  EXPECT_EQ(back.crystal, s.crystal);
  EXPECT_EQ(back.energy, 511.0f);
  if (kHostIsLittleEndian) {
    // The in-memory single is its wire form: published without conversion.
    EXPECT_EQ(std::memcmp(&s, want, 16), 0);
  }
}

TEST(Single, OrderIsTimeThenCrystalThenEnergy) {
  EXPECT_TRUE(single_less({1, 9, 900.f}, {2, 0, 0.f}));
  EXPECT_FALSE(single_less({2, 0, 0.f}, {1, 9, 900.f}));
  EXPECT_TRUE(single_less({5, 1, 900.f}, {5, 2, 0.f}));
  EXPECT_TRUE(single_less({5, 2, 400.f}, {5, 2, 500.f}));
  EXPECT_FALSE(single_less({5, 2, 500.f}, {5, 2, 500.f}));
}

TEST(CoincRecord, EncodesToDocumentedBytes) {
  CoincRecord r{};
  r.time_a = 0x1122334455667788ull;
  r.dt = -2;
  r.crystal_a = 0x00003F60u;
  r.crystal_b = 7;
  r.energy_a = 511.0f;
  r.energy_b = -1.0f;
  r.flags = coinc_flag::delayed | coinc_flag::from_multiple | (3u << coinc_flag::multiplicity_shift);
  std::uint8_t p[32] = {};
  encode_record(r, p);
  const std::uint8_t want[32] = {
      0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,  // 0: time_a
      0xFE, 0xFF, 0xFF, 0xFF,                          // 8: dt = -2
      0x60, 0x3F, 0x00, 0x00,                          // 12: crystal_a
      0x07, 0x00, 0x00, 0x00,                          // 16: crystal_b
      0x00, 0x80, 0xFF, 0x43,                          // 20: energy_a 511.0f
      0x00, 0x00, 0x80, 0xBF,                          // 24: energy_b -1.0f = 0xBF800000
      0x03, 0x03, 0x00, 0x00,                          // 28: flags: delayed, multiple, k = 3
  };
  expect_bytes(p, want);
  const CoincRecord back = decode_record(want);
  EXPECT_TRUE(back == r);
  EXPECT_EQ(back.dt, -2);
  EXPECT_EQ(record_multiplicity(back), 3u);
  if (kHostIsLittleEndian) {
    EXPECT_EQ(std::memcmp(&r, want, 32), 0);
  }
}

TEST(CoincRecord, MultiplicityIsBits8To15) {
  CoincRecord r{};
  r.flags = 0xFFFF'FF03u;
  EXPECT_EQ(record_multiplicity(r), 255u);
  r.flags = 2u << coinc_flag::multiplicity_shift;
  EXPECT_EQ(record_multiplicity(r), 2u);
}

TEST(MessageHeader, EncodesToDocumentedBytes) {
  MessageHeader h;
  h.kind = static_cast<std::uint16_t>(MessageKind::delayed);
  h.message_id = 0x0102;
  h.run_id = 0x0304;
  h.slice_id = 0x0506;
  h.t_begin = 0x0708;
  h.t_end = 0xF0E0D0C0B0A09080ull;
  h.record_count = 0x0A0B;
  h.record_size = 32;
  h.publisher_id = 0xA1B2C3D4;
  std::uint8_t p[kMessageHeaderBytes];
  std::memset(p, 0xEE, sizeof p);
  encode_message_header(h, p);
  const std::uint8_t want[kMessageHeaderBytes] = {
      0x50, 0x44, 0x51, 0x31,                          // 0: magic 0x31514450 "PDQ1"
      0x02, 0x00,                                      // 4: version 2
      0x02, 0x00,                                      // 6: kind 2 (delayed)
      0x02, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // 8: message_id
      0x04, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // 16: run_id
      0x06, 0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // 24: slice_id
      0x08, 0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // 32: t_begin
      0x80, 0x90, 0xA0, 0xB0, 0xC0, 0xD0, 0xE0, 0xF0,  // 40: t_end
      0x0B, 0x0A, 0x00, 0x00,                          // 48: record count
      0x20, 0x00, 0x00, 0x00,                          // 52: record size 32
      0x00, 0x00, 0x00, 0x00,                          // 56: flags
      0xD4, 0xC3, 0xB2, 0xA1,                          // 60: publisher id
  };
  expect_bytes(p, want);
  const MessageHeader d = decode_message_header(want);
  EXPECT_EQ(d.magic, kMessageMagic);
  EXPECT_EQ(d.version, kMessageVersion);
  EXPECT_EQ(d.kind, 2);
  EXPECT_EQ(d.message_id, h.message_id);
  EXPECT_EQ(d.run_id, h.run_id);
  EXPECT_EQ(d.slice_id, h.slice_id);
  EXPECT_EQ(d.t_begin, h.t_begin);
  EXPECT_EQ(d.t_end, h.t_end);
  EXPECT_EQ(d.record_count, h.record_count);
  EXPECT_EQ(d.record_size, 32u);
  EXPECT_EQ(d.flags, 0u);
  EXPECT_EQ(d.publisher_id, 0xA1B2C3D4u);
  EXPECT_TRUE(message_version_supported(1));
  EXPECT_TRUE(message_version_supported(2));
  EXPECT_FALSE(message_version_supported(0));
  EXPECT_FALSE(message_version_supported(3));
}

TEST(PlmHeader, EncodesToDocumentedBytes) {
  PlmHeader h;
  h.tick_ps = 15.625;
  h.crystal_count = 16224;
  h.crystals_per_ring = 312;
  h.settings_hash = 0x0123456789ABCDEFull;
  h.created_unix_ns = 0x1111222233334444ull;
  std::uint8_t p[kPlmHeaderBytes];
  std::memset(p, 0xEE, sizeof p);  // the encoder must zero the tail itself
  encode_plm_header(h, p);
  const std::uint8_t want[kPlmHeaderBytes] = {
      0x50, 0x44, 0x51, 0x4C,                          // 0: magic 0x4C514450 "PDQL"
      0x01, 0x00,                                      // 4: version 1
      0x40, 0x00,                                      // 6: header_size 64
      0x00, 0x00, 0x00, 0x00, 0x00, 0x40, 0x2F, 0x40,  // 8: tick_ps 15.625 = 0x402F400000000000
      0x60, 0x3F, 0x00, 0x00,                          // 16: crystal_count 16224 = 0x3F60
      0x38, 0x01, 0x00, 0x00,                          // 20: crystals_per_ring 312
      0xEF, 0xCD, 0xAB, 0x89, 0x67, 0x45, 0x23, 0x01,  // 24: settings_hash
      0x44, 0x44, 0x33, 0x33, 0x22, 0x22, 0x11, 0x11,  // 32: created_unix_ns
      0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  // 40: zeros up to 64
      0, 0, 0, 0, 0, 0, 0, 0,
  };
  expect_bytes(p, want);
  const PlmHeader d = decode_plm_header(want);
  EXPECT_EQ(d.magic, kPlmMagic);
  EXPECT_EQ(d.version, kPlmVersion);
  EXPECT_EQ(d.header_size, kPlmHeaderBytes);
  EXPECT_EQ(d.tick_ps, 15.625);
  EXPECT_EQ(d.crystal_count, 16224u);
  EXPECT_EQ(d.crystals_per_ring, 312u);
  EXPECT_EQ(d.settings_hash, h.settings_hash);
  EXPECT_EQ(d.created_unix_ns, h.created_unix_ns);
}

}  // namespace
}  // namespace petdaq

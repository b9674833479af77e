// The raw frame of DESIGN section 2: decode from literal wire bytes, boundary values, round trip.
#include "proto/frame.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>

namespace petdaq {
namespace {

TEST(Frame, DecodesEveryFieldFromLiteralBytes) {
  const std::uint8_t f[kFrameBytes] = {
      0xA3,                                            // head_du: head marker 0xA, DU 3
      0x17,                                            // bdm: 23
      0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,  // time, big-endian
      0x80,                                            // x: 128
      0x7F,                                            // y: 127
      0x01, 0xF4,                                      // energy, big-endian: 500
      0x24,                                            // temp_int: 36 °C
      0x85,                                            // temp_frac_tail: 8/16 °C, tail marker 0x5
  };
  const FrameFields d = decode_frame(f);
  EXPECT_EQ(d.head_marker, 0xA);
  EXPECT_EQ(d.du, 3);
  EXPECT_EQ(d.bdm, 23);
  EXPECT_EQ(d.time_ticks, 0x0102030405060708ull);
  EXPECT_EQ(d.x, 128);
  EXPECT_EQ(d.y, 127);
  EXPECT_EQ(d.energy_raw, 500);
  EXPECT_EQ(d.temp_int_degC, 36);
  EXPECT_EQ(d.temp_frac_16ths, 8);
  EXPECT_EQ(d.tail_marker, 0x5);
  EXPECT_DOUBLE_EQ(frame_temperature_degC(d), 36.5);
  EXPECT_EQ(frame_time(f), 0x0102030405060708ull);
  EXPECT_EQ(frame_bdm(f), 23);
}

TEST(Frame, TimeAndEnergyAreBigEndian) {
  // Only the last byte of each field set: a little-endian reader would see 2^56 and 256.
  const std::uint8_t f[kFrameBytes] = {
      0xA0,                                            // head_du
      0x00,                                            // bdm
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,  // time = 1
      0x00,                                            // x
      0x00,                                            // y
      0x00, 0x01,                                      // energy = 1
      0x00,                                            // temp_int
      0x05,                                            // temp_frac_tail
  };
  EXPECT_EQ(decode_frame(f).time_ticks, 1u);
  EXPECT_EQ(decode_frame(f).energy_raw, 1u);
}

TEST(Frame, TimeZeroAndEnergyZero) {
  const std::uint8_t f[kFrameBytes] = {
      0xA0,                                            // head_du: marker 0xA, DU 0
      0x00,                                            // bdm 0
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // time 0
      0x00,                                            // x 0
      0x00,                                            // y 0
      0x00, 0x00,                                      // energy 0
      0x00,                                            // temp_int 0
      0x05,                                            // frac 0, tail 0x5
  };
  const FrameFields d = decode_frame(f);
  EXPECT_EQ(d.time_ticks, 0u);
  EXPECT_EQ(d.energy_raw, 0u);
  EXPECT_EQ(d.du, 0u);
  EXPECT_EQ(d.bdm, 0u);
  EXPECT_DOUBLE_EQ(frame_temperature_degC(d), 0.0);
}

TEST(Frame, TimeAndEnergyMaximum) {
  const std::uint8_t f[kFrameBytes] = {
      0xA1,                                            // head_du: marker 0xA, DU 1
      0x02,                                            // bdm 2
      0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,  // time 2^64-1
      0x03,                                            // x 3
      0x04,                                            // y 4
      0xFF, 0xFF,                                      // energy 65535
      0x19,                                            // temp_int 25
      0xF5,                                            // frac 15/16, tail 0x5
  };
  const FrameFields d = decode_frame(f);
  EXPECT_EQ(d.time_ticks, 0xFFFF'FFFF'FFFF'FFFFull);
  EXPECT_EQ(d.energy_raw, 65535u);
  EXPECT_DOUBLE_EQ(frame_temperature_degC(d), 25.9375);
}

TEST(Frame, NegativeTemperature) {
  const std::uint8_t f[kFrameBytes] = {
      0xA0,                                            // head_du
      0x00,                                            // bdm
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // time
      0x00,                                            // x
      0x00,                                            // y
      0x00, 0x00,                                      // energy
      0xFB,                                            // temp_int: -5 °C (two's complement)
      0x05,                                            // frac 0, tail 0x5
  };
  FrameFields d = decode_frame(f);
  EXPECT_EQ(d.temp_int_degC, -5);
  EXPECT_DOUBLE_EQ(frame_temperature_degC(d), -5.0);

  std::uint8_t g[kFrameBytes];
  std::memcpy(g, f, kFrameBytes);
  g[14] = 0x80;  // temp_int: -128 °C, the most negative byte
  g[15] = 0x45;  // frac 4/16, tail 0x5
  d = decode_frame(g);
  EXPECT_EQ(d.temp_int_degC, -128);
  EXPECT_EQ(d.temp_frac_16ths, 4);
  // Integer part plus sixteenths, as the header documents.
  EXPECT_DOUBLE_EQ(frame_temperature_degC(d), -127.75);
}

TEST(Frame, AllOnesFrame) {
  std::uint8_t f[kFrameBytes];
  std::memset(f, 0xFF, sizeof f);  // every field at its maximum, markers 0xF
  const FrameFields d = decode_frame(f);
  EXPECT_EQ(d.head_marker, 0xF);
  EXPECT_EQ(d.du, 0xF);
  EXPECT_EQ(d.bdm, 255);
  EXPECT_EQ(d.time_ticks, ~0ull);
  EXPECT_EQ(d.x, 255);
  EXPECT_EQ(d.y, 255);
  EXPECT_EQ(d.energy_raw, 65535);
  EXPECT_EQ(d.temp_int_degC, -1);
  EXPECT_EQ(d.temp_frac_16ths, 15);
  EXPECT_EQ(d.tail_marker, 0xF);

  std::uint8_t back[kFrameBytes] = {};
  encode_frame(d, back);
  EXPECT_EQ(std::memcmp(back, f, kFrameBytes), 0);
}

TEST(Frame, EncodeWritesTheDocumentedBytes) {
  FrameFields in{};
  in.head_marker = 0xA;
  in.du = 0xC;
  in.bdm = 0x42;
  in.time_ticks = 0x1122334455667788ull;
  in.x = 0x99;
  in.y = 0xAA;
  in.energy_raw = 0xBBCC;
  in.temp_int_degC = -2;
  in.temp_frac_16ths = 0xD;
  in.tail_marker = 0x5;
  std::uint8_t f[kFrameBytes] = {};
  encode_frame(in, f);
  const std::uint8_t expected[kFrameBytes] = {
      0xAC,                                            // head_du
      0x42,                                            // bdm
      0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,  // time, big-endian
      0x99,                                            // x
      0xAA,                                            // y
      0xBB, 0xCC,                                      // energy, big-endian
      0xFE,                                            // temp_int -2
      0xD5,                                            // frac 13, tail 5
  };
  for (std::size_t i = 0; i < kFrameBytes; ++i) EXPECT_EQ(f[i], expected[i]) << "byte " << i;
}

TEST(Frame, EveryByteStringRoundTrips) {
  // Every 16-byte string is some frame: decode then encode must give the same bytes back,
  // and encode then decode the same fields.
  std::mt19937_64 rng(7);
  for (int i = 0; i < 10000; ++i) {
    std::uint8_t f[kFrameBytes];
    for (auto& b : f) b = static_cast<std::uint8_t>(rng());
    const FrameFields d = decode_frame(f);
    std::uint8_t back[kFrameBytes] = {};
    encode_frame(d, back);
    ASSERT_EQ(std::memcmp(back, f, kFrameBytes), 0) << "iteration " << i;
    const FrameFields d2 = decode_frame(back);
    ASSERT_EQ(d2.time_ticks, d.time_ticks);
    ASSERT_EQ(d2.energy_raw, d.energy_raw);
    ASSERT_EQ(d2.temp_int_degC, d.temp_int_degC);
    ASSERT_EQ(d2.temp_frac_16ths, d.temp_frac_16ths);
    ASSERT_EQ(d2.head_marker, d.head_marker);
    ASSERT_EQ(d2.tail_marker, d.tail_marker);
    ASSERT_EQ(d2.du, d.du);
    ASSERT_EQ(d2.bdm, d.bdm);
    ASSERT_EQ(d2.x, d.x);
    ASSERT_EQ(d2.y, d.y);
  }
}

TEST(Frame, RawFrameIsPackedBytes) {
  // Frames sit back to back in a datagram at any offset.
  std::uint8_t buf[1 + 2 * kFrameBytes] = {};
  buf[1 + kFrameBytes + frame_offset::bdm] = 9;
  const auto* frames = reinterpret_cast<const RawFrame*>(buf + 1);
  EXPECT_EQ(frame_bdm(frames[1].bytes), 9);
  EXPECT_EQ(sizeof(RawFrame[3]), 3 * kFrameBytes);
}

}  // namespace
}  // namespace petdaq

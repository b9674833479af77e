// The raw frame a detector board (BDM) sends for every detected photon: 16 bytes,
// big-endian time and energy (DESIGN section 2).
#pragma once

#include <cstddef>
#include <cstdint>

#include "proto/bytes.h"

namespace petdaq {

inline constexpr std::size_t kFrameBytes = 16;

// Byte offsets of the fields inside a frame.
namespace frame_offset {
inline constexpr std::size_t head_du = 0;
inline constexpr std::size_t bdm = 1;
inline constexpr std::size_t time = 2;
inline constexpr std::size_t x = 10;
inline constexpr std::size_t y = 11;
inline constexpr std::size_t energy = 12;
inline constexpr std::size_t temp_int = 14;
inline constexpr std::size_t temp_frac_tail = 15;
}  // namespace frame_offset

// One frame as bytes, exactly as on the wire. Alignment 1: frames sit back to back inside
// datagrams at any offset.
struct RawFrame {
  std::uint8_t bytes[kFrameBytes];
};
static_assert(sizeof(RawFrame) == kFrameBytes && alignof(RawFrame) == 1);

// The fields of a frame, decoded into host values.
struct FrameFields {
  std::uint8_t head_marker;  // high nibble of byte 0
  std::uint8_t du;           // low nibble of byte 0
  std::uint8_t bdm;
  std::uint64_t time_ticks;
  std::uint8_t x;
  std::uint8_t y;
  std::uint16_t energy_raw;
  std::int8_t temp_int_degC;
  std::uint8_t temp_frac_16ths;  // high nibble of byte 15
  std::uint8_t tail_marker;      // low nibble of byte 15
};

PETDAQ_HD std::uint64_t frame_time(const std::uint8_t* f) {
  return bytes::load_be64(f + frame_offset::time);
}
PETDAQ_HD std::uint8_t frame_bdm(const std::uint8_t* f) { return f[frame_offset::bdm]; }

PETDAQ_HD FrameFields decode_frame(const std::uint8_t* f) {
  FrameFields out{};
  out.head_marker = static_cast<std::uint8_t>(f[frame_offset::head_du] >> 4);
  out.du = static_cast<std::uint8_t>(f[frame_offset::head_du] & 0x0F);
  out.bdm = f[frame_offset::bdm];
  out.time_ticks = bytes::load_be64(f + frame_offset::time);
  out.x = f[frame_offset::x];
  out.y = f[frame_offset::y];
  out.energy_raw = bytes::load_be16(f + frame_offset::energy);
  out.temp_int_degC = static_cast<std::int8_t>(f[frame_offset::temp_int]);
  out.temp_frac_16ths = static_cast<std::uint8_t>(f[frame_offset::temp_frac_tail] >> 4);
  out.tail_marker = static_cast<std::uint8_t>(f[frame_offset::temp_frac_tail] & 0x0F);
  return out;
}

PETDAQ_HD void encode_frame(const FrameFields& in, std::uint8_t* f) {
  f[frame_offset::head_du] = static_cast<std::uint8_t>((in.head_marker << 4) | (in.du & 0x0F));
  f[frame_offset::bdm] = in.bdm;
  bytes::store_be64(f + frame_offset::time, in.time_ticks);
  f[frame_offset::x] = in.x;
  f[frame_offset::y] = in.y;
  bytes::store_be16(f + frame_offset::energy, in.energy_raw);
  f[frame_offset::temp_int] = static_cast<std::uint8_t>(in.temp_int_degC);
  f[frame_offset::temp_frac_tail] =
      static_cast<std::uint8_t>((in.temp_frac_16ths << 4) | (in.tail_marker & 0x0F));
}

// Board temperature in °C: integer part plus sixteenths.
inline double frame_temperature_degC(const FrameFields& f) {
  return f.temp_int_degC + f.temp_frac_16ths / 16.0;
}

}  // namespace petdaq

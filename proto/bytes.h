// Explicit byte order: every multi-byte field on the wire or in a file is read and written
// byte by byte, so nothing depends on the host's endianness or on aligned access.
#pragma once

#include <cstdint>

#include "proto/host_device.h"

namespace petdaq::bytes {

PETDAQ_HD std::uint16_t load_be16(const std::uint8_t* p) {
  return static_cast<std::uint16_t>((unsigned{p[0]} << 8) | unsigned{p[1]});
}
PETDAQ_HD std::uint64_t load_be64(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
  return v;
}
PETDAQ_HD void store_be16(std::uint8_t* p, std::uint16_t v) {
  p[0] = static_cast<std::uint8_t>(v >> 8);
  p[1] = static_cast<std::uint8_t>(v);
}
PETDAQ_HD void store_be64(std::uint8_t* p, std::uint64_t v) {
  for (int i = 7; i >= 0; --i, v >>= 8) p[i] = static_cast<std::uint8_t>(v);
}

PETDAQ_HD std::uint16_t load_le16(const std::uint8_t* p) {
  return static_cast<std::uint16_t>(unsigned{p[0]} | (unsigned{p[1]} << 8));
}
PETDAQ_HD std::uint32_t load_le32(const std::uint8_t* p) {
  return std::uint32_t{p[0]} | (std::uint32_t{p[1]} << 8) | (std::uint32_t{p[2]} << 16) |
         (std::uint32_t{p[3]} << 24);
}
PETDAQ_HD std::uint64_t load_le64(const std::uint8_t* p) {
  return std::uint64_t{load_le32(p)} | (std::uint64_t{load_le32(p + 4)} << 32);
}
PETDAQ_HD void store_le16(std::uint8_t* p, std::uint16_t v) {
  p[0] = static_cast<std::uint8_t>(v);
  p[1] = static_cast<std::uint8_t>(v >> 8);
}
PETDAQ_HD void store_le32(std::uint8_t* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i, v >>= 8) p[i] = static_cast<std::uint8_t>(v);
}
PETDAQ_HD void store_le64(std::uint8_t* p, std::uint64_t v) {
  for (int i = 0; i < 8; ++i, v >>= 8) p[i] = static_cast<std::uint8_t>(v);
}

}  // namespace petdaq::bytes

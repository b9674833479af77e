// yardl's compact binary encoding, written to a file: the encoding of the PETSIRD export
// (docs/export.md, "PETSIRD"). Written from yardl's binary-encoding reference
// (docs/reference/binary.md) and checked against its C++ runtime where the reference is
// silent or wrong:
// * a file starts with the magic "yardl", a little-endian u32 format version (1) and the
//   protocol's schema JSON as a string;
// * unsigned integers of 16 bits and wider (and sizes, lengths, union indices, block counts)
//   are LEB128 varints; signed ones are zigzag-encoded first ((n << 1) ^ (n >> 63));
// * 8-bit integers are one raw byte each, not varints (the reference says varint; the
//   runtime's WriteInteger for 1-byte types writes the byte as it is);
// * an enum without a `base` has C++'s default underlying type, int: a zigzag varint (value
//   1 is the byte 0x02);
// * bool and an optional's presence are one byte, 0 or 1; floats are little-endian IEEE 754;
// * a string is its UTF-8 length (varint) and the bytes; a vector without a fixed length is
//   its length (varint) and the items; a fixed-length vector or fixed array is the items
//   only; an array whose dimension count is fixed but whose lengths are not is each length
//   (varint) then the items in row-major order;
// * a union is its 0-based case index (varint) and the value;
// * a stream is blocks, each a count (varint) and that many items, ended by a block of 0.
#pragma once

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

namespace petdaq::exporter {

inline constexpr char kYardlMagic[5] = {'y', 'a', 'r', 'd', 'l'};
inline constexpr std::uint32_t kYardlBinaryVersion = 1;

inline std::uint64_t zigzag64(std::int64_t v) {
  return (static_cast<std::uint64_t>(v) << 1) ^ static_cast<std::uint64_t>(v >> 63);
}

// A buffered yardl binary stream into a file; every write error throws naming the file.
class YardlWriter {
 public:
  // Creates the file and writes the header: magic, version, `schema`.
  YardlWriter(const std::filesystem::path& file, std::string_view schema) : path_(file) {
    file_ = std::fopen(file.c_str(), "wb");
    if (!file_) throw std::runtime_error(file.string() + ": cannot create: " + std::strerror(errno));
    buffer_ = std::make_unique<std::uint8_t[]>(kBufferBytes);
    bytes(kYardlMagic, sizeof kYardlMagic);
    fixed_u32(kYardlBinaryVersion);
    string(schema);
  }
  ~YardlWriter() {
    if (file_) std::fclose(file_);
  }
  YardlWriter(const YardlWriter&) = delete;
  YardlWriter& operator=(const YardlWriter&) = delete;

  void bytes(const void* data, std::size_t n) {
    const auto* p = static_cast<const std::uint8_t*>(data);
    while (n > 0) {
      if (used_ == kBufferBytes) flush_buffer();
      const std::size_t take = std::min(n, kBufferBytes - used_);
      std::memcpy(buffer_.get() + used_, p, take);
      used_ += take;
      p += take;
      n -= take;
    }
  }
  void byte(std::uint8_t b) {
    if (used_ == kBufferBytes) flush_buffer();
    buffer_[used_++] = b;
  }
  void fixed_u32(std::uint32_t v) {
    const std::uint8_t b[4] = {std::uint8_t(v), std::uint8_t(v >> 8), std::uint8_t(v >> 16),
                               std::uint8_t(v >> 24)};
    bytes(b, 4);
  }
  // uint16/32/64, size, lengths, union indices, stream block counts.
  void varuint(std::uint64_t v) {
    while (v >= 0x80) {
      byte(static_cast<std::uint8_t>(v) | 0x80);
      v >>= 7;
    }
    byte(static_cast<std::uint8_t>(v));
  }
  // int16/32/64 and enums without a base.
  void varint(std::int64_t v) { varuint(zigzag64(v)); }
  void u8(std::uint8_t v) { byte(v); }
  void i8(std::int8_t v) { byte(static_cast<std::uint8_t>(v)); }
  void boolean(bool v) { byte(v ? 1 : 0); }
  void f32(float v) { fixed_u32(std::bit_cast<std::uint32_t>(v)); }
  void f64(double v) {
    const std::uint64_t u = std::bit_cast<std::uint64_t>(v);
    fixed_u32(static_cast<std::uint32_t>(u));
    fixed_u32(static_cast<std::uint32_t>(u >> 32));
  }
  void string(std::string_view s) {
    varuint(s.size());
    bytes(s.data(), s.size());
  }
  // An optional's presence byte (the value follows when true).
  void presence(bool has_value) { boolean(has_value); }
  // The case index of a union (the value follows).
  void union_index(std::uint64_t index) { varuint(index); }

  // Writes what is buffered and closes; throws if the bytes did not reach the file.
  void close() {
    flush_buffer();
    std::FILE* f = file_;
    file_ = nullptr;
    if (std::fclose(f) != 0)
      throw std::runtime_error(path_.string() + ": close failed: " + std::strerror(errno));
  }
  std::uint64_t bytes_written() const { return flushed_ + used_; }

 private:
  static constexpr std::size_t kBufferBytes = 1u << 20;
  void flush_buffer() {
    if (used_ && std::fwrite(buffer_.get(), 1, used_, file_) != used_)
      throw std::runtime_error(path_.string() + ": write failed: " + std::strerror(errno));
    flushed_ += used_;
    used_ = 0;
  }

  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
  std::unique_ptr<std::uint8_t[]> buffer_;
  std::size_t used_ = 0;
  std::uint64_t flushed_ = 0;
};

}  // namespace petdaq::exporter

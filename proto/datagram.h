// Datagram framings (DESIGN section 2): `raw` (whole frames, trailing bytes discarded) and
// `sequenced` (a 16-byte little-endian header, then frame_count frames).
#pragma once

#include <cstddef>
#include <cstdint>

#include "proto/bytes.h"
#include "proto/frame.h"

namespace petdaq {

enum class Framing : std::uint8_t { raw, sequenced };

inline constexpr std::uint32_t kSequencedMagic = 0x53514450;  // "PDQS" little-endian
inline constexpr std::uint16_t kSequencedVersion = 1;
inline constexpr std::size_t kSequencedHeaderBytes = 16;

struct SequencedHeader {
  std::uint32_t magic = kSequencedMagic;
  std::uint16_t version = kSequencedVersion;
  std::uint16_t source_id = 0;
  std::uint32_t sequence = 0;
  std::uint32_t frame_count = 0;
};

inline void encode_sequenced_header(const SequencedHeader& h, std::uint8_t* p) {
  bytes::store_le32(p + 0, h.magic);
  bytes::store_le16(p + 4, h.version);
  bytes::store_le16(p + 6, h.source_id);
  bytes::store_le32(p + 8, h.sequence);
  bytes::store_le32(p + 12, h.frame_count);
}

inline SequencedHeader decode_sequenced_header(const std::uint8_t* p) {
  SequencedHeader h;
  h.magic = bytes::load_le32(p + 0);
  h.version = bytes::load_le16(p + 4);
  h.source_id = bytes::load_le16(p + 6);
  h.sequence = bytes::load_le32(p + 8);
  h.frame_count = bytes::load_le32(p + 12);
  return h;
}

// What a datagram's payload holds, after its framing was checked.
enum class DatagramStatus : std::uint8_t {
  ok,
  empty,          // no whole frame in it
  bad_header,     // sequenced: shorter than the header, wrong magic or version
  count_mismatch  // sequenced: frame_count disagrees with the payload length
};

struct DatagramView {
  DatagramStatus status = DatagramStatus::empty;
  const std::uint8_t* frames = nullptr;  // first frame
  std::size_t frame_count = 0;           // whole frames kept
  std::size_t trailing_bytes = 0;        // bytes after the last whole frame (discarded)
  SequencedHeader header{};              // sequenced framing only
};

// Splits a payload into its frames without copying. A sequenced datagram whose frame_count
// claims more frames than the payload holds is refused whole (its bytes cannot be trusted);
// one that holds more bytes than frame_count says keeps frame_count frames and counts the rest
// as trailing bytes.
inline DatagramView parse_datagram(const std::uint8_t* p, std::size_t len, Framing framing) {
  DatagramView v;
  if (framing == Framing::raw) {
    v.frames = p;
    v.frame_count = len / kFrameBytes;
    v.trailing_bytes = len % kFrameBytes;
    v.status = v.frame_count ? DatagramStatus::ok : DatagramStatus::empty;
    return v;
  }
  if (len < kSequencedHeaderBytes) {
    v.status = DatagramStatus::bad_header;
    v.trailing_bytes = len;
    return v;
  }
  v.header = decode_sequenced_header(p);
  if (v.header.magic != kSequencedMagic || v.header.version != kSequencedVersion) {
    v.status = DatagramStatus::bad_header;
    v.trailing_bytes = len;
    return v;
  }
  const std::size_t body = len - kSequencedHeaderBytes;
  if (std::size_t{v.header.frame_count} * kFrameBytes > body) {
    v.status = DatagramStatus::count_mismatch;
    v.trailing_bytes = body;
    return v;
  }
  v.frames = p + kSequencedHeaderBytes;
  v.frame_count = v.header.frame_count;
  v.trailing_bytes = body - v.frame_count * kFrameBytes;
  v.status = v.frame_count ? DatagramStatus::ok : DatagramStatus::empty;
  return v;
}

}  // namespace petdaq

// Datagram framings of DESIGN section 2: raw (whole frames, trailing bytes counted) and
// sequenced (16-byte little-endian header, then frame_count frames).
#include "proto/datagram.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace petdaq {
namespace {

TEST(RawFraming, SplitsWholeFramesAndCountsTrailingBytes) {
  std::vector<std::uint8_t> buf(64, 0xAB);
  struct Case {
    std::size_t len, frames, trailing;
    DatagramStatus status;
  };
  const Case cases[] = {
      {0, 0, 0, DatagramStatus::empty},  {15, 0, 15, DatagramStatus::empty},
      {16, 1, 0, DatagramStatus::ok},    {17, 1, 1, DatagramStatus::ok},
      {32, 2, 0, DatagramStatus::ok},    {47, 2, 15, DatagramStatus::ok},
  };
  for (const Case& c : cases) {
    const DatagramView v = parse_datagram(buf.data(), c.len, Framing::raw);
    EXPECT_EQ(v.status, c.status) << "len " << c.len;
    EXPECT_EQ(v.frame_count, c.frames) << "len " << c.len;
    EXPECT_EQ(v.trailing_bytes, c.trailing) << "len " << c.len;
    if (c.frames) {
      EXPECT_EQ(v.frames, buf.data());
    }
  }
}

TEST(SequencedFraming, HeaderDecodesFromLittleEndianBytes) {
  const std::uint8_t h[kSequencedHeaderBytes] = {
      0x50, 0x44, 0x51, 0x53,  // magic 0x53514450 "PDQS", little-endian
      0x01, 0x00,              // version 1
      0x34, 0x12,              // source_id 0x1234
      0x78, 0x56, 0x34, 0x12,  // sequence 0x12345678
      0x03, 0x00, 0x00, 0x00,  // frame_count 3
  };
  const SequencedHeader d = decode_sequenced_header(h);
  EXPECT_EQ(d.magic, kSequencedMagic);
  EXPECT_EQ(d.version, 1);
  EXPECT_EQ(d.source_id, 0x1234);
  EXPECT_EQ(d.sequence, 0x12345678u);
  EXPECT_EQ(d.frame_count, 3u);
  EXPECT_EQ(std::memcmp(h, "PDQS", 4), 0);

  std::uint8_t back[kSequencedHeaderBytes] = {};
  encode_sequenced_header(d, back);
  EXPECT_EQ(std::memcmp(back, h, sizeof h), 0);
}

TEST(SequencedFraming, EncodeWritesTheDocumentedBytes) {
  SequencedHeader in;
  in.source_id = 0xBEEF;
  in.sequence = 0xFFFFFFFEu;
  in.frame_count = 0x01020304u;
  std::uint8_t p[kSequencedHeaderBytes] = {};
  encode_sequenced_header(in, p);
  const std::uint8_t expected[kSequencedHeaderBytes] = {
      0x50, 0x44, 0x51, 0x53,  // magic
      0x01, 0x00,              // version
      0xEF, 0xBE,              // source_id
      0xFE, 0xFF, 0xFF, 0xFF,  // sequence
      0x04, 0x03, 0x02, 0x01,  // frame_count
  };
  for (std::size_t i = 0; i < sizeof p; ++i) EXPECT_EQ(p[i], expected[i]) << "byte " << i;
}

// A sequenced datagram with `frames` frames of distinct content after the header.
std::vector<std::uint8_t> sequenced(std::uint32_t frame_count, std::size_t frames,
                                    std::size_t extra_bytes = 0) {
  std::vector<std::uint8_t> d(kSequencedHeaderBytes + frames * kFrameBytes + extra_bytes);
  SequencedHeader h;
  h.source_id = 7;
  h.sequence = 41;
  h.frame_count = frame_count;
  encode_sequenced_header(h, d.data());
  for (std::size_t i = kSequencedHeaderBytes; i < d.size(); ++i)
    d[i] = static_cast<std::uint8_t>(i);
  return d;
}

TEST(SequencedFraming, KeepsFrameCountFrames) {
  const auto d = sequenced(2, 2);
  const DatagramView v = parse_datagram(d.data(), d.size(), Framing::sequenced);
  EXPECT_EQ(v.status, DatagramStatus::ok);
  EXPECT_EQ(v.frame_count, 2u);
  EXPECT_EQ(v.trailing_bytes, 0u);
  EXPECT_EQ(v.frames, d.data() + kSequencedHeaderBytes);
  EXPECT_EQ(v.header.source_id, 7);
  EXPECT_EQ(v.header.sequence, 41u);
}

TEST(SequencedFraming, ZeroFramesIsEmpty) {
  const auto d = sequenced(0, 0);
  const DatagramView v = parse_datagram(d.data(), d.size(), Framing::sequenced);
  EXPECT_EQ(v.status, DatagramStatus::empty);
  EXPECT_EQ(v.frame_count, 0u);
  EXPECT_EQ(v.trailing_bytes, 0u);
}

TEST(SequencedFraming, BadMagicIsRefused) {
  auto d = sequenced(1, 1);
  d[3] = 0x54;  // magic "PDQT"
  const DatagramView v = parse_datagram(d.data(), d.size(), Framing::sequenced);
  EXPECT_EQ(v.status, DatagramStatus::bad_header);
  EXPECT_EQ(v.frame_count, 0u);
  EXPECT_EQ(v.trailing_bytes, d.size());
}

TEST(SequencedFraming, BadVersionIsRefused) {
  auto d = sequenced(1, 1);
  d[4] = 0x02;  // version 2
  const DatagramView v = parse_datagram(d.data(), d.size(), Framing::sequenced);
  EXPECT_EQ(v.status, DatagramStatus::bad_header);
  EXPECT_EQ(v.frame_count, 0u);
}

TEST(SequencedFraming, ShortHeaderIsRefused) {
  const auto d = sequenced(0, 0);
  for (std::size_t len = 0; len < kSequencedHeaderBytes; ++len) {
    const DatagramView v = parse_datagram(d.data(), len, Framing::sequenced);
    EXPECT_EQ(v.status, DatagramStatus::bad_header) << "len " << len;
    EXPECT_EQ(v.frame_count, 0u);
    EXPECT_EQ(v.trailing_bytes, len);
  }
}

TEST(SequencedFraming, FrameCountLargerThanPayloadIsRefusedWhole) {
  const auto d = sequenced(3, 2, 15);  // claims 3 frames, holds 2 and 15 bytes
  const DatagramView v = parse_datagram(d.data(), d.size(), Framing::sequenced);
  EXPECT_EQ(v.status, DatagramStatus::count_mismatch);
  EXPECT_EQ(v.frame_count, 0u);
  EXPECT_EQ(v.trailing_bytes, 2 * kFrameBytes + 15);

  // The largest count cannot wrap the length computation into acceptance.
  const auto huge = sequenced(0xFFFFFFFFu, 2);
  const DatagramView w = parse_datagram(huge.data(), huge.size(), Framing::sequenced);
  EXPECT_EQ(w.status, DatagramStatus::count_mismatch);
  EXPECT_EQ(w.frame_count, 0u);
}

TEST(SequencedFraming, ExtraBytesAfterTheFramesAreTrailing) {
  const auto d = sequenced(1, 2, 3);  // 1 frame announced, 2 frames + 3 bytes present
  const DatagramView v = parse_datagram(d.data(), d.size(), Framing::sequenced);
  EXPECT_EQ(v.status, DatagramStatus::ok);
  EXPECT_EQ(v.frame_count, 1u);
  EXPECT_EQ(v.trailing_bytes, kFrameBytes + 3);
  EXPECT_EQ(v.frames, d.data() + kSequencedHeaderBytes);
}

}  // namespace
}  // namespace petdaq

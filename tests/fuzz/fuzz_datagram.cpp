// The datagram parser (both framings) and the per-source sequence tracker on arbitrary
// bytes. The first byte picks the framing; the rest is one datagram, and also a stream of
// (source, sequence) pairs for the tracker, whose accounting must stay consistent.
#include <cstdint>
#include <cstdlib>

#include "daemon/sequence_tracker.h"
#include "proto/bytes.h"
#include "proto/datagram.h"

using namespace petdaq;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const Framing framing = data[0] & 1 ? Framing::sequenced : Framing::raw;
  const std::uint8_t* p = data + 1;
  const std::size_t len = size - 1;
  const DatagramView v = parse_datagram(p, len, framing);
  if (v.status == DatagramStatus::ok) {
    // The frames kept lie inside the datagram.
    if (v.frames < p || v.frames + v.frame_count * kFrameBytes > p + len) std::abort();
    std::uint64_t sum = 0;
    for (std::size_t i = 0; i < v.frame_count * kFrameBytes; ++i) sum += v.frames[i];
    if (sum == 0xFFFFFFFFFFFFFFFFull) std::abort();  // keeps the reads from being optimised out
  }
  static daemon::SequenceTracker tracker;
  daemon::SequenceCounts c;
  std::uint64_t processed = 0, observed = 0;
  for (std::size_t at = 0; at + 6 <= len; at += 6, ++observed) {
    const std::uint16_t source = static_cast<std::uint16_t>(p[at] & 3);
    const std::uint32_t sequence = bytes::load_le32(p + at + 2);
    processed += tracker.observe(source, sequence, c);
  }
  // Every datagram not processed was counted as a duplicate or held back (a held-back one is
  // counted wild or missing later).
  if (processed + c.duplicate > observed) std::abort();
  return 0;
}

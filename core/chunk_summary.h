// What the receiver records about the frames it writes into a ring chunk, per source present
// (DESIGN section 6): enough for the slicer to decide the fate of the whole chunk without
// touching its frames in the common case. The receiver threads pay this per-frame cost, so
// it spreads over as many cores as there are receivers.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>

#include "core/frame_source.h"
#include "proto/frame.h"

namespace petdaq {

struct Settings;

SourceRule make_source_rule(const Settings& settings);

// The longest stretch of acquisition time one chunk (or block) may hold: half of
// stream.max_future_ps, so that a chunk that arrives in order lies inside the range the
// slicer's common case allows (core/slicer.h). A receiver seals a chunk that reaches it;
// a wild time stamp seals its chunk at once, and that chunk takes the exact per-frame pass.
std::uint64_t max_chunk_span_ticks(const Settings& settings);

struct SourceSpan {
  std::uint64_t min_time = 0;
  std::uint64_t max_time = 0;
  std::uint32_t frames = 0;
  std::uint32_t first_index = 0;  // the source's first frame in the chunk
};

struct ChunkSummary {
  std::uint64_t frames = 0;
  std::uint64_t sourceless = 0;  // frames whose markers or BDM name no source
  std::uint64_t min_time = ~std::uint64_t{0};  // over the frames with a source
  std::uint64_t max_time = 0;
  std::uint32_t present_count = 0;
  std::array<std::uint8_t, 256> present{};  // sources in order of first appearance
  std::array<SourceSpan, 256> sources{};     // valid for the present sources only

  // Forgets the chunk's frames; touches only the entries in use.
  void clear() {
    for (std::uint32_t i = 0; i < present_count; ++i) sources[present[i]].frames = 0;
    present_count = 0;
    frames = 0;
    sourceless = 0;
    min_time = ~std::uint64_t{0};
    max_time = 0;
  }

  // Acquisition time the frames with a source span (0 when none).
  std::uint64_t span_ticks() const { return max_time > min_time ? max_time - min_time : 0; }

  // Adds frames [0, n) that sit at index `first` of the chunk. Frames come in runs of one
  // source (a datagram is one BDM's): a run's span is kept in registers and filed once. A
  // run goes on while the frames' markers and BDM bytes are the same as its first frame's
  // (one compare of their bytes, four frames at a time), which a source's frames share.
  // Returns the latest time of these frames that have a source (0: none has one).
  std::uint64_t add(const RawFrame* f, std::size_t n, std::uint32_t first, const SourceRule& rule) {
    std::uint64_t latest = 0;
    const std::uint32_t mask = rule.check_markers ? kRunKeyMarkersMask : kRunKeyBdmMask;
    std::size_t i = 0;
    while (i < n) {
      const int src = rule.source_of(f[i].bytes);
      if (src < 0) {
        ++sourceless;
        ++i;
        continue;
      }
      const std::uint32_t key = run_key(f[i].bytes, mask);
      std::uint64_t lo = frame_time(f[i].bytes);
      std::uint64_t hi = lo;
      std::size_t j = i + 1;
      for (; j + 4 <= n; j += 4) {
        const std::uint8_t* p = f[j].bytes;
        const bool same = (run_key(p, mask) == key) & (run_key(p + kFrameBytes, mask) == key) &
                          (run_key(p + 2 * kFrameBytes, mask) == key) &
                          (run_key(p + 3 * kFrameBytes, mask) == key);
        if (!same) break;
        const std::uint64_t a = frame_time(p), b = frame_time(p + kFrameBytes);
        const std::uint64_t c = frame_time(p + 2 * kFrameBytes), d = frame_time(p + 3 * kFrameBytes);
        const std::uint64_t lo2 = std::min(std::min(a, b), std::min(c, d));
        const std::uint64_t hi2 = std::max(std::max(a, b), std::max(c, d));
        lo = lo2 < lo ? lo2 : lo;
        hi = hi2 > hi ? hi2 : hi;
      }
      for (; j < n && run_key(f[j].bytes, mask) == key; ++j) {
        const std::uint64_t t = frame_time(f[j].bytes);
        lo = t < lo ? t : lo;
        hi = t > hi ? t : hi;
      }
      SourceSpan& s = sources[static_cast<std::size_t>(src)];
      if (s.frames == 0) {
        present[present_count++] = static_cast<std::uint8_t>(src);
        s.min_time = lo;
        s.max_time = hi;
        s.first_index = first + static_cast<std::uint32_t>(i);
      } else {
        s.min_time = lo < s.min_time ? lo : s.min_time;
        s.max_time = hi > s.max_time ? hi : s.max_time;
      }
      s.frames += static_cast<std::uint32_t>(j - i);
      min_time = lo < min_time ? lo : min_time;
      max_time = hi > max_time ? hi : max_time;
      latest = hi > latest ? hi : latest;
      i = j;
    }
    frames += n;
    return latest;
  }

 private:
  // The bytes that make a frame's source (core/frame_source.h) side by side: byte 0 (head
  // marker in its high nibble), byte 1 (BDM), and byte 15's low nibble (tail marker). Two
  // frames with equal keys under the rule's mask have the same source, or none.
  static constexpr std::uint32_t kRunKeyMarkersMask = 0x0FFFF0u;
  static constexpr std::uint32_t kRunKeyBdmMask = 0x00FF00u;
  static std::uint32_t run_key(const std::uint8_t* frame, std::uint32_t mask) {
    static_assert(frame_offset::head_du == 0 && frame_offset::bdm == 1 &&
                  frame_offset::temp_frac_tail == 15);
    return (std::uint32_t{frame[0]} | std::uint32_t{frame[1]} << 8 |
            std::uint32_t{static_cast<std::uint8_t>(frame[15] & 0x0F)} << 16) &
           mask;
  }
};

// Frames next_block() adds at a time: a datagram's worth.
inline constexpr std::size_t kBlockGroupFrames = 560;

// Cuts the next block from frames [0, n) the way a receiver fills a chunk: whole groups of
// `group` frames (a datagram's worth) until the block holds `max_frames` or spans more than
// `max_span_ticks`. Returns the frames taken (at least one group, or n) with their summary.
std::size_t next_block(const RawFrame* frames, std::size_t n, std::size_t max_frames,
                       std::uint64_t max_span_ticks, const SourceRule& rule, ChunkSummary& out,
                       std::size_t group = kBlockGroupFrames);

}  // namespace petdaq

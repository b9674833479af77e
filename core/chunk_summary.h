// What the receiver records about the frames it writes into a ring chunk, per source present
// (DESIGN section 6): enough for the slicer to decide the fate of the whole chunk without
// touching its frames in the common case. The receiver threads pay this per-frame cost, so
// it spreads over as many cores as there are receivers.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "core/frame_source.h"
#include "proto/frame.h"

namespace petdaq {

struct Settings;

SourceRule make_source_rule(const Settings& settings);

struct SourceSpan {
  std::uint64_t min_time = 0;
  std::uint64_t max_time = 0;
  std::uint32_t frames = 0;
  std::uint32_t first_index = 0;  // the source's first frame in the chunk
};

struct ChunkSummary {
  std::uint64_t frames = 0;
  std::uint64_t sourceless = 0;  // frames whose markers or BDM name no source
  std::uint32_t present_count = 0;
  std::array<std::uint8_t, 256> present{};  // sources in order of first appearance
  std::array<SourceSpan, 256> sources{};     // valid for the present sources only

  // Forgets the chunk's frames; touches only the entries in use.
  void clear() {
    for (std::uint32_t i = 0; i < present_count; ++i) sources[present[i]].frames = 0;
    present_count = 0;
    frames = 0;
    sourceless = 0;
  }

  // Adds frames [0, n) that sit at index `first` of the chunk.
  void add(const RawFrame* f, std::size_t n, std::uint32_t first, const SourceRule& rule) {
    for (std::size_t i = 0; i < n; ++i) {
      const int src = rule.source_of(f[i].bytes);
      if (src < 0) {
        ++sourceless;
        continue;
      }
      const std::uint64_t t = frame_time(f[i].bytes);
      SourceSpan& s = sources[static_cast<std::size_t>(src)];
      if (s.frames == 0) {
        present[present_count++] = static_cast<std::uint8_t>(src);
        s.min_time = s.max_time = t;
        s.first_index = first + static_cast<std::uint32_t>(i);
      } else {
        s.min_time = t < s.min_time ? t : s.min_time;
        s.max_time = t > s.max_time ? t : s.max_time;
      }
      ++s.frames;
    }
    frames += n;
  }
};

}  // namespace petdaq

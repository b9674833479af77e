// Stretches of acquisition time (raw ticks) that are dead for the whole scanner although
// frames of them may already be staged: a receiving socket lost datagrams there (DESIGN
// section 6, "Losses at a socket"). The slicer hands the ranges still open with each slice
// (SliceRequest::dead); both backends' convert drops every frame with a source whose raw time
// lies in one (FrameStatus::dead: stream.dead_frames, and per BDM through `bdm_frames`).
#pragma once

#include <cstdint>
#include <utility>

#include "proto/host_device.h"

namespace petdaq {

struct DeadRanges {
  static constexpr std::uint32_t kMax = 8;
  std::uint32_t count = 0;
  std::uint64_t begin[kMax] = {};  // [begin, end) in raw ticks, disjoint
  std::uint64_t end[kMax] = {};
  // Where a backend counts the dead frames per BDM (host memory for the CPU backend, device
  // memory for the GPU backend; null where nobody counts): atomically, threads share it.
  std::uint64_t* bdm_frames = nullptr;

  PETDAQ_HD bool contains(std::uint64_t t) const {
    for (std::uint32_t i = 0; i < count; ++i)
      if (t >= begin[i] && t < end[i]) return true;
    return false;
  }

  // The slicer's side. Adds [b, e): the ranges it meets or touches are merged into it, as
  // one. With kMax ranges held and none met it is refused ({0, 0}), never merged with the
  // time between. Returns the range held that covers [b, e).
  std::pair<std::uint64_t, std::uint64_t> add(std::uint64_t b, std::uint64_t e) {
    std::uint32_t kept = 0;
    for (std::uint32_t i = 0; i < count; ++i) {
      if (end[i] >= b && begin[i] <= e) {
        b = b < begin[i] ? b : begin[i];
        e = e > end[i] ? e : end[i];
        continue;
      }
      begin[kept] = begin[i];
      end[kept++] = end[i];
    }
    if (kept == kMax) return {0, 0};  // none met: the ranges are as they were
    count = kept;
    begin[count] = b;
    end[count++] = e;
    return {b, e};
  }
  // Forgets the ranges that end at or below `bound`.
  void drop_ended(std::uint64_t bound) {
    std::uint32_t kept = 0;
    for (std::uint32_t i = 0; i < count; ++i)
      if (end[i] > bound) {
        begin[kept] = begin[i];
        end[kept++] = end[i];
      }
    count = kept;
  }
};

}  // namespace petdaq

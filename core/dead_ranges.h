// Stretches of acquisition time (raw ticks) that are dead for the whole scanner although
// frames of them may already be staged: a receiving socket lost datagrams there (DESIGN
// section 6, "Losses at a socket"). The slicer hands the ranges still open with each slice
// (SliceRequest::dead); both backends' convert drops every frame with a source whose raw time
// lies in one (FrameStatus::dead: stream.dead_frames, and per BDM through `bdm_frames`).
#pragma once

#include <cstdint>

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
};

}  // namespace petdaq

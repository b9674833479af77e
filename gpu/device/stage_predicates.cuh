// The stage: which staged frames a slice takes (core/frame_source.h), as the predicates of
// count_taken_kernel and the partition.
#pragma once

#include <cstdint>

#include "core/frame_source.h"
#include "gpu/device/convert_tile.cuh"

namespace petdaq::gpu {

// The partition's input: the frames earlier slices left (kept), then those staged since
// (arrivals), as one sequence. Both counts are known on the host when it is queued.
struct StagedInput {
  const uint4* kept;
  std::uint64_t kept_count;
  const uint4* arrivals;
  __host__ __device__ uint4 operator()(std::int64_t i) const {
    const std::uint64_t k = static_cast<std::uint64_t>(i);
    return k < kept_count ? kept[k] : arrivals[k - kept_count];
  }
};

// Staged frames are read 16 bytes at a time.
struct TakenBy {
  SourceRule rule;
  std::uint64_t bound;
  __device__ bool operator()(const uint4& v) const {
    std::uint8_t bytes[16];
    load_frame(v, bytes);
    return slice_takes(bytes, rule, bound);
  }
};

// A frame with a source at exactly `time` (only when `active`): dropped when more frames
// share one time than a slice can take.
struct DroppedAt {
  SourceRule rule;
  std::uint64_t time;
  bool active;
  __device__ bool operator()(const uint4& v) const {
    if (!active) return false;
    std::uint8_t bytes[16];
    load_frame(v, bytes);
    return rule.source_of(bytes) >= 0 && frame_time(bytes) == time;
  }
};

}  // namespace petdaq::gpu

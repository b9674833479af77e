// Launch policies of the per-slice kernels (gpu/kernels.cuh) and the state they share: a
// slice's counts on the device, the carry-over state one slice leaves for the next, and the
// summary the host reads.
#pragma once

#include <cstdint>

#include "core/convert.h"

namespace petdaq::gpu {

struct ConvertPolicy {
  static constexpr int threads_per_block = 256;
  static constexpr int items_per_thread = 8;
  static constexpr int tile_frames = threads_per_block * items_per_thread;
};
struct WalkPolicy {
  static constexpr int threads_per_block = 128;
};
struct ElementwisePolicy {
  static constexpr int threads_per_block = 256;
};

template <class T>
__device__ __forceinline__ T min_of(T a, T b) {
  return a < b ? a : b;
}
template <class T>
__device__ __forceinline__ T max_of(T a, T b) {
  return a < b ? b : a;
}

// Shared-memory per-BDM tallies cover every BDM a frame can address (its bdm field is a byte).
inline constexpr int kMaxFrameBdms = 256;

// Counts and decisions of one slice, accumulated on the device (sums only:
// order-independent atomics).
struct SliceCounts {
  unsigned long long status[kFrameStatusCount];
  unsigned long long multiples;
  unsigned long long delayed_multiples;
  unsigned long long carry_start;  // first unresolved opener (atomicMin), ~0 when none
  unsigned long long accepted;     // new singles of this slice
  unsigned long long singles;      // carry-over + new singles in the sort range
  unsigned long long t_min;        // over the slice's singles (atomicMin / atomicMax)
  unsigned long long t_max;
  unsigned int resolve_all;        // final slice, or turned into one by a carry overflow
  unsigned int redo;               // the count pass must run again (carry overflow)
  unsigned int carry_overflow;
};

// State that one slice leaves for the next (device-resident).
struct CarryState {
  unsigned long long carry_count;
  unsigned long long t_begin;
  unsigned long long carry_t_min;  // the carry-over is sorted: its first and last times
  unsigned long long carry_t_max;
};

// What the host reads after a slice (mapped pinned memory, written by summarize_kernel).
struct SliceSummary {
  std::uint64_t status[kFrameStatusCount];
  std::uint64_t multiples;
  std::uint64_t delayed_multiples;
  std::uint64_t prompts_total;   // records the windows emitted
  std::uint64_t delayed_total;
  std::uint64_t prompts_kept;    // records that fit in the output buffer
  std::uint64_t delayed_kept;
  std::uint64_t carry_count;
  std::uint64_t carry_overflow;
  std::uint64_t t_begin;
  std::uint64_t t_end;
};

}  // namespace petdaq::gpu

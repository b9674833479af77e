// The 64-bit sort keys of a slice's singles (make_keys_kernel, order_ties_kernel).
#pragma once

#include <cstdint>

#include "gpu/device/slice_state.cuh"
#include "proto/records.h"

namespace petdaq::gpu {

// The sort key of a single: the slice-relative time above the crystal id, so that one
// 64-bit radix sort gives the (time, crystal) order; equal keys (same time and crystal) are
// put in energy order afterwards. When a slice spans too long for that (hours of ticks:
// never through the slicer, which drops time jumps), the key is the time alone and the
// tie pass orders equal times by (crystal, energy). Padding sorts after every real key.
struct SortKeyLayout {
  std::uint32_t crystal_bits;  // bits of the largest crystal id
};
inline constexpr unsigned long long kPaddingKey = ~0ull;

__device__ inline bool relative_keys_fit(const SliceCounts& c, SortKeyLayout layout) {
  if (c.singles == 0) return true;
  const unsigned long long span = c.t_max - c.t_min;
  // Strictly below the largest value, so that no real key equals the padding key.
  return span < (1ull << (64 - layout.crystal_bits)) - 1;
}

// The key of one single (the slice's t_min and whether relative keys fit, as above). With
// key_bits below 64 (the radix sort orders only those bits), a single too late for them
// gets the largest key, 2^key_bits - 1: all such singles come last, in one run of equal
// keys, which the tie pass puts in (time, crystal, energy) order like any other.
__device__ inline unsigned long long sort_key(const Single& s, bool relative,
                                              unsigned long long t_min, SortKeyLayout layout,
                                              unsigned key_bits) {
  if (key_bits < 64) {
    const unsigned long long rel = s.time - t_min;
    if (rel >> (key_bits - layout.crystal_bits)) return (1ull << key_bits) - 1;
    return (rel << layout.crystal_bits) | s.crystal;
  }
  return relative ? ((s.time - t_min) << layout.crystal_bits) | s.crystal : s.time;
}

}  // namespace petdaq::gpu

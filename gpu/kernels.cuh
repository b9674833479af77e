// The per-slice kernels of the GPU backend: fused convert + count + per-tile compaction, the
// slice's counts, sort keys read from the convert's staging, merge with the carry-over and
// tie pass, window walks (count, then fill) and the per-slice summary. Launch shapes live in the policy structs; the host side
// (gpu_backend.cu) sizes and queues them. The per-tile and per-thread device code the kernels
// run, and the state they share, live in gpu/device/.
#pragma once

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cuda/functional>

#include <cstdint>

#include "core/convert.h"
#include "core/counters.h"
#include "core/slice_end.h"
#include "core/sort_run.h"
#include "core/stream_limits.h"
#include "gpu/device/convert_tile.cuh"
#include "gpu/device/slice_state.cuh"
#include "gpu/device/sort_keys.cuh"
#include "gpu/device/stage_predicates.cuh"
#include "gpu/device/walk.cuh"
#include "proto/records.h"

namespace petdaq::gpu {

// ---- convert: one pass converts, counts per tile and per reason, and compacts each tile's
// singles in place (staging), where the key pass and the merge read them ----

__global__ void __launch_bounds__(ConvertPolicy::threads_per_block)
    convert_kernel(const uint4* frames, std::uint32_t frame_bound,
                   const unsigned long long* frames_taken, ConvertTables tables,
                   std::uint32_t* tile_accepted, SliceCounts* counts,
                   unsigned long long* bdm_singles, unsigned long long* bdm_rejected,
                   std::uint32_t bdm_count, Single* staging) {
  using Scan = cub::BlockScan<std::uint32_t, ConvertPolicy::threads_per_block>;
  using Bound = cub::BlockReduce<unsigned long long, ConvertPolicy::threads_per_block>;
  __shared__ union {
    typename FrameLoad::TempStorage load;
    typename Scan::TempStorage scan;
    typename Bound::TempStorage bound;
  } temp;
  __shared__ std::uint32_t status_tally[kFrameStatusCount];
  __shared__ std::uint32_t accepted_tally[kMaxFrameBdms];
  __shared__ std::uint32_t rejected_tally[kMaxFrameBdms];
  for (int i = threadIdx.x; i < kMaxFrameBdms; i += blockDim.x) {
    accepted_tally[i] = 0;
    rejected_tally[i] = 0;
  }
  if (threadIdx.x < kFrameStatusCount) status_tally[threadIdx.x] = 0;

  uint4 raw[ConvertPolicy::items_per_thread];
  const int valid =
      load_tile(temp.load, frames, frames_to_convert(frame_bound, frames_taken), raw);
  __syncthreads();

  Single out[ConvertPolicy::items_per_thread];
  bool keep[ConvertPolicy::items_per_thread];
  const ThreadCount mine = convert_thread_frames(raw, valid, tables, status_tally,
                                                 accepted_tally, rejected_tally, out, keep);
  std::uint32_t offset = 0, tile_total = 0;
  Scan(temp.scan).ExclusiveSum(mine.accepted, offset, tile_total);
  Single* dst = staging + std::uint64_t{blockIdx.x} * ConvertPolicy::tile_frames + offset;
#pragma unroll
  for (int k = 0; k < ConvertPolicy::items_per_thread; ++k)
    if (keep[k]) *dst++ = out[k];
  if (threadIdx.x == 0) tile_accepted[blockIdx.x] = tile_total;
  // The common reasons' per-thread counts into the block's tallies, one shared atomic
  // per warp (every thread of the block reaches this line).
  const std::uint32_t warp_rejected = __reduce_add_sync(0xFFFFFFFFu, mine.energy_rejected);
  if (threadIdx.x % 32 == 0 && warp_rejected)
    atomicAdd(&status_tally[static_cast<int>(FrameStatus::energy_rejected)], warp_rejected);
  if (threadIdx.x == 0) status_tally[static_cast<int>(FrameStatus::single)] += tile_total;
  __syncthreads();
  const unsigned long long block_min = Bound(temp.bound).Reduce(mine.t_min, ::cuda::minimum<>{});
  __syncthreads();
  const unsigned long long block_max = Bound(temp.bound).Reduce(mine.t_max, ::cuda::maximum<>{});
  if (threadIdx.x == 0 && tile_total > 0) {
    atomicMin(&counts->t_min, block_min);
    atomicMax(&counts->t_max, block_max);
  }
  if (threadIdx.x < kFrameStatusCount && status_tally[threadIdx.x])
    atomicAdd(&counts->status[threadIdx.x], status_tally[threadIdx.x]);
  const std::uint32_t bdms = min_of<std::uint32_t>(bdm_count, kMaxFrameBdms);
  for (std::uint32_t b = threadIdx.x; b < bdms; b += blockDim.x) {
    if (accepted_tally[b]) atomicAdd(&bdm_singles[b], accepted_tally[b]);
    if (rejected_tally[b]) atomicAdd(&bdm_rejected[b], rejected_tally[b]);
  }
}

// The slice's counts once the tile offsets are known: the new singles, with the carry-over
// (kept by the slice before in its own buffer, in order) in front of them. One thread.
__global__ void count_singles_kernel(const CarryState* state, const std::uint32_t* tile_accepted,
                                   const std::uint32_t* tile_offset, std::uint32_t tiles,
                                   SliceCounts* counts) {
  const std::uint64_t c = state->carry_count;
  const std::uint64_t m =
      tiles ? std::uint64_t{tile_offset[tiles - 1]} + tile_accepted[tiles - 1] : 0;
  counts->accepted = m;
  counts->singles = c + m;
  if (c > 0) {
    counts->t_min = min_of<unsigned long long>(counts->t_min, state->carry_t_min);
    counts->t_max = max_of<unsigned long long>(counts->t_max, state->carry_t_max);
  }
}

// Keys of the slice's new singles, read where the convert left them (each tile's singles at
// the front of its tile in `staging`): the key of the tile's r-th single goes to its place
// in frame order, tile_offset[tile] + r, with the single's staging position as its index,
// so that the sort orders the same keys, in the same input order, as if the singles had
// been compacted first; [m, range) holds padding. The carry-over is in order already and is
// merged in afterwards (merge_*_kernel).
__global__ void make_keys_kernel(const Single* staging, const std::uint32_t* tile_accepted,
                                 const std::uint32_t* tile_offset, std::uint64_t frame_count,
                                 const SliceCounts* counts, SortKeyLayout layout,
                                 unsigned key_bits, std::uint64_t range, unsigned long long* keys,
                                 std::uint32_t* index) {
  const std::uint64_t m = counts->accepted;
  const bool relative = relative_keys_fit(*counts, layout);
  const unsigned long long t_min = counts->t_min;
  for (std::uint64_t p = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; p < range;
       p += std::uint64_t{gridDim.x} * blockDim.x) {
    if (p < frame_count) {
      const std::uint64_t tile = p / ConvertPolicy::tile_frames;
      const std::uint32_t r = static_cast<std::uint32_t>(p % ConvertPolicy::tile_frames);
      if (r < tile_accepted[tile]) {
        const std::uint64_t i = std::uint64_t{tile_offset[tile]} + r;
        keys[i] = sort_key(staging[p], relative, t_min, layout, key_bits);
        index[i] = static_cast<std::uint32_t>(p);
      }
    }
    if (p >= m) {
      keys[p] = kPaddingKey;
      index[p] = static_cast<std::uint32_t>(p);
    }
  }
}

// The merge of the sorted new singles (gathered from `staging` by their index) with the
// carry-over (sorted, in `carry`): each lands at its rank in its own list plus the number of
// the other list's keys before it, the carry-over first among equal keys, as a stable sort
// of carry-over + new singles would put them. Each also writes its key beside it for the tie
// pass.
__global__ void merge_new_kernel(const Single* carry, const Single* staging,
                                 const unsigned long long* new_keys,
                                 const std::uint32_t* new_index, const SliceCounts* counts,
                                 const CarryState* state, SortKeyLayout layout,
                                 unsigned key_bits, Single* sorted,
                                 unsigned long long* sorted_keys) {
  const std::uint64_t m = counts->accepted;
  const std::uint64_t c = state->carry_count;
  const bool relative = relative_keys_fit(*counts, layout);
  const unsigned long long t_min = counts->t_min;
  for (std::uint64_t j = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; j < m;
       j += std::uint64_t{gridDim.x} * blockDim.x) {
    const unsigned long long key = new_keys[j];
    // Carry-over keys <= key.
    std::uint64_t lo = 0, hi = c;
    while (lo < hi) {
      const std::uint64_t mid = lo + (hi - lo) / 2;
      if (sort_key(carry[mid], relative, t_min, layout, key_bits) <= key) lo = mid + 1; else hi = mid;
    }
    const std::uint64_t at = j + lo;
    sorted[at] = staging[new_index[j]];
    sorted_keys[at] = key;
  }
}

__global__ void merge_carry_kernel(const Single* carry, const unsigned long long* new_keys,
                                   const SliceCounts* counts, const CarryState* state,
                                   SortKeyLayout layout, unsigned key_bits, Single* sorted,
                                   unsigned long long* sorted_keys) {
  const std::uint64_t m = counts->accepted;
  const std::uint64_t c = state->carry_count;
  const bool relative = relative_keys_fit(*counts, layout);
  const unsigned long long t_min = counts->t_min;
  for (std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < c;
       i += std::uint64_t{gridDim.x} * blockDim.x) {
    const Single s = carry[i];
    const unsigned long long key = sort_key(s, relative, t_min, layout, key_bits);
    // New keys < key.
    std::uint64_t lo = 0, hi = m;
    while (lo < hi) {
      const std::uint64_t mid = lo + (hi - lo) / 2;
      if (new_keys[mid] < key) lo = mid + 1; else hi = mid;
    }
    sorted[i + lo] = s;
    sorted_keys[i + lo] = key;
  }
}

// Equal keys are the same time and crystal (or the same time, for long slices): the first
// thread of each run of equal keys completes the order.
__global__ void order_ties_kernel(const unsigned long long* keys, const SliceCounts* counts,
                                  Single* sorted) {
  const std::uint64_t n = counts->singles;
  for (std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n;
       i += std::uint64_t{gridDim.x} * blockDim.x) {
    if (i + 1 >= n || keys[i + 1] != keys[i]) continue;
    if (i > 0 && keys[i - 1] == keys[i]) continue;
    std::uint64_t end = i + 2;
    while (end < n && keys[end] == keys[i]) ++end;
    sort_run(sorted + i, end - i);
  }
}

// ---- windows ----


// Pass 1: records per unit, multiples, and the first unresolved opener. The redo pass runs
// only after a carry overflow turned the slice into a resolve-everything slice.
__global__ void __launch_bounds__(WalkPolicy::threads_per_block)
    walk_count_kernel(WalkInput in, std::uint64_t unit_capacity, bool redo_pass,
                      unsigned long long* prompt_count, unsigned long long* delayed_count,
                      SliceCounts* counts) {
  if (redo_pass && !counts->redo) return;
  using Reduce = cub::BlockReduce<unsigned long long, WalkPolicy::threads_per_block>;
  __shared__ typename Reduce::TempStorage reduce;
  const std::uint64_t unit = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  WalkTotals totals;
  if (unit < unit_total(in)) {
    CountOnly count;
    const std::uint64_t stop = walk_unit(in, unit, totals, count);
    if (stop != ~std::uint64_t{0}) atomicMin(&counts->carry_start, stop);
  }
  if (unit < unit_capacity) {
    prompt_count[unit] = totals.prompts;
    delayed_count[unit] = totals.delayed;
  }
  const unsigned long long multiples = Reduce(reduce).Sum(totals.multiples);
  __syncthreads();
  const unsigned long long delayed_multiples = Reduce(reduce).Sum(totals.delayed_multiples);
  if (threadIdx.x == 0) {
    if (multiples) atomicAdd(&counts->multiples, multiples);
    if (delayed_multiples) atomicAdd(&counts->delayed_multiples, delayed_multiples);
  }
}

// Carry overflow (core/backend.h): when a non-final slice would carry more than the carry
// buffer holds, the whole slice is resolved as if it were final; the count pass runs again.
__global__ void carry_overflow_kernel(SliceCounts* counts, std::uint64_t max_carry) {
  if (counts->resolve_all || !carry_overflows(counts->singles, counts->carry_start, max_carry))
    return;
  counts->resolve_all = 1;
  counts->redo = 1;
  counts->carry_overflow = 1;
  counts->multiples = 0;
  counts->delayed_multiples = 0;
  counts->carry_start = ~0ull;
}


// Pass 2: the same walk, writing each record at its unit's offset. Records past the
// capacity are dropped here and counted by the summary.
__global__ void __launch_bounds__(WalkPolicy::threads_per_block)
    walk_fill_kernel(WalkInput in, const unsigned long long* prompt_offset,
                     const unsigned long long* delayed_offset, CoincRecord* prompts,
                     CoincRecord* delayed, std::uint64_t prompt_capacity,
                     std::uint64_t delayed_capacity) {
  const std::uint64_t unit = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (unit >= unit_total(in)) return;
  FillRecords fill{prompts,         delayed,         prompt_offset[unit], delayed_offset[unit],
                   prompt_capacity, delayed_capacity};
  WalkTotals totals;
  walk_unit(in, unit, totals, fill);
}


// Opens a slice: zeroes its counts, applies run_start and final.
__global__ void begin_slice_kernel(SliceCounts* counts, CarryState* state, bool run_start,
                                   bool final, unsigned long long* bdm_counts,
                                   std::uint32_t bdm_count) {
  for (std::uint32_t b = threadIdx.x; b < 3 * bdm_count; b += blockDim.x) bdm_counts[b] = 0;
  if (threadIdx.x != 0) return;
  *counts = SliceCounts{};
  counts->carry_start = ~0ull;
  counts->t_min = ~0ull;
  counts->resolve_all = final ? 1u : 0u;
  if (run_start) *state = CarryState{};
}

// One thread: totals, carry-over, the batch interval of core/backend.h; the next slice's
// state. Writes the summary straight into mapped host memory.
__global__ void summarize_kernel(const Single* singles, SliceCounts* counts, CarryState* state,
                                 const unsigned long long* prompt_offset,
                                 const unsigned long long* prompt_count,
                                 const unsigned long long* delayed_offset,
                                 const unsigned long long* delayed_count,
                                 std::uint64_t unit_capacity, std::uint64_t prompt_capacity,
                                 std::uint64_t delayed_capacity, std::uint64_t horizon,
                                 bool final, SliceSummary* out, const unsigned long long* bdm_in,
                                 std::uint64_t* bdm_out, std::uint32_t bdm_count) {
  const std::uint64_t n = counts->singles;
  const bool resolve_all = counts->resolve_all != 0;
  const std::uint64_t carry_start = resolve_all ? n : min_of<std::uint64_t>(counts->carry_start, n);
  const std::uint64_t carry = n - carry_start;
  const std::uint64_t last = unit_capacity - 1;
  const std::uint64_t prompts_total = prompt_offset[last] + prompt_count[last];
  const std::uint64_t delayed_total = delayed_offset[last] + delayed_count[last];
  for (int i = 0; i < kFrameStatusCount; ++i) out->status[i] = counts->status[i];
  out->multiples = counts->multiples;
  out->delayed_multiples = counts->delayed_multiples;
  out->prompts_total = prompts_total;
  out->delayed_total = delayed_total;
  out->prompts_kept = min_of<std::uint64_t>(prompts_total, prompt_capacity);
  out->delayed_kept = min_of<std::uint64_t>(delayed_total, delayed_capacity);
  out->carry_overflow = counts->carry_overflow;
  const std::uint64_t t_begin = state->t_begin;
  const std::uint64_t t_end = slice_t_end(singles, n, carry_start, resolve_all, t_begin, horizon);
  out->t_begin = t_begin;
  out->t_end = t_end;
  out->carry_count = final ? 0 : carry;
  for (std::uint32_t b = 0; b < bdm_count; ++b) {
    bdm_out[b] = bdm_in[b];
    bdm_out[bdm_count + b] = bdm_in[bdm_count + b];
    bdm_out[2 * bdm_count + b] = bdm_in[2 * bdm_count + b];
  }
  state->t_begin = final ? 0 : t_end;
  state->carry_count = final ? 0 : carry;
  counts->carry_start = carry_start;
}

// Keeps the carry-over for the next slice (the sort's output buffer is reused).
__global__ void save_carry_kernel(const Single* singles, const SliceCounts* counts,
                                  CarryState* state, Single* carry,
                                  std::uint64_t max_carry) {
  const std::uint64_t c = state->carry_count;
  const std::uint64_t from = counts->carry_start;
  if (blockIdx.x == 0 && threadIdx.x == 0 && c > 0) {
    state->carry_t_min = singles[from].time;
    state->carry_t_max = singles[from + c - 1].time;
  }
  for (std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < c && i < max_carry;
       i += std::uint64_t{gridDim.x} * blockDim.x)
    carry[i] = singles[from + i];
}

}  // namespace petdaq::gpu

// ---- the stage: which staged frames a slice takes (core/frame_source.h) ----

namespace petdaq::gpu {

// Counts the staged frames a slice with this bound would take.
__global__ void __launch_bounds__(ElementwisePolicy::threads_per_block)
    count_taken_kernel(const uint4* frames, std::uint64_t n, TakenBy taken,
                       unsigned long long* out) {
  using Reduce = cub::BlockReduce<unsigned long long, ElementwisePolicy::threads_per_block>;
  __shared__ typename Reduce::TempStorage temp;
  unsigned long long mine = 0;
  for (std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n;
       i += std::uint64_t{gridDim.x} * blockDim.x)
    mine += taken(frames[i]) ? 1ull : 0ull;
  const unsigned long long block = Reduce(temp).Sum(mine);
  if (threadIdx.x == 0 && block) atomicAdd(out, block);
}

}  // namespace petdaq::gpu

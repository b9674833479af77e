// The per-slice kernels of the GPU backend: fused convert + count + compaction, carry-over
// placement, sort keys, gather and tie pass, window walks (count, then fill) and the
// per-slice summary. Launch shapes live in
// the policy structs; the host side (gpu_backend.cu) sizes and queues them.
#pragma once

#include <cub/block/block_load.cuh>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cuda/functional>

#include <cstdint>

#include "core/coincidence.h"
#include "core/convert.h"
#include "core/counters.h"
#include "core/frame_source.h"
#include "core/slice_end.h"
#include "core/sort_run.h"
#include "core/window_walk.h"
#include "proto/records.h"

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

// The sort key of a single: the slice-relative time above the crystal id, so that one
// 64-bit radix sort gives the (time, crystal) order; equal keys (same time and crystal) are
// put in energy order afterwards. When a slice spans too long for that (hours of ticks:
// never through the slicer, which drops time jumps), the key is the time alone and the
// tie pass orders equal times by (crystal, energy). Padding sorts after every real key.
struct SortKeyLayout {
  std::uint32_t crystal_bits;  // bits of the largest crystal id
};
inline constexpr unsigned long long kPaddingKey = ~0ull;

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

__device__ inline void load_frame(const uint4& v, std::uint8_t (&bytes)[16]) {
  const std::uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 16; ++i) bytes[i] = static_cast<std::uint8_t>(w[i / 4] >> (8 * (i % 4)));
}

// ---- convert: pass 1 counts per tile and per reason, pass 2 converts again and compacts ----

using FrameLoad = cub::BlockLoad<uint4, ConvertPolicy::threads_per_block,
                                 ConvertPolicy::items_per_thread, cub::BLOCK_LOAD_WARP_TRANSPOSE>;

__global__ void __launch_bounds__(ConvertPolicy::threads_per_block)
    convert_count_kernel(const uint4* frames, std::uint32_t frame_count, ConvertTables tables,
                         std::uint32_t* tile_accepted, SliceCounts* counts,
                         unsigned long long* bdm_singles, unsigned long long* bdm_rejected,
                         std::uint32_t bdm_count) {
  using Reduce = cub::BlockReduce<std::uint32_t, ConvertPolicy::threads_per_block>;
  __shared__ union {
    typename FrameLoad::TempStorage load;
    typename Reduce::TempStorage reduce;
  } temp;
  __shared__ std::uint32_t status_tally[kFrameStatusCount];
  __shared__ std::uint32_t accepted_tally[kMaxFrameBdms];
  __shared__ std::uint32_t rejected_tally[kMaxFrameBdms];
  for (int i = threadIdx.x; i < kMaxFrameBdms; i += blockDim.x) {
    accepted_tally[i] = 0;
    rejected_tally[i] = 0;
  }
  if (threadIdx.x < kFrameStatusCount) status_tally[threadIdx.x] = 0;

  const std::uint32_t tile_start = blockIdx.x * ConvertPolicy::tile_frames;
  const int valid = static_cast<int>(min_of<std::uint32_t>(ConvertPolicy::tile_frames,
                                                        frame_count - tile_start));
  uint4 raw[ConvertPolicy::items_per_thread];
  FrameLoad(temp.load).Load(frames + tile_start, raw, valid);
  __syncthreads();

  std::uint32_t accepted = 0;
  unsigned long long t_min = ~0ull, t_max = 0;
#pragma unroll
  for (int k = 0; k < ConvertPolicy::items_per_thread; ++k) {
    const int index = threadIdx.x * ConvertPolicy::items_per_thread + k;
    if (index >= valid) continue;
    std::uint8_t bytes[16];
    load_frame(raw[k], bytes);
    Single s;
    const FrameStatus status = convert_frame(bytes, tables, s);
    atomicAdd(&status_tally[static_cast<int>(status)], 1u);
    if (status == FrameStatus::single) {
      ++accepted;
      t_min = min_of<unsigned long long>(t_min, s.time);
      t_max = max_of<unsigned long long>(t_max, s.time);
      atomicAdd(&accepted_tally[bytes[frame_offset::bdm]], 1u);
    } else if (status == FrameStatus::energy_rejected) {
      atomicAdd(&rejected_tally[bytes[frame_offset::bdm]], 1u);
    }
  }
  const std::uint32_t tile_total = Reduce(temp.reduce).Sum(accepted);
  if (threadIdx.x == 0) tile_accepted[blockIdx.x] = tile_total;
  __syncthreads();
  using Bound = cub::BlockReduce<unsigned long long, ConvertPolicy::threads_per_block>;
  __shared__ typename Bound::TempStorage bound;
  const unsigned long long block_min = Bound(bound).Reduce(t_min, ::cuda::minimum<>{});
  __syncthreads();
  const unsigned long long block_max = Bound(bound).Reduce(t_max, ::cuda::maximum<>{});
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

// Writes the accepted singles of each tile, in frame order, after the carry-over.
__global__ void __launch_bounds__(ConvertPolicy::threads_per_block)
    convert_scatter_kernel(const uint4* frames, std::uint32_t frame_count, ConvertTables tables,
                           const std::uint32_t* tile_offset, const CarryState* state,
                           Single* singles) {
  using Scan = cub::BlockScan<std::uint32_t, ConvertPolicy::threads_per_block>;
  __shared__ union {
    typename FrameLoad::TempStorage load;
    typename Scan::TempStorage scan;
  } temp;
  const std::uint32_t tile_start = blockIdx.x * ConvertPolicy::tile_frames;
  const int valid = static_cast<int>(min_of<std::uint32_t>(ConvertPolicy::tile_frames,
                                                        frame_count - tile_start));
  uint4 raw[ConvertPolicy::items_per_thread];
  FrameLoad(temp.load).Load(frames + tile_start, raw, valid);
  __syncthreads();

  Single out[ConvertPolicy::items_per_thread];
  bool keep[ConvertPolicy::items_per_thread];
  std::uint32_t kept = 0;
#pragma unroll
  for (int k = 0; k < ConvertPolicy::items_per_thread; ++k) {
    const int index = threadIdx.x * ConvertPolicy::items_per_thread + k;
    keep[k] = false;
    if (index >= valid) continue;
    std::uint8_t bytes[16];
    load_frame(raw[k], bytes);
    keep[k] = convert_frame(bytes, tables, out[k]) == FrameStatus::single;
    kept += keep[k] ? 1u : 0u;
  }
  std::uint32_t offset = 0;
  Scan(temp.scan).ExclusiveSum(kept, offset);
  Single* dst = singles + state->carry_count + tile_offset[blockIdx.x] + offset;
#pragma unroll
  for (int k = 0; k < ConvertPolicy::items_per_thread; ++k)
    if (keep[k]) *dst++ = out[k];
}

// Puts the carry-over in front of the new singles.
__global__ void place_carry_kernel(Single* singles, const Single* carry, const CarryState* state,
                                   const std::uint32_t* tile_accepted,
                                   const std::uint32_t* tile_offset, std::uint32_t tiles,
                                   SliceCounts* counts) {
  const std::uint64_t c = state->carry_count;
  const std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i == 0) {
    const std::uint64_t m =
        tiles ? std::uint64_t{tile_offset[tiles - 1]} + tile_accepted[tiles - 1] : 0;
    counts->accepted = m;
    counts->singles = c + m;
    if (c > 0) {
      counts->t_min = min_of<unsigned long long>(counts->t_min, state->carry_t_min);
      counts->t_max = max_of<unsigned long long>(counts->t_max, state->carry_t_max);
    }
  }
  for (std::uint64_t j = i; j < c; j += std::uint64_t{gridDim.x} * blockDim.x)
    singles[j] = carry[j];
}

__device__ inline bool relative_keys_fit(const SliceCounts& c, SortKeyLayout layout) {
  if (c.singles == 0) return true;
  const unsigned long long span = c.t_max - c.t_min;
  // Strictly below the largest value, so that no real key equals the padding key.
  return span < (1ull << (64 - layout.crystal_bits)) - 1;
}

__global__ void make_keys_kernel(const Single* singles, const SliceCounts* counts,
                                 SortKeyLayout layout, std::uint64_t sort_count,
                                 unsigned long long* keys, std::uint32_t* index) {
  const std::uint64_t n = counts->singles;
  const bool relative = relative_keys_fit(*counts, layout);
  const unsigned long long t_min = counts->t_min;
  for (std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < sort_count;
       i += std::uint64_t{gridDim.x} * blockDim.x) {
    unsigned long long key = kPaddingKey;
    if (i < n) {
      const Single s = singles[i];
      key = relative ? ((s.time - t_min) << layout.crystal_bits) | s.crystal : s.time;
    }
    keys[i] = key;
    index[i] = static_cast<std::uint32_t>(i);
  }
}

__global__ void gather_kernel(const Single* unsorted, const std::uint32_t* index,
                              const SliceCounts* counts, Single* sorted) {
  const std::uint64_t n = counts->singles;
  for (std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n;
       i += std::uint64_t{gridDim.x} * blockDim.x)
    sorted[i] = unsorted[index[i]];
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

struct WalkInput {
  const Single* singles;  // sorted; the first `counts->singles` are real
  const SliceCounts* counts;
  const std::uint32_t* segment_start;  // first_open: where each chain segment starts
  const std::uint32_t* segment_count;
  CoincidenceParams params;
  std::uint64_t horizon;
};

// The first index in [from, n) whose time fails `inside` (true on a prefix of the sorted
// singles, then false), searching outwards from `from`: windows and delayed intervals lie a
// few singles ahead, so this stays in cache where a binary search over the whole slice
// would not, and a window of many members (a stuck clock) costs log k, not k.
template <class Inside>
__device__ std::uint64_t gallop_end(const Single* s, std::uint64_t from, std::uint64_t n,
                                    Inside inside) {
  std::uint64_t lo = from, hi = from, step = 1;
  while (hi < n && inside(s[hi].time)) {
    lo = hi + 1;
    hi = min_of<std::uint64_t>(n, hi + step);
    step *= 2;
  }
  while (lo < hi) {
    const std::uint64_t mid = lo + (hi - lo) / 2;
    if (inside(s[mid].time))
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

struct WalkTotals {
  std::uint64_t prompts = 0;
  std::uint64_t delayed = 0;
  std::uint64_t multiples = 0;
  std::uint64_t delayed_multiples = 0;
};

// Hands each record of a walk to the caller with its rank among the unit's records.
template <class Emit>
struct RankedSink {
  Emit& emit;
  bool delayed;
  std::uint64_t rank = 0;
  __device__ void operator()(const CoincRecord& r) { emit(delayed, rank++, r); }
};

// The window walk's search (core/window_walk.h) on the GPU: gallop_end over the slice.
struct Gallop {
  const Single* singles;
  std::uint64_t n;
  template <class Inside>
  __device__ std::uint64_t operator()(std::uint64_t from, Inside inside) const {
    return gallop_end(singles, from, n, inside);
  }
};

// Walks the windows of one unit of work: a segment of the first_open chain (each window's
// successor opens right after its last member, and no window crosses a gap the window
// cannot bridge), or one single in every_single mode. Hands every record to
// emit(delayed, rank, record) in output order. Stops at the first unresolved opener and
// returns it (~0 when every window was resolved). Each step is walk_window(), the CPU
// engine's step (core/window_walk.h).
template <class Emit>
__device__ std::uint64_t walk_unit(const WalkInput& in, std::uint64_t unit, WalkTotals& totals,
                                   Emit& emit) {
  const Single* s = in.singles;
  const std::uint64_t n = in.counts->singles;
  const bool final = in.counts->resolve_all != 0;
  const CoincidenceParams& p = in.params;
  std::uint64_t open, unit_end;
  if (p.mode == WindowMode::first_open) {
    const std::uint32_t segments = *in.segment_count;
    open = in.segment_start[unit];
    unit_end = unit + 1 < segments ? in.segment_start[unit + 1] : n;
  } else {
    open = unit;
    unit_end = unit + 1;
  }
  RankedSink<Emit> prompt_sink{emit, false};
  RankedSink<Emit> delayed_sink{emit, true};
  Gallop find{s, n};
  WalkCursors cursors;
  while (open < unit_end) {
    if (!final && !p.resolvable(s[open].time, in.horizon)) return open;
    open = walk_window(s, open, p, cursors, find, totals, prompt_sink, delayed_sink);
  }
  return ~std::uint64_t{0};
}

__device__ inline std::uint64_t unit_total(const WalkInput& in) {
  return in.params.mode == WindowMode::first_open ? *in.segment_count : in.counts->singles;
}

struct CountOnly {
  __device__ void operator()(bool, std::uint64_t, const CoincRecord&) const {}
};

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
  const std::uint64_t n = counts->singles;
  const std::uint64_t carry_start = min_of<std::uint64_t>(counts->carry_start, n);
  if (counts->resolve_all || n - carry_start <= max_carry) return;
  counts->resolve_all = 1;
  counts->redo = 1;
  counts->carry_overflow = 1;
  counts->multiples = 0;
  counts->delayed_multiples = 0;
  counts->carry_start = ~0ull;
}

struct FillRecords {
  CoincRecord* prompts;
  CoincRecord* delayed;
  std::uint64_t prompt_base;
  std::uint64_t delayed_base;
  std::uint64_t prompt_capacity;
  std::uint64_t delayed_capacity;
  __device__ void operator()(bool is_delayed, std::uint64_t rank, const CoincRecord& r) const {
    if (is_delayed) {
      if (delayed_base + rank < delayed_capacity) delayed[delayed_base + rank] = r;
    } else if (prompt_base + rank < prompt_capacity) {
      prompts[prompt_base + rank] = r;
    }
  }
};

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

// first_open chains restart after every gap the window cannot bridge.
struct SegmentStart {
  const Single* singles;
  const SliceCounts* counts;
  CoincidenceParams params;
  __device__ bool operator()(std::uint32_t i) const {
    if (i >= counts->singles) return false;
    return i == 0 || !params.within(singles[i - 1].time, singles[i].time);
  }
};

// Opens a slice: zeroes its counts, applies run_start and final.
__global__ void begin_slice_kernel(SliceCounts* counts, CarryState* state, bool run_start,
                                   bool final, unsigned long long* bdm_counts,
                                   std::uint32_t bdm_count) {
  for (std::uint32_t b = threadIdx.x; b < 2 * bdm_count; b += blockDim.x) bdm_counts[b] = 0;
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

// One unit of the window walk (core/window_walk.h) on the device: the search, the sinks that
// count or write the records, and the first_open segment starts. walk_count_kernel and
// walk_fill_kernel (gpu/kernels.cuh) run it per thread.
#pragma once

#include <cstdint>

#include "core/coincidence.h"
#include "core/window_walk.h"
#include "gpu/device/slice_state.cuh"
#include "proto/records.h"

namespace petdaq::gpu {

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

// A unit's counts: the walk's counts of the CPU engine (core/coincidence.h).
using WalkTotals = CoincidenceCounts;

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

}  // namespace petdaq::gpu

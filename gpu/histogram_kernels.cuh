// The GPU side of the live histograms (core/histograms.h): the same histogram_frame() and
// histogram_record() rules as the CPU, with atomic increments into device bins; and the
// copy of a slice's resolved singles for the `singles` topic. The bins are sums, so the
// order in which threads add does not matter: GPU = CPU bin for bin.
#pragma once

#include <cstdint>

#include "core/histograms.h"
#include "gpu/device/convert_tile.cuh"
#include "gpu/device/slice_state.cuh"

namespace petdaq::gpu {

struct HistogramPolicy {
  static constexpr int threads_per_block = 256;
  static constexpr unsigned max_blocks = 2048;  // grid-stride beyond this
};

struct AtomicIncrement {
  PETDAQ_HD void operator()(unsigned int* bin) const {
#if defined(__CUDA_ARCH__)
    atomicAdd(bin, 1u);
#else
    ++*bin;
#endif
  }
  PETDAQ_HD void operator()(unsigned long long* bin) const {
#if defined(__CUDA_ARCH__)
    atomicAdd(bin, 1ull);
#else
    ++*bin;
#endif
  }
};

// Convert stage: every frame of the slice.
__global__ void __launch_bounds__(HistogramPolicy::threads_per_block)
    histogram_frames_kernel(const uint4* frames, std::uint32_t frame_bound,
                            const unsigned long long* frames_taken, ConvertTables tables,
                            HistogramLayout layout, std::uint8_t* bins) {
  const std::uint32_t frame_count = frames_to_convert(frame_bound, frames_taken);
  for (std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < frame_count;
       i += gridDim.x * blockDim.x) {
    std::uint8_t f[16];
    load_frame(frames[i], f);
    histogram_frame(f, tables, layout, bins, AtomicIncrement{});
  }
}

// Coincidence stage: the records the slice keeps (their number is in the slice's summary,
// which summarize_kernel wrote before this kernel runs).
__global__ void __launch_bounds__(HistogramPolicy::threads_per_block)
    histogram_records_kernel(const CoincRecord* prompts, const CoincRecord* delayed,
                             const SliceSummary* summary, HistogramLayout layout,
                             std::uint8_t* bins) {
  // The summary is in mapped host memory: one read per block, not one per thread.
  __shared__ std::uint64_t kept[2];
  if (threadIdx.x == 0) {
    kept[0] = summary->prompts_kept;
    kept[1] = summary->delayed_kept;
  }
  __syncthreads();
  const std::uint64_t np = kept[0];
  const std::uint64_t n = np + kept[1];
  for (std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n;
       i += std::uint64_t{gridDim.x} * blockDim.x) {
    if (i < np)
      histogram_record(prompts[i], false, layout, bins, AtomicIncrement{});
    else
      histogram_record(delayed[i - np], true, layout, bins, AtomicIncrement{});
  }
}

// `singles` topic: the number of singles the slice resolved (those before the carry-over;
// summarize_kernel left that index in counts->carry_start), into mapped host memory.
__global__ void resolved_count_kernel(const SliceCounts* counts, std::uint64_t* out) {
  *out = counts->carry_start;
}

}  // namespace petdaq::gpu

// The GPU side of the live image (core/image.h). The bins are integer sums, so the order in
// which threads add does not matter: GPU = CPU voxel for voxel.
#include "gpu/image_kernels.h"

#include <algorithm>

#include <cstddef>

#include "gpu/cuda_support.h"
#include "gpu/device/slice_state.cuh"

namespace petdaq::gpu {

// The kernel reads prompts_kept and delayed_kept as two neighbours.
static_assert(offsetof(SliceSummary, delayed_kept) == offsetof(SliceSummary, prompts_kept) + 8);

namespace {

constexpr int kThreads = 256;
constexpr unsigned kMaxBlocks = 2048;  // grid-stride beyond this

struct AtomicImageAdd {
  __device__ void operator()(int* v, int w) const { atomicAdd(v, w); }
  __device__ void operator()(unsigned long long* v, unsigned long long x) const {
    atomicAdd(v, x);
  }
  __device__ void max(unsigned long long* v, unsigned long long x) const { atomicMax(v, x); }
};

// Each thread takes one record per pass; the voxel goes in with one atomic, the tallies with
// one per warp. The records of a slice nearly always share one trace bin, and eleven atomics per record
// on the same eleven words would queue behind each other: a warp whose records with a point
// in the field all fall in one bin adds its sums once (integer sums, so the order and the
// grouping change nothing).
__global__ void __launch_bounds__(kThreads)
    image_records_kernel(const CoincRecord* prompts, const CoincRecord* delayed,
                         const std::uint64_t* kept, ImageLayout layout, std::uint8_t* bins) {
  // `kept` is in mapped host memory: one read per block, not one per thread.
  __shared__ std::uint64_t n_kept[2];
  if (threadIdx.x == 0) {
    n_kept[0] = kept[0];
    n_kept[1] = kept[1];
  }
  __syncthreads();
  const std::uint64_t np = n_kept[0];
  const std::uint64_t n = np + n_kept[1];
  const AtomicImageAdd add;
  constexpr std::uint32_t kNoBin = 0xFFFFFFFFu;
  const std::uint64_t stride = std::uint64_t{gridDim.x} * blockDim.x;
  // Every lane of a warp runs the same passes (the bound is the warp's first index), so the
  // warp-wide calls below see all 32 lanes.
  const std::uint64_t lane0 = std::uint64_t{blockIdx.x} * blockDim.x + (threadIdx.x & ~31u);
  for (std::uint64_t base = lane0; base < n; base += stride) {
    const std::uint64_t i = base + (threadIdx.x & 31u);
    ImageHit h;
    if (i < np)
      image_hit(prompts[i], false, layout, h);
    else if (i < n)
      image_hit(delayed[i - np], true, layout, h);
    // The tallies: four words every record adds to, so one atomic per warp and tally (one
    // per record would queue every record of the slice behind each other on those words).
    for (int k = 0; k < kImageTallies; ++k) {
      const unsigned with_k = __ballot_sync(0xFFFFFFFFu, h.tally == k);
      if (with_k != 0 && (threadIdx.x & 31u) == static_cast<unsigned>(__ffs(with_k) - 1))
        add(layout.tallies(bins) + k, static_cast<unsigned long long>(__popc(with_k)));
    }
    const bool in_field = h.tally >= 0 && h.voxel != layout.voxel_count;
    if (in_field) add(layout.voxels(bins) + h.voxel, h.weight);
    const std::uint32_t bin = in_field ? h.trace_bin : kNoBin;
    // The bin of the warp's first lane with one; do all lanes with a bin share it?
    const unsigned with_bin = __ballot_sync(0xFFFFFFFFu, bin != kNoBin);
    if (with_bin == 0) continue;
    const std::uint32_t first = __shfl_sync(0xFFFFFFFFu, bin, __ffs(with_bin) - 1);
    const bool shared = __all_sync(0xFFFFFFFFu, bin == kNoBin || bin == first);
    if (!shared) {
      if (in_field) image_add_trace(layout, bins, bin, h.sums, add);
      continue;
    }
    std::int64_t sums[kTraceSums];
    for (int k = 0; k < kTraceSums; ++k) {
      long long v = in_field ? h.sums[k] : 0;
      for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xFFFFFFFFu, v, offset);
      sums[k] = v;
    }
    if ((threadIdx.x & 31u) == 0) image_add_trace(layout, bins, first, sums, add);
  }
}

}  // namespace

void launch_image_records(const CoincRecord* prompts, const CoincRecord* delayed,
                          const std::uint64_t* kept, std::uint64_t capacity,
                          const ImageLayout& layout, std::uint8_t* bins, cudaStream_t stream) {
  const std::uint64_t blocks = std::max<std::uint64_t>(1, (capacity + kThreads - 1) / kThreads);
  image_records_kernel<<<static_cast<unsigned>(std::min<std::uint64_t>(kMaxBlocks, blocks)),
                         kThreads, 0, stream>>>(prompts, delayed, kept, layout, bins);
  PETDAQ_CUDA_CHECK_LAUNCH("image_records_kernel");
}

}  // namespace petdaq::gpu

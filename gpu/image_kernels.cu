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
};

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
  for (std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n;
       i += std::uint64_t{gridDim.x} * blockDim.x) {
    if (i < np)
      image_record(prompts[i], false, layout, bins, AtomicImageAdd{});
    else
      image_record(delayed[i - np], true, layout, bins, AtomicImageAdd{});
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

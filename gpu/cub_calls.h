// The CUB device-wide calls of the slice pipeline, written once for sizing (temp == nullptr:
// `bytes` receives the temporary storage the call needs) and for running (queued on
// `stream`). They compile in their own translation unit (gpu/cub_calls.cu), beside the
// kernels' one.
#pragma once

#include <cub/util_type.cuh>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "gpu/device/stage_predicates.cuh"
#include "gpu/device/walk.cuh"

namespace petdaq::gpu {

cudaError_t sort_keys_async(void* temp, std::size_t& bytes,
                            cub::DoubleBuffer<unsigned long long>& keys,
                            cub::DoubleBuffer<std::uint32_t>& index, std::int64_t count,
                            int end_bit, cudaStream_t stream);
cudaError_t scan_tiles_async(void* temp, std::size_t& bytes, const std::uint32_t* in,
                             std::uint32_t* out, std::int64_t count, cudaStream_t stream);
cudaError_t scan_units_async(void* temp, std::size_t& bytes, const unsigned long long* in,
                             unsigned long long* out, std::int64_t count, cudaStream_t stream);
cudaError_t select_segments_async(void* temp, std::size_t& bytes, SegmentStart start,
                                  std::uint32_t* out, std::uint32_t* out_count,
                                  std::int64_t count, cudaStream_t stream);

// Staged frames (kept, then arrivals) -> the slice's frames (taken), dropped, and the frames
// kept staged.
cudaError_t partition_async(void* temp, std::size_t& bytes, StagedInput in, uint4* taken,
                            uint4* kept, unsigned long long* counts, std::int64_t count,
                            TakenBy take, DroppedAt drop, cudaStream_t stream);

}  // namespace petdaq::gpu

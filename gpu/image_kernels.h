// The GPU side of the live image (core/image.h): the same image_record() rule as the CPU,
// with atomic additions into device bins (gpu/image_kernels.cu).
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "core/image.h"
#include "proto/records.h"

namespace petdaq::gpu {

// Adds the records a slice keeps (their numbers are in the slice's summary, `kept` pointing
// at its prompts_kept and delayed_kept, in that order) to `bins`; `capacity` bounds the grid.
void launch_image_records(const CoincRecord* prompts, const CoincRecord* delayed,
                          const std::uint64_t* kept, std::uint64_t capacity,
                          const ImageLayout& layout, std::uint8_t* bins, cudaStream_t stream);

}  // namespace petdaq::gpu

// A convert tile's frames: loaded by one block (ConvertPolicy) and unpacked per thread into
// the 16 wire bytes that convert_frame() (core/convert.h) reads.
#pragma once

#include <cub/block/block_load.cuh>

#include <cstdint>

#include "gpu/device/slice_state.cuh"

namespace petdaq::gpu {

__device__ inline void load_frame(const uint4& v, std::uint8_t (&bytes)[16]) {
  const std::uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 16; ++i) bytes[i] = static_cast<std::uint8_t>(w[i / 4] >> (8 * (i % 4)));
}

using FrameLoad = cub::BlockLoad<uint4, ConvertPolicy::threads_per_block,
                                 ConvertPolicy::items_per_thread, cub::BLOCK_LOAD_WARP_TRANSPOSE>;

}  // namespace petdaq::gpu

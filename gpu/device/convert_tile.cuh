// A convert tile's frames: loaded by one block (ConvertPolicy), unpacked per thread into the
// 16 wire bytes that convert_frame() (core/convert.h) reads, and one thread's share of the
// tile's work (convert_kernel).
#pragma once

#include <cub/block/block_load.cuh>

#include <cstdint>

#include "core/convert.h"
#include "gpu/device/slice_state.cuh"
#include "proto/records.h"

namespace petdaq::gpu {

__device__ inline void load_frame(const uint4& v, std::uint8_t (&bytes)[16]) {
  const std::uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 16; ++i) bytes[i] = static_cast<std::uint8_t>(w[i / 4] >> (8 * (i % 4)));
}

using FrameLoad = cub::BlockLoad<uint4, ConvertPolicy::threads_per_block,
                                 ConvertPolicy::items_per_thread, cub::BLOCK_LOAD_WARP_TRANSPOSE>;

// The frames a slice's kernels convert: `bound`, the most the host sized their grids for,
// or fewer where the partition left its count of the frames taken on the device (`taken`,
// read by every thread).
__device__ __forceinline__ std::uint32_t frames_to_convert(std::uint32_t bound,
                                                           const unsigned long long* taken) {
  return taken ? static_cast<std::uint32_t>(min_of<unsigned long long>(bound, *taken)) : bound;
}

// Loads this block's tile of frames (tile blockIdx.x) into each thread's raw[]; returns how
// many frames of the tile are real (the last tile may be short).
__device__ __forceinline__ int load_tile(FrameLoad::TempStorage& storage, const uint4* frames,
                                         std::uint32_t frame_count,
                                         uint4 (&raw)[ConvertPolicy::items_per_thread]) {
  const std::uint32_t tile_start = blockIdx.x * ConvertPolicy::tile_frames;
  // A tile past the frames (the grid is sized for a bound on them) loads none.
  const int valid = frame_count > tile_start
                        ? static_cast<int>(min_of<std::uint32_t>(ConvertPolicy::tile_frames,
                                                                 frame_count - tile_start))
                        : 0;
  FrameLoad(storage).Load(frames + tile_start, raw, valid);
  return valid;
}

// What one thread's frames of a tile add up to.
struct ThreadCount {
  std::uint32_t accepted = 0;
  std::uint32_t energy_rejected = 0;
  unsigned long long t_min = ~0ull;
  unsigned long long t_max = 0;
};

// One thread: converts its frames of the tile once (the first `valid` of the tile are
// frames), counts them per BDM into the block's shared tallies and per reason, and keeps
// the singles (keep[k] marks those in out[k]) for the tile's compaction. The two common
// reasons (single, energy_rejected) are counted in registers and summed per tile by the
// caller: a shared atomic per frame on one of eight words would serialise each warp on
// the same address. The rare reasons go to `status_tally` as they come.
__device__ __forceinline__ ThreadCount convert_thread_frames(
    const uint4 (&raw)[ConvertPolicy::items_per_thread], int valid, const ConvertTables& tables,
    std::uint32_t* status_tally, std::uint32_t* accepted_tally, std::uint32_t* rejected_tally,
    Single (&out)[ConvertPolicy::items_per_thread], bool (&keep)[ConvertPolicy::items_per_thread]) {
  ThreadCount c;
#pragma unroll
  for (int k = 0; k < ConvertPolicy::items_per_thread; ++k) {
    keep[k] = false;
    const int index = threadIdx.x * ConvertPolicy::items_per_thread + k;
    if (index >= valid) continue;
    std::uint8_t bytes[16];
    load_frame(raw[k], bytes);
    const FrameStatus status = convert_frame(bytes, tables, out[k]);
    if (status == FrameStatus::single) {
      keep[k] = true;
      ++c.accepted;
      c.t_min = min_of<unsigned long long>(c.t_min, out[k].time);
      c.t_max = max_of<unsigned long long>(c.t_max, out[k].time);
      atomicAdd(&accepted_tally[bytes[frame_offset::bdm]], 1u);
    } else if (status == FrameStatus::energy_rejected) {
      ++c.energy_rejected;
      atomicAdd(&rejected_tally[bytes[frame_offset::bdm]], 1u);
    } else {
      atomicAdd(&status_tally[static_cast<int>(status)], 1u);
      // In the slice's dead ranges (rare: a socket lost datagrams), counted per BDM too.
      if (status == FrameStatus::dead && tables.dead.bdm_frames)
        atomicAdd(reinterpret_cast<unsigned long long*>(tables.dead.bdm_frames) + bytes[frame_offset::bdm], 1ull);
    }
  }
  return c;
}

}  // namespace petdaq::gpu

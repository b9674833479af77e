// The device memory a slice works in (DESIGN section 6): the singles before and after the
// sort, the carry-over, the sort keys, the per-tile and per-unit counts and offsets, the
// per-BDM counts, the slice's counts and the state one slice leaves for the next, and CUB's
// temporary storage at the largest size its calls need. All of it is taken at once, at
// start-up, and freed with the workspace.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gpu/cuda_support.h"
#include "gpu/device/slice_state.cuh"
#include "gpu/device/sort_keys.cuh"
#include "proto/records.h"

namespace petdaq::gpu {

struct WorkspaceSizes {
  std::uint64_t sort_capacity;  // carry-over + new singles
  std::size_t max_carry;
  std::uint64_t tile_capacity;  // convert tiles of the largest slice
  std::uint32_t bdm_count;
  std::uint32_t crystal_count;  // the sort key's crystal field holds the largest id
};

struct DeviceWorkspace {
  explicit DeviceWorkspace(const WorkspaceSizes& sizes);

  // b: the new singles as converted, each tile's at the front of its tile; a: carry-over +
  // new singles in order (the merge's output); the carry-over the slice before kept.
  cuda::device_unique_ptr<Single> d_singles_a, d_singles_b, d_carry;
  cuda::device_unique_ptr<unsigned long long> d_keys_a, d_keys_b;
  cuda::device_unique_ptr<std::uint32_t> d_index_a, d_index_b;
  SortKeyLayout key_layout{};
  cuda::device_unique_ptr<std::uint32_t> d_tile_accepted, d_tile_offset;
  cuda::device_unique_ptr<std::uint32_t> d_segment_start, d_segment_count;
  cuda::device_unique_ptr<unsigned long long> d_prompt_count, d_prompt_offset;
  cuda::device_unique_ptr<unsigned long long> d_delayed_count, d_delayed_offset;
  cuda::device_unique_ptr<unsigned long long> d_bdm;  // accepted [bdm], energy-rejected, dead
  cuda::device_unique_ptr<SliceCounts> d_counts;
  cuda::device_unique_ptr<CarryState> d_state;
  cuda::device_unique_ptr<std::uint8_t> d_temp;
  std::size_t temp_bytes = 0;
};

}  // namespace petdaq::gpu

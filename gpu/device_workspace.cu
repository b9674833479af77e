#include "gpu/device_workspace.h"

#include <algorithm>

#include "gpu/cub_calls.h"

namespace petdaq::gpu {

using cuda::make_device;

DeviceWorkspace::DeviceWorkspace(const WorkspaceSizes& sizes) {
  const std::uint64_t sort_capacity = sizes.sort_capacity;
  const std::uint64_t tile_capacity = sizes.tile_capacity;
  d_singles_a = make_device<Single>(sort_capacity);
  d_singles_b = make_device<Single>(sort_capacity);
  d_carry = make_device<Single>(sizes.max_carry);
  d_keys_a = make_device<unsigned long long>(sort_capacity);
  d_keys_b = make_device<unsigned long long>(sort_capacity);
  d_index_a = make_device<std::uint32_t>(sort_capacity);
  d_index_b = make_device<std::uint32_t>(sort_capacity);
  {
    std::uint32_t bits = 1;  // at least one: the key layout shifts by 64 - bits
    while (bits < 32 && (std::uint64_t{1} << bits) < sizes.crystal_count) ++bits;
    key_layout.crystal_bits = bits;
  }
  d_tile_accepted = make_device<std::uint32_t>(tile_capacity);
  d_tile_offset = make_device<std::uint32_t>(tile_capacity);
  d_segment_start = make_device<std::uint32_t>(sort_capacity);
  d_segment_count = make_device<std::uint32_t>(1);
  d_prompt_count = make_device<unsigned long long>(sort_capacity);
  d_prompt_offset = make_device<unsigned long long>(sort_capacity);
  d_delayed_count = make_device<unsigned long long>(sort_capacity);
  d_delayed_offset = make_device<unsigned long long>(sort_capacity);
  d_bdm = make_device<unsigned long long>(3 * std::size_t{sizes.bdm_count});
  d_counts = make_device<SliceCounts>(1);
  d_state = make_device<CarryState>(1);
  PETDAQ_CUDA_CHECK(cudaMemset(d_state.get(), 0, sizeof(CarryState)));

  // CUB's temporary storage: the largest of what the calls need at full size.
  std::size_t bytes = 0, need = 0;
  cub::DoubleBuffer<unsigned long long> keys(d_keys_a.get(), d_keys_b.get());
  cub::DoubleBuffer<std::uint32_t> index(d_index_a.get(), d_index_b.get());
  PETDAQ_CUDA_CHECK(sort_keys_async(nullptr, bytes, keys, index,
                                    static_cast<std::int64_t>(sort_capacity), 64, nullptr));
  need = std::max(need, bytes);
  PETDAQ_CUDA_CHECK(scan_tiles_async(nullptr, bytes, nullptr, nullptr,
                                     static_cast<std::int64_t>(tile_capacity), nullptr));
  need = std::max(need, bytes);
  PETDAQ_CUDA_CHECK(scan_units_async(nullptr, bytes, nullptr, nullptr,
                                     static_cast<std::int64_t>(sort_capacity), nullptr));
  need = std::max(need, bytes);
  PETDAQ_CUDA_CHECK(select_segments_async(nullptr, bytes, SegmentStart{}, nullptr, nullptr,
                                          static_cast<std::int64_t>(sort_capacity), nullptr));
  need = std::max(need, bytes);
  temp_bytes = need;
  d_temp = make_device<std::uint8_t>(temp_bytes);
}

}  // namespace petdaq::gpu

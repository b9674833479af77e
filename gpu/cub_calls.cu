#include "gpu/cub_calls.h"

#include <cub/device/device_partition.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/discard_iterator.h>
#include <thrust/iterator/transform_iterator.h>

namespace petdaq::gpu {

cudaError_t sort_keys_async(void* temp, std::size_t& bytes,
                            cub::DoubleBuffer<unsigned long long>& keys,
                            cub::DoubleBuffer<std::uint32_t>& index, std::int64_t count,
                            int end_bit, cudaStream_t stream) {
  return cub::DeviceRadixSort::SortPairs(temp, bytes, keys, index, count, 0, end_bit, stream);
}
cudaError_t scan_tiles_async(void* temp, std::size_t& bytes, const std::uint32_t* in,
                             std::uint32_t* out, std::int64_t count, cudaStream_t stream) {
  return cub::DeviceScan::ExclusiveSum(temp, bytes, in, out, count, stream);
}
cudaError_t scan_units_async(void* temp, std::size_t& bytes, const unsigned long long* in,
                             unsigned long long* out, std::int64_t count, cudaStream_t stream) {
  return cub::DeviceScan::ExclusiveSum(temp, bytes, in, out, count, stream);
}
cudaError_t select_segments_async(void* temp, std::size_t& bytes, SegmentStart start,
                                  std::uint32_t* out, std::uint32_t* out_count,
                                  std::int64_t count, cudaStream_t stream) {
  return cub::DeviceSelect::If(temp, bytes, thrust::counting_iterator<std::uint32_t>(0), out,
                               out_count, count, start, stream);
}

cudaError_t partition_async(void* temp, std::size_t& bytes, StagedInput in, uint4* taken,
                            uint4* kept, unsigned long long* counts, std::int64_t count,
                            TakenBy take, DroppedAt drop, cudaStream_t stream) {
  const auto frames =
      thrust::make_transform_iterator(thrust::counting_iterator<std::int64_t>(0), in);
  return cub::DevicePartition::If(temp, bytes, frames, taken, thrust::make_discard_iterator(),
                                  kept, counts, count, take, drop, stream);
}

}  // namespace petdaq::gpu

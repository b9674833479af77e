// The GPU backend's launches: the per-slice kernel sequence on the compute stream, the count
// of the frames a bound takes, and the check that this build's kernels load on the device.
// The one translation unit that compiles the kernels (gpu/kernels.cuh,
// gpu/histogram_kernels.cuh).
#include <algorithm>
#include <string>

#include "gpu/gpu_backend_impl.h"
#include "gpu/histogram_kernels.cuh"
#include "gpu/image_kernels.h"
#include "gpu/kernels.cuh"

namespace petdaq {
namespace gpu_impl {

// The staged frames a slice with this bound takes (the partition stream waits for it). The
// stage is one buffer here (consolidate_stage()).
std::uint64_t GpuBackend::count_taken(std::uint64_t bound) {
  cudaStream_t stream = streams_.partition.get();
  if (stage_.kept_count == 0) return 0;
  PETDAQ_CUDA_CHECK(
      cudaMemsetAsync(partition_.d_taken.get(), 0, sizeof(unsigned long long), stream));
  const unsigned blocks = static_cast<unsigned>(std::min(
      kMaxStrideBlocks, blocks_for(stage_.kept_count, ElementwisePolicy::threads_per_block)));
  gpu::count_taken_kernel<<<blocks, ElementwisePolicy::threads_per_block, 0, stream>>>(
      reinterpret_cast<const uint4*>(stage_.kept[stage_.kept_current].get()), stage_.kept_count,
      gpu::TakenBy{rule_, bound}, partition_.d_taken.get());
  PETDAQ_CUDA_CHECK_LAUNCH("count_taken_kernel");
  PETDAQ_CUDA_CHECK(cudaMemcpyAsync(partition_.h_taken.get(), partition_.d_taken.get(),
                                    sizeof(unsigned long long), cudaMemcpyDeviceToHost, stream));
  PETDAQ_CUDA_CHECK(cudaEventRecord(partition_.counted.get(), stream));
  PhaseScope wait(phases_, Phase::count_wait);
  wait_for(partition_.counted.get(), ring_.next_submit);
  return partition_.h_taken[0];
}

// One slice's kernels on the compute stream: begin, convert, order, windows, outputs. Every
// kernel is sized for the bound on the slice's frames (the frames past their count add
// padding keys to the sort, and nothing else); the windows' passes and the outputs run over
// a range padded to the largest carry-over.
void GpuBackend::enqueue_compute(Slot& slot, const Work& request, FrameCount frames) {
  const std::uint64_t sort_count = std::max<std::uint64_t>(1, caps_.max_carry + frames.bound);
  enqueue_begin(request);
  const std::uint64_t tiles = enqueue_convert(slot, request, frames);
  Single* sorted = enqueue_order(slot, request, frames.bound, tiles, sort_count);
  enqueue_windows(slot, request, sorted, sort_count);
  enqueue_outputs(slot, sorted, sort_count);
  PETDAQ_CUDA_CHECK(cudaEventRecord(slot.events.done.get(), streams_.compute.get()));
}

// The slice's counts and state start; a run's first slice clears the histograms and image.
void GpuBackend::enqueue_begin(const Work& request) {
  cudaStream_t stream = streams_.compute.get();
  gpu::DeviceWorkspace& ws = *ws_;
  gpu::begin_slice_kernel<<<1, ElementwisePolicy::threads_per_block, 0, stream>>>(
      ws.d_counts.get(), ws.d_state.get(), request.run_start, request.final, ws.d_bdm.get(),
      caps_.bdm_count);
  PETDAQ_CUDA_CHECK_LAUNCH("begin_slice_kernel");
  if (live_.d_histograms && request.run_start)  // histograms: a run starts
    PETDAQ_CUDA_CHECK(
        cudaMemsetAsync(live_.d_histograms.get(), 0, live_.histogram_layout.bytes, stream));
  if (live_.d_image && request.run_start)  // image: a run starts
    PETDAQ_CUDA_CHECK(cudaMemsetAsync(live_.d_image.get(), 0, live_.image_layout.bytes, stream));
}

// Convert: one pass converts, counts and compacts each tile's singles to the front of its
// tile in a staging area, and the tile counts are scanned; the keys are made from there
// (make_keys_kernel), and the merge gathers the singles from there and from the carry-over
// into the slice's ordered singles (d_singles_a), so that no pass copies them in between.
// Returns the tiles.
std::uint64_t GpuBackend::enqueue_convert(Slot& slot, const Work& request, FrameCount frames) {
  const std::uint64_t frame_count = frames.bound;
  cudaStream_t stream = streams_.compute.get();
  gpu::DeviceWorkspace& ws = *ws_;
  SliceCounts* counts = ws.d_counts.get();
  unsigned long long* bdm = ws.d_bdm.get();
  // The slice's tables: the backend's, with the request's dead ranges, whose frames are
  // counted per BDM in the third part of the per-BDM counts.
  ConvertTables tables = calibration_.tables;
  tables.dead = request.dead;
  tables.dead.bdm_frames =
      request.dead.count ? reinterpret_cast<std::uint64_t*>(bdm + 2 * std::size_t{caps_.bdm_count}) : nullptr;
  const std::uint64_t tiles = frame_count ? blocks_for(frame_count, ConvertPolicy::tile_frames) : 0;
  const uint4* input = reinterpret_cast<const uint4*>(slot.d_frames.get());
  if (tiles > 0) {
    gpu::convert_kernel<<<tiles, ConvertPolicy::threads_per_block, 0, stream>>>(
        input, static_cast<std::uint32_t>(frame_count), frames.device, tables,
        ws.d_tile_accepted.get(), counts, bdm, bdm + caps_.bdm_count, caps_.bdm_count,
        ws.d_singles_b.get());
    PETDAQ_CUDA_CHECK_LAUNCH("convert_kernel");
    std::size_t bytes = ws.temp_bytes;
    PETDAQ_CUDA_CHECK(scan_tiles_async(ws.d_temp.get(), bytes, ws.d_tile_accepted.get(),
                                       ws.d_tile_offset.get(), static_cast<std::int64_t>(tiles),
                                       stream));
    if (live_.d_histograms) {  // histograms of the frames
      gpu::histogram_frames_kernel<<<static_cast<unsigned>(std::min<std::uint64_t>(
                                         gpu::HistogramPolicy::max_blocks,
                                         blocks_for(frame_count,
                                                    gpu::HistogramPolicy::threads_per_block))),
                                     gpu::HistogramPolicy::threads_per_block, 0, stream>>>(
          input, static_cast<std::uint32_t>(frame_count), frames.device, tables,
          live_.histogram_layout, live_.d_histograms.get());
      PETDAQ_CUDA_CHECK_LAUNCH("histogram_frames_kernel");
    }
  }
  PETDAQ_CUDA_CHECK(cudaEventRecord(slot.events.convert_end.get(), stream));
  return tiles;
}

// Order: 64-bit keys of the new singles with their positions, one radix sort over the bound
// on the slice's frames (a size the host knows: the new singles are at most that many,
// padding keys after them), a merge with the carry-over (in order already) that writes
// each single with its key, and the rare runs of equal keys put in energy order. Returns
// the ordered singles.
Single* GpuBackend::enqueue_order(Slot& slot, const Work& request, std::size_t frame_count,
                                  std::uint64_t tiles, std::uint64_t sort_count) {
  cudaStream_t stream = streams_.compute.get();
  gpu::DeviceWorkspace& ws = *ws_;
  SliceCounts* counts = ws.d_counts.get();
  CarryState* state = ws.d_state.get();
  const std::uint64_t key_count = std::max<std::uint64_t>(1, frame_count);
  const unsigned elementwise_blocks = static_cast<unsigned>(
      std::min(kMaxStrideBlocks, blocks_for(sort_count, ElementwisePolicy::threads_per_block)));
  const unsigned key_blocks = static_cast<unsigned>(
      std::min(kMaxStrideBlocks, blocks_for(key_count, ElementwisePolicy::threads_per_block)));
  const unsigned carry_blocks = static_cast<unsigned>(
      std::min(kMaxStrideBlocks, blocks_for(std::max<std::uint64_t>(1, caps_.max_carry),
                                            ElementwisePolicy::threads_per_block)));
  const Single* staging = ws.d_singles_b.get();
  gpu::count_singles_kernel<<<1, 1, 0, stream>>>(state, ws.d_tile_accepted.get(),
                                                 ws.d_tile_offset.get(),
                                                 static_cast<std::uint32_t>(tiles), counts);
  PETDAQ_CUDA_CHECK_LAUNCH("count_singles_kernel");
  gpu::make_keys_kernel<<<key_blocks, ElementwisePolicy::threads_per_block, 0, stream>>>(
      staging, ws.d_tile_accepted.get(), ws.d_tile_offset.get(), frame_count, counts,
      ws.key_layout, request.key_bits, key_count, ws.d_keys_a.get(), ws.d_index_a.get());
  PETDAQ_CUDA_CHECK_LAUNCH("make_keys_kernel");
  cub::DoubleBuffer<unsigned long long> keys(ws.d_keys_a.get(), ws.d_keys_b.get());
  cub::DoubleBuffer<std::uint32_t> index(ws.d_index_a.get(), ws.d_index_b.get());
  if (key_count > 1) {
    std::size_t bytes = ws.temp_bytes;
    PETDAQ_CUDA_CHECK(sort_keys_async(ws.d_temp.get(), bytes, keys, index,
                                      static_cast<std::int64_t>(key_count),
                                      static_cast<int>(request.key_bits), stream));
  }
  Single* sorted = ws.d_singles_a.get();
  unsigned long long* sorted_keys = keys.Alternate();
  gpu::merge_new_kernel<<<key_blocks, ElementwisePolicy::threads_per_block, 0, stream>>>(
      ws.d_carry.get(), staging, keys.Current(), index.Current(), counts, state, ws.key_layout,
      request.key_bits, sorted, sorted_keys);
  PETDAQ_CUDA_CHECK_LAUNCH("merge_new_kernel");
  gpu::merge_carry_kernel<<<carry_blocks, ElementwisePolicy::threads_per_block, 0, stream>>>(
      ws.d_carry.get(), keys.Current(), counts, state, ws.key_layout, request.key_bits, sorted,
      sorted_keys);
  PETDAQ_CUDA_CHECK_LAUNCH("merge_carry_kernel");
  gpu::order_ties_kernel<<<elementwise_blocks, ElementwisePolicy::threads_per_block, 0, stream>>>(
      sorted_keys, counts, sorted);
  PETDAQ_CUDA_CHECK_LAUNCH("order_ties_kernel");
  PETDAQ_CUDA_CHECK(cudaEventRecord(slot.events.sort_end.get(), stream));
  return sorted;
}

// Windows: units of work are chain segments (first_open) or singles (every_single); the
// count pass (again after a carry overflow), the records' offsets, the fill pass and the
// slice's summary.
void GpuBackend::enqueue_windows(Slot& slot, const Work& request, Single* sorted,
                                 std::uint64_t sort_count) {
  cudaStream_t stream = streams_.compute.get();
  gpu::DeviceWorkspace& ws = *ws_;
  SliceCounts* counts = ws.d_counts.get();
  if (params_.mode == WindowMode::first_open) {
    std::size_t bytes = ws.temp_bytes;
    PETDAQ_CUDA_CHECK(select_segments_async(
        ws.d_temp.get(), bytes, gpu::SegmentStart{sorted, counts, params_},
        ws.d_segment_start.get(), ws.d_segment_count.get(), static_cast<std::int64_t>(sort_count),
        stream));
  }
  const gpu::WalkInput walk{sorted, counts, ws.d_segment_start.get(), ws.d_segment_count.get(),
                            params_, request.horizon};
  const std::uint64_t walk_blocks = blocks_for(sort_count, WalkPolicy::threads_per_block);
  for (const bool redo : {false, true}) {
    gpu::walk_count_kernel<<<walk_blocks, WalkPolicy::threads_per_block, 0, stream>>>(
        walk, sort_count, redo, ws.d_prompt_count.get(), ws.d_delayed_count.get(), counts);
    PETDAQ_CUDA_CHECK_LAUNCH("walk_count_kernel");
    if (!redo) {
      gpu::carry_overflow_kernel<<<1, 1, 0, stream>>>(counts, caps_.max_carry);
      PETDAQ_CUDA_CHECK_LAUNCH("carry_overflow_kernel");
    }
  }
  {
    std::size_t bytes = ws.temp_bytes;
    PETDAQ_CUDA_CHECK(scan_units_async(ws.d_temp.get(), bytes, ws.d_prompt_count.get(),
                                       ws.d_prompt_offset.get(),
                                       static_cast<std::int64_t>(sort_count), stream));
    bytes = ws.temp_bytes;
    PETDAQ_CUDA_CHECK(scan_units_async(ws.d_temp.get(), bytes, ws.d_delayed_count.get(),
                                       ws.d_delayed_offset.get(),
                                       static_cast<std::int64_t>(sort_count), stream));
  }
  gpu::walk_fill_kernel<<<walk_blocks, WalkPolicy::threads_per_block, 0, stream>>>(
      walk, ws.d_prompt_offset.get(), ws.d_delayed_offset.get(), slot.records.d_prompts.get(),
      slot.records.d_delayed.get(), caps_.prompt_capacity, caps_.delayed_capacity);
  PETDAQ_CUDA_CHECK_LAUNCH("walk_fill_kernel");
  gpu::summarize_kernel<<<1, 1, 0, stream>>>(
      sorted, counts, ws.d_state.get(), ws.d_prompt_offset.get(), ws.d_prompt_count.get(),
      ws.d_delayed_offset.get(), ws.d_delayed_count.get(), sort_count, caps_.prompt_capacity,
      caps_.delayed_capacity, request.horizon, request.final, slot.records.d_summary,
      ws.d_bdm.get(), slot.records.d_bdm_out, caps_.bdm_count);
  PETDAQ_CUDA_CHECK_LAUNCH("summarize_kernel");
}

// The outputs beside the records (histograms, image, the resolved singles) and the next
// carry-over.
void GpuBackend::enqueue_outputs(Slot& slot, Single* sorted, std::uint64_t sort_count) {
  cudaStream_t stream = streams_.compute.get();
  gpu::DeviceWorkspace& ws = *ws_;
  if (live_.d_histograms) {  // histograms of the records
    gpu::histogram_records_kernel<<<static_cast<unsigned>(std::min<std::uint64_t>(
                                        gpu::HistogramPolicy::max_blocks,
                                        blocks_for(caps_.prompt_capacity + caps_.delayed_capacity,
                                                   gpu::HistogramPolicy::threads_per_block))),
                                    gpu::HistogramPolicy::threads_per_block, 0, stream>>>(
        slot.records.d_prompts.get(), slot.records.d_delayed.get(), slot.records.d_summary,
        live_.histogram_layout, live_.d_histograms.get());
    PETDAQ_CUDA_CHECK_LAUNCH("histogram_records_kernel");
  }
  if (live_.d_image)  // the live image of the records
    gpu::launch_image_records(slot.records.d_prompts.get(), slot.records.d_delayed.get(),
                              &slot.records.d_summary->prompts_kept,
                              caps_.prompt_capacity + caps_.delayed_capacity, live_.image_layout,
                              live_.d_image.get(), stream);
  if (live_.singles) {  // singles topic: keep this slice's ordered singles
    PETDAQ_CUDA_CHECK(cudaMemcpyAsync(slot.singles.d_singles.get(), sorted,
                                      sort_count * sizeof(Single), cudaMemcpyDeviceToDevice,
                                      stream));
    gpu::resolved_count_kernel<<<1, 1, 0, stream>>>(ws.d_counts.get(), slot.singles.d_resolved);
    PETDAQ_CUDA_CHECK_LAUNCH("resolved_count_kernel");
  }
  if (caps_.max_carry > 0) {
    gpu::save_carry_kernel<<<std::min(
                                 kMaxStrideBlocks,
                                 blocks_for(caps_.max_carry, ElementwisePolicy::threads_per_block)),
                             ElementwisePolicy::threads_per_block, 0, stream>>>(
        sorted, ws.d_counts.get(), ws.d_state.get(), ws.d_carry.get(), caps_.max_carry);
    PETDAQ_CUDA_CHECK_LAUNCH("save_carry_kernel");
  }
}

}  // namespace gpu_impl

bool gpu_device_usable(std::string& reason) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    reason = std::string("no usable CUDA driver or device: ") + cudaGetErrorName(e) + " (" +
             cudaGetErrorString(e) + ")";
    cudaGetLastError();
    return false;
  }
  if (count == 0) {
    reason = "no CUDA device";
    return false;
  }
  cudaDeviceProp prop{};
  e = cudaGetDeviceProperties(&prop, 0);
  if (e != cudaSuccess) {
    reason = std::string("cannot read the CUDA device's properties: ") + cudaGetErrorName(e);
    cudaGetLastError();
    return false;
  }
  // The kernels must load on this device (they are built for one architecture family).
  cudaFuncAttributes attributes{};
  e = cudaFuncGetAttributes(&attributes, gpu::begin_slice_kernel);
  if (e != cudaSuccess) {
    reason = std::string(prop.name) + " (compute capability " + std::to_string(prop.major) + "." +
             std::to_string(prop.minor) + ") cannot run this build's kernels: " +
             cudaGetErrorName(e);
    cudaGetLastError();
    return false;
  }
  reason = std::string(prop.name) + ", compute capability " + std::to_string(prop.major) + "." +
           std::to_string(prop.minor) + ", " +
           std::to_string(prop.totalGlobalMem >> 20) + " MiB";
  return true;
}

}  // namespace petdaq

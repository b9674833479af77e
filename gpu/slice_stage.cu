// The GPU backend's stage (DESIGN section 6, docs/gpu.md "One slice"): frames copied to the
// device ahead of their slice, and submit(): which staged frames a slice takes (the partition,
// the split), then the slice's compute queued behind it (slice_compute.cu). On the common path
// no call here waits for the device, and the compute does not wait for the host: its kernels
// read the count of frames the slice took where the partition left it on the device; the
// count also comes back to the host, which reads it once it is there (at the latest at the
// next submit() or collect()) to keep the stage's count exact.
#include <algorithm>
#include <bit>
#include <stdexcept>
#include <string>

#include "gpu/gpu_backend_impl.h"

namespace petdaq::gpu_impl {

std::uint64_t GpuBackend::stage(const RawFrame* frames, std::size_t count) {
  complete_partition(false);
  // stage_.kept_count may still be a bound: the count of the last partition settles it.
  if (staged_bound() + count > caps_.max_staged && partition_.pending) complete_partition(true);
  // The slicer never stages more; a caller that does has a bug, not bad data.
  if (staged_bound() + count > caps_.max_staged)
    throw std::invalid_argument(
        "GpuBackend::stage: " + std::to_string(count) + " frames do not fit beside the " +
        std::to_string(staged_bound()) +
        " staged (stream.max_pending_frames = " + std::to_string(caps_.max_staged) + ")");
  cudaStream_t copy = streams_.copy.get();
  if (count > 0)
    PETDAQ_CUDA_CHECK(
        cudaMemcpyAsync(stage_.arrivals[stage_.arrivals_current].get() + stage_.arrivals_count,
                        frames, count * sizeof(RawFrame), cudaMemcpyHostToDevice, copy));
  stage_.arrivals_count += count;
  const std::uint64_t ticket = ++tickets_.issued;
  PETDAQ_CUDA_CHECK(cudaEventRecord(tickets_.events[ticket % kStageEvents].get(), copy));
  return ticket;
}

// The ticket whose event tells about `ticket`: the event of an old ticket may have been
// recorded again for a later one, whose completion implies this one's (one copy stream).
std::uint64_t GpuBackend::stage_probe(std::uint64_t ticket) const {
  return tickets_.issued >= kStageEvents ? std::max(ticket, tickets_.issued - kStageEvents + 1)
                                         : ticket;
}

bool GpuBackend::staged(std::uint64_t ticket) {
  complete_partition(false);
  if (ticket <= tickets_.staged_through) return true;
  const std::uint64_t probe = stage_probe(ticket);
  const cudaError_t e = cudaEventQuery(tickets_.events[probe % kStageEvents].get());
  if (e == cudaErrorNotReady) return false;
  PETDAQ_CUDA_CHECK(e);
  tickets_.staged_through = std::max(tickets_.staged_through, probe);
  return true;
}

void GpuBackend::wait_staged(std::uint64_t ticket) {
  complete_partition(false);
  if (ticket <= tickets_.staged_through) return;
  const std::uint64_t probe = stage_probe(ticket);
  wait_for(tickets_.events[probe % kStageEvents].get(), ring_.next_submit);
  tickets_.staged_through = std::max(tickets_.staged_through, probe);
}

// The stage's frames below `bound` (and those with no source) to the slot, those at `bound`
// dropped when `drop`, the rest to the other kept buffer, in order (the input buffers are
// only read); then the counts to pinned host memory.
void GpuBackend::enqueue_partition(Slot& slot, std::uint64_t bound, bool drop) {
  cudaStream_t stream = streams_.partition.get();
  std::size_t bytes = partition_.temp_bytes;
  const gpu::StagedInput input{
      reinterpret_cast<const uint4*>(stage_.kept[stage_.kept_current].get()), stage_.kept_count,
      reinterpret_cast<const uint4*>(stage_.arrivals[stage_.arrivals_current].get())};
  PETDAQ_CUDA_CHECK(partition_async(
      partition_.d_temp.get(), bytes, input, reinterpret_cast<uint4*>(slot.d_frames.get()),
      reinterpret_cast<uint4*>(stage_.kept[1 - stage_.kept_current].get()),
      slot.take.d_partition_counts.get(), static_cast<std::int64_t>(staged_bound()),
      gpu::TakenBy{rule_, bound}, gpu::DroppedAt{rule_, bound, drop}, stream));
  PETDAQ_CUDA_CHECK(
      cudaMemcpyAsync(slot.take.h_partition_counts.get(), slot.take.d_partition_counts.get(),
                      2 * sizeof(unsigned long long), cudaMemcpyDeviceToHost, stream));
  PETDAQ_CUDA_CHECK(cudaEventRecord(slot.take.counted.get(), stream));
}

// The arrivals copied behind the kept frames (device to device, on the partition stream), so
// that the kept buffer holds the whole stage; the counts are exact (no partition pending).
void GpuBackend::consolidate_stage() {
  if (stage_.arrivals_count == 0) return;
  PETDAQ_CUDA_CHECK(cudaMemcpyAsync(stage_.kept[stage_.kept_current].get() + stage_.kept_count,
                                    stage_.arrivals[stage_.arrivals_current].get(),
                                    stage_.arrivals_count * sizeof(RawFrame),
                                    cudaMemcpyDeviceToDevice, streams_.partition.get()));
  stage_.kept_count += stage_.arrivals_count;
  stage_.arrivals_count = 0;
}

// The slice's counts are on the host: the stage's count is exact again. (The slice's compute
// was queued at its submit, reading the count on the device.)
void GpuBackend::finish_slot_partition(Slot& slot, std::uint64_t taken, std::uint64_t dropped) {
  if (taken + dropped > slot.take.partition_items || taken > caps_.max_slice_frames)
    throw std::logic_error("GpuBackend: the partition of slice " + std::to_string(slot.slice_id) +
                           " counted " + std::to_string(taken) + " taken and " +
                           std::to_string(dropped) + " dropped of " +
                           std::to_string(slot.take.partition_items) + " frames");
  stage_.kept_count = slot.take.partition_items - taken - dropped;
  slot.take.frames_taken = taken;
  slot.take.frames_dropped = dropped;
}

bool GpuBackend::complete_partition(bool wait) {
  if (!partition_.pending) return true;
  Slot& slot = ring_.slots[partition_.pending_slice % kSlicesInFlight];
  if (wait) {
    PhaseScope scope(phases_, Phase::partition_wait);
    wait_for(slot.take.counted.get(), slot.slice_id);
  } else {
    const cudaError_t e = cudaEventQuery(slot.take.counted.get());
    if (e == cudaErrorNotReady) return false;
    PETDAQ_CUDA_CHECK(e);
  }
  partition_.pending = false;
  finish_slot_partition(slot, slot.take.h_partition_counts[0], slot.take.h_partition_counts[1]);
  return true;
}

// The sort key bits a slice needs when its frames keep to the contract of core/backend.h:
// every frame staged since the slice before has a raw time at or after that slice's bound,
// so the new singles span less than the bounds' difference plus the calibration's offsets.
// Twice that, and room for a carry-over that reaches back a little, rounded up to whole
// radix passes of 8 bits. A slice that breaks the contract stays exact: its keys saturate
// and the tie pass orders the saturated run (gpu/device/sort_keys.cuh).
unsigned GpuBackend::key_bits_for(std::uint64_t bound) const {
  if (key_width_.previous_bound == kNoBound || bound == kNoBound ||
      bound < key_width_.previous_bound)
    return 64;
  const std::uint64_t span = bound - key_width_.previous_bound;
  if (span > (std::uint64_t{1} << 40)) return 64;
  const std::uint64_t reach = 2 * span + key_width_.time_offset_range + (std::uint64_t{1} << 20);
  const unsigned time_bits = static_cast<unsigned>(std::bit_width(reach));
  const unsigned bits = (ws_->key_layout.crystal_bits + time_bits + 7) / 8 * 8;
  return std::min(bits, 64u);
}

void GpuBackend::submit(const SliceRequest& request) {
  if (in_flight() >= kSlicesInFlight)
    throw std::logic_error("GpuBackend::submit: " + std::to_string(kSlicesInFlight) +
                           " slices already in flight; collect one first");
  // The slice before: its count is nearly always in by now (its partition ran while this
  // slice's frames were copied); it makes the stage's count exact for this one.
  complete_partition(true);
  Slot& slot = ring_.slots[ring_.next_submit % kSlicesInFlight];
  slot.slice_id = request.slice_id;
  cudaStream_t partition = streams_.partition.get();

  // Every staged copy is in before the stage is partitioned.
  PETDAQ_CUDA_CHECK(cudaEventRecord(slot.events.copy_begin.get(), streams_.copy.get()));
  PETDAQ_CUDA_CHECK(cudaStreamWaitEvent(partition, slot.events.copy_begin.get(), 0));

  // Which frames the slice takes:
  // * at most max_slice_frames staged (the common case): no split is possible and the
  //   slot holds whatever the partition takes, so the partition runs at once and its count
  //   comes back with it; nothing here waits;
  // * more staged (a backlog, or a final slice behind one; rare): the stage is made one
  //   buffer and counted first, since the partition's output must fit the slot; above
  //   max_slice_frames the bound is lowered by bisection on such counts (core/backend.h's
  //   split), one wait per count.
  std::uint64_t bound = request.final ? kNoBound : request.bound;
  bool split = false;
  bool drop = false;
  bool counted = false;
  std::uint64_t taken = 0, dropped = 0;
  if (staged_bound() > caps_.max_slice_frames) {
    consolidate_stage();
    counted = true;
    taken = count_taken(bound);
    if (taken > caps_.max_slice_frames) {
      split = true;
      std::uint64_t lo = 0, hi = bound;  // count_taken(lo) <= max_slice_frames < count_taken(hi)
      while (hi - lo > 1) {
        const std::uint64_t mid = lo + (hi - lo) / 2;
        if (count_taken(mid) <= caps_.max_slice_frames)
          lo = mid;
        else
          hi = mid;
      }
      bound = lo;
      taken = count_taken(bound);
      if (taken == 0) {
        // More frames share the earliest time than a slice holds: they are dropped.
        drop = true;
        dropped = count_taken(bound + 1);
      }
    }
  }
  slot.take.partition_items = staged_bound();
  slot.take.bound = bound;
  slot.take.split = split;
  if (request.run_start) key_width_.previous_bound = kNoBound;
  slot.work = Work{corrected_horizon(bound, min_time_offset_), request.final && !split,
                   request.run_start, key_bits_for(bound), request.dead};
  key_width_.previous_bound = slot.work.final ? kNoBound : bound;
  if (slot.take.partition_items > 0) enqueue_partition(slot, bound, drop);
  PETDAQ_CUDA_CHECK(cudaEventRecord(slot.events.copy_end.get(), partition));
  // The slice's compute goes on the compute stream behind the partition now, without its
  // count: the kernels read the count the partition left on the device, and the host sizes
  // them for every frame the partition read (counted: the exact count).
  PETDAQ_CUDA_CHECK(cudaStreamWaitEvent(streams_.compute.get(), slot.events.copy_end.get(), 0));
  enqueue_compute(slot, slot.work,
                  FrameCount{counted ? taken : slot.take.partition_items,
                             slot.take.partition_items > 0 ? slot.take.d_partition_counts.get()
                                                           : nullptr});
  // The copies staged after this submit go to the other arrivals buffer, once the partition
  // that read it last (the slice before's) has run.
  PETDAQ_CUDA_CHECK(
      cudaEventRecord(stage_.arrivals_read[stage_.arrivals_current].get(), partition));
  stage_.arrivals_current = 1 - stage_.arrivals_current;
  stage_.arrivals_count = 0;
  PETDAQ_CUDA_CHECK(cudaStreamWaitEvent(streams_.copy.get(),
                                        stage_.arrivals_read[stage_.arrivals_current].get(), 0));
  if (slot.take.partition_items > 0) stage_.kept_current = 1 - stage_.kept_current;
  // stage_.kept_count is now the bound slot.take.partition_items until the counts are in.
  stage_.kept_count = slot.take.partition_items;
  ++ring_.next_submit;
  if (slot.take.partition_items == 0 || counted) {
    finish_slot_partition(slot, taken, dropped);  // the counts are known already
  } else {
    partition_.pending = true;
    partition_.pending_slice = ring_.next_submit - 1;
    complete_partition(false);
  }
}

}  // namespace petdaq::gpu_impl

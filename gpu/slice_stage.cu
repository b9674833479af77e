// The GPU backend's stage (DESIGN section 6, docs/gpu.md "One slice"): frames copied to the
// device ahead of their slice, and submit(): which staged frames a slice takes (the partition,
// the split), before the slice's compute is queued (slice_compute.cu).
#include <algorithm>
#include <stdexcept>
#include <string>

#include "gpu/gpu_backend_impl.h"

namespace petdaq::gpu_impl {

std::uint64_t GpuBackend::stage(const RawFrame* frames, std::size_t count) {
  // The slicer never stages more; a caller that does has a bug, not bad data.
  if (count > max_staged_ - stage_count_)
    throw std::invalid_argument("GpuBackend::stage: " + std::to_string(count) +
                                " frames do not fit beside the " + std::to_string(stage_count_) +
                                " staged (stream.max_pending_frames = " +
                                std::to_string(max_staged_) + ")");
  cudaStream_t copy = copy_stream_.get();
  if (count > 0)
    PETDAQ_CUDA_CHECK(cudaMemcpyAsync(d_stage_[stage_current_].get() + stage_count_, frames,
                                      count * sizeof(RawFrame), cudaMemcpyHostToDevice, copy));
  stage_count_ += count;
  const std::uint64_t ticket = ++tickets_;
  PETDAQ_CUDA_CHECK(cudaEventRecord(staged_event_[ticket % kStageEvents].get(), copy));
  return ticket;
}

// The ticket whose event tells about `ticket`: the event of an old ticket may have been
// recorded again for a later one, whose completion implies this one's (one copy stream).
std::uint64_t GpuBackend::stage_probe(std::uint64_t ticket) const {
  return tickets_ >= kStageEvents ? std::max(ticket, tickets_ - kStageEvents + 1) : ticket;
}

bool GpuBackend::staged(std::uint64_t ticket) {
  if (ticket <= staged_through_) return true;
  const std::uint64_t probe = stage_probe(ticket);
  const cudaError_t e = cudaEventQuery(staged_event_[probe % kStageEvents].get());
  if (e == cudaErrorNotReady) return false;
  PETDAQ_CUDA_CHECK(e);
  staged_through_ = std::max(staged_through_, probe);
  return true;
}

void GpuBackend::wait_staged(std::uint64_t ticket) {
  if (ticket <= staged_through_) return;
  const std::uint64_t probe = stage_probe(ticket);
  wait_for(staged_event_[probe % kStageEvents].get(), next_submit_);
  staged_through_ = std::max(staged_through_, probe);
}

// The stage's frames below `bound` (and those with no source) to the slot, those at `bound`
// dropped when `drop`, the rest to the other stage buffer, in order (the input buffer is
// only read).
void GpuBackend::enqueue_partition(Slot& slot, std::uint64_t bound, bool drop) {
  std::size_t bytes = partition_temp_bytes_;
  PETDAQ_CUDA_CHECK(partition_async(
      d_partition_temp_.get(), bytes, reinterpret_cast<const uint4*>(d_stage_[stage_current_].get()),
      reinterpret_cast<uint4*>(slot.d_frames.get()),
      reinterpret_cast<uint4*>(d_stage_[1 - stage_current_].get()), d_partition_counts_.get(),
      static_cast<std::int64_t>(stage_count_), gpu::TakenBy{rule_, bound},
      gpu::DroppedAt{rule_, bound, drop}, partition_stream_.get()));
}

// The count of frames the partition just queued took (its first output count).
std::uint64_t GpuBackend::read_partition_count() {
  cudaStream_t stream = partition_stream_.get();
  PETDAQ_CUDA_CHECK(cudaMemcpyAsync(h_taken_.get(), d_partition_counts_.get(),
                                    sizeof(unsigned long long), cudaMemcpyDeviceToHost, stream));
  PETDAQ_CUDA_CHECK(cudaEventRecord(counted_.get(), stream));
  PhaseScope wait(phases_, Phase::partition_wait);
  wait_for(counted_.get(), next_submit_);
  return h_taken_[0];
}

void GpuBackend::submit(const SliceRequest& request) {
  if (in_flight() >= kSlicesInFlight)
    throw std::logic_error("GpuBackend::submit: " + std::to_string(kSlicesInFlight) +
                           " slices already in flight; collect one first");
  Slot& slot = slots_[next_submit_ % kSlicesInFlight];
  slot.slice_id = request.slice_id;
  cudaStream_t partition = partition_stream_.get();

  // Every staged copy is in before the stage is counted and partitioned.
  PETDAQ_CUDA_CHECK(cudaEventRecord(slot.copy_begin.get(), copy_stream_.get()));
  PETDAQ_CUDA_CHECK(cudaStreamWaitEvent(partition, slot.copy_begin.get(), 0));

  // The stage copies queued after this submit write into the buffer the last partition read.
  if (next_submit_ > 0)
    PETDAQ_CUDA_CHECK(cudaStreamWaitEvent(copy_stream_.get(), partitioned_.get(), 0));

  // The host needs the count of frames the slice takes before it can queue the compute. The
  // fewest waits for it:
  // * no bound (a final slice): every staged frame, known without the device;
  // * at most max_slice_frames staged: no split is possible and the slot holds whatever the
  //   partition takes, so the partition runs at once and its own count is the one waited for;
  // * more staged (a backlog; rare): counted first, since the partition's output must fit the
  //   slot.
  // Then the split of core/backend.h when more frames are below the bound than a slice
  // holds: the largest bound below which at most max_slice_frames are taken (the (m+1)-th
  // smallest raw time), found by bisection on counts.
  std::uint64_t bound = request.final ? kNoBound : request.bound;
  bool partitioned = false;
  std::uint64_t taken = 0;
  if (bound == kNoBound) {
    taken = stage_count_;
  } else if (stage_count_ <= max_slice_frames_) {
    if (stage_count_ > 0) {
      enqueue_partition(slot, bound, false);
      partitioned = true;
      taken = read_partition_count();
    }
  } else {
    taken = count_taken(bound);
  }
  bool split = false;
  bool drop = false;
  std::uint64_t dropped = 0;
  if (taken > max_slice_frames_) {
    split = true;
    std::uint64_t lo = 0, hi = bound;  // count_taken(lo) <= max_slice_frames < count_taken(hi)
    while (hi - lo > 1) {
      const std::uint64_t mid = lo + (hi - lo) / 2;
      if (count_taken(mid) <= max_slice_frames_) lo = mid; else hi = mid;
    }
    bound = lo;
    taken = count_taken(bound);
    if (taken == 0) {
      // More frames share the earliest time than a slice holds: they are dropped.
      drop = true;
      dropped = count_taken(bound + 1);
    }
  }
  if (stage_count_ > 0 && !partitioned) enqueue_partition(slot, bound, drop);
  PETDAQ_CUDA_CHECK(cudaEventRecord(slot.copy_end.get(), partition));
  PETDAQ_CUDA_CHECK(cudaEventRecord(partitioned_.get(), partition));
  stage_count_ -= taken + dropped;
  stage_current_ = 1 - stage_current_;
  slot.frames_taken = taken;
  slot.frames_dropped = dropped;
  slot.bound = bound;
  slot.split = split;

  PETDAQ_CUDA_CHECK(cudaStreamWaitEvent(compute_stream_.get(), slot.copy_end.get(), 0));
  enqueue_compute(slot, Work{corrected_horizon(bound, min_time_offset_), request.final && !split,
                             request.run_start},
                  taken);
  ++next_submit_;
}

}  // namespace petdaq::gpu_impl

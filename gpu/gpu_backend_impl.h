// The GPU backend's class and the one slice in flight (Slot), shared by its translation
// units: gpu_backend.cu (start-up, collect), slice_stage.cu (stage and submit) and
// slice_compute.cu (the per-slice launches: the one unit that compiles the kernels).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "core/calibration.h"
#include "core/chunk_summary.h"
#include "core/frame_source.h"
#include "core/histograms.h"
#include "core/image.h"
#include "core/phase_timer.h"
#include "core/settings.h"
#include "gpu/cub_calls.h"
#include "gpu/cuda_support.h"
#include "gpu/device/slice_state.cuh"
#include "gpu/device_workspace.h"
#include "gpu/gpu_backend.h"
#include "gpu/gpu_stage_times.h"

namespace petdaq::gpu_impl {

using cuda::device_unique_ptr;
using cuda::make_device;
using cuda::make_pinned;
using cuda::pinned_unique_ptr;
using gpu::CarryState;
using gpu::ConvertPolicy;
using gpu::ElementwisePolicy;
using gpu::SliceCounts;
using gpu::SliceSummary;
using gpu::WalkPolicy;
using gpu::partition_async;
using gpu::scan_tiles_async;
using gpu::scan_units_async;
using gpu::select_segments_async;
using gpu::sort_keys_async;

constexpr int kSlicesInFlight = 3;
// Events that mark staged copies; a ticket older than the ring is known complete through
// a later one (one copy stream).
constexpr std::uint64_t kStageEvents = 256;
// collect() gives up on a slice that has not finished after this long: the device is lost.
constexpr std::chrono::seconds kSliceTimeout{60};

inline std::uint64_t blocks_for(std::uint64_t items, int threads) {
  return std::max<std::uint64_t>(1, (items + threads - 1) / threads);
}

// A grid-stride kernel needs no more blocks than this to fill the device.
constexpr std::uint64_t kMaxStrideBlocks = 4096;

// What a slice's compute needs besides its frames.
struct Work {
  std::uint64_t horizon = 0;  // corrected time
  bool final = false;
  bool run_start = false;
  // Low bits of the sort keys that the radix sort orders (64: all, and keys as before);
  // below 64, keys saturate (gpu/device/sort_keys.cuh).
  unsigned key_bits = 64;
};

// One slice in flight: its pinned input, its device copy of the frames, its records on
// the device and in pinned host memory, its summary (mapped: the one-thread summary kernel
// writes it directly) and its events.
struct Slot {
  device_unique_ptr<RawFrame> d_frames;
  pinned_unique_ptr<CoincRecord> h_prompts;
  pinned_unique_ptr<CoincRecord> h_delayed;
  pinned_unique_ptr<SliceSummary> h_summary;
  pinned_unique_ptr<std::uint64_t> h_bdm;  // accepted [bdm], then energy-rejected [bdm]
  device_unique_ptr<CoincRecord> d_prompts;
  device_unique_ptr<CoincRecord> d_delayed;
  SliceSummary* d_summary = nullptr;  // device addresses of the mapped summary buffers
  std::uint64_t* d_bdm_out = nullptr;
  cuda::Event copy_begin, copy_end, convert_end, sort_end, done, out_begin, out_end;
  std::uint64_t slice_id = 0;
  // The partition's counts (taken, dropped) on the device and, once `counted` has passed,
  // in pinned host memory; the frames the partition read; the slice's compute as submitted.
  device_unique_ptr<unsigned long long> d_partition_counts;
  pinned_unique_ptr<unsigned long long> h_partition_counts;
  cuda::Event counted{false};
  std::uint64_t partition_items = 0;
  Work work{};
  // What the slice took from the stage (core/backend.h).
  std::size_t frames_taken = 0;
  std::size_t frames_dropped = 0;
  std::uint64_t bound = 0;
  bool split = false;
  // `singles` topic (output.singles.enabled): the slice's ordered singles, how many of them
  // it resolved (mapped), and the host copy of those.
  device_unique_ptr<Single> d_singles;
  pinned_unique_ptr<std::uint64_t> h_resolved;
  std::uint64_t* d_resolved = nullptr;
  pinned_unique_ptr<Single> h_singles;
};

class GpuBackend final : public Backend {
 public:
  GpuBackend(const Settings& s, const Calibration& cal);
  ~GpuBackend() override;

  const char* name() const override { return "gpu"; }
  std::size_t max_slice_frames() const override { return max_slice_frames_; }
  std::size_t max_staged_frames() const override { return max_staged_; }
  std::size_t max_in_flight() const override { return kSlicesInFlight; }
  std::unique_ptr<HostAllocator> make_stage_allocator() const override {
    return make_cuda_host_allocator();
  }
  std::uint64_t stage(const RawFrame* frames, std::size_t count) override;
  bool staged(std::uint64_t ticket) override;
  void wait_staged(std::uint64_t ticket) override;
  void submit(const SliceRequest& request) override;
  const SliceResult& collect() override;
  std::size_t in_flight() const override { return next_submit_ - next_collect_; }
  const HistogramSet* histograms() override;
  const ImageSet* image() override;
  void set_result_memory(ResultMemory* memory) override { result_memory_ = memory; }

  const GpuStageTimes& last_stage_times() const { return stage_times_; }

 private:
  void enqueue_compute(Slot& slot, const Work& work, std::size_t frame_count);
  // enqueue_compute()'s steps on the compute stream, in this order (gpu/slice_compute.cu).
  void enqueue_begin(const Work& work);
  std::uint64_t enqueue_convert(Slot& slot, std::size_t frame_count);
  Single* enqueue_order(Slot& slot, const Work& work, std::size_t frame_count, std::uint64_t tiles,
                        std::uint64_t sort_count);
  void enqueue_windows(Slot& slot, const Work& work, Single* sorted, std::uint64_t sort_count);
  void enqueue_outputs(Slot& slot, Single* sorted, std::uint64_t sort_count);
  std::uint64_t count_taken(std::uint64_t bound);
  void enqueue_partition(Slot& slot, std::uint64_t bound, bool drop);
  // The slice whose partition count is not yet on the host (at most one, the last
  // submitted): once its count is in (at once when `wait`, else only if it already is),
  // the stage's count is exact and the slice's compute is queued. Returns whether none is
  // left pending.
  bool complete_partition(bool wait);
  void finish_slot_partition(Slot& slot, std::uint64_t taken, std::uint64_t dropped);
  // The arrivals after the kept frames, in one buffer (the backlog path counts on it).
  void consolidate_stage();
  std::uint64_t stage_probe(std::uint64_t ticket) const;
  std::uint64_t staged_bound() const { return kept_count_ + arrivals_count_; }
  unsigned key_bits_for(std::uint64_t bound) const;

  // collect() copies a slice's records and singles into pieces lent from here when it can.
  ResultMemory* result_memory_ = nullptr;
  std::size_t max_slice_frames_;
  std::size_t max_staged_;
  SourceRule rule_;
  std::int64_t min_time_offset_ = 0;
  std::uint64_t time_offset_range_ = 0;  // largest minus smallest calibration time offset
  // The bound the last slice of this run took (kNoBound: none yet), below which no frame
  // staged since comes (core/backend.h): the span of the next slice's new singles.
  std::uint64_t previous_bound_ = kNoBound;
  std::size_t max_carry_;
  std::uint64_t sort_capacity_;  // carry-over + new singles
  std::uint64_t tile_capacity_;
  std::uint64_t prompt_capacity_;
  std::uint64_t delayed_capacity_;
  std::uint32_t bdm_count_;
  ConvertTables tables_;  // device pointers
  CoincidenceParams params_;

  device_unique_ptr<std::uint8_t> d_lut_;
  device_unique_ptr<float> d_energy_;
  device_unique_ptr<std::int32_t> d_offsets_;

  // Every buffer a slice works in (gpu/device_workspace.h).
  std::unique_ptr<gpu::DeviceWorkspace> ws_;

  // The stage, in two parts, so that stage() never needs a count only the device has:
  // * the frames earlier slices left (kept), at [0, kept_count_) of d_kept_[kept_current_];
  //   each partition writes the frames it leaves to the other kept buffer;
  // * the frames staged since the last submit (arrivals), at [0, arrivals_count_) of
  //   d_arrivals_[arrivals_current_], where stage() copies them; the two arrival buffers
  //   alternate from submit to submit, so that a slice's copies never wait for the
  //   partition of the slice before.
  // A partition reads kept + arrivals in that order (the frames' arrival order). Until the
  // last partition's count is on the host (pending_), kept_count_ is that partition's
  // input size: an upper bound.
  device_unique_ptr<RawFrame> d_kept_[2];
  device_unique_ptr<RawFrame> d_arrivals_[2];
  int kept_current_ = 0;
  int arrivals_current_ = 0;
  std::size_t kept_count_ = 0;
  std::size_t arrivals_count_ = 0;
  bool pending_ = false;
  std::uint64_t pending_slice_ = 0;  // its index (next_submit_ numbering)
  device_unique_ptr<std::uint8_t> d_partition_temp_;
  std::size_t partition_temp_bytes_ = 0;
  // count_taken_kernel's result: counted in device memory (atomics to mapped host memory
  // would cross the bus once per block), then copied to pinned host memory.
  device_unique_ptr<unsigned long long> d_taken_;
  pinned_unique_ptr<unsigned long long> h_taken_;
  cuda::Event staged_event_[kStageEvents];
  std::uint64_t tickets_ = 0;
  std::uint64_t staged_through_ = 0;
  // counted_: count_taken's count is on the host. arrivals_read_[i]: the last partition
  // that read d_arrivals_[i] has run (the copies that refill it wait for it).
  cuda::Event counted_{false};
  cuda::Event arrivals_read_[2] = {cuda::Event{false}, cuda::Event{false}};

  cuda::Stream copy_stream_, compute_stream_, out_stream_;
  // The partition (and, on the backlog path, the counts the worker thread waits on) go
  // before the slices' kernels.
  cuda::Stream partition_stream_{cuda::Stream::HighPriority{}};
  Slot slots_[kSlicesInFlight];
  std::uint64_t next_submit_ = 0;
  std::uint64_t next_collect_ = 0;
  SliceResult result_;
  GpuStageTimes stage_times_;

  // Live histograms (output.histograms.enabled): device bins, copied to h_histograms_ on
  // request.
  HistogramLayout histogram_layout_;
  device_unique_ptr<std::uint8_t> d_histograms_;
  std::unique_ptr<HistogramSet> h_histograms_;
  // Live image (output.image.enabled): device bins and crystal table, copied to h_image_ on
  // request; image_layout_ points at the device table.
  ImageLayout image_layout_;
  device_unique_ptr<std::uint8_t> d_image_;
  device_unique_ptr<std::int32_t> d_crystal_um_;
  std::unique_ptr<ImageSet> h_image_;
  bool singles_out_ = false;
};

// Polls rather than blocks forever: a lost device must surface as an error, not a hang.
// `meanwhile` runs between polls (the backend's work that needs no wait).
void wait_for(cudaEvent_t event, std::uint64_t slice_id,
              const std::function<void()>& meanwhile = {});

}  // namespace petdaq::gpu_impl

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
#include "gpu/backend_parts.h"
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
  DeadRanges dead;  // the request's (core/dead_ranges.h)
};

// The frames a slice's compute converts, as the host knows them when it queues the compute:
// at most `bound` (the kernels' grids are sized for it), exactly `*device` where set (the
// partition's count of the frames taken, which the kernels read on the device).
struct FrameCount {
  std::uint64_t bound = 0;
  const unsigned long long* device = nullptr;
};

// A slice's records on the device and in pinned host memory, and its summary and per-BDM
// counts (mapped: the one-thread summary kernel writes them directly).
struct SlotRecords {
  pinned_unique_ptr<CoincRecord> h_prompts;
  pinned_unique_ptr<CoincRecord> h_delayed;
  pinned_unique_ptr<SliceSummary> h_summary;
  pinned_unique_ptr<std::uint64_t> h_bdm;  // accepted [bdm], energy-rejected [bdm], dead [bdm]
  device_unique_ptr<CoincRecord> d_prompts;
  device_unique_ptr<CoincRecord> d_delayed;
  SliceSummary* d_summary = nullptr;  // device addresses of the mapped summary buffers
  std::uint64_t* d_bdm_out = nullptr;
};

// The events that time a slice's stages (gpu_stage_times.h) and tell when it is done.
struct SlotEvents {
  cuda::Event copy_begin, copy_end, convert_end, sort_end, done, out_begin, out_end;
};

// What the slice took from the stage: the partition's counts (taken, dropped) on the device
// and, once `counted` has passed, in pinned host memory; the frames the partition read; and
// the outcome (core/backend.h).
struct SlotTake {
  device_unique_ptr<unsigned long long> d_partition_counts;
  pinned_unique_ptr<unsigned long long> h_partition_counts;
  cuda::Event counted{false};
  std::uint64_t partition_items = 0;
  std::size_t frames_taken = 0;
  std::size_t frames_dropped = 0;
  std::uint64_t bound = 0;
  bool split = false;
};

// `singles` topic (output.singles.enabled): the slice's ordered singles, how many of them it
// resolved (mapped), and the host copy of those.
struct SlotSingles {
  device_unique_ptr<Single> d_singles;
  pinned_unique_ptr<std::uint64_t> h_resolved;
  std::uint64_t* d_resolved = nullptr;
  pinned_unique_ptr<Single> h_singles;
};

// One slice in flight: its device copy of the frames, its records, its events, what it took
// from the stage, its compute as submitted and its singles.
struct Slot {
  device_unique_ptr<RawFrame> d_frames;
  SlotRecords records;
  SlotEvents events;
  std::uint64_t slice_id = 0;
  SlotTake take;
  Work work{};
  SlotSingles singles;
};

// The slices in flight: submit() fills slots[next_submit % kSlicesInFlight], collect()
// empties slots[next_collect % kSlicesInFlight].
struct SlotRing {
  Slot slots[kSlicesInFlight];
  std::uint64_t next_submit = 0;
  std::uint64_t next_collect = 0;
};

class GpuBackend final : public Backend {
 public:
  GpuBackend(const Settings& s, const Calibration& cal);
  ~GpuBackend() override;

  const char* name() const override { return "gpu"; }
  std::size_t max_slice_frames() const override { return caps_.max_slice_frames; }
  std::size_t max_staged_frames() const override { return caps_.max_staged; }
  std::size_t max_in_flight() const override { return kSlicesInFlight; }
  std::unique_ptr<HostAllocator> make_stage_allocator() const override {
    return make_cuda_host_allocator();
  }
  std::uint64_t stage(const RawFrame* frames, std::size_t count) override;
  bool staged(std::uint64_t ticket) override;
  void wait_staged(std::uint64_t ticket) override;
  void submit(const SliceRequest& request) override;
  const SliceResult& collect() override;
  std::size_t in_flight() const override { return ring_.next_submit - ring_.next_collect; }
  const HistogramSet* histograms() override;
  const ImageSet* image() override;
  const HistogramSet* histograms_snapshot() override;
  const ImageSet* image_snapshot() override;
  void set_result_memory(ResultMemory* memory) override { collected_.memory = memory; }

  const GpuStageTimes& last_stage_times() const { return collected_.stage_times; }

 private:
  void enqueue_compute(Slot& slot, const Work& work, FrameCount frames);
  // enqueue_compute()'s steps on the compute stream, in this order (gpu/slice_compute.cu).
  void enqueue_begin(const Work& work);
  std::uint64_t enqueue_convert(Slot& slot, const Work& request, FrameCount frames);
  Single* enqueue_order(Slot& slot, const Work& work, std::size_t frame_count, std::uint64_t tiles,
                        std::uint64_t sort_count);
  void enqueue_windows(Slot& slot, const Work& work, Single* sorted, std::uint64_t sort_count);
  void enqueue_outputs(Slot& slot, Single* sorted, std::uint64_t sort_count);
  std::uint64_t count_taken(std::uint64_t bound);
  void enqueue_partition(Slot& slot, std::uint64_t bound, bool drop);
  // The slice whose partition count is not yet on the host (at most one, the last
  // submitted): once its count is in (at once when `wait`, else only if it already is),
  // the stage's count is exact again. Returns whether none is left pending.
  bool complete_partition(bool wait);
  void finish_slot_partition(Slot& slot, std::uint64_t taken, std::uint64_t dropped);
  // histograms(), image() and their snapshots: the copy of device bins to their host set.
  template <class Set>
  const Set* copy_live(Set& host, const std::uint8_t* device, std::size_t bytes,
                       SnapshotCopy& copy, bool wait);
  // The arrivals after the kept frames, in one buffer (the backlog path counts on it).
  void consolidate_stage();
  std::uint64_t stage_probe(std::uint64_t ticket) const;
  std::uint64_t staged_bound() const { return stage_.kept_count + stage_.arrivals_count; }
  unsigned key_bits_for(std::uint64_t bound) const;

  // The backend's state, in parts that own theirs (gpu/backend_parts.h).
  Capacities caps_;
  SourceRule rule_;
  std::int64_t min_time_offset_ = 0;
  KeyWidth key_width_;
  CoincidenceParams params_;
  DeviceCalibration calibration_;
  // Every buffer a slice works in (gpu/device_workspace.h).
  std::unique_ptr<gpu::DeviceWorkspace> ws_;
  StageTickets tickets_;
  Partition partition_;
  StageBuffers stage_;
  Streams streams_;
  SlotRing ring_;
  Collected collected_;
  LiveOutputs live_;
};

// Polls rather than blocks forever: a lost device must surface as an error, not a hang.
// `meanwhile` runs between polls (the backend's work that needs no wait).
void wait_for(cudaEvent_t event, std::uint64_t slice_id,
              const std::function<void()>& meanwhile = {});

}  // namespace petdaq::gpu_impl

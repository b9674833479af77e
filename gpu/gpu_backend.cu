// The CUDA backend (DESIGN sections 1, 5 and 6): per slice, raw frames are copied from pinned
// host memory on a copy stream while the previous slice computes; on the compute stream a
// fused convert kernel (the same convert_frame() as the CPU) counts and compacts the
// singles, a radix sort puts carry-over and new singles in (time, crystal, energy) order,
// and two walks over the windows (count, scan, fill) write the records; collect() copies
// exactly those back to pinned host memory. The carry-over stays on the device. Every buffer, including
// CUB's temporary storage, is taken at construction.
#include "gpu/gpu_backend.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/calibration.h"
#include "core/chunk_summary.h"
#include "core/frame_source.h"
#include "core/histograms.h"
#include "core/phase_timer.h"
#include "core/settings.h"
#include "gpu/cub_calls.h"
#include "gpu/cuda_support.h"
#include "gpu/device_workspace.h"
#include "gpu/gpu_stage_times.h"
#include "gpu/histogram_kernels.cuh"
#include "gpu/kernels.cuh"

namespace petdaq {
namespace {

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

std::uint64_t blocks_for(std::uint64_t items, int threads) {
  return std::max<std::uint64_t>(1, (items + threads - 1) / threads);
}

// A grid-stride kernel needs no more blocks than this to fill the device.
constexpr std::uint64_t kMaxStrideBlocks = 4096;

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
  std::uint64_t stage(const RawFrame* frames, std::size_t count) override;
  bool staged(std::uint64_t ticket) override;
  void wait_staged(std::uint64_t ticket) override;
  void submit(const SliceRequest& request) override;
  const SliceResult& collect() override;
  std::size_t in_flight() const override { return next_submit_ - next_collect_; }
  const HistogramSet* histograms() override;

  const GpuStageTimes& last_stage_times() const { return stage_times_; }

 private:
  struct Work {
    std::uint64_t horizon;  // corrected time
    bool final;
    bool run_start;
  };
  void enqueue_compute(Slot& slot, const Work& work, std::size_t frame_count);
  std::uint64_t count_taken(std::uint64_t bound);
  void enqueue_partition(Slot& slot, std::uint64_t bound, bool drop);
  std::uint64_t read_partition_count();
  std::uint64_t stage_probe(std::uint64_t ticket) const;

  std::size_t max_slice_frames_;
  std::size_t max_staged_;
  SourceRule rule_;
  std::int64_t min_time_offset_ = 0;
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

  // The stage: staged frames at [0, stage_count_) of d_stage_[stage_current_]; a slice's
  // partition moves the frames it leaves to the other buffer.
  device_unique_ptr<RawFrame> d_stage_[2];
  int stage_current_ = 0;
  std::size_t stage_count_ = 0;
  device_unique_ptr<std::uint8_t> d_partition_temp_;
  std::size_t partition_temp_bytes_ = 0;
  device_unique_ptr<unsigned long long> d_partition_counts_;
  // count_taken_kernel's result, or the partition's count of the frames it took: counted in
  // device memory (atomics to mapped host memory would cross the bus once per block), then
  // copied to pinned host memory.
  device_unique_ptr<unsigned long long> d_taken_;
  pinned_unique_ptr<unsigned long long> h_taken_;
  cuda::Event staged_event_[kStageEvents];
  std::uint64_t tickets_ = 0;
  std::uint64_t staged_through_ = 0;
  // counted_: the count is on the host. partitioned_: the last submit's partition has read
  // its input buffer, which the stage copies after the next submit overwrite.
  cuda::Event counted_, partitioned_;

  cuda::Stream copy_stream_, compute_stream_, out_stream_;
  // The count the worker thread waits on, and the partition, go before the slices' kernels.
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
  bool singles_out_ = false;
};

GpuBackend::GpuBackend(const Settings& s, const Calibration& cal)
    : max_slice_frames_(s.stream.max_slice_frames),
      max_staged_(std::max(s.stream.max_pending_frames, s.stream.max_slice_frames)),
      rule_(make_source_rule(s)),
      min_time_offset_(cal.min_time_offset),
      max_carry_(s.stream.max_carry_singles),
      params_(CoincidenceParams::from(s)) {
  if (max_slice_frames_ == 0) throw std::invalid_argument("stream.max_slice_frames must be > 0");
  sort_capacity_ = std::uint64_t{max_carry_} + max_slice_frames_;
  // Segment starts and frame indices are 32-bit on the device.
  if (sort_capacity_ >= std::numeric_limits<std::uint32_t>::max())
    throw std::invalid_argument(
        "stream.max_slice_frames + stream.max_carry_singles must stay below 2^32 on the GPU");
  tile_capacity_ = blocks_for(max_slice_frames_, ConvertPolicy::tile_frames);
  // The same record capacity as the CPU backend (core/cpu_backend.cpp).
  prompt_capacity_ =
      sort_capacity_ * std::max<std::uint64_t>(1, s.stream.max_records_per_single);
  delayed_capacity_ = params_.delayed ? prompt_capacity_ : 0;

  const ConvertTables host_tables = make_convert_tables(s, cal);
  bdm_count_ = host_tables.geometry.bdm_count();
  tables_ = host_tables;
  d_lut_ = make_device<std::uint8_t>(cal.position_lut.size());
  PETDAQ_CUDA_CHECK(cudaMemcpy(d_lut_.get(), cal.position_lut.data(), cal.position_lut.size(),
                               cudaMemcpyHostToDevice));
  d_energy_ = make_device<float>(cal.energy_correction.size());
  PETDAQ_CUDA_CHECK(cudaMemcpy(d_energy_.get(), cal.energy_correction.data(),
                               cal.energy_correction.size() * sizeof(float),
                               cudaMemcpyHostToDevice));
  tables_.position_lut = d_lut_.get();
  tables_.energy_correction = d_energy_.get();
  tables_.time_offsets = nullptr;
  if (!cal.time_offsets.empty()) {
    d_offsets_ = make_device<std::int32_t>(cal.time_offsets.size());
    PETDAQ_CUDA_CHECK(cudaMemcpy(d_offsets_.get(), cal.time_offsets.data(),
                                 cal.time_offsets.size() * sizeof(std::int32_t),
                                 cudaMemcpyHostToDevice));
    tables_.time_offsets = d_offsets_.get();
  }

  ws_ = std::make_unique<gpu::DeviceWorkspace>(gpu::WorkspaceSizes{
      sort_capacity_, max_carry_, tile_capacity_, bdm_count_,
      host_tables.geometry.crystal_count()});

  d_stage_[0] = make_device<RawFrame>(max_staged_);
  d_stage_[1] = make_device<RawFrame>(max_staged_);
  d_partition_counts_ = make_device<unsigned long long>(2);
  d_taken_ = make_device<unsigned long long>(1);
  h_taken_ = make_pinned<unsigned long long>(1);
  PETDAQ_CUDA_CHECK(partition_async(nullptr, partition_temp_bytes_, nullptr, nullptr, nullptr,
                                    nullptr, static_cast<std::int64_t>(max_staged_),
                                    gpu::TakenBy{}, gpu::DroppedAt{}, nullptr));
  d_partition_temp_ = make_device<std::uint8_t>(partition_temp_bytes_);

  if (s.output.histograms.enabled) {
    histogram_layout_ = make_histogram_layout(s);
    d_histograms_ = make_device<std::uint8_t>(histogram_layout_.bytes);
    PETDAQ_CUDA_CHECK(cudaMemset(d_histograms_.get(), 0, histogram_layout_.bytes));
    h_histograms_ = std::make_unique<HistogramSet>(histogram_layout_);
  }
  singles_out_ = s.output.singles.enabled;
  for (Slot& slot : slots_) {
    if (singles_out_) {
      slot.d_singles = make_device<Single>(sort_capacity_);
      slot.h_singles = make_pinned<Single>(sort_capacity_);
      slot.h_resolved = make_pinned<std::uint64_t>(1, true);
      slot.d_resolved = cuda::device_address(slot.h_resolved);
    }
    slot.d_frames = make_device<RawFrame>(max_slice_frames_);
    slot.h_prompts = make_pinned<CoincRecord>(prompt_capacity_);
    slot.h_delayed = make_pinned<CoincRecord>(delayed_capacity_);
    slot.d_prompts = make_device<CoincRecord>(prompt_capacity_);
    slot.d_delayed = make_device<CoincRecord>(delayed_capacity_);
    slot.h_summary = make_pinned<SliceSummary>(1, true);
    slot.h_bdm = make_pinned<std::uint64_t>(2 * std::size_t{bdm_count_}, true);
    slot.d_summary = cuda::device_address(slot.h_summary);
    slot.d_bdm_out = cuda::device_address(slot.h_bdm);
  }
  PETDAQ_CUDA_CHECK(cudaDeviceSynchronize());
}

GpuBackend::~GpuBackend() {
  // Work still queued must finish before its buffers are freed; errors here have nowhere
  // to go.
  cudaStreamSynchronize(copy_stream_.get());
  cudaStreamSynchronize(partition_stream_.get());
  cudaStreamSynchronize(out_stream_.get());
  cudaStreamSynchronize(compute_stream_.get());
}

// Polls rather than blocks forever: a lost device must surface as an error, not a hang.
void wait_for(cudaEvent_t event, std::uint64_t slice_id) {
  const auto deadline = std::chrono::steady_clock::now() + kSliceTimeout;
  for (;;) {
    const cudaError_t e = cudaEventQuery(event);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) PETDAQ_CUDA_CHECK(e);
    if (std::chrono::steady_clock::now() > deadline)
      throw std::runtime_error("GpuBackend: slice " + std::to_string(slice_id) +
                               " did not finish within " +
                               std::to_string(kSliceTimeout.count()) + " s");
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

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

// The staged frames a slice with this bound takes (the partition stream waits for it).
std::uint64_t GpuBackend::count_taken(std::uint64_t bound) {
  cudaStream_t stream = partition_stream_.get();
  if (stage_count_ == 0) return 0;
  PETDAQ_CUDA_CHECK(cudaMemsetAsync(d_taken_.get(), 0, sizeof(unsigned long long), stream));
  const unsigned blocks = static_cast<unsigned>(
      std::min(kMaxStrideBlocks, blocks_for(stage_count_, ElementwisePolicy::threads_per_block)));
  gpu::count_taken_kernel<<<blocks, ElementwisePolicy::threads_per_block, 0, stream>>>(
      reinterpret_cast<const uint4*>(d_stage_[stage_current_].get()), stage_count_,
      gpu::TakenBy{rule_, bound}, d_taken_.get());
  PETDAQ_CUDA_CHECK_LAUNCH("count_taken_kernel");
  PETDAQ_CUDA_CHECK(cudaMemcpyAsync(h_taken_.get(), d_taken_.get(), sizeof(unsigned long long),
                                    cudaMemcpyDeviceToHost, stream));
  PETDAQ_CUDA_CHECK(cudaEventRecord(counted_.get(), stream));
  PhaseScope wait(phases_, Phase::count_wait);
  wait_for(counted_.get(), next_submit_);
  return h_taken_[0];
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

void GpuBackend::enqueue_compute(Slot& slot, const Work& request, std::size_t frame_count) {
  cudaStream_t stream = compute_stream_.get();
  gpu::DeviceWorkspace& ws = *ws_;
  SliceCounts* counts = ws.d_counts.get();
  CarryState* state = ws.d_state.get();
  unsigned long long* bdm = ws.d_bdm.get();

  gpu::begin_slice_kernel<<<1, ElementwisePolicy::threads_per_block, 0, stream>>>(
      counts, state, request.run_start, request.final, bdm, bdm_count_);
  PETDAQ_CUDA_CHECK_LAUNCH("begin_slice_kernel");
  if (d_histograms_ && request.run_start)  // histograms: a run starts
    PETDAQ_CUDA_CHECK(cudaMemsetAsync(d_histograms_.get(), 0, histogram_layout_.bytes, stream));

  // Convert: count per tile, scan the tile counts, convert again and compact in order.
  const std::uint64_t tiles = frame_count ? blocks_for(frame_count, ConvertPolicy::tile_frames) : 0;
  const uint4* frames = reinterpret_cast<const uint4*>(slot.d_frames.get());
  if (tiles > 0) {
    gpu::convert_count_kernel<<<tiles, ConvertPolicy::threads_per_block, 0, stream>>>(
        frames, static_cast<std::uint32_t>(frame_count), tables_, ws.d_tile_accepted.get(), counts,
        bdm, bdm + bdm_count_, bdm_count_);
    PETDAQ_CUDA_CHECK_LAUNCH("convert_count_kernel");
    std::size_t bytes = ws.temp_bytes;
    PETDAQ_CUDA_CHECK(scan_tiles_async(ws.d_temp.get(), bytes, ws.d_tile_accepted.get(),
                                       ws.d_tile_offset.get(), static_cast<std::int64_t>(tiles),
                                       stream));
    gpu::convert_scatter_kernel<<<tiles, ConvertPolicy::threads_per_block, 0, stream>>>(
        frames, static_cast<std::uint32_t>(frame_count), tables_, ws.d_tile_offset.get(), state,
        ws.d_singles_a.get());
    PETDAQ_CUDA_CHECK_LAUNCH("convert_scatter_kernel");
    if (d_histograms_) {  // histograms of the frames
      gpu::histogram_frames_kernel<<<static_cast<unsigned>(std::min<std::uint64_t>(
                                         gpu::HistogramPolicy::max_blocks,
                                         blocks_for(frame_count, gpu::HistogramPolicy::threads_per_block))),
                                     gpu::HistogramPolicy::threads_per_block, 0, stream>>>(
          frames, static_cast<std::uint32_t>(frame_count), tables_, histogram_layout_,
          d_histograms_.get());
      PETDAQ_CUDA_CHECK_LAUNCH("histogram_frames_kernel");
    }
  }
  PETDAQ_CUDA_CHECK(cudaEventRecord(slot.convert_end.get(), stream));

  // Order: 64-bit keys with the singles' positions, one radix sort, a gather, and the
  // rare runs of equal keys put in energy order. The sort range is padded to a size the
  // host knows without waiting for the device.
  const std::uint64_t sort_count = std::max<std::uint64_t>(1, max_carry_ + frame_count);
  const unsigned elementwise_blocks = static_cast<unsigned>(
      std::min(kMaxStrideBlocks, blocks_for(sort_count, ElementwisePolicy::threads_per_block)));
  gpu::place_carry_kernel<<<std::min(kMaxStrideBlocks,
                                     blocks_for(max_carry_, ElementwisePolicy::threads_per_block)),
                            ElementwisePolicy::threads_per_block, 0, stream>>>(
      ws.d_singles_a.get(), ws.d_carry.get(), state, ws.d_tile_accepted.get(), ws.d_tile_offset.get(),
      static_cast<std::uint32_t>(tiles), counts);
  PETDAQ_CUDA_CHECK_LAUNCH("place_carry_kernel");
  gpu::make_keys_kernel<<<elementwise_blocks, ElementwisePolicy::threads_per_block, 0, stream>>>(
      ws.d_singles_a.get(), counts, ws.key_layout, sort_count, ws.d_keys_a.get(), ws.d_index_a.get());
  PETDAQ_CUDA_CHECK_LAUNCH("make_keys_kernel");
  cub::DoubleBuffer<unsigned long long> keys(ws.d_keys_a.get(), ws.d_keys_b.get());
  cub::DoubleBuffer<std::uint32_t> index(ws.d_index_a.get(), ws.d_index_b.get());
  if (sort_count > 1) {
    std::size_t bytes = ws.temp_bytes;
    PETDAQ_CUDA_CHECK(sort_keys_async(ws.d_temp.get(), bytes, keys, index,
                                      static_cast<std::int64_t>(sort_count), stream));
  }
  Single* sorted = ws.d_singles_b.get();
  gpu::gather_kernel<<<elementwise_blocks, ElementwisePolicy::threads_per_block, 0, stream>>>(
      ws.d_singles_a.get(), index.Current(), counts, sorted);
  PETDAQ_CUDA_CHECK_LAUNCH("gather_kernel");
  gpu::order_ties_kernel<<<elementwise_blocks, ElementwisePolicy::threads_per_block, 0, stream>>>(
      keys.Current(), counts, sorted);
  PETDAQ_CUDA_CHECK_LAUNCH("order_ties_kernel");
  PETDAQ_CUDA_CHECK(cudaEventRecord(slot.sort_end.get(), stream));

  // Windows: units of work are chain segments (first_open) or singles (every_single).
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
      gpu::carry_overflow_kernel<<<1, 1, 0, stream>>>(counts, max_carry_);
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
      walk, ws.d_prompt_offset.get(), ws.d_delayed_offset.get(), slot.d_prompts.get(), slot.d_delayed.get(),
      prompt_capacity_, delayed_capacity_);
  PETDAQ_CUDA_CHECK_LAUNCH("walk_fill_kernel");
  gpu::summarize_kernel<<<1, 1, 0, stream>>>(
      sorted, counts, state, ws.d_prompt_offset.get(), ws.d_prompt_count.get(),
      ws.d_delayed_offset.get(), ws.d_delayed_count.get(), sort_count, prompt_capacity_,
      delayed_capacity_, request.horizon, request.final, slot.d_summary, bdm, slot.d_bdm_out,
      bdm_count_);
  PETDAQ_CUDA_CHECK_LAUNCH("summarize_kernel");
  if (d_histograms_) {  // histograms of the records
    gpu::histogram_records_kernel<<<static_cast<unsigned>(std::min<std::uint64_t>(
                                        gpu::HistogramPolicy::max_blocks,
                                        blocks_for(prompt_capacity_ + delayed_capacity_,
                                                   gpu::HistogramPolicy::threads_per_block))),
                                    gpu::HistogramPolicy::threads_per_block, 0, stream>>>(
        slot.d_prompts.get(), slot.d_delayed.get(), slot.d_summary, histogram_layout_,
        d_histograms_.get());
    PETDAQ_CUDA_CHECK_LAUNCH("histogram_records_kernel");
  }
  if (singles_out_) {  // singles topic: keep this slice's ordered singles
    PETDAQ_CUDA_CHECK(cudaMemcpyAsync(slot.d_singles.get(), sorted, sort_count * sizeof(Single),
                                      cudaMemcpyDeviceToDevice, stream));
    gpu::resolved_count_kernel<<<1, 1, 0, stream>>>(counts, slot.d_resolved);
    PETDAQ_CUDA_CHECK_LAUNCH("resolved_count_kernel");
  }
  if (max_carry_ > 0) {
    gpu::save_carry_kernel<<<std::min(kMaxStrideBlocks,
                                      blocks_for(max_carry_, ElementwisePolicy::threads_per_block)),
                             ElementwisePolicy::threads_per_block, 0, stream>>>(
        sorted, counts, state, ws.d_carry.get(), max_carry_);
    PETDAQ_CUDA_CHECK_LAUNCH("save_carry_kernel");
  }
  PETDAQ_CUDA_CHECK(cudaEventRecord(slot.done.get(), stream));
}

// The bins of every slice submitted so far: the copy is queued behind them.
const HistogramSet* GpuBackend::histograms() {
  if (!d_histograms_) return nullptr;
  cudaStream_t stream = compute_stream_.get();
  PETDAQ_CUDA_CHECK(cudaMemcpyAsync(h_histograms_->bins(), d_histograms_.get(),
                                    histogram_layout_.bytes, cudaMemcpyDeviceToHost, stream));
  PETDAQ_CUDA_CHECK(cudaStreamSynchronize(stream));
  return h_histograms_.get();
}

const SliceResult& GpuBackend::collect() {
  if (in_flight() == 0) throw std::logic_error("GpuBackend::collect: no slice submitted");
  Slot& slot = slots_[next_collect_ % kSlicesInFlight];
  {
    PhaseScope wait(phases_, Phase::collect_wait);
    wait_for(slot.done.get(), slot.slice_id);
  }
  // Only now is the number of records known on the host: copy exactly those, on a stream
  // of their own, while the compute stream goes on with the slices behind this one.
  const SliceSummary& summary = slot.h_summary[0];
  cudaStream_t out = out_stream_.get();
  PETDAQ_CUDA_CHECK(cudaEventRecord(slot.out_begin.get(), out));
  if (summary.prompts_kept > 0)
    PETDAQ_CUDA_CHECK(cudaMemcpyAsync(slot.h_prompts.get(), slot.d_prompts.get(),
                                      summary.prompts_kept * sizeof(CoincRecord),
                                      cudaMemcpyDeviceToHost, out));
  if (summary.delayed_kept > 0)
    PETDAQ_CUDA_CHECK(cudaMemcpyAsync(slot.h_delayed.get(), slot.d_delayed.get(),
                                      summary.delayed_kept * sizeof(CoincRecord),
                                      cudaMemcpyDeviceToHost, out));
  const std::uint64_t resolved = singles_out_ ? slot.h_resolved[0] : 0;
  if (resolved > 0)  // singles topic
    PETDAQ_CUDA_CHECK(cudaMemcpyAsync(slot.h_singles.get(), slot.d_singles.get(),
                                      resolved * sizeof(Single), cudaMemcpyDeviceToHost, out));
  PETDAQ_CUDA_CHECK(cudaEventRecord(slot.out_end.get(), out));
  {
    PhaseScope wait(phases_, Phase::copy_out_wait);
    wait_for(slot.out_end.get(), slot.slice_id);
  }
  ++next_collect_;

  const SliceSummary& sum = summary;
  result_ = SliceResult{};
  result_.slice_id = slot.slice_id;
  result_.t_begin = sum.t_begin;
  result_.t_end = sum.t_end;
  result_.prompts = slot.h_prompts.get();
  result_.prompt_count = sum.prompts_kept;
  result_.delayed = slot.h_delayed.get();
  result_.delayed_count = sum.delayed_kept;
  result_.carry_count = sum.carry_count;
  result_.frames_taken = slot.frames_taken;
  result_.frames_dropped = slot.frames_dropped;
  result_.bound = slot.bound;
  result_.split = slot.split;
  CounterDelta& d = result_.counters;
  for (int i = 0; i < kFrameStatusCount; ++i)
    d[counter_of(static_cast<FrameStatus>(i))] += sum.status[i];
  d[Counter::coinc_prompts] += sum.prompts_total;
  d[Counter::coinc_delayed] += sum.delayed_total;
  d[Counter::coinc_multiples] += sum.multiples;
  d[Counter::coinc_delayed_multiples] += sum.delayed_multiples;
  d[Counter::coinc_records_overflow] +=
      (sum.prompts_total - sum.prompts_kept) + (sum.delayed_total - sum.delayed_kept);
  d[Counter::stream_carry_overflow] += sum.carry_overflow;
  d[Counter::stream_pending_full] += slot.frames_dropped;
  result_.bdm_singles = slot.h_bdm.get();
  result_.bdm_energy_rejected = slot.h_bdm.get() + bdm_count_;
  if (singles_out_) {
    result_.singles = slot.h_singles.get();
    result_.single_count = resolved;
  }

  PETDAQ_CUDA_CHECK(cudaEventElapsedTime(&stage_times_.copy_in_ms, slot.copy_begin.get(),
                                         slot.copy_end.get()));
  PETDAQ_CUDA_CHECK(cudaEventElapsedTime(&stage_times_.convert_ms, slot.copy_end.get(),
                                         slot.convert_end.get()));
  PETDAQ_CUDA_CHECK(cudaEventElapsedTime(&stage_times_.sort_ms, slot.convert_end.get(),
                                         slot.sort_end.get()));
  PETDAQ_CUDA_CHECK(cudaEventElapsedTime(&stage_times_.coincidence_ms, slot.sort_end.get(),
                                         slot.done.get()));
  PETDAQ_CUDA_CHECK(cudaEventElapsedTime(&stage_times_.copy_out_ms, slot.out_begin.get(),
                                         slot.out_end.get()));
  PETDAQ_CUDA_CHECK(cudaEventElapsedTime(&stage_times_.slice_ms, slot.copy_begin.get(),
                                         slot.done.get()));
  return result_;
}

}  // namespace

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

std::unique_ptr<Backend> make_gpu_backend(const Settings& settings,
                                          const Calibration& calibration) {
  return std::make_unique<GpuBackend>(settings, calibration);
}

namespace {

class CudaHostAllocator final : public HostAllocator {
 public:
  void* allocate(std::size_t bytes) override {
    void* p = nullptr;
    const cudaError_t e = cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
    if (e != cudaSuccess) {
      cudaGetLastError();
      throw std::runtime_error("cannot page-lock " + std::to_string(bytes) +
                               " bytes of host memory for the GPU: " + cudaGetErrorName(e) +
                               " (" + cudaGetErrorString(e) + ")");
    }
    return p;
  }
  void deallocate(void* p, std::size_t) noexcept override {
    if (p) cudaFreeHost(p);
  }
  const char* kind() const override { return "cuda-pinned"; }
};

}  // namespace

std::unique_ptr<HostAllocator> make_cuda_host_allocator() {
  return std::make_unique<CudaHostAllocator>();
}

bool gpu_last_stage_times(const Backend& backend, GpuStageTimes& out) {
  const auto* gpu = dynamic_cast<const GpuBackend*>(&backend);
  if (!gpu) return false;
  out = gpu->last_stage_times();
  return true;
}

}  // namespace petdaq

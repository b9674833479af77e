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
#include <functional>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>

#include "core/stream_limits.h"
#include "gpu/gpu_backend_impl.h"

namespace petdaq {
namespace gpu_impl {

GpuBackend::GpuBackend(const Settings& s, const Calibration& cal)
    : max_slice_frames_(s.stream.max_slice_frames),
      max_staged_(staged_frames_limit(s.stream.max_pending_frames, s.stream.max_slice_frames)),
      rule_(make_source_rule(s)),
      min_time_offset_(cal.min_time_offset),
      max_carry_(s.stream.max_carry_singles),
      params_(CoincidenceParams::from(s)) {
  if (max_slice_frames_ == 0) throw std::invalid_argument("stream.max_slice_frames must be > 0");
  if (!cal.time_offsets.empty()) {
    const auto [lo, hi] = std::minmax_element(cal.time_offsets.begin(), cal.time_offsets.end());
    time_offset_range_ = static_cast<std::uint64_t>(std::int64_t{*hi} - std::int64_t{*lo});
  }
  sort_capacity_ = std::uint64_t{max_carry_} + max_slice_frames_;
  // Segment starts and frame indices are 32-bit on the device.
  if (sort_capacity_ >= std::numeric_limits<std::uint32_t>::max())
    throw std::invalid_argument(
        "stream.max_slice_frames + stream.max_carry_singles must stay below 2^32 on the GPU");
  tile_capacity_ = blocks_for(max_slice_frames_, ConvertPolicy::tile_frames);
  // The same record capacity as the CPU backend (core/stream_limits.h).
  prompt_capacity_ = slice_record_capacity(sort_capacity_, s.stream.max_records_per_single);
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

  for (int i = 0; i < 2; ++i) {
    d_kept_[i] = make_device<RawFrame>(max_staged_);
    d_arrivals_[i] = make_device<RawFrame>(max_staged_);
  }
  d_taken_ = make_device<unsigned long long>(1);
  h_taken_ = make_pinned<unsigned long long>(1);
  PETDAQ_CUDA_CHECK(partition_async(nullptr, partition_temp_bytes_, gpu::StagedInput{}, nullptr,
                                    nullptr, nullptr, static_cast<std::int64_t>(max_staged_),
                                    gpu::TakenBy{}, gpu::DroppedAt{}, nullptr));
  d_partition_temp_ = make_device<std::uint8_t>(partition_temp_bytes_);

  if (s.output.histograms.enabled) {
    histogram_layout_ = make_histogram_layout(s);
    d_histograms_ = make_device<std::uint8_t>(histogram_layout_.bytes);
    PETDAQ_CUDA_CHECK(cudaMemset(d_histograms_.get(), 0, histogram_layout_.bytes));
    h_histograms_ = std::make_unique<HistogramSet>(histogram_layout_);
  }
  if (s.output.image.enabled) {
    h_image_ = std::make_unique<ImageSet>(s);
    image_layout_ = h_image_->layout();
    const std::vector<std::int32_t>& table = h_image_->crystal_table();
    d_crystal_um_ = make_device<std::int32_t>(table.size());
    PETDAQ_CUDA_CHECK(cudaMemcpy(d_crystal_um_.get(), table.data(),
                                 table.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice));
    image_layout_.crystal_um = d_crystal_um_.get();
    d_image_ = make_device<std::uint8_t>(image_layout_.bytes);
    PETDAQ_CUDA_CHECK(cudaMemset(d_image_.get(), 0, image_layout_.bytes));
  }
  singles_out_ = s.output.wants_singles();
  for (Slot& slot : slots_) {
    if (singles_out_) {
      slot.d_singles = make_device<Single>(sort_capacity_);
      slot.h_singles = make_pinned<Single>(sort_capacity_);
      slot.h_resolved = make_pinned<std::uint64_t>(1, true);
      slot.d_resolved = cuda::device_address(slot.h_resolved);
    }
    slot.d_frames = make_device<RawFrame>(max_slice_frames_);
    slot.d_partition_counts = make_device<unsigned long long>(2);
    slot.h_partition_counts = make_pinned<unsigned long long>(2);
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
void wait_for(cudaEvent_t event, std::uint64_t slice_id, const std::function<void()>& meanwhile) {
  const auto deadline = std::chrono::steady_clock::now() + kSliceTimeout;
  for (;;) {
    const cudaError_t e = cudaEventQuery(event);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) PETDAQ_CUDA_CHECK(e);
    if (meanwhile) meanwhile();
    if (std::chrono::steady_clock::now() > deadline)
      throw std::runtime_error("GpuBackend: slice " + std::to_string(slice_id) +
                               " did not finish within " +
                               std::to_string(kSliceTimeout.count()) + " s");
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

// The bins of every slice submitted so far: the copy is queued behind them.
const HistogramSet* GpuBackend::histograms() {
  if (!d_histograms_) return nullptr;
  complete_partition(true);  // every submitted slice's compute queued
  cudaStream_t stream = compute_stream_.get();
  PETDAQ_CUDA_CHECK(cudaMemcpyAsync(h_histograms_->bins(), d_histograms_.get(),
                                    histogram_layout_.bytes, cudaMemcpyDeviceToHost, stream));
  PETDAQ_CUDA_CHECK(cudaStreamSynchronize(stream));
  return h_histograms_.get();
}

// The image of every slice submitted so far: the copy is queued behind them.
const ImageSet* GpuBackend::image() {
  if (!d_image_) return nullptr;
  cudaStream_t stream = compute_stream_.get();
  PETDAQ_CUDA_CHECK(cudaMemcpyAsync(h_image_->bins(), d_image_.get(), image_layout_.bytes,
                                    cudaMemcpyDeviceToHost, stream));
  PETDAQ_CUDA_CHECK(cudaStreamSynchronize(stream));
  return h_image_.get();
}

const SliceResult& GpuBackend::collect() {
  if (in_flight() == 0) throw std::logic_error("GpuBackend::collect: no slice submitted");
  Slot& slot = slots_[next_collect_ % kSlicesInFlight];
  // The slice's compute is queued once its partition's count is in (slice_stage.cu); until
  // then this waits for that count.
  if (pending_ && pending_slice_ == next_collect_) complete_partition(true);
  {
    PhaseScope wait(phases_, Phase::collect_wait);
    wait_for(slot.done.get(), slot.slice_id, [this] { complete_partition(false); });
  }
  // Only now is the number of records known on the host: copy exactly those, on a stream
  // of their own, while the compute stream goes on with the slices behind this one.
  // The copies land in memory the caller lent where it can (it then publishes them without
  // a copy of its own), else in the slot's pinned buffers.
  const SliceSummary& summary = slot.h_summary[0];
  cudaStream_t out = out_stream_.get();
  auto copy_out = [&](auto* own, const auto* device, std::uint64_t count) {
    using T = std::remove_const_t<std::remove_pointer_t<decltype(device)>>;
    T* dst = own;
    if (count == 0) return dst;
    if (result_memory_)
      if (void* lent = result_memory_->lend(count * sizeof(T))) dst = static_cast<T*>(lent);
    PETDAQ_CUDA_CHECK(
        cudaMemcpyAsync(dst, device, count * sizeof(T), cudaMemcpyDeviceToHost, out));
    return dst;
  };
  PETDAQ_CUDA_CHECK(cudaEventRecord(slot.out_begin.get(), out));
  const CoincRecord* prompts = copy_out(slot.h_prompts.get(), slot.d_prompts.get(), summary.prompts_kept);
  const CoincRecord* delayed = copy_out(slot.h_delayed.get(), slot.d_delayed.get(), summary.delayed_kept);
  const std::uint64_t resolved = singles_out_ ? slot.h_resolved[0] : 0;
  const Single* singles =  // singles topic
      singles_out_ ? copy_out(slot.h_singles.get(), slot.d_singles.get(), resolved) : nullptr;
  PETDAQ_CUDA_CHECK(cudaEventRecord(slot.out_end.get(), out));
  {
    PhaseScope wait(phases_, Phase::copy_out_wait);
    wait_for(slot.out_end.get(), slot.slice_id, [this] { complete_partition(false); });
  }
  ++next_collect_;

  const SliceSummary& sum = summary;
  result_ = SliceResult{};
  result_.slice_id = slot.slice_id;
  result_.t_begin = sum.t_begin;
  result_.t_end = sum.t_end;
  result_.prompts = prompts;
  result_.prompt_count = sum.prompts_kept;
  result_.delayed = delayed;
  result_.delayed_count = sum.delayed_kept;
  result_.carry_count = sum.carry_count;
  result_.frames_taken = slot.frames_taken;
  result_.frames_dropped = slot.frames_dropped;
  result_.bound = slot.bound;
  result_.split = slot.split;
  CounterDelta& d = result_.counters;
  add_status_counts(d, sum.status);
  add_coincidence_counts(
      d, CoincidenceCounts{sum.prompts_total, sum.delayed_total, sum.multiples, sum.delayed_multiples},
      (sum.prompts_total - sum.prompts_kept) + (sum.delayed_total - sum.delayed_kept));
  d[Counter::stream_carry_overflow] += sum.carry_overflow;
  d[Counter::stream_pending_full] += slot.frames_dropped;
  result_.bdm_singles = slot.h_bdm.get();
  result_.bdm_energy_rejected = slot.h_bdm.get() + bdm_count_;
  if (singles_out_) {
    result_.singles = singles;
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

}  // namespace gpu_impl

std::unique_ptr<Backend> make_gpu_backend(const Settings& settings,
                                          const Calibration& calibration) {
  return std::make_unique<gpu_impl::GpuBackend>(settings, calibration);
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
  const auto* gpu = dynamic_cast<const gpu_impl::GpuBackend*>(&backend);
  if (!gpu) return false;
  out = gpu->last_stage_times();
  return true;
}

}  // namespace petdaq

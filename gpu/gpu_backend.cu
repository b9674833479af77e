// The CUDA backend (DESIGN sections 1, 5 and 6): per slice, raw frames are copied from pinned
// host memory on a copy stream while the previous slice computes; on the compute stream a
// fused convert kernel (the same convert_frame() as the CPU) counts and compacts the
// singles, a radix sort puts carry-over and new singles in (time, crystal, energy) order,
// and two walks over the windows (count, scan, fill) write the records; collect() copies
// exactly those back to pinned host memory. The carry-over stays on the device. Every buffer, including
// CUB's temporary storage, is taken at construction.
#include "gpu/gpu_backend.h"

#include <sys/prctl.h>

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
    : caps_{.max_slice_frames = s.stream.max_slice_frames,
            .max_staged =
                staged_frames_limit(s.stream.max_pending_frames, s.stream.max_slice_frames),
            .max_carry = s.stream.max_carry_singles},
      rule_(make_source_rule(s)),
      min_time_offset_(cal.min_time_offset),
      params_(CoincidenceParams::from(s)) {
  if (caps_.max_slice_frames == 0)
    throw std::invalid_argument("stream.max_slice_frames must be > 0");
  if (!cal.time_offsets.empty()) {
    const auto [lo, hi] = std::minmax_element(cal.time_offsets.begin(), cal.time_offsets.end());
    key_width_.time_offset_range =
        static_cast<std::uint64_t>(std::int64_t{*hi} - std::int64_t{*lo});
  }
  caps_.sort_capacity = std::uint64_t{caps_.max_carry} + caps_.max_slice_frames;
  // Segment starts and frame indices are 32-bit on the device.
  if (caps_.sort_capacity >= std::numeric_limits<std::uint32_t>::max())
    throw std::invalid_argument(
        "stream.max_slice_frames + stream.max_carry_singles must stay below 2^32 on the GPU");
  caps_.tile_capacity = blocks_for(caps_.max_slice_frames, ConvertPolicy::tile_frames);
  // The same record capacity as the CPU backend (core/stream_limits.h).
  caps_.prompt_capacity =
      slice_record_capacity(caps_.sort_capacity, s.stream.max_records_per_single);
  caps_.delayed_capacity = params_.delayed ? caps_.prompt_capacity : 0;

  const ConvertTables host_tables = make_convert_tables(s, cal);
  caps_.bdm_count = host_tables.geometry.bdm_count();
  calibration_.tables = host_tables;
  calibration_.d_lut = make_device<std::uint8_t>(cal.position_lut.size());
  PETDAQ_CUDA_CHECK(cudaMemcpy(calibration_.d_lut.get(), cal.position_lut.data(),
                               cal.position_lut.size(), cudaMemcpyHostToDevice));
  calibration_.d_energy = make_device<float>(cal.energy_correction.size());
  PETDAQ_CUDA_CHECK(cudaMemcpy(calibration_.d_energy.get(), cal.energy_correction.data(),
                               cal.energy_correction.size() * sizeof(float),
                               cudaMemcpyHostToDevice));
  calibration_.tables.position_lut = calibration_.d_lut.get();
  calibration_.tables.energy_correction = calibration_.d_energy.get();
  calibration_.tables.time_offsets = nullptr;
  if (!cal.time_offsets.empty()) {
    calibration_.d_offsets = make_device<std::int32_t>(cal.time_offsets.size());
    PETDAQ_CUDA_CHECK(cudaMemcpy(calibration_.d_offsets.get(), cal.time_offsets.data(),
                                 cal.time_offsets.size() * sizeof(std::int32_t),
                                 cudaMemcpyHostToDevice));
    calibration_.tables.time_offsets = calibration_.d_offsets.get();
  }

  ws_ = std::make_unique<gpu::DeviceWorkspace>(
      gpu::WorkspaceSizes{caps_.sort_capacity, caps_.max_carry, caps_.tile_capacity,
                          caps_.bdm_count, host_tables.geometry.crystal_count()});

  for (int i = 0; i < 2; ++i) {
    stage_.kept[i] = make_device<RawFrame>(caps_.max_staged);
    stage_.arrivals[i] = make_device<RawFrame>(caps_.max_staged);
  }
  partition_.d_taken = make_device<unsigned long long>(1);
  partition_.h_taken = make_pinned<unsigned long long>(1);
  PETDAQ_CUDA_CHECK(partition_async(nullptr, partition_.temp_bytes, gpu::StagedInput{}, nullptr,
                                    nullptr, nullptr, static_cast<std::int64_t>(caps_.max_staged),
                                    gpu::TakenBy{}, gpu::DroppedAt{}, nullptr));
  partition_.d_temp = make_device<std::uint8_t>(partition_.temp_bytes);

  if (s.output.histograms.enabled) {
    live_.histogram_layout = make_histogram_layout(s);
    live_.d_histograms = make_device<std::uint8_t>(live_.histogram_layout.bytes);
    PETDAQ_CUDA_CHECK(cudaMemset(live_.d_histograms.get(), 0, live_.histogram_layout.bytes));
    live_.h_histograms = std::make_unique<HistogramSet>(live_.histogram_layout);
    live_.histograms_copy.locked =
        cuda::HostRegistration(live_.h_histograms->bins(), live_.histogram_layout.bytes);
  }
  if (s.output.image.enabled) {
    live_.h_image = std::make_unique<ImageSet>(s);
    live_.image_layout = live_.h_image->layout();
    live_.image_copy.locked = cuda::HostRegistration(live_.h_image->bins(), live_.image_layout.bytes);
    const std::vector<std::int32_t>& table = live_.h_image->crystal_table();
    live_.d_crystal_um = make_device<std::int32_t>(table.size());
    PETDAQ_CUDA_CHECK(cudaMemcpy(live_.d_crystal_um.get(), table.data(),
                                 table.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice));
    live_.image_layout.crystal_um = live_.d_crystal_um.get();
    live_.d_image = make_device<std::uint8_t>(live_.image_layout.bytes);
    PETDAQ_CUDA_CHECK(cudaMemset(live_.d_image.get(), 0, live_.image_layout.bytes));
  }
  live_.singles = s.output.wants_singles();
  for (Slot& slot : ring_.slots) {
    if (live_.singles) {
      slot.singles.d_singles = make_device<Single>(caps_.sort_capacity);
      slot.singles.h_singles = make_pinned<Single>(caps_.sort_capacity);
      slot.singles.h_resolved = make_pinned<std::uint64_t>(1, true);
      slot.singles.d_resolved = cuda::device_address(slot.singles.h_resolved);
    }
    slot.d_frames = make_device<RawFrame>(caps_.max_slice_frames);
    slot.take.d_partition_counts = make_device<unsigned long long>(2);
    slot.take.h_partition_counts = make_pinned<unsigned long long>(2);
    slot.records.h_prompts = make_pinned<CoincRecord>(caps_.prompt_capacity);
    slot.records.h_delayed = make_pinned<CoincRecord>(caps_.delayed_capacity);
    slot.records.d_prompts = make_device<CoincRecord>(caps_.prompt_capacity);
    slot.records.d_delayed = make_device<CoincRecord>(caps_.delayed_capacity);
    slot.records.h_summary = make_pinned<SliceSummary>(1, true);
    slot.records.h_bdm = make_pinned<std::uint64_t>(3 * std::size_t{caps_.bdm_count}, true);
    slot.records.d_summary = cuda::device_address(slot.records.h_summary);
    slot.records.d_bdm_out = cuda::device_address(slot.records.h_bdm);
  }
  PETDAQ_CUDA_CHECK(cudaDeviceSynchronize());
}

GpuBackend::~GpuBackend() {
  // Work still queued must finish before its buffers are freed; errors here have nowhere
  // to go.
  cudaStreamSynchronize(streams_.copy.get());
  cudaStreamSynchronize(streams_.partition.get());
  cudaStreamSynchronize(streams_.out.get());
  cudaStreamSynchronize(streams_.compute.get());
}

// Polls rather than blocks forever: a lost device must surface as an error, not a hang.
// The first kSpinWait it asks the device again at once (most waits end within it: a slice's
// partition, a record copy); then every 20 us, with this thread's timer slack at 1 us, so
// that a sleep ends when asked rather than up to the default 50 us later.
void wait_for(cudaEvent_t event, std::uint64_t slice_id, const std::function<void()>& meanwhile) {
  constexpr auto kSpinWait = std::chrono::microseconds(100);
  thread_local const bool precise_sleeps = ::prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0) == 0;
  (void)precise_sleeps;
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + kSliceTimeout;
  for (;;) {
    const cudaError_t e = cudaEventQuery(event);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) PETDAQ_CUDA_CHECK(e);
    if (meanwhile) meanwhile();
    const auto now = std::chrono::steady_clock::now();
    if (now > deadline)
      throw std::runtime_error("GpuBackend: slice " + std::to_string(slice_id) +
                               " did not finish within " +
                               std::to_string(kSliceTimeout.count()) + " s");
    if (now - start > kSpinWait) std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

// Device bins to their host set, the copy queued on the compute stream behind the slices
// queued there. Waiting: returns once it is in. Not waiting: queues one and returns null; a
// later call returns the set once that copy is in (never blocks).
template <class Set>
const Set* GpuBackend::copy_live(Set& host, const std::uint8_t* device, std::size_t bytes,
                                 SnapshotCopy& copy, bool wait) {
  cudaStream_t stream = streams_.compute.get();
  if (!wait && copy.pending) {
    const cudaError_t e = cudaEventQuery(copy.copied.get());
    if (e == cudaErrorNotReady) return nullptr;
    PETDAQ_CUDA_CHECK(e);
    copy.pending = false;
    return &host;
  }
  PETDAQ_CUDA_CHECK(cudaMemcpyAsync(host.bins(), device, bytes, cudaMemcpyDeviceToHost, stream));
  PETDAQ_CUDA_CHECK(cudaEventRecord(copy.copied.get(), stream));
  copy.pending = !wait;
  if (!wait) return nullptr;
  // Polled like every other wait (a copy still queued before this one is in too).
  wait_for(copy.copied.get(), ring_.next_submit);
  return &host;
}

// The bins of every slice submitted so far (each slice's compute is queued at its submit):
// the copy is queued behind them.
const HistogramSet* GpuBackend::histograms() {
  if (!live_.d_histograms) return nullptr;
  return copy_live(*live_.h_histograms, live_.d_histograms.get(), live_.histogram_layout.bytes,
                   live_.histograms_copy, true);
}

// The bins of every slice submitted before the copy was queued, once that copy is in (null
// until then; never blocks).
const HistogramSet* GpuBackend::histograms_snapshot() {
  if (!live_.d_histograms) return nullptr;
  return copy_live(*live_.h_histograms, live_.d_histograms.get(), live_.histogram_layout.bytes,
                   live_.histograms_copy, false);
}

// The image of every slice submitted so far: the copy is queued behind them.
const ImageSet* GpuBackend::image() {
  if (!live_.d_image) return nullptr;
  return copy_live(*live_.h_image, live_.d_image.get(), live_.image_layout.bytes, live_.image_copy,
                   true);
}

const ImageSet* GpuBackend::image_snapshot() {
  if (!live_.d_image) return nullptr;
  return copy_live(*live_.h_image, live_.d_image.get(), live_.image_layout.bytes, live_.image_copy,
                   false);
}

const SliceResult& GpuBackend::collect() {
  if (in_flight() == 0) throw std::logic_error("GpuBackend::collect: no slice submitted");
  Slot& slot = ring_.slots[ring_.next_collect % kSlicesInFlight];
  // The result says how many staged frames the slice took: its partition's count must be on
  // the host (slice_stage.cu), which this waits for if no call found it in yet.
  if (partition_.pending && partition_.pending_slice == ring_.next_collect)
    complete_partition(true);
  {
    PhaseScope wait(phases_, Phase::collect_wait);
    wait_for(slot.events.done.get(), slot.slice_id, [this] { complete_partition(false); });
  }
  // Only now is the number of records known on the host: copy exactly those, on a stream
  // of their own, while the compute stream goes on with the slices behind this one.
  // The copies land in memory the caller lent where it can (it then publishes them without
  // a copy of its own), else in the slot's pinned buffers.
  const SliceSummary& summary = slot.records.h_summary[0];
  cudaStream_t out = streams_.out.get();
  auto copy_out = [&](auto* own, const auto* device, std::uint64_t count) {
    using T = std::remove_const_t<std::remove_pointer_t<decltype(device)>>;
    T* dst = own;
    if (count == 0) return dst;
    if (collected_.memory)
      if (void* lent = collected_.memory->lend(count * sizeof(T))) dst = static_cast<T*>(lent);
    PETDAQ_CUDA_CHECK(
        cudaMemcpyAsync(dst, device, count * sizeof(T), cudaMemcpyDeviceToHost, out));
    return dst;
  };
  PETDAQ_CUDA_CHECK(cudaEventRecord(slot.events.out_begin.get(), out));
  const CoincRecord* prompts =
      copy_out(slot.records.h_prompts.get(), slot.records.d_prompts.get(), summary.prompts_kept);
  const CoincRecord* delayed =
      copy_out(slot.records.h_delayed.get(), slot.records.d_delayed.get(), summary.delayed_kept);
  const std::uint64_t resolved = live_.singles ? slot.singles.h_resolved[0] : 0;
  const Single* singles =  // singles topic
      live_.singles ? copy_out(slot.singles.h_singles.get(), slot.singles.d_singles.get(), resolved)
                    : nullptr;
  PETDAQ_CUDA_CHECK(cudaEventRecord(slot.events.out_end.get(), out));
  {
    PhaseScope wait(phases_, Phase::copy_out_wait);
    wait_for(slot.events.out_end.get(), slot.slice_id, [this] { complete_partition(false); });
  }
  ++ring_.next_collect;

  const SliceSummary& sum = summary;
  SliceResult& result = collected_.result;
  result = SliceResult{};
  result.slice_id = slot.slice_id;
  result.t_begin = sum.t_begin;
  result.t_end = sum.t_end;
  result.prompts = prompts;
  result.prompt_count = sum.prompts_kept;
  result.delayed = delayed;
  result.delayed_count = sum.delayed_kept;
  result.carry_count = sum.carry_count;
  result.frames_taken = slot.take.frames_taken;
  result.frames_dropped = slot.take.frames_dropped;
  result.bound = slot.take.bound;
  result.split = slot.take.split;
  CounterDelta& d = result.counters;
  add_status_counts(d, sum.status);
  add_coincidence_counts(
      d, CoincidenceCounts{sum.prompts_total, sum.delayed_total, sum.multiples, sum.delayed_multiples},
      (sum.prompts_total - sum.prompts_kept) + (sum.delayed_total - sum.delayed_kept));
  d[Counter::stream_carry_overflow] += sum.carry_overflow;
  d[Counter::stream_pending_full] += slot.take.frames_dropped;
  result.bdm_singles = slot.records.h_bdm.get();
  result.bdm_energy_rejected = slot.records.h_bdm.get() + caps_.bdm_count;
  if (slot.work.dead.count) result.bdm_dead = slot.records.h_bdm.get() + 2 * caps_.bdm_count;
  if (live_.singles) {
    result.singles = singles;
    result.single_count = resolved;
  }

  GpuStageTimes& times = collected_.stage_times;
  PETDAQ_CUDA_CHECK(cudaEventElapsedTime(&times.copy_in_ms, slot.events.copy_begin.get(),
                                         slot.events.copy_end.get()));
  PETDAQ_CUDA_CHECK(cudaEventElapsedTime(&times.convert_ms, slot.events.copy_end.get(),
                                         slot.events.convert_end.get()));
  PETDAQ_CUDA_CHECK(cudaEventElapsedTime(&times.sort_ms, slot.events.convert_end.get(),
                                         slot.events.sort_end.get()));
  PETDAQ_CUDA_CHECK(cudaEventElapsedTime(&times.coincidence_ms, slot.events.sort_end.get(),
                                         slot.events.done.get()));
  PETDAQ_CUDA_CHECK(cudaEventElapsedTime(&times.copy_out_ms, slot.events.out_begin.get(),
                                         slot.events.out_end.get()));
  PETDAQ_CUDA_CHECK(
      cudaEventElapsedTime(&times.slice_ms, slot.events.copy_begin.get(), slot.events.done.get()));
  return result;
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

std::size_t gpu_backend_host_bytes(const Settings& s) {
  // The capacities as GpuBackend's constructor sets them (core/stream_limits.h).
  const std::uint64_t sort = std::uint64_t{s.stream.max_carry_singles} + s.stream.max_slice_frames;
  const std::uint64_t prompts = slice_record_capacity(sort, s.stream.max_records_per_single);
  const std::uint64_t delayed = CoincidenceParams::from(s).delayed ? prompts : 0;
  const std::uint64_t bdms = Geometry::from(s.scanner).bdm_count();
  std::uint64_t slot = (prompts + delayed) * sizeof(CoincRecord) + sizeof(gpu::SliceSummary) +
                       3 * bdms * sizeof(std::uint64_t) + 2 * sizeof(unsigned long long);
  if (s.output.wants_singles()) slot += sort * sizeof(Single) + sizeof(std::uint64_t);
  std::uint64_t bytes = gpu_impl::kSlicesInFlight * slot + sizeof(unsigned long long);
  if (s.output.histograms.enabled) bytes += make_histogram_layout(s).bytes;
  if (s.output.image.enabled) bytes += make_image_layout(s).bytes;
  return static_cast<std::size_t>(bytes);
}

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

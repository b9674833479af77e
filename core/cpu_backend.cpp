#include "core/cpu_backend.h"

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/calibration.h"
#include "core/coincidence.h"
#include "core/convert.h"
#include "core/histograms.h"
#include "core/settings.h"

namespace petdaq {

namespace {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
template <class T>
using HugeArray = std::unique_ptr<T[], FreeDeleter>;

// A copy of a calibration table on transparent huge pages where the kernel allows them: the
// energy table's rows are a page apart, so with 4 KiB pages nearly every look-up also misses
// the TLB.
template <class T>
HugeArray<T> huge_page_copy(const T* source, std::size_t count) {
  constexpr std::size_t kHugePageBytes = 2u << 20;
  const std::size_t bytes =
      std::max<std::size_t>(1, (count * sizeof(T) + kHugePageBytes - 1) / kHugePageBytes) *
      kHugePageBytes;
  void* p = std::aligned_alloc(kHugePageBytes, bytes);
  if (!p) throw std::bad_alloc();
  ::madvise(p, bytes, MADV_HUGEPAGE);  // a hint: without huge pages it works all the same
  if (count > 0) std::memcpy(p, source, count * sizeof(T));
  return HugeArray<T>(static_cast<T*>(p));
}

}  // namespace

struct CpuBackend::Impl {
  HugeArray<std::uint8_t> position_lut;
  HugeArray<float> energy_correction;
  ConvertTables tables;
  CoincidenceParams params;
  std::size_t max_slice_frames = 0;
  std::size_t max_carry_singles = 0;
  std::uint32_t bdm_count = 0;

  // Buffers are left uninitialised: pages nobody writes cost no memory and no start-up time.
  std::unique_ptr<RawFrame[]> input;
  // Two singles buffers of max_carry + max_slice: the carry-over sits at the front of
  // `singles`, the slice's new singles follow it; `scratch` is the sort's and the merge's
  // second buffer, and the two swap roles after a merge.
  std::unique_ptr<Single[]> singles_a;
  std::unique_ptr<Single[]> singles_b;
  Single* singles = nullptr;
  Single* scratch = nullptr;
  std::size_t carry_count = 0;
  std::uint64_t next_t_begin = 0;

  std::unique_ptr<CoincRecord[]> prompt_storage;
  std::unique_ptr<CoincRecord[]> delayed_storage;
  RecordBuffer prompts;
  RecordBuffer delayed;
  std::vector<std::uint64_t> bdm_singles;
  std::vector<std::uint64_t> bdm_energy_rejected;
  std::unique_ptr<HistogramSet> histograms;  // output.histograms.enabled
  std::unique_ptr<Single[]> resolved;        // output.singles.enabled

  StageSeconds stage;
  SliceRequest pending;
  bool has_pending = false;
  SliceResult result;

  Impl(const Settings& s, const Calibration& cal)
      : position_lut(huge_page_copy(cal.position_lut.data(), cal.position_lut.size())),
        energy_correction(
            huge_page_copy(cal.energy_correction.data(), cal.energy_correction.size())),
        tables(make_convert_tables(s, cal)),
        params(CoincidenceParams::from(s)),
        max_slice_frames(s.stream.max_slice_frames),
        max_carry_singles(s.stream.max_carry_singles),
        bdm_count(tables.geometry.bdm_count()) {
    if (max_slice_frames == 0) throw std::invalid_argument("stream.max_slice_frames must be > 0");
    tables.position_lut = position_lut.get();
    tables.energy_correction = energy_correction.get();
    const std::size_t singles_capacity = max_carry_singles + max_slice_frames;
    input = std::make_unique_for_overwrite<RawFrame[]>(max_slice_frames);
    singles_a = std::make_unique_for_overwrite<Single[]>(singles_capacity);
    singles_b = std::make_unique_for_overwrite<Single[]>(singles_capacity);
    singles = singles_a.get();
    scratch = singles_b.get();
    const std::size_t record_capacity =
        singles_capacity * std::max<std::size_t>(1, s.stream.max_records_per_single);
    const std::size_t delayed_capacity = params.delayed ? record_capacity : 0;
    prompt_storage = std::make_unique_for_overwrite<CoincRecord[]>(record_capacity);
    delayed_storage = std::make_unique_for_overwrite<CoincRecord[]>(delayed_capacity);
    prompts.data = prompt_storage.get();
    prompts.capacity = record_capacity;
    delayed.data = delayed_storage.get();
    delayed.capacity = delayed_capacity;
    bdm_singles.resize(bdm_count);
    bdm_energy_rejected.resize(bdm_count);
    if (s.output.histograms.enabled)
      histograms = std::make_unique<HistogramSet>(make_histogram_layout(s));
    if (s.output.singles.enabled) resolved = std::make_unique_for_overwrite<Single[]>(singles_capacity);
  }

  void process(const SliceRequest& req) {
    if (req.run_start) {
      carry_count = 0;
      next_t_begin = 0;
      if (histograms) histograms->reset();  // histograms: a run starts
    }
    result = SliceResult{};
    result.slice_id = req.slice_id;
    result.t_begin = next_t_begin;
    prompts.clear();
    delayed.clear();
    std::fill(bdm_singles.begin(), bdm_singles.end(), 0);
    std::fill(bdm_energy_rejected.begin(), bdm_energy_rejected.end(), 0);

    using Clock = std::chrono::steady_clock;
    const auto seconds = [](Clock::time_point a, Clock::time_point b) {
      return std::chrono::duration<double>(b - a).count();
    };
    const Clock::time_point t0 = Clock::now();
    const std::size_t frame_count = req.frame_count;
    CounterDelta& delta = result.counters;
    const std::size_t fresh =
        convert_frames(req.frames, frame_count, tables, singles + carry_count, delta,
                       bdm_singles.data(), bdm_energy_rejected.data());
    if (histograms) histograms->add_frames(req.frames, frame_count, tables);  // histograms
    const Clock::time_point t1 = Clock::now();
    sort_singles(singles + carry_count, fresh, scratch);
    // The carry-over is sorted already; the new singles mostly follow it, so a merge is only
    // needed where the two overlap in time.
    if (carry_count > 0 && fresh > 0 &&
        single_less(singles[carry_count], singles[carry_count - 1])) {
      std::merge(singles, singles + carry_count, singles + carry_count,
                 singles + carry_count + fresh, scratch, single_less);
      std::swap(singles, scratch);
    }
    const std::size_t total = carry_count + fresh;
    const Clock::time_point t2 = Clock::now();

    CoincidenceCounts counts;
    std::size_t first_carried =
        find_coincidences(singles, total, params, req.horizon, req.final, prompts, delayed, counts);
    bool resolved_all = req.final;
    if (!req.final && total - first_carried > max_carry_singles) {
      // Carry overflow (core/backend.h): the rest is resolved as if the run ended here. The
      // carried part starts at a window-chain start, so resolving it alone appends exactly
      // the records a final call on the whole slice would have made.
      find_coincidences(singles + first_carried, total - first_carried, params, req.horizon,
                        true, prompts, delayed, counts);
      first_carried = total;
      resolved_all = true;
      delta[Counter::stream_carry_overflow] += 1;
    }

    if (histograms) {  // histograms of the records
      histograms->add_records(prompts.data, prompts.size, false);
      histograms->add_records(delayed.data, delayed.size, true);
    }
    if (resolved) {  // singles topic: the resolved singles, before the carry-over moves
      std::memcpy(resolved.get(), singles, first_carried * sizeof(Single));
      result.singles = resolved.get();
      result.single_count = first_carried;
    }
    const Clock::time_point t3 = Clock::now();
    stage.convert += seconds(t0, t1);
    stage.sort += seconds(t1, t2);
    stage.coincidence += seconds(t2, t3);

    std::uint64_t t_end;
    if (resolved_all) {
      t_end = total > 0 ? std::max(result.t_begin, singles[total - 1].time + 1) : result.t_begin;
    } else {
      t_end = first_carried < total ? std::min(singles[first_carried].time, req.horizon)
                                    : req.horizon;
      t_end = std::max(t_end, result.t_begin);
    }
    result.t_end = t_end;
    next_t_begin = t_end;

    carry_count = total - first_carried;
    if (carry_count > 0 && first_carried > 0)
      std::memmove(singles, singles + first_carried, carry_count * sizeof(Single));
    if (req.final) {
      carry_count = 0;
      next_t_begin = 0;
    }

    delta[Counter::coinc_prompts] += counts.prompts;
    delta[Counter::coinc_delayed] += counts.delayed;
    delta[Counter::coinc_multiples] += counts.multiples;
    delta[Counter::coinc_delayed_multiples] += counts.delayed_multiples;
    delta[Counter::coinc_records_overflow] += prompts.overflow + delayed.overflow;

    result.prompts = prompts.data;
    result.prompt_count = prompts.size;
    result.delayed = delayed.data;
    result.delayed_count = delayed.size;
    result.carry_count = carry_count;
    result.bdm_singles = bdm_singles.data();
    result.bdm_energy_rejected = bdm_energy_rejected.data();
  }
};

CpuBackend::CpuBackend(const Settings& settings, const Calibration& calibration)
    : impl_(std::make_unique<Impl>(settings, calibration)) {}

CpuBackend::~CpuBackend() = default;

std::size_t CpuBackend::max_slice_frames() const { return impl_->max_slice_frames; }

RawFrame* CpuBackend::input_buffer() { return impl_->input.get(); }

void CpuBackend::submit(const SliceRequest& request) {
  if (impl_->has_pending)
    throw std::logic_error("CpuBackend::submit: the previous slice was not collected");
  // The slicer never asks for more; a caller that does has a bug, not bad data.
  if (request.frame_count > impl_->max_slice_frames)
    throw std::invalid_argument("CpuBackend::submit: a slice of " +
                                std::to_string(request.frame_count) +
                                " frames exceeds stream.max_slice_frames = " +
                                std::to_string(impl_->max_slice_frames));
  impl_->pending = request;
  impl_->has_pending = true;
}

const SliceResult& CpuBackend::collect() {
  if (!impl_->has_pending) throw std::logic_error("CpuBackend::collect: no slice submitted");
  impl_->has_pending = false;
  // The work runs here rather than in submit(), so that submit() never blocks on it.
  impl_->process(impl_->pending);
  return impl_->result;
}

const CpuBackend::StageSeconds& CpuBackend::stage_seconds() const { return impl_->stage; }

const HistogramSet* CpuBackend::histograms() { return impl_->histograms.get(); }

std::size_t CpuBackend::in_flight() const { return impl_->has_pending ? 1 : 0; }

}  // namespace petdaq

// The CPU backend (core/backend.h): the store of staged frames (cpu_store.h), the take of a
// slice's frames by its bound (cpu_take.h) and the slice's stages (cpu_stages.h), with the
// calibration tables they read and the threads they share.
#include "core/cpu_backend.h"

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>

#include "core/calibration.h"
#include "core/convert.h"
#include "core/cpu_stages.h"
#include "core/cpu_store.h"
#include "core/cpu_take.h"
#include "core/frame_source.h"
#include "core/histograms.h"
#include "core/parallel_engine.h"
#include "core/settings.h"
#include "core/stream_limits.h"
#include "core/thread_placement.h"

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

// The convert's tables, reading the calibration's look-up tables from huge-page copies.
struct CpuTables {
  HugeArray<std::uint8_t> position_lut;
  HugeArray<float> energy_correction;
  ConvertTables tables;

  CpuTables(const Settings& s, const Calibration& cal)
      : position_lut(huge_page_copy(cal.position_lut.data(), cal.position_lut.size())),
        energy_correction(huge_page_copy(cal.energy_correction.data(), cal.energy_correction.size())),
        tables(make_convert_tables(s, cal)) {
    tables.position_lut = position_lut.get();
    tables.energy_correction = energy_correction.get();
  }
  SourceRule source_rule() const {
    return SourceRule{tables.check_markers, tables.head_marker, tables.tail_marker,
                      tables.geometry.bdm_count()};
  }
};

// The sizes of the backend's threads; `layout` receives the histograms' layout, which
// e.histograms points to when they are on (each thread's set has the stages' layout).
ParallelEngine::Sizes engine_sizes(const Settings& s, const CpuBackendOptions& o,
                                   HistogramLayout& layout) {
  ParallelEngine::Sizes e;
  e.threads = resolve_backend_threads(s.backend_threads, s.input.receiver_threads);
  e.delayed = s.coincidence.delayed.enabled;
  e.bdm_count = Geometry::from(s.scanner).bdm_count();
  e.min_parallel = o.min_parallel_frames;
  e.pool_cpus = cpu_list(s.cpus.backend);
  e.record_capacity = SliceStages::record_capacity(s);
  if (s.output.histograms.enabled) {
    layout = make_histogram_layout(s);
    e.histograms = &layout;
  }
  return e;
}

// The backend's threads beside the calling one (null: it runs alone).
std::unique_ptr<ParallelEngine> make_engine(const Settings& s, const CpuBackendOptions& o) {
  HistogramLayout layout;
  const ParallelEngine::Sizes e = engine_sizes(s, o, layout);
  if (e.threads <= 1) return nullptr;
  return std::make_unique<ParallelEngine>(e);  // it copies the layout
}

std::size_t staged_limit(const Settings& s) {
  return staged_frames_limit(s.stream.max_pending_frames, s.stream.max_slice_frames);
}

std::size_t checked_slice_frames(const Settings& s) {
  if (s.stream.max_slice_frames == 0) throw std::invalid_argument("stream.max_slice_frames must be > 0");
  return s.stream.max_slice_frames;
}

}  // namespace

struct CpuBackend::Impl {
  const std::size_t max_slice_frames;
  CpuTables tables;
  std::unique_ptr<ParallelEngine> engine;  // backend_threads > 1
  StagedStore store;
  SliceTake take;
  SliceStages stages;
  SliceRequest pending;
  bool has_pending = false;
  SliceResult result;

  Impl(const Settings& s, const Calibration& cal, const CpuBackendOptions& options)
      : max_slice_frames(checked_slice_frames(s)),
        tables(s, cal),
        engine(make_engine(s, options)),
        store(staged_limit(s), engine.get()),
        take(max_slice_frames, tables.source_rule(), store, engine.get()),
        stages(s, cal.min_time_offset, tables.tables, engine.get()) {}

  // The stages run on the frames the take gave the slice; the result says what it took.
  void process(const SliceRequest& req) {
    result = SliceResult{};
    result.slice_id = req.slice_id;
    stages.run(req, take, result);
    const SliceTake::Outcome& took = take.outcome();
    result.frames_taken = took.taken;
    result.frames_dropped = took.dropped;
    result.bound = took.bound;
    result.split = took.split;
    result.counters[Counter::stream_pending_full] += took.dropped;
  }
};

CpuBackend::CpuBackend(const Settings& settings, const Calibration& calibration,
                       const CpuBackendOptions& options)
    : impl_(std::make_unique<Impl>(settings, calibration, options)) {}

CpuBackend::~CpuBackend() = default;

std::size_t CpuBackend::memory_bytes(const Settings& s) {
  HistogramLayout layout;
  return StagedStore::memory_bytes(staged_limit(s)) +
         SliceTake::memory_bytes(s.stream.max_slice_frames, staged_limit(s)) +
         SliceStages::memory_bytes(s) + ParallelEngine::memory_bytes(engine_sizes(s, {}, layout));
}

std::size_t CpuBackend::max_slice_frames() const { return impl_->max_slice_frames; }

std::size_t CpuBackend::max_staged_frames() const { return impl_->store.capacity(); }

std::size_t CpuBackend::preferred_slice_frames() const {
  return std::min<std::size_t>(slice_new_frames(impl_->max_slice_frames), kCacheSliceFrames * threads());
}

std::uint64_t CpuBackend::stage(const RawFrame* frames, std::size_t count) {
  impl_->take.complete();
  return impl_->store.stage(frames, count);
}

void CpuBackend::defer_staging(bool on) {
  impl_->take.complete();
  impl_->store.defer(on);
}

bool CpuBackend::staged(std::uint64_t ticket) { return impl_->store.staged(ticket); }

void CpuBackend::wait_staged(std::uint64_t ticket) {
  impl_->take.complete();
  if (!impl_->store.staged(ticket)) impl_->store.copy_deferred();
}

void CpuBackend::submit(const SliceRequest& request) {
  if (impl_->has_pending)
    throw std::logic_error("CpuBackend::submit: the previous slice was not collected");
  // The frames are taken now: those staged after this request belong to later slices.
  const auto start = std::chrono::steady_clock::now();
  impl_->take.take(request.final ? kNoBound : request.bound);
  impl_->stages.seconds().take +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
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

const CpuBackend::StageSeconds& CpuBackend::stage_seconds() const {
  return impl_->stages.seconds();
}

const HistogramSet* CpuBackend::histograms() {
  HistogramSet* h = impl_->stages.histograms();
  // The other threads' histograms are added in when someone looks.
  if (h && impl_->engine) impl_->engine->collect_histograms(*h);
  return h;
}

const ImageSet* CpuBackend::image() { return impl_->stages.image(); }

void CpuBackend::set_result_memory(ResultMemory* memory) { impl_->stages.set_result_memory(memory); }

unsigned CpuBackend::threads() const { return impl_->engine ? impl_->engine->threads() : 1; }

ParallelStats CpuBackend::parallel_stats() const {
  return impl_->engine ? impl_->engine->stats() : ParallelStats{};
}

std::size_t CpuBackend::in_flight() const { return impl_->has_pending ? 1 : 0; }

}  // namespace petdaq

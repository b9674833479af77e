// The CPU reference backend: staged frames wait in a store; a slice takes those below its
// bound, and convert, order and coincidence run on the calling thread (and, with
// backend_threads > 1, on a pool of threads made at construction: core/parallel_engine.h),
// with the carry-over kept between slices. Every buffer is sized at construction.
#pragma once

#include <memory>

#include "core/backend.h"
#include "core/parallel_engine.h"

namespace petdaq {

struct Settings;
struct Calibration;

// Construction options that are not settings.
struct CpuBackendOptions {
  // Slices with fewer frames (and coincidence calls with fewer singles) stay on the calling
  // thread: below this, splitting costs more than it saves. Tests make it small so that
  // seams happen.
  std::size_t min_parallel_frames = 64 * 1024;
};

class CpuBackend final : public Backend {
 public:
  // Runs on resolve_backend_threads(settings.backend_threads, ...) threads, the calling one
  // included; the records, singles and counters do not depend on it.
  CpuBackend(const Settings& settings, const Calibration& calibration,
             const CpuBackendOptions& options = {});
  ~CpuBackend() override;
  // Host memory the buffers it makes at construction take, from the settings alone (the
  // calibration's tables besides): the store, the take, the stages and the threads'.
  static std::size_t memory_bytes(const Settings& settings);

  const char* name() const override { return "cpu"; }
  std::size_t max_slice_frames() const override;
  std::size_t max_staged_frames() const override;
  std::size_t max_in_flight() const override { return 1; }
  bool works_in_collect() const override { return true; }
  // kCacheSliceFrames per thread, at most half of max_slice_frames.
  std::size_t preferred_slice_frames() const override;
  // Frames per backend thread in a slice the slicer cuts when it has the choice: their
  // frames, singles and scratch (16 bytes each) stay in a core's caches through the stages.
  static constexpr std::size_t kCacheSliceFrames = 64 * 1024;
  std::uint64_t stage(const RawFrame* frames, std::size_t count) override;
  bool staged(std::uint64_t ticket) override;
  void wait_staged(std::uint64_t ticket) override;
  void submit(const SliceRequest& request) override;
  const SliceResult& collect() override;
  std::size_t in_flight() const override;
  const HistogramSet* histograms() override;
  const ImageSet* image() override;
  // The records and singles of each slice go to pieces `memory` lends (copied there from the
  // stages' buffers by the backend's threads), or stay in the backend's own buffers where it
  // lends none: the caller passes them on without a copy of its own.
  void set_result_memory(ResultMemory* memory) override;

  // Cumulative time spent in each stage, for benchmarks (a few clock reads per slice).
  struct StageSeconds {
    double convert = 0;
    double sort = 0;  // sort of the new singles and merge with the carry-over
    double coincidence = 0;
    double take = 0;  // submit(): the slice's frames taken from the store
  };
  const StageSeconds& stage_seconds() const;
  unsigned threads() const;
  // By default stage() copies a block to the store at once, on the calling thread (or, from
  // 16 Ki frames, on the backend's threads). Deferred: stage() only notes the block; the
  // next submitted slice's take reads the noted blocks where they lie, on the backend's
  // threads (or copies them to the store first when it holds more than a slice), and
  // wait_staged() copies them at once; until then staged() says no and the caller keeps the
  // memory. For a caller that waits for its tickets (petdaq-offline), not one that polls
  // staged() to free memory between slices. No effect on one thread.
  void defer_staging(bool on);
  ParallelStats parallel_stats() const;  // what the threads were given (zeros on one thread)

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace petdaq

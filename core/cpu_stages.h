// The CPU backend's stages for one slice (DESIGN sections 4 and 5): convert the slice's
// frames, order the new singles and merge them with the carry-over, find the coincidences
// (a carry overflow resolves everything), add the outputs (histograms, image, resolved
// singles) and keep the new carry-over. The stages themselves live in convert.cpp, order.cpp,
// coincidence.cpp and, on several threads, parallel_engine.cpp; here are their buffers,
// made at construction, and the order they run in.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/backend.h"
#include "core/coincidence.h"
#include "core/convert.h"
#include "core/cpu_backend.h"

namespace petdaq {

class SliceTake;

// The slice's singles: two buffers of max_carry + max_slice singles. The carry-over sits at
// the front of singles(), the slice's new singles follow it; scratch() is the sort's and the
// merge's second buffer.
class SinglesBuffers {
 public:
  explicit SinglesBuffers(std::size_t capacity);
  static std::size_t memory_bytes(std::size_t capacity) { return 2 * capacity * sizeof(Single); }

  Single* singles() { return singles_; }
  Single* scratch() { return scratch_; }
  Single* fresh() { return singles_ + carry_; }  // where the new singles go
  std::size_t carry() const { return carry_; }
  // The `fresh` new singles, ordered, join the carry-over in order; returns the total.
  std::size_t merge(std::size_t fresh);
  // The singles [first_carried, total) are the next carry-over; clear(): none.
  void carry_from(std::size_t first_carried, std::size_t total);
  void clear() { carry_ = 0; }

 private:
  std::unique_ptr<Single[]> a_;
  std::unique_ptr<Single[]> b_;
  Single* singles_;
  Single* scratch_;
  std::size_t carry_ = 0;
};

// A slice's records and per-BDM counts.
struct SliceRecords {
  SliceRecords(std::size_t record_capacity, bool delayed, std::uint32_t bdm_count);
  static std::size_t memory_bytes(std::size_t record_capacity, bool delayed, std::uint32_t bdm_count) {
    return (delayed ? 2 : 1) * record_capacity * sizeof(CoincRecord) +
           2 * std::size_t{bdm_count} * sizeof(std::uint64_t);
  }
  void clear();

  std::unique_ptr<CoincRecord[]> prompt_storage;
  std::unique_ptr<CoincRecord[]> delayed_storage;
  RecordBuffer prompts;
  RecordBuffer delayed;
  std::vector<std::uint64_t> bdm_singles;
  std::vector<std::uint64_t> bdm_energy_rejected;
  std::vector<std::uint64_t> bdm_dead;  // frames in the slice's dead ranges
};

class SliceStages {
 public:
  // The records of a slice fit (max_carry + max_slice) × max_records_per_single.
  static std::size_t singles_capacity(const Settings& s);
  static std::size_t record_capacity(const Settings& s);
  // Host memory its buffers take: singles, records, per-BDM counts and the outputs on.
  static std::size_t memory_bytes(const Settings& s);

  // `tables` and `engine` (null: one thread) outlive the stages.
  SliceStages(const Settings& s, std::int64_t min_time_offset, const ConvertTables& tables,
              ParallelEngine* engine);
  ~SliceStages();

  // Runs the stages on the frames `take` gave the slice (running a planned take piece by
  // piece inside the convert stage) and fills `result`.
  void run(const SliceRequest& req, SliceTake& take, SliceResult& result);

  // Memory the slices' records and singles are delivered in (null: the stages' buffers).
  void set_result_memory(ResultMemory* memory) { memory_ = memory; }

  HistogramSet* histograms() { return histograms_.get(); }
  const ImageSet* image() const { return image_.get(); }
  CpuBackend::StageSeconds& seconds() { return seconds_; }
  const CpuBackend::StageSeconds& seconds() const { return seconds_; }

 private:
  void start_run();
  std::size_t convert(SliceTake& take, bool threaded, CounterDelta& delta);
  std::size_t order(std::size_t fresh, bool threaded);
  std::size_t find(const Single* s, std::size_t n, std::uint64_t horizon, bool resolve_all,
                   CoincidenceCounts& counts);
  void add_outputs(std::size_t resolved, SliceResult& result);
  // `count` items of `bytes_each` at `from`, in a piece memory_ lends when it does (copied on
  // the threads when they are many), else where they are.
  const void* deliver(const void* from, std::size_t count, std::size_t bytes_each);

  const ConvertTables& tables_;
  ConvertTables slice_tables_;  // tables_ with the slice's dead ranges (run())
  ParallelEngine* engine_;
  const CoincidenceParams params_;
  const std::size_t max_carry_;
  const std::int64_t min_time_offset_;
  SinglesBuffers singles_;
  SliceRecords records_;
  std::uint64_t next_t_begin_ = 0;
  std::unique_ptr<HistogramSet> histograms_;  // output.histograms.enabled
  std::unique_ptr<ImageSet> image_;           // output.image.enabled
  std::unique_ptr<Single[]> resolved_;        // output.singles.enabled
  ResultMemory* memory_ = nullptr;
  CpuBackend::StageSeconds seconds_;
};

}  // namespace petdaq

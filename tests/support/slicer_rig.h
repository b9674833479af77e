// The slicer's test rig: a sink that records every slice it is handed, a slicer over a
// backend with its counters, and the checks against the batch definition (DESIGN sections 5
// and 6: the same records in the same order, batches that tile time, the same counters).
// Header only: the rig compiles against whichever build of the core the test links (plain,
// AddressSanitizer, ThreadSanitizer).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "core/backend.h"
#include "core/counters.h"
#include "core/cpu_backend.h"
#include "core/geometry.h"
#include "core/settings.h"
#include "core/slicer.h"
#include "proto/records.h"
#include "tests/core/test_scanner.h"

namespace petdaq::test {

// One slice as the sink was handed it.
struct RecordedSlice {
  std::uint64_t run = 0;
  std::uint64_t slice_id = 0;
  std::uint64_t t_begin = 0;
  std::uint64_t t_end = 0;
  std::vector<CoincRecord> prompts;
  std::vector<CoincRecord> delayed;
};

// Copies every slice and notes every run's end, in order.
class RecordingSink final : public ResultSink {
 public:
  void on_slice(std::uint64_t run_id, const SliceResult& r) override {
    RecordedSlice b;
    b.run = run_id;
    b.slice_id = r.slice_id;
    b.t_begin = r.t_begin;
    b.t_end = r.t_end;
    b.prompts.assign(r.prompts, r.prompts + r.prompt_count);
    b.delayed.assign(r.delayed, r.delayed + r.delayed_count);
    batches.push_back(std::move(b));
  }
  void on_run_end(std::uint64_t run_id, RunEnd reason) override {
    run_ends.push_back(run_id);
    reasons.push_back(reason);
  }

  // The records of every slice, one after the other.
  std::vector<CoincRecord> prompts() const {
    std::vector<CoincRecord> out;
    for (const RecordedSlice& b : batches) out.insert(out.end(), b.prompts.begin(), b.prompts.end());
    return out;
  }
  std::vector<CoincRecord> delayed() const {
    std::vector<CoincRecord> out;
    for (const RecordedSlice& b : batches) out.insert(out.end(), b.delayed.begin(), b.delayed.end());
    return out;
  }

  std::vector<RecordedSlice> batches;
  std::vector<std::uint64_t> run_ends;
  std::vector<RunEnd> reasons;
};

// Checks the slices of `run` against the batch result: the concatenated records equal it,
// the intervals tile time from 0 with no gap or overlap, and every record lies in its slice.
inline void expect_run_equals_batch(const RecordingSink& sink, std::uint64_t run,
                                    const BatchResult& want) {
  std::vector<CoincRecord> prompts, delayed;
  std::uint64_t t_expected = 0;
  std::size_t batches = 0;
  for (const RecordedSlice& b : sink.batches) {
    if (b.run != run) continue;
    ++batches;
    EXPECT_EQ(b.t_begin, t_expected) << "slice " << b.slice_id << " of run " << run;
    EXPECT_LE(b.t_begin, b.t_end) << "slice " << b.slice_id;
    t_expected = b.t_end;
    for (const auto* list : {&b.prompts, &b.delayed})
      for (const CoincRecord& r : *list) {
        EXPECT_GE(r.time_a, b.t_begin) << "slice " << b.slice_id;
        EXPECT_LT(r.time_a, b.t_end) << "slice " << b.slice_id;
      }
    prompts.insert(prompts.end(), b.prompts.begin(), b.prompts.end());
    delayed.insert(delayed.end(), b.delayed.begin(), b.delayed.end());
  }
  EXPECT_GT(batches, 0u);
  ASSERT_EQ(prompts.size(), want.prompts.size()) << "run " << run;
  ASSERT_EQ(delayed.size(), want.delayed.size()) << "run " << run;
  for (std::size_t i = 0; i < prompts.size(); ++i)
    ASSERT_TRUE(prompts[i] == want.prompts[i]) << "prompt " << i << " of run " << run;
  for (std::size_t i = 0; i < delayed.size(); ++i)
    ASSERT_TRUE(delayed[i] == want.delayed[i]) << "delayed " << i << " of run " << run;
}

// The conversion's and the coincidence sorter's counters equal the batch result's.
inline void expect_counters_equal_batch(const Counters& c, const BatchResult& want) {
  for (Counter k : {Counter::frame_bad_marker, Counter::frame_bad_bdm, Counter::frame_bad_du,
                    Counter::frame_bad_position, Counter::frame_no_crystal, Counter::frame_bad_time,
                    Counter::single_accepted, Counter::single_energy_rejected})
    EXPECT_EQ(c.get(k), want.counters[k]) << counter_name(k);
  EXPECT_EQ(c.get(Counter::coinc_prompts), want.counts.prompts);
  EXPECT_EQ(c.get(Counter::coinc_delayed), want.counts.delayed);
  EXPECT_EQ(c.get(Counter::coinc_multiples), want.counts.multiples);
  EXPECT_EQ(c.get(Counter::coinc_delayed_multiples), want.counts.delayed_multiples);
  for (std::uint32_t b = 0; b < c.bdm_count(); ++b) {
    EXPECT_EQ(c.bdm_singles(b), want.bdm_singles[b]) << "bdm " << b;
    EXPECT_EQ(c.bdm_energy_rejected(b), want.bdm_energy_rejected[b]) << "bdm " << b;
  }
}

// A slicer over a backend, a recording sink and the counters, built in the order the slicer
// needs them (and torn down in reverse). `settings` must outlive the rig.
class SlicerRig {
 public:
  // Where the slicer cuts: its own default (half of the backend's max_slice_frames, as
  // petdaq-offline) or the backend's preferred size (as petdaqd).
  enum class Cuts { slicer_default, backend_preferred };

  // The CPU backend.
  SlicerRig(const Settings& settings, const Calibration& calibration,
            Cuts cuts = Cuts::slicer_default)
      : SlicerRig(settings, std::make_unique<CpuBackend>(settings, calibration), cuts) {}
  SlicerRig(const Settings& settings, std::unique_ptr<Backend> backend,
            Cuts cuts = Cuts::slicer_default,
            Slicer::Delivery delivery = Slicer::Delivery::latency)
      : counters(Geometry::from(settings.scanner).bdm_count()),
        backend(std::move(backend)),
        slicer(settings, *this->backend, sink, counters,
               cuts == Cuts::backend_preferred ? this->backend->preferred_slice_frames() : 0,
               delivery) {}
  SlicerRig(const SlicerRig&) = delete;
  SlicerRig& operator=(const SlicerRig&) = delete;

  RecordingSink sink;
  Counters counters;
  std::unique_ptr<Backend> backend;
  Slicer slicer;
};

}  // namespace petdaq::test

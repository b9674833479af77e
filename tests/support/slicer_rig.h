// The slicer's test rig: a sink that records every slice it is handed, a slicer over a
// backend with its counters, and the checks against the batch definition (DESIGN sections 5
// and 6: the same records in the same order, batches that tile time, the same counters).
// Header only: the rig compiles against whichever build of the core the test links (plain,
// AddressSanitizer, ThreadSanitizer).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "core/backend.h"
#include "core/counters.h"
#include "core/convert.h"
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

// Small slices and buffers for the slicer's tests: a slice at least every millisecond,
// sources that never go idle.
inline void small_stream_settings(Settings& s, std::uint32_t max_records_per_single = 8) {
  s.stream.max_slice_ms = 1.0;
  s.stream.source_idle_ms = 1e7;
  s.stream.max_pending_frames = 1 << 16;
  s.stream.max_carry_singles = 1 << 16;
  s.stream.max_records_per_single = max_records_per_single;
}

// A dead range (Slicer::add_dead_range) added while frames of it are staged and more of it
// are still to come: every frame with a source in the range the slicer holds is dropped, on
// every board, whenever it was staged, and counted in stream.dead_frames and per BDM in
// bdm.dead; the records are the batch's of the acquisition without those frames. `make` gives
// the backend for the settings (the CPU's, the GPU's).
template <class MakeBackend>
void expect_dead_range_drops_what_it_holds(TestScanner& scanner, MakeBackend make,
                                           std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  Settings& s = scanner.settings;
  small_stream_settings(s, 16);
  s.stream.max_disorder_ps = 50 * s.scanner.tick_ps;
  s.stream.max_slice_frames = 200;
  AcquisitionOptions o;
  o.events = 3000;
  const auto frames = random_acquisition(scanner, rng, o);
  const auto arrival = arrival_order(frames, 50, rng);
  const ConvertTables t = make_convert_tables(s, scanner.calibration);
  const auto has_source = [&](const RawFrame& f) {
    return markers_ok(f.bytes, t.check_markers, t.head_marker, t.tail_marker) &&
           f.bytes[frame_offset::bdm] < t.bdm_count;
  };

  SlicerRig rig(s, make(s));
  Slicer::Clock::time_point now{};
  std::pair<std::uint64_t, std::uint64_t> range{0, 0};
  std::uint64_t held_when_added = 0;
  for (std::size_t i = 0; i < arrival.size(); ++i) {
    rig.slicer.push(&arrival[i], 1, now);
    now += std::chrono::microseconds(1);
    if (i % 50 == 0) now += std::chrono::milliseconds(2);  // slices cut by time too
    rig.slicer.poll(now);
    if (i == arrival.size() / 2) {
      // From just past the published horizon to well past the latest frame pushed.
      const std::uint64_t h = rig.slicer.horizon();
      range = rig.slicer.add_dead_range(h + 1, frame_time(arrival[i].bytes) + 4000);
      EXPECT_EQ(range.first, h + 1);
      held_when_added = rig.slicer.pending_frames();
    }
  }
  rig.slicer.finish();
  ASSERT_GT(range.second, range.first);
  ASSERT_GT(held_when_added, 0u);

  std::vector<RawFrame> alive;
  std::vector<std::uint64_t> dead(t.bdm_count, 0);
  std::uint64_t dead_total = 0;
  for (const RawFrame& f : frames) {
    const std::uint64_t time = frame_time(f.bytes);
    if (has_source(f) && time >= range.first && time < range.second) {
      ++dead[f.bytes[frame_offset::bdm]];
      ++dead_total;
    } else {
      alive.push_back(f);
    }
  }
  ASSERT_GT(dead_total, 20u);
  ASSERT_LT(dead_total, frames.size() / 2);
  const BatchResult want = batch_process(scanner, alive);
  expect_run_equals_batch(rig.sink, 0, want);
  expect_counters_equal_batch(rig.counters, want);
  EXPECT_EQ(rig.counters.get(Counter::stream_dead_frames), dead_total);
  for (std::uint32_t b = 0; b < t.bdm_count; ++b) EXPECT_EQ(rig.counters.bdm_dead(b), dead[b]) << "bdm " << b;
}

}  // namespace petdaq::test

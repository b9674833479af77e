// The slicer driving the GPU backend against the batch definition (DESIGN sections 5 and 6):
// the same records in the same order, whatever the slicing, chunking and interleaving, with
// batches that tile time and the same counters. Skips where no CUDA device is usable.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "core/slicer.h"
#include "gpu/gpu_backend.h"
#include "tests/core/test_scanner.h"

namespace petdaq {
namespace {

using test::AcquisitionOptions;
using test::BatchResult;
using test::TestScanner;

struct Batch {
  std::uint64_t run = 0;
  std::uint64_t t_begin = 0;
  std::uint64_t t_end = 0;
  std::vector<CoincRecord> prompts;
  std::vector<CoincRecord> delayed;
};

class RecordingSink final : public ResultSink {
 public:
  void on_slice(std::uint64_t run_id, const SliceResult& r) override {
    batches.push_back({run_id, r.t_begin, r.t_end,
                       std::vector<CoincRecord>(r.prompts, r.prompts + r.prompt_count),
                       std::vector<CoincRecord>(r.delayed, r.delayed + r.delayed_count)});
  }
  std::vector<Batch> batches;
};

class GpuSlicerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string reason;
    if (!gpu_device_usable(reason)) GTEST_SKIP() << "no usable CUDA device: " << reason;
  }
};

void expect_equals_batch(const RecordingSink& sink, const Counters& counters,
                         const BatchResult& want) {
  std::vector<CoincRecord> prompts, delayed;
  std::uint64_t t_expected = 0;
  for (const Batch& b : sink.batches) {
    EXPECT_EQ(b.t_begin, t_expected);
    EXPECT_LE(b.t_begin, b.t_end);
    t_expected = b.t_end;
    for (const auto* list : {&b.prompts, &b.delayed})
      for (const CoincRecord& r : *list) {
        EXPECT_GE(r.time_a, b.t_begin);
        EXPECT_LT(r.time_a, b.t_end);
      }
    prompts.insert(prompts.end(), b.prompts.begin(), b.prompts.end());
    delayed.insert(delayed.end(), b.delayed.begin(), b.delayed.end());
  }
  EXPECT_TRUE(prompts == want.prompts) << prompts.size() << " prompts, want " << want.prompts.size();
  EXPECT_TRUE(delayed == want.delayed) << delayed.size() << " delayed, want " << want.delayed.size();
  for (Counter k : {Counter::frame_bad_marker, Counter::frame_bad_bdm, Counter::frame_bad_du,
                    Counter::frame_bad_position, Counter::frame_no_crystal, Counter::frame_bad_time,
                    Counter::single_accepted, Counter::single_energy_rejected})
    EXPECT_EQ(counters.get(k), want.counters[k]) << counter_name(k);
  EXPECT_EQ(counters.get(Counter::coinc_prompts), want.counts.prompts);
  EXPECT_EQ(counters.get(Counter::coinc_delayed), want.counts.delayed);
  EXPECT_EQ(counters.get(Counter::coinc_multiples), want.counts.multiples);
  EXPECT_EQ(counters.get(Counter::coinc_delayed_multiples), want.counts.delayed_multiples);
  for (std::uint32_t b = 0; b < counters.bdm_count(); ++b) {
    EXPECT_EQ(counters.bdm_singles(b), want.bdm_singles[b]) << "bdm " << b;
    EXPECT_EQ(counters.bdm_energy_rejected(b), want.bdm_energy_rejected[b]) << "bdm " << b;
  }
}

// Pushes `arrival` in random chunks with a fake clock; now and then the clock jumps past
// stream.max_slice_ms, so slices are cut by time as well as by size.
void push_all(Slicer& slicer, const Settings& s, const std::vector<RawFrame>& arrival,
              std::size_t max_chunk, std::mt19937_64& rng) {
  std::uniform_int_distribution<std::size_t> chunk(1, max_chunk);
  std::uniform_real_distribution<double> u(0, 1);
  const auto slice_time = std::chrono::duration_cast<Slicer::Clock::duration>(
      std::chrono::duration<double, std::milli>(s.stream.max_slice_ms * 1.5));
  Slicer::Clock::time_point now{};
  for (std::size_t i = 0; i < arrival.size();) {
    const std::size_t n = std::min(chunk(rng), arrival.size() - i);
    slicer.push(arrival.data() + i, n, now);
    i += n;
    now += std::chrono::microseconds(1);
    if (u(rng) < 0.05) now += slice_time;
    slicer.poll(now);
  }
}

TEST_F(GpuSlicerTest, StreamingEqualsBatchOverRandomSlicingAndInterleaving) {
  std::mt19937_64 rng(20261122);
  for (int iteration = 0; iteration < 24; ++iteration) {
    SCOPED_TRACE("iteration " + std::to_string(iteration));
    TestScanner scanner(iteration % 3 != 2);
    Settings& s = scanner.settings;
    s.stream.max_slice_ms = 1.0;
    s.stream.source_idle_ms = 1e7;
    s.stream.max_pending_frames = 1 << 16;
    s.stream.max_carry_singles = 1 << 16;
    s.stream.max_records_per_single = 16;
    s.coincidence.window_mode = iteration % 2 ? WindowMode::every_single : WindowMode::first_open;
    s.coincidence.policy = static_cast<Policy>(iteration % 6);
    s.coincidence.window_edge = iteration % 4 < 2 ? WindowEdge::closed : WindowEdge::half_open;
    s.coincidence.delayed.enabled = iteration % 5 != 4;
    s.coincidence.delayed.offset_ps = 1600 * s.scanner.tick_ps;
    s.coincidence.min_sector_difference = iteration % 7 == 3 ? 1 : 0;
    const std::uint64_t disorder_ticks = std::array<std::uint64_t, 4>{0, 50, 700, 5000}[iteration % 4];
    s.stream.max_disorder_ps = static_cast<double>(disorder_ticks) * s.scanner.tick_ps;
    s.stream.max_slice_frames = std::uniform_int_distribution<std::uint64_t>(3, 400)(rng);

    AcquisitionOptions o;
    o.events = 2000;
    // Every fourth acquisition at a very high rate: windows of many members.
    if (iteration % 4 == 3) o.mean_gap_ticks = 40;
    const auto frames = test::random_acquisition(scanner, rng, o);
    const BatchResult want = test::batch_process(scanner, frames);
    ASSERT_EQ(want.records_overflow, 0u);
    ASSERT_GT(want.prompts.size(), 0u);
    const auto arrival = test::arrival_order(frames, disorder_ticks, rng);

    RecordingSink sink;
    Counters counters(scanner.geometry().bdm_count());
    const auto backend = make_gpu_backend(s, scanner.calibration);
    Slicer slicer(s, *backend, sink, counters);
    push_all(slicer, s, arrival, iteration % 3 == 0 ? 4 : 300, rng);
    slicer.finish();

    expect_equals_batch(sink, counters, want);
    EXPECT_EQ(counters.get(Counter::stream_carry_overflow), 0u);
    EXPECT_GT(sink.batches.size(), 5u);
    if (HasFailure()) break;
  }
}

}  // namespace
}  // namespace petdaq

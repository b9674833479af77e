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
#include "tests/support/slicer_rig.h"

namespace petdaq {
namespace {

using test::AcquisitionOptions;
using test::BatchResult;
using test::SlicerRig;
using test::TestScanner;

class GpuSlicerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string reason;
    if (!gpu_device_usable(reason)) GTEST_SKIP() << "no usable CUDA device: " << reason;
  }
};

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
    test::small_stream_settings(s, 16);
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

    // Every other acquisition delivered as petdaq-offline does (slices stay in flight
    // across the timed cuts).
    SlicerRig rig(s, make_gpu_backend(s, scanner.calibration), SlicerRig::Cuts::slicer_default,
                  iteration % 4 < 2 ? Slicer::Delivery::latency : Slicer::Delivery::throughput);
    push_all(rig.slicer, s, arrival, iteration % 3 == 0 ? 4 : 300, rng);
    rig.slicer.finish();

    test::expect_run_equals_batch(rig.sink, 0, want);
    test::expect_counters_equal_batch(rig.counters, want);
    EXPECT_EQ(rig.counters.get(Counter::stream_carry_overflow), 0u);
    EXPECT_GT(rig.sink.batches.size(), 5u);
    if (HasFailure()) break;
  }
}

// A receiving socket's losses on the GPU backend: the frames of a dead range that it holds
// are dropped on the device, record for record as on the CPU.
TEST_F(GpuSlicerTest, ADeadRangeDropsTheFramesOfItThatItHoldsOnEveryBoard) {
  for (const std::uint64_t seed : {31u, 32u, 33u}) {
    TestScanner scanner;
    test::expect_dead_range_drops_what_it_holds(
        scanner, [&](const Settings& s) { return make_gpu_backend(s, scanner.calibration); }, seed);
  }
}

}  // namespace
}  // namespace petdaq

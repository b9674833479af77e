// Live image (core/image.h): the GPU backend against the CPU backend (the reference), voxel
// for voxel, trace sum for trace sum, tally for tally, over the same slice requests, with the
// delayed subtraction on, and again in a second run (the bins start again from zero). Skips
// where no CUDA device is usable.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_backend.h"
#include "core/image.h"
#include "gpu/gpu_backend.h"
#include "tests/core/test_scanner.h"
#include "tests/support/wait.h"

namespace petdaq {
namespace {

using test::TestScanner;

void run(Backend& backend, const std::vector<RawFrame>& frames, std::size_t slice) {
  for (std::size_t at = 0; at < frames.size(); at += slice) {
    if (backend.in_flight() >= backend.max_in_flight()) backend.collect();
    const std::size_t n = std::min(slice, frames.size() - at);
    backend.wait_staged(backend.stage(frames.data() + at, n));
    SliceRequest r;
    r.slice_id = at / slice;
    r.final = at + n == frames.size();
    r.run_start = at == 0;
    r.bound = r.final ? 0 : frame_time(frames[at + n].bytes);
    backend.submit(r);
  }
  while (backend.in_flight() > 0) backend.collect();
}

class GpuImageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string reason;
    if (!gpu_device_usable(reason)) GTEST_SKIP() << "no usable CUDA device: " << reason;
    auto& is = sc.settings.output.image;
    is.enabled = true;
    is.subtract_delayed = true;
    is.voxel_mm = 2.5;
    is.dim_x = is.dim_y = 72;
    is.dim_z = 40;
    is.trace_bin_ms = 0.001;
    is.trace_bins = 64;
    sc.settings.coincidence.delayed.offset_ps = 20'000;
    sc.settings.stream.max_slice_frames = 2048;
    sc.settings.stream.max_carry_singles = 8192;
    std::mt19937_64 rng(9);
    test::AcquisitionOptions o;
    o.events = 40000;
    frames = test::random_acquisition(sc, rng, o);
  }

  static void expect_equal(const ImageSet& cpu, const ImageSet& gpu) {
    ASSERT_EQ(cpu.layout().bytes, gpu.layout().bytes);
    const ImageLayout& l = cpu.layout();
    std::uint64_t mismatches = 0;
    for (std::uint64_t v = 0; v < l.voxel_count; ++v)
      if (cpu.voxels()[v] != gpu.voxels()[v] && mismatches++ < 5)
        ADD_FAILURE() << "voxel " << v << ": cpu " << cpu.voxels()[v] << ", gpu " << gpu.voxels()[v];
    EXPECT_EQ(mismatches, 0u);
    for (std::uint32_t b = 0; b < l.trace_bins; ++b)
      for (int k = 0; k < kTraceSums; ++k)
        EXPECT_EQ(cpu.trace_sum(b, static_cast<TraceSum>(k)), gpu.trace_sum(b, static_cast<TraceSum>(k)))
            << "trace bin " << b << " sum " << k;
    for (int k = 0; k < kImageTallies; ++k)
      EXPECT_EQ(cpu.tally(static_cast<ImageTally>(k)), gpu.tally(static_cast<ImageTally>(k)))
          << "tally " << k;
    EXPECT_GT(cpu.tally(ImageTally::prompts_in), 1000u) << "the test shows nothing";
    EXPECT_GT(cpu.tally(ImageTally::delayed_in), 0u) << "no delayed record was subtracted";
  }

  TestScanner sc;
  std::vector<RawFrame> frames;
};

TEST_F(GpuImageTest, VoxelsTraceAndTalliesEqualTheCpu) {
  CpuBackend cpu(sc.settings, sc.calibration);
  auto gpu = make_gpu_backend(sc.settings, sc.calibration);
  run(cpu, frames, 1500);
  run(*gpu, frames, 1500);
  expect_equal(*cpu.image(), *gpu->image());
  EXPECT_EQ(std::memcmp(cpu.image()->bins(), gpu->image()->bins(), cpu.image()->layout().bytes), 0);
}

// The periodic publication's path: queued without waiting, returned once the copy is in.
TEST_F(GpuImageTest, ASnapshotIsQueuedWithoutWaitingAndEqualsTheCpu) {
  CpuBackend cpu(sc.settings, sc.calibration);
  auto gpu = make_gpu_backend(sc.settings, sc.calibration);
  run(cpu, frames, 1500);
  run(*gpu, frames, 1500);
  EXPECT_EQ(gpu->image_snapshot(), nullptr);
  const ImageSet* snapshot = test::wait_for_snapshot([&] { return gpu->image_snapshot(); });
  ASSERT_NE(snapshot, nullptr) << "the snapshot's copy did not come in within 10 s";
  expect_equal(*cpu.image(), *snapshot);
  EXPECT_EQ(std::memcmp(cpu.image()->bins(), snapshot->bins(), cpu.image()->layout().bytes), 0);
  EXPECT_GT(snapshot->trace_end(), snapshot->trace_first());
}

TEST_F(GpuImageTest, ASecondRunStartsFromZero) {
  CpuBackend cpu(sc.settings, sc.calibration);
  auto gpu = make_gpu_backend(sc.settings, sc.calibration);
  run(cpu, frames, 1000);
  run(*gpu, frames, 1000);
  const std::vector<RawFrame> second(frames.begin() + frames.size() / 2, frames.end());
  run(cpu, second, 700);
  run(*gpu, second, 700);
  expect_equal(*cpu.image(), *gpu->image());
  CpuBackend fresh(sc.settings, sc.calibration);
  run(fresh, second, 700);
  EXPECT_EQ(std::memcmp(cpu.image()->bins(), fresh.image()->bins(), cpu.image()->layout().bytes), 0);
}

}  // namespace
}  // namespace petdaq

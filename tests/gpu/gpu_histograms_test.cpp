// Live histograms and resolved singles: the GPU backend against the CPU backend (the
// reference), bin for bin and single for single, over the same slice requests, including a
// second run (the bins start again from zero). Skips where no CUDA device is usable.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tests/core/test_scanner.h"
#include "tests/support/wait.h"
#include "core/cpu_backend.h"
#include "core/histograms.h"
#include "gpu/gpu_backend.h"

namespace petdaq {
namespace {

using test::TestScanner;

struct Collected {
  std::vector<Single> singles;
  std::vector<std::size_t> single_counts;
};

// Same requests to the backend: slices of `slice` frames, the last one final; up to
// max_in_flight slices queued before collecting.
Collected run(Backend& backend, const std::vector<RawFrame>& frames, std::size_t slice) {
  Collected out;
  auto take = [&] {
    const SliceResult& r = backend.collect();
    out.single_counts.push_back(r.single_count);
    if (r.singles) out.singles.insert(out.singles.end(), r.singles, r.singles + r.single_count);
  };
  for (std::size_t at = 0; at < frames.size(); at += slice) {
    if (backend.in_flight() >= backend.max_in_flight()) take();
    const std::size_t n = std::min(slice, frames.size() - at);
    backend.wait_staged(backend.stage(frames.data() + at, n));
    SliceRequest r;
    r.slice_id = at / slice;
    r.final = at + n == frames.size();
    r.run_start = at == 0;
    r.bound = r.final ? 0 : frame_time(frames[at + n].bytes);
    backend.submit(r);
  }
  while (backend.in_flight() > 0) take();
  return out;
}

class GpuHistogramsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string reason;
    if (!gpu_device_usable(reason)) GTEST_SKIP() << "no usable CUDA device: " << reason;
    auto& hs = sc.settings.output.histograms;
    hs.enabled = true;
    hs.energy_bins = 64;
    hs.energy_max_keV = 900;
    hs.raw_bins = 48;
    hs.raw_bin_adc = 25;
    hs.rate_bins = 32;
    hs.rate_bin_ms = 0.001;
    sc.settings.output.singles.enabled = true;
    sc.settings.coincidence.delayed.offset_ps = 20'000;
    sc.settings.stream.max_slice_frames = 2048;
    sc.settings.stream.max_carry_singles = 8192;
    std::mt19937_64 rng(5);
    test::AcquisitionOptions o;
    o.events = 20000;
    o.bad_fraction = 0.05;
    frames = test::random_acquisition(sc, rng, o);
    std::uniform_int_distribution<int> pixel(0, 15);
    for (RawFrame& f : frames)
      if (f.bytes[frame_offset::x] < 15) {
        f.bytes[frame_offset::x] = static_cast<std::uint8_t>(pixel(rng));
        f.bytes[frame_offset::y] = static_cast<std::uint8_t>(pixel(rng));
      }
  }

  void expect_equal_bins(const HistogramSet& cpu, const HistogramSet& gpu) {
    ASSERT_EQ(cpu.layout().bytes, gpu.layout().bytes);
    for (int i = 0; i < kHistCount; ++i) {
      const Hist id = static_cast<Hist>(i);
      std::uint64_t mismatches = 0;
      for (std::uint64_t k = 0; k < cpu.layout().count[i]; ++k)
        if (cpu.at(id, k) != gpu.at(id, k) && mismatches++ < 5)
          ADD_FAILURE() << hist_name(id) << " bin " << k << ": cpu " << cpu.at(id, k) << ", gpu "
                        << gpu.at(id, k);
      EXPECT_EQ(mismatches, 0u) << hist_name(id);
      // Estimates are derived from the others when published (derive_histograms), not
      // accumulated by a backend: both stay zero here.
      if (hist_is_real(id)) continue;
      EXPECT_GT(cpu.sum(id), 0u) << hist_name(id) << " is empty: the test shows nothing";
    }
  }

  TestScanner sc;
  std::vector<RawFrame> frames;
};

TEST_F(GpuHistogramsTest, BinsAndSinglesEqualTheCpu) {
  CpuBackend cpu(sc.settings, sc.calibration);
  auto gpu = make_gpu_backend(sc.settings, sc.calibration);
  const Collected c = run(cpu, frames, 1500);
  const Collected g = run(*gpu, frames, 1500);
  expect_equal_bins(*cpu.histograms(), *gpu->histograms());
  EXPECT_EQ(c.single_counts, g.single_counts);
  ASSERT_EQ(c.singles.size(), g.singles.size());
  EXPECT_EQ(std::memcmp(c.singles.data(), g.singles.data(), c.singles.size() * sizeof(Single)), 0);
}

// The periodic publication's path: the first call queues the copy and returns null, a later
// one returns the bins once the copy is in; the worker never waits on the device for them.
TEST_F(GpuHistogramsTest, ASnapshotIsQueuedWithoutWaitingAndEqualsTheCpu) {
  CpuBackend cpu(sc.settings, sc.calibration);
  auto gpu = make_gpu_backend(sc.settings, sc.calibration);
  run(cpu, frames, 1500);
  run(*gpu, frames, 1500);
  EXPECT_EQ(gpu->histograms_snapshot(), nullptr);
  const HistogramSet* snapshot = test::wait_for_snapshot([&] { return gpu->histograms_snapshot(); });
  ASSERT_NE(snapshot, nullptr) << "the snapshot's copy did not come in within 10 s";
  expect_equal_bins(*cpu.histograms(), *snapshot);
  EXPECT_EQ(gpu->histograms_snapshot(), nullptr) << "each snapshot is a new copy";
  expect_equal_bins(*cpu.histograms(), *gpu->histograms());  // waits, and takes that copy too
}

TEST_F(GpuHistogramsTest, ASecondRunStartsFromZero) {
  CpuBackend cpu(sc.settings, sc.calibration);
  auto gpu = make_gpu_backend(sc.settings, sc.calibration);
  run(cpu, frames, 1000);
  run(*gpu, frames, 1000);
  const std::vector<RawFrame> second(frames.begin() + frames.size() / 2, frames.end());
  run(cpu, second, 700);
  run(*gpu, second, 700);
  expect_equal_bins(*cpu.histograms(), *gpu->histograms());
  CpuBackend fresh(sc.settings, sc.calibration);
  run(fresh, second, 700);
  EXPECT_EQ(cpu.histograms()->sum(Hist::flood), fresh.histograms()->sum(Hist::flood));
}

}  // namespace
}  // namespace petdaq

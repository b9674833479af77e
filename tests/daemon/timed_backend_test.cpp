// The worker's timing wrapper (core/timed_backend.h) around a backend.
#include "core/timed_backend.h"

#include <gtest/gtest.h>

#include "core/cpu_backend.h"
#include "core/phase_timer.h"
#include "core/settings.h"
#include "tests/core/test_scanner.h"

namespace petdaq::daemon {
namespace {

// The worker's timing wrapper answers the slicer's questions as the backend inside would:
// the CPU backend's slices are collected at once and cut to its cache-sized preference.
TEST(TimedBackend, ForwardsWhatTheSlicerAsksTheBackend) {
  test::TestScanner scanner;
  Settings s = scanner.settings;
  s.stream.max_slice_frames = 1u << 20;
  for (const unsigned threads : {1u, 3u}) {
    s.backend_threads = threads;
    CpuBackend cpu(s, scanner.calibration);
    PhaseTimer timer;
    TimedBackend timed(cpu, timer);
    EXPECT_STREQ(timed.name(), cpu.name());
    EXPECT_TRUE(timed.works_in_collect());
    EXPECT_EQ(timed.preferred_slice_frames(), cpu.preferred_slice_frames());
    EXPECT_EQ(cpu.preferred_slice_frames(), CpuBackend::kCacheSliceFrames * threads);
    EXPECT_LT(timed.preferred_slice_frames(), timed.max_slice_frames() / 2);
    EXPECT_EQ(timed.max_slice_frames(), cpu.max_slice_frames());
    EXPECT_EQ(timed.max_staged_frames(), cpu.max_staged_frames());
    EXPECT_EQ(timed.max_in_flight(), cpu.max_in_flight());
  }
}

}  // namespace
}  // namespace petdaq::daemon

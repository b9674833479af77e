// What the CPU backend and the slicer report as their memory (the start-up memory check sums
// it, daemon/preflight.cpp) against what their construction allocates, measured on the heap.
#include <malloc.h>

#include <gtest/gtest.h>

#include <cstddef>

#include "core/cpu_backend.h"
#include "core/slicer.h"
#include "test_scanner.h"

namespace petdaq {
namespace {

std::size_t heap_in_use() {
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}

class NullSink final : public ResultSink {
 public:
  void on_slice(std::uint64_t, const SliceResult&) override {}
};

constexpr std::size_t kMiB = 1u << 20;

void large_buffers(Settings& s) {
  // Large enough that leaving out any one buffer shows beyond the slack below.
  s.stream.max_slice_frames = 1u << 18;
  s.stream.max_pending_frames = 1u << 22;
  s.stream.max_carry_singles = 1u << 16;
  s.stream.max_records_per_single = 2;
}

struct Measured {
  std::size_t reported;
  std::size_t used;
};

// Allocated, untouched: the buffers cost no physical memory here.
Measured measure(const Settings& s, const Calibration& cal) {
  Measured m{CpuBackend::memory_bytes(s), 0};
  const std::size_t before = heap_in_use();
  CpuBackend backend(s, cal);
  m.used = heap_in_use() - before;
  return m;
}

TEST(MemoryBytes, CpuBackendReportsEachBufferItMakes) {
  test::TestScanner scanner;
  Settings base = scanner.settings;
  large_buffers(base);
  base.backend_threads = 1;
  base.coincidence.delayed.enabled = false;
  measure(base, scanner.calibration);  // the first construction also sets up the allocator
  const Measured b = measure(base, scanner.calibration);
  EXPECT_LE(b.reported, b.used) << "reported more than the construction allocated";
  // Besides: the calibration's two huge-page copies (each up to 4 MiB with its alignment)
  // and small bookkeeping.
  EXPECT_LE(b.used, b.reported + 9 * kMiB)
      << "the construction allocated " << b.used - b.reported << " bytes more than reported";

  // Each setting that sizes a buffer: the allocation grows as the report does.
  struct Variation {
    const char* what;
    void (*change)(Settings&);
    std::size_t slack;
  };
  const Variation variations[] = {
      {"max_pending_frames", [](Settings& s) { s.stream.max_pending_frames *= 2; }, kMiB},
      {"max_slice_frames", [](Settings& s) { s.stream.max_slice_frames *= 2; }, kMiB},
      {"max_carry_singles", [](Settings& s) { s.stream.max_carry_singles *= 4; }, kMiB},
      {"max_records_per_single", [](Settings& s) { s.stream.max_records_per_single = 4; }, kMiB},
      {"delayed", [](Settings& s) { s.coincidence.delayed.enabled = true; }, kMiB},
      // A histogram set lies on whole huge pages.
      {"histograms", [](Settings& s) { s.output.histograms.enabled = true; }, 5 * kMiB},
      {"image", [](Settings& s) { s.output.image.enabled = true; }, kMiB},
      {"singles", [](Settings& s) { s.output.singles.enabled = true; }, kMiB},
      {"threads", [](Settings& s) { s.backend_threads = 3; }, kMiB},
      {"threads with histograms",
       [](Settings& s) {
         s.backend_threads = 3;
         s.output.histograms.enabled = true;
       },
       13 * kMiB},
  };
  for (const Variation& v : variations) {
    Settings s = base;
    v.change(s);
    const Measured m = measure(s, scanner.calibration);
    const double grew_reported = static_cast<double>(m.reported) - static_cast<double>(b.reported);
    const double grew_used = static_cast<double>(m.used) - static_cast<double>(b.used);
    EXPECT_GT(grew_reported, 0) << v.what;
    EXPECT_NEAR(grew_used, grew_reported, static_cast<double>(v.slack)) << v.what;
  }
}

TEST(MemoryBytes, Slicer) {
  test::TestScanner scanner;
  Settings s = scanner.settings;
  large_buffers(s);
  s.backend_threads = 1;
  CpuBackend backend(s, scanner.calibration);
  Counters counters(scanner.geometry().bdm_count());
  NullSink sink;
  const std::size_t reported = Slicer::memory_bytes(s, backend.max_slice_frames());
  const std::size_t before = heap_in_use();
  Slicer slicer(s, backend, sink, counters);
  const std::size_t used = heap_in_use() - before;
  EXPECT_GE(reported, 64 * kMiB) << "the frames held for the next run";
  EXPECT_LE(reported, used);
  EXPECT_LE(used, reported + 64 * 1024);
}

}  // namespace
}  // namespace petdaq

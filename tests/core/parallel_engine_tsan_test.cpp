// The threaded CPU backend under ThreadSanitizer: a streamed acquisition with histograms
// and the singles topic on 3 threads, pieces made small so every stage splits; the records,
// singles, counters and histograms must equal one thread's (also with blocks staged between
// a submit and its collect), and TSan must see no race; and the thread pool's hand-over on
// its own.
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/cpu_backend.h"
#include "core/histograms.h"
#include "core/thread_pool.h"
#include "test_scanner.h"

namespace petdaq {
namespace {

struct Collected {
  std::vector<CoincRecord> prompts, delayed;
  std::vector<Single> singles;
  std::vector<std::uint64_t> counters;
  std::vector<std::uint8_t> histograms;
  ParallelStats stats;
};

// `early`: each slice's first block is staged between the submit and the collect of the
// slice before (the planned take runs first, on the pool).
Collected run(const test::TestScanner& scanner, const std::vector<RawFrame>& frames,
              unsigned threads, bool deferred = false, bool early = false) {
  Settings s = scanner.settings;
  s.stream.max_slice_frames = frames.size();
  s.coincidence.policy = Policy::take_all_goods;
  s.output.histograms.enabled = true;
  s.output.singles.enabled = true;
  s.backend_threads = threads;
  CpuBackendOptions options;
  options.min_parallel_frames = 16;
  CpuBackend backend(s, scanner.calibration, options);
  backend.defer_staging(deferred);
  Collected c;
  c.counters.assign(kCounterCount, 0);
  constexpr std::size_t kSlices = 6;
  const auto bounds = [&](std::size_t k) {
    const std::size_t first = frames.size() * k / kSlices;
    const std::size_t last = frames.size() * (k + 1) / kSlices;
    // Two blocks, so that a deferred copy crosses from one to the next.
    return std::array<std::size_t, 3>{first, first + (last - first) / 3, last};
  };
  for (std::size_t k = 0; k < kSlices; ++k) {
    const auto [first, middle, last] = bounds(k);
    if (!early || k == 0) backend.stage(frames.data() + first, middle - first);
    backend.stage(frames.data() + middle, last - middle);
    SliceRequest r;
    r.run_start = k == 0;
    r.final = k + 1 == kSlices;
    r.bound = last < frames.size() ? frame_time(frames[last].bytes) : 0;
    backend.submit(r);
    if (early && k + 1 < kSlices) {
      const auto next = bounds(k + 1);
      backend.stage(frames.data() + next[0], next[1] - next[0]);
    }
    const SliceResult& out = backend.collect();
    c.prompts.insert(c.prompts.end(), out.prompts, out.prompts + out.prompt_count);
    c.delayed.insert(c.delayed.end(), out.delayed, out.delayed + out.delayed_count);
    c.singles.insert(c.singles.end(), out.singles, out.singles + out.single_count);
    for (std::size_t i = 0; i < kCounterCount; ++i) c.counters[i] += out.counters.value[i];
  }
  const HistogramSet* h = backend.histograms();
  c.histograms.assign(h->bins(), h->bins() + h->layout().bytes);
  c.stats = backend.parallel_stats();
  return c;
}

TEST(ParallelEngineTsan, ThreeThreadsEqualOneWithoutRaces) {
  test::TestScanner scanner;
  std::mt19937_64 rng(41);
  test::AcquisitionOptions o;
  o.events = 1500;
  const std::vector<RawFrame> frames = test::random_acquisition(scanner, rng, o);
  const Collected one = run(scanner, frames, 1);
  for (const bool early : {false, true})
  for (const bool deferred : {false, true}) {
  SCOPED_TRACE(std::string(deferred ? "deferred staging" : "staging at once") +
               (early ? ", blocks staged before the collect" : ""));
  const Collected three = run(scanner, frames, 3, deferred, early);
  ASSERT_GT(one.prompts.size(), 100u);
  ASSERT_EQ(one.prompts.size(), three.prompts.size());
  EXPECT_EQ(std::memcmp(one.prompts.data(), three.prompts.data(), one.prompts.size() * sizeof(CoincRecord)), 0);
  ASSERT_EQ(one.delayed.size(), three.delayed.size());
  EXPECT_EQ(std::memcmp(one.delayed.data(), three.delayed.data(), one.delayed.size() * sizeof(CoincRecord)), 0);
  ASSERT_EQ(one.singles.size(), three.singles.size());
  EXPECT_EQ(std::memcmp(one.singles.data(), three.singles.data(), one.singles.size() * sizeof(Single)), 0);
  EXPECT_EQ(one.counters, three.counters);
  EXPECT_TRUE(one.histograms == three.histograms);
  EXPECT_GT(three.stats.coincidence_seams, 0u);
  EXPECT_GT(three.stats.convert_calls, 0u);
  }
}

// The pool's hand-over: what tasks write is seen by the caller after run(), and what the
// caller wrote before run() is seen by the tasks, over many runs and an exception.
TEST(ParallelEngineTsan, ThreadPoolRunsPublishTheirWrites) {
  ThreadPool pool(4);
  std::vector<std::uint64_t> in(64), out(64);
  for (std::uint64_t round = 1; round <= 200; ++round) {
    for (std::size_t i = 0; i < in.size(); ++i) in[i] = round * 1000 + i;
    const std::size_t tasks = 1 + round % in.size();
    pool.run(tasks, [&](std::size_t i) { out[i] = in[i] * 2; });
    for (std::size_t i = 0; i < tasks; ++i) ASSERT_EQ(out[i], (round * 1000 + i) * 2);
  }
  EXPECT_THROW(pool.run(16,
                        [&](std::size_t i) {
                          out[i] = i;
                          if (i % 5 == 1) throw std::runtime_error("task");
                        }),
               std::runtime_error);
  for (std::size_t i = 0; i < 16; ++i) EXPECT_EQ(out[i], i);
}

}  // namespace
}  // namespace petdaq

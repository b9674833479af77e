// A simulated acquisition (petdaq-sim, with time offsets, scatter and randoms) through the
// CPU backend on 2, 3 and 7 threads against one thread, streamed in slices with carry-over:
// every slice's records, singles, interval, carry and counters identical, for every policy,
// both window modes, both edges, delayed on and off.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "core/calibration.h"
#include "core/cpu_backend.h"
#include "sim_fixture.h"

namespace petdaq::sim {
namespace {

struct Slices {
  std::vector<std::vector<std::uint8_t>> bytes;  // per slice: everything it returned
  ParallelStats stats;
  std::uint64_t records = 0;  // prompts and delayed
};

template <class T>
void append(std::vector<std::uint8_t>& out, const T* p, std::size_t n) {
  const auto* b = reinterpret_cast<const std::uint8_t*>(p);
  out.insert(out.end(), b, b + n * sizeof(T));
}

Slices run(Settings s, const Calibration& cal, const std::vector<RawFrame>& frames,
           unsigned threads) {
  s.backend_threads = threads;
  s.stream.max_slice_frames = frames.size();
  s.stream.max_pending_frames = frames.size();
  s.output.singles.enabled = true;
  CpuBackendOptions options;
  options.min_parallel_frames = 64;
  CpuBackend backend(s, cal, options);
  const std::uint32_t bdms = Geometry::from(s.scanner).bdm_count();
  Slices out;
  constexpr std::size_t kSlices = 12;
  std::uint64_t latest = 0;
  for (std::size_t k = 0; k < kSlices; ++k) {
    const std::size_t first = frames.size() * k / kSlices;
    const std::size_t last = frames.size() * (k + 1) / kSlices;
    for (std::size_t i = first; i < last; ++i) latest = std::max(latest, frame_time(frames[i].bytes));
    backend.stage(frames.data() + first, last - first);
    SliceRequest r;
    r.run_start = k == 0;
    r.final = k + 1 == kSlices;
    r.bound = latest > 20000 ? latest - 20000 : 0;  // behind the simulator's disorder
    backend.submit(r);
    const SliceResult& x = backend.collect();
    std::vector<std::uint8_t> b;
    const std::uint64_t head[] = {x.t_begin, x.t_end, x.carry_count, x.frames_taken,
                                  x.frames_dropped, x.bound, x.split};
    append(b, head, std::size(head));
    out.records += x.prompt_count + x.delayed_count;
    append(b, x.prompts, x.prompt_count);
    append(b, x.delayed, x.delayed_count);
    append(b, x.singles, x.single_count);
    append(b, x.counters.value.data(), x.counters.value.size());
    append(b, x.bdm_singles, bdms);
    append(b, x.bdm_energy_rejected, bdms);
    out.bytes.push_back(std::move(b));
  }
  out.stats = backend.parallel_stats();
  return out;
}

TEST(SimThreads, ThreadsGiveTheOneThreadSlicesForEveryPolicyAndMode) {
  testing::ScratchDir dir;
  SimOptions o;
  o.duration_s = 0.01;
  o.activity_MBq = 3.0;
  const SimSummary summary = simulate(testing::write_small_config(dir.path()), dir.path(), o);
  ASSERT_GT(summary.frames, 5000u);
  Settings settings = load_settings(dir.path() / "petdaq.yaml");
  const Calibration cal = load_calibration(settings);
  const std::vector<std::uint8_t> file = testing::read_bytes(dir.path() / "frames.bin");
  std::vector<RawFrame> frames(file.size() / kFrameBytes);
  std::memcpy(frames.data(), file.data(), frames.size() * kFrameBytes);

  const Policy policies[] = {Policy::kill_multiples,          Policy::take_all_goods,
                             Policy::take_winner_of_goods,    Policy::take_winner_if_good,
                             Policy::take_winner_if_all_good, Policy::kill_all_if_multiple_goods};
  std::uint64_t records = 0;
  for (const Policy policy : policies)
    for (const WindowMode mode : {WindowMode::first_open, WindowMode::every_single})
      for (const WindowEdge edge : {WindowEdge::closed, WindowEdge::half_open})
        for (const bool delayed : {false, true}) {
          Settings s = settings;
          s.coincidence.policy = policy;
          s.coincidence.window_mode = mode;
          s.coincidence.window_edge = edge;
          s.coincidence.delayed.enabled = delayed;
          SCOPED_TRACE(std::string(to_string(policy)) + " " + to_string(mode) + " " +
                       to_string(edge) + " delayed " + std::to_string(delayed));
          const Slices one = run(s, cal, frames, 1);
          records += one.records;
          for (const unsigned t : {2u, 3u, 7u}) {
            const Slices many = run(s, cal, frames, t);
            ASSERT_EQ(one.bytes.size(), many.bytes.size());
            for (std::size_t k = 0; k < one.bytes.size(); ++k)
              EXPECT_TRUE(one.bytes[k] == many.bytes[k]) << t << " threads, slice " << k;
            EXPECT_GT(many.stats.coincidence_seams, 0u);
            EXPECT_GT(many.stats.sort_ranges, 0u);
          }
          if (::testing::Test::HasFailure()) return;
        }
  EXPECT_GT(records, 3000u);
}

}  // namespace
}  // namespace petdaq::sim

// The slicer and CpuBackend under AddressSanitizer and UBSan on hostile input: random bytes,
// wild timestamps, clock resets, tiny buffers. Nothing may crash or read out of bounds, and
// every frame pushed is accounted for exactly once: converted (a frame.* or single.*
// counter) or dropped by the slicer (stream.late, stream.time_jump, stream.pending_full).
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "core/cpu_backend.h"
#include "core/slicer.h"
#include "test_scanner.h"

namespace petdaq {
namespace {

class CountingSink final : public ResultSink {
 public:
  void on_slice(std::uint64_t run_id, const SliceResult& r) override {
    EXPECT_GE(run_id, last_run);
    if (run_id != last_run) t_end = 0;
    EXPECT_EQ(r.t_begin, t_end);
    EXPECT_LE(r.t_begin, r.t_end);
    t_end = r.t_end;
    last_run = run_id;
    for (std::size_t i = 0; i < r.prompt_count; ++i) EXPECT_NE(r.prompts[i].crystal_a, r.prompts[i].crystal_b);
    records += r.prompt_count + r.delayed_count;
  }
  void on_run_end(std::uint64_t, RunEnd) override { t_end = 0; }
  std::uint64_t last_run = 0;
  std::uint64_t t_end = 0;
  std::uint64_t records = 0;
};

std::uint64_t accounted(const Counters& c) {
  std::uint64_t n = 0;
  for (Counter k : {Counter::frame_bad_marker, Counter::frame_bad_bdm, Counter::frame_bad_du,
                    Counter::frame_bad_position, Counter::frame_no_crystal, Counter::frame_bad_time,
                    Counter::single_accepted, Counter::single_energy_rejected, Counter::stream_late,
                    Counter::stream_time_jump, Counter::stream_pending_full})
    n += c.get(k);
  return n;
}

TEST(SlicerAsan, HostileInputIsCountedNeverFatal) {
  std::mt19937_64 rng(5);
  CounterDelta total;
  for (int iteration = 0; iteration < 12; ++iteration) {
    SCOPED_TRACE("iteration " + std::to_string(iteration));
    test::TestScanner scanner(iteration % 2 == 0);
    Settings& s = scanner.settings;
    s.stream.max_slice_frames = 1 + iteration % 7;
    s.stream.max_pending_frames = 16 + 40 * (iteration % 3);
    s.stream.max_carry_singles = iteration % 4;
    s.stream.max_records_per_single = 1;
    s.stream.max_disorder_ps = 300 * s.scanner.tick_ps;
    s.stream.max_future_ps = 30'000 * s.scanner.tick_ps;
    s.stream.source_idle_ms = 1.0;
    s.stream.max_slice_ms = 0.5;
    s.coincidence.policy = static_cast<Policy>(iteration % 6);
    s.coincidence.window_mode = iteration % 3 == 1 ? WindowMode::every_single : WindowMode::first_open;

    test::AcquisitionOptions o;
    o.events = 800;
    o.start_ticks = 1'000'000;
    std::vector<RawFrame> frames = test::random_acquisition(scanner, rng, o);
    // A clock reset half way, then garbage: random bytes, wild and zero times.
    test::AcquisitionOptions after = o;
    after.start_ticks = 100;
    const auto second = test::random_acquisition(scanner, rng, after);
    frames.insert(frames.end(), second.begin(), second.end());
    std::uniform_int_distribution<int> byte(0, 255);
    std::uniform_real_distribution<double> u(0, 1);
    for (RawFrame& f : frames) {
      const double r = u(rng);
      if (r < 0.03) {
        for (auto& b : f.bytes) b = static_cast<std::uint8_t>(byte(rng));
      } else if (r < 0.05) {
        bytes::store_be64(f.bytes + frame_offset::time, rng());
      } else if (r < 0.06) {
        bytes::store_be64(f.bytes + frame_offset::time, 0);
      }
    }

    CountingSink sink;
    Counters counters(scanner.geometry().bdm_count());
    CpuBackend backend(s, scanner.calibration);
    Slicer slicer(s, backend, sink, counters);
    Slicer::Clock::time_point now{};
    std::uniform_int_distribution<std::size_t> chunk(1, 40);
    for (std::size_t i = 0; i < frames.size();) {
      const std::size_t n = std::min(chunk(rng), frames.size() - i);
      slicer.push(frames.data() + i, n, now);
      i += n;
      now += std::chrono::microseconds(u(rng) < 0.1 ? 2000 : 10);
      slicer.poll(now);
    }
    slicer.finish();
    EXPECT_EQ(accounted(counters), frames.size());
    EXPECT_EQ(slicer.pending_frames(), 0u);
    EXPECT_GT(counters.get(Counter::frame_bad_marker), 0u);
    for (std::size_t k = 0; k < kCounterCount; ++k) total.value[k] += counters.get(static_cast<Counter>(k));
  }
  // The input reached every path it was made for.
  for (Counter k : {Counter::stream_late, Counter::stream_time_jump, Counter::stream_pending_full,
                    Counter::stream_runs, Counter::stream_source_idle, Counter::stream_carry_overflow,
                    Counter::coinc_records_overflow, Counter::frame_bad_time})
    EXPECT_GT(total[k], 0u) << counter_name(k);
}

}  // namespace
}  // namespace petdaq

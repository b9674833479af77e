// Lagging sources and dead time in the slicer (DESIGN section 6): a source that falls behind
// stops holding the horizon and loses only its own frames, counted per BDM, to the frame; it
// holds the horizon again once it catches up; a stage filled by one source's wait declares it
// lagging; acquisition time shed as dead time moves the horizon on without a time jump.
#include <gtest/gtest.h>

#include "core/chunk_summary.h"

#include <algorithm>
#include <functional>
#include <random>
#include <vector>

#include "core/geometry.h"
#include "core/slicer.h"
#include "test_scanner.h"
#include "tests/support/slicer_rig.h"

namespace petdaq {
namespace {

using test::AcquisitionOptions;
using test::BatchResult;
using test::SlicerRig;
using test::TestScanner;

// Independent pairs (every single opens a window, every good pair is taken), so that the
// pairs of two boards do not depend on a third board's singles.
void pair_settings(Settings& s) {
  s.coincidence.window_mode = WindowMode::every_single;
  s.coincidence.policy = Policy::take_all_goods;
  s.stream.max_slice_ms = 1.0;
  s.stream.source_idle_ms = 1e7;  // the fake clock never makes a source idle
  s.stream.max_pending_frames = 1 << 16;
  s.stream.max_carry_singles = 1 << 16;
  s.stream.max_records_per_single = 16;
  s.stream.max_slice_frames = 512;  // slices are cut by frames (the fake clock stands still)
  s.stream.max_disorder_ps = 100 * s.scanner.tick_ps;
  s.stream.max_future_ps = 20'000 * s.scanner.tick_ps;  // far less than the lag
}

double ticks_to_ms(const Settings& s, std::uint64_t ticks) {
  return static_cast<double>(ticks) * s.scanner.tick_ps * 1e-9;
}

std::uint32_t bdm_of(const Geometry& g, std::uint32_t crystal) { return g.address_of(crystal).bdm; }

// The records that pass `keep`, in order.
std::vector<CoincRecord> only(const std::vector<CoincRecord>& in,
                              const std::function<bool(const CoincRecord&)>& keep) {
  std::vector<CoincRecord> out;
  for (const CoincRecord& r : in)
    if (keep(r)) out.push_back(r);
  return out;
}

// The pairs alone: a window's multiplicity counts the singles the daemon kept, which the
// lagging board's late frames are not (they are counted instead).
std::vector<CoincRecord> pairs(std::vector<CoincRecord> in) {
  for (CoincRecord& r : in) r.flags &= coinc_flag::delayed;
  return in;
}

void expect_same(const std::vector<CoincRecord>& got, const std::vector<CoincRecord>& want,
                 const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_TRUE(got[i] == want[i]) << what << " " << i << ": " << got[i].time_a << " " << got[i].dt << " " << got[i].crystal_a << " " << got[i].crystal_b << " " << got[i].flags << " vs " << want[i].time_a << " " << want[i].dt << " " << want[i].crystal_a << " " << want[i].crystal_b << " " << want[i].flags;
}

// Pushes frames in arrival order (stable sort by `arrival`), 64 at a time, on a clock that
// never moves (no source idles), polling after each push.
void stream(Slicer& slicer, const std::vector<RawFrame>& frames,
            const std::vector<std::uint64_t>& arrival,
            const std::function<void(std::size_t)>& after_push = {}) {
  std::vector<std::size_t> order(frames.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return arrival[a] < arrival[b]; });
  const Slicer::Clock::time_point now{};
  std::vector<RawFrame> block;
  for (std::size_t k = 0; k < order.size(); ++k) {
    block.push_back(frames[order[k]]);
    if (block.size() == 64 || k + 1 == order.size()) {
      slicer.push(block.data(), block.size(), now);
      block.clear();
      slicer.poll(now);
      if (after_push) after_push(k);
    }
  }
}

std::uint64_t frames_of(const std::vector<RawFrame>& frames, std::uint32_t bdm) {
  return static_cast<std::uint64_t>(std::count_if(frames.begin(), frames.end(), [&](const RawFrame& f) {
    return f.bytes[frame_offset::bdm] == bdm;
  }));
}

// Frames of one BDM the batch definition finds without a crystal (no per-BDM counter).
std::uint64_t no_crystal_of(const TestScanner& sc, const std::vector<RawFrame>& frames,
                            std::uint32_t bdm) {
  std::vector<RawFrame> mine;
  for (const RawFrame& f : frames)
    if (f.bytes[frame_offset::bdm] == bdm) mine.push_back(f);
  return test::batch_process(sc, mine).counters[Counter::frame_no_crystal];
}

// BDM 1's link runs at 0.6 of real time: its frames arrive at 5/3 of their time.
struct SlowBoard {
  static constexpr std::uint32_t kSlow = 1;
  TestScanner scanner;
  AcquisitionOptions o;
  std::vector<RawFrame> frames;
  BatchResult want;
  std::vector<std::uint64_t> arrival;
  SlowBoard() {
    std::mt19937_64 rng(5);
    Settings& s = scanner.settings;
    pair_settings(s);
    s.stream.max_lag_ms = ticks_to_ms(s, 50'000);
    s.stream.lag_stage_fraction = 0;
    o.events = 6000;
    o.bad_fraction = 0;
    frames = test::random_acquisition(scanner, rng, o);
    want = test::batch_process(scanner, frames);
    for (const RawFrame& f : frames) {
      const std::uint64_t t = frame_time(f.bytes);
      arrival.push_back(f.bytes[frame_offset::bdm] == kSlow ? o.start_ticks + (t - o.start_ticks) * 5 / 3 : t);
    }
  }
  // The on-time boards' pairs are the batch's; every frame of BDM 1 is a single, an energy
  // reject, a frame without a crystal or late, and only BDM 1 has late frames.
  void expect_only_the_slow_board_lost(const SlicerRig& rig) const {
    const Geometry g = scanner.geometry();
    auto on_time = [&](const CoincRecord& r) {
      return bdm_of(g, r.crystal_a) != kSlow && bdm_of(g, r.crystal_b) != kSlow;
    };
    expect_same(pairs(only(rig.sink.prompts(), on_time)), pairs(only(want.prompts, on_time)), "prompt");
    expect_same(pairs(only(rig.sink.delayed(), on_time)), pairs(only(want.delayed, on_time)), "delayed");
    EXPECT_EQ(rig.counters.get(Counter::stream_source_lagging), 1u);
    EXPECT_EQ(rig.counters.get(Counter::stream_runs), 0u);
    EXPECT_EQ(rig.counters.get(Counter::stream_time_jump), 0u);
    EXPECT_EQ(rig.counters.get(Counter::stream_pending_full), 0u);
    const std::uint64_t late = rig.counters.bdm_late(kSlow);
    EXPECT_GT(late, frames_of(frames, kSlow) / 10);
    EXPECT_EQ(rig.counters.get(Counter::stream_late), late);
    for (std::uint32_t b = 0; b < 4; ++b) {
      if (b == kSlow) continue;
      EXPECT_EQ(rig.counters.bdm_late(b), 0u) << "bdm " << b;
      EXPECT_EQ(rig.counters.bdm_singles(b), want.bdm_singles[b]) << "bdm " << b;
    }
    EXPECT_EQ(frames_of(frames, kSlow), rig.counters.bdm_singles(kSlow) +
                                            rig.counters.bdm_energy_rejected(kSlow) + late +
                                            no_crystal_of(scanner, frames, kSlow));
  }
};

// BDM 1's link runs at 0.6 of real time: it falls further and further behind. The other
// boards lose nothing (their pairs are the batch's), BDM 1 holds the horizon until it is
// max_lag behind, then its frames behind the horizon are late — counted for BDM 1, to the
// frame — and none is taken for a clock reset or a time jump.
TEST(SlicerLag, ASlowBoardLosesOnlyItsOwnFramesCountedPerBdm) {
  const SlowBoard c;
  ASSERT_GT(frame_time(c.frames.back().bytes) - c.o.start_ticks, 200'000u);
  SlicerRig rig(c.scanner.settings, c.scanner.calibration);
  bool seen_lagging = false;
  stream(rig.slicer, c.frames, c.arrival, [&](std::size_t) {
    seen_lagging = seen_lagging || rig.slicer.source_lagging(SlowBoard::kSlow);
    for (std::uint32_t b = 0; b < 4; ++b)
      if (b != SlowBoard::kSlow) ASSERT_FALSE(rig.slicer.source_lagging(b)) << "bdm " << b;
  });
  EXPECT_TRUE(seen_lagging);
  rig.slicer.finish();
  c.expect_only_the_slow_board_lost(rig);
}

// The same slow board, its frames in blocks of its own as a receiver per board makes them
// (push_block with their summaries): its blocks wholly behind the horizon are counted late
// from their summaries, and the count is still the frame-by-frame one, to the frame.
TEST(SlicerLag, ASlowBoardsBlocksBehindTheHorizonAreLateToTheFrame) {
  const SlowBoard c;
  std::vector<std::size_t> order(c.frames.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return c.arrival[a] < c.arrival[b]; });
  SlicerRig rig(c.scanner.settings, c.scanner.calibration);
  const SourceRule rule = make_source_rule(c.scanner.settings);
  const Slicer::Clock::time_point now{};
  std::vector<std::vector<RawFrame>> blocks(4);
  auto push = [&](std::vector<RawFrame>& b) {
    if (b.empty()) return;
    ChunkSummary sum;
    sum.add(b.data(), b.size(), 0, rule);
    rig.slicer.push_block(b.data(), b.size(), sum, now);
    rig.slicer.poll(now);
    b.clear();
  };
  for (std::size_t i : order) {
    auto& b = blocks[c.frames[i].bytes[frame_offset::bdm]];
    b.push_back(c.frames[i]);
    if (b.size() == 16) push(b);
  }
  for (auto& b : blocks) push(b);
  rig.slicer.finish();
  c.expect_only_the_slow_board_lost(rig);
}

// BDM 2 goes silent (not idle: its link stalls) for the middle third of the acquisition,
// then sends its backlog at once and from then on `delay` after the other boards. The checks
// both cases below share: it lagged, it holds the horizon again by the end, every record from
// `rejoined_by` after the backlog on is the batch's, the other boards lost nothing, and each
// of its frames is taken, rejected or late.
struct StalledBoard {
  static constexpr std::uint32_t kBdm = 2;
  TestScanner scanner;
  AcquisitionOptions o;
  std::vector<RawFrame> frames;
  BatchResult want;
  std::uint64_t t1 = 0, t2 = 0;

  StalledBoard(std::uint64_t max_lag_ticks, std::uint64_t max_future_ticks) {
    std::mt19937_64 rng(9);
    Settings& s = scanner.settings;
    pair_settings(s);
    s.stream.max_lag_ms = ticks_to_ms(s, max_lag_ticks);
    if (max_future_ticks) s.stream.max_future_ps = static_cast<double>(max_future_ticks) * s.scanner.tick_ps;
    s.stream.lag_stage_fraction = 0;
    o.events = 6000;
    o.bad_fraction = 0;
    frames = test::random_acquisition(scanner, rng, o);
    want = test::batch_process(scanner, frames);
    const std::uint64_t end = frame_time(frames.back().bytes);
    t1 = o.start_ticks + (end - o.start_ticks) / 3;
    t2 = o.start_ticks + 2 * (end - o.start_ticks) / 3;
  }

  void run(SlicerRig& rig, std::uint64_t delay, std::uint64_t rejoined_by) const {
    std::vector<std::uint64_t> arrival;
    for (const RawFrame& f : frames) {
      const std::uint64_t t = frame_time(f.bytes);
      const bool mine = f.bytes[frame_offset::bdm] == kBdm;
      arrival.push_back(!mine || t < t1 ? t : t < t2 ? t2 + delay : t + delay);
    }
    bool seen_lagging = false;
    stream(rig.slicer, frames, arrival,
           [&](std::size_t) { seen_lagging = seen_lagging || rig.slicer.source_lagging(kBdm); });
    EXPECT_TRUE(seen_lagging);
    EXPECT_FALSE(rig.slicer.source_lagging(kBdm)) << "it is back but does not hold the horizon";
    rig.slicer.finish();

    const Geometry g = scanner.geometry();
    auto after = [&](const CoincRecord& r) { return r.time_a >= t2 + rejoined_by; };
    expect_same(only(rig.sink.prompts(), after), only(want.prompts, after), "prompt after it rejoined");
    auto others = [&](const CoincRecord& r) {
      return bdm_of(g, r.crystal_a) != kBdm && bdm_of(g, r.crystal_b) != kBdm;
    };
    expect_same(pairs(only(rig.sink.prompts(), others)), pairs(only(want.prompts, others)), "prompt");
    EXPECT_EQ(rig.counters.get(Counter::stream_source_lagging), 1u);
    EXPECT_EQ(rig.counters.get(Counter::stream_runs), 0u);
    EXPECT_EQ(rig.counters.get(Counter::stream_time_jump), 0u);
    EXPECT_GT(rig.counters.bdm_late(kBdm), 0u);
    EXPECT_EQ(rig.counters.get(Counter::stream_late), rig.counters.bdm_late(kBdm));
    EXPECT_EQ(frames_of(frames, kBdm),
              rig.counters.bdm_singles(kBdm) + rig.counters.bdm_energy_rejected(kBdm) +
                  rig.counters.bdm_late(kBdm) + no_crystal_of(scanner, frames, kBdm));
  }
};

// It catches up: once back on time it holds the horizon again and loses nothing more.
TEST(SlicerLag, ABoardThatCatchesUpHoldsTheHorizonAgain) {
  const StalledBoard c(40'000, 0);
  ASSERT_GT(c.t2 - c.t1, 200'000u);
  SlicerRig rig(c.scanner.settings, c.scanner.calibration);
  c.run(rig, 0, 1000);  // a window's margin after the backlog
}

// Its link stays slower than the others': its frames keep arriving 50 000 ticks after theirs
// (far more than max_disorder, less than half of max_future and of max_lag), so that it never
// again reaches the horizon the others moved on. It holds the horizon again all the same and
// loses nothing more; before, it stayed lagging, every later frame late, until the run ended.
TEST(SlicerLag, ABoardThatStaysALittleBehindHoldsTheHorizonAgain) {
  constexpr std::uint64_t kDelay = 50'000;
  const StalledBoard c(200'000, 200'000);
  ASSERT_GT(c.t2 - c.t1, 2 * 200'000u);  // the stall makes it lag
  ASSERT_GT(frame_time(c.frames.back().bytes) - c.t2, 8 * kDelay);
  SlicerRig rig(c.scanner.settings, c.scanner.calibration);
  c.run(rig, kDelay, 4 * kDelay);
  // Late: its backlog, and no more than the frames of the few delays after it.
  std::uint64_t backlog = 0, up_to_rejoin = 0;
  for (const RawFrame& f : c.frames) {
    if (f.bytes[frame_offset::bdm] != StalledBoard::kBdm) continue;
    const std::uint64_t t = frame_time(f.bytes);
    backlog += t >= c.t1 && t < c.t2;
    up_to_rejoin += t >= c.t1 && t < c.t2 + 4 * kDelay;
  }
  EXPECT_GE(rig.counters.bdm_late(StalledBoard::kBdm), backlog / 2);
  EXPECT_LE(rig.counters.bdm_late(StalledBoard::kBdm), up_to_rejoin);
}

// The room rule alone (no time limit): BDM 0 sends once and then nothing (its link stalls,
// it is not idle yet) while BDM 1 goes on. Once the frames waiting for BDM 0 fill half of
// the stage, BDM 0 is lagging: BDM 1 loses nothing. BDM 0 then comes back on time and holds
// the horizon again.
TEST(SlicerLag, AStageFilledByOneSourcesWaitDeclaresItLagging) {
  TestScanner scanner;
  Settings& s = scanner.settings;
  pair_settings(s);
  s.stream.max_disorder_ps = 10 * s.scanner.tick_ps;
  s.stream.max_future_ps = 1e9 * s.scanner.tick_ps;
  s.stream.max_slice_frames = 1024;
  s.stream.max_pending_frames = 4096;
  s.stream.max_slice_ms = 1e6;
  s.stream.max_lag_ms = 0;
  s.stream.lag_stage_fraction = 0.5;
  SlicerRig rig(s, scanner.calibration);
  const Slicer::Clock::time_point now{};
  std::vector<RawFrame> warm;
  for (std::uint32_t i = 0; i < 64; ++i) warm.push_back(scanner.frame(i % 2, 0, i % 16, 100 + i, 500));
  rig.slicer.push(warm.data(), warm.size(), now);
  std::uint64_t t = 1000;
  for (int b = 0; b < 100; ++b) {
    std::vector<RawFrame> block;
    for (int i = 0; i < 256; ++i) block.push_back(scanner.frame(1, 0, i % 16, t += 10, 500));
    rig.slicer.push(block.data(), block.size(), now);
  }
  EXPECT_TRUE(rig.slicer.source_lagging(0));
  EXPECT_FALSE(rig.slicer.source_lagging(1));
  EXPECT_EQ(rig.counters.get(Counter::stream_source_lagging), 1u);
  EXPECT_EQ(rig.counters.get(Counter::stream_pending_full), 0u);
  EXPECT_LE(rig.slicer.pending_frames(), 2048u + 256u);
  for (int b = 0; b < 10; ++b) {
    std::vector<RawFrame> on;
    for (int i = 0; i < 64; ++i) {
      on.push_back(scanner.frame(0, 0, i % 16, t += 10, 500));
      on.push_back(scanner.frame(1, 0, i % 16, t += 10, 500));
    }
    rig.slicer.push(on.data(), on.size(), now);
  }
  EXPECT_FALSE(rig.slicer.source_lagging(0));
  rig.slicer.finish();
  EXPECT_EQ(rig.counters.get(Counter::stream_late), 0u);
  EXPECT_EQ(rig.counters.get(Counter::stream_pending_full), 0u);
  EXPECT_EQ(rig.counters.get(Counter::single_accepted) + rig.counters.get(Counter::single_energy_rejected) +
                rig.counters.get(Counter::frame_no_crystal),
            64u + 25600u + 10 * 128u);
}

// Acquisition time shed as dead time: the slicer is told that nothing of [t_begin, t_end)
// will come; the frames after it, far more than max_future ahead of the frames before it,
// are taken without a time jump, and the records are the batch's of the frames kept.
TEST(SlicerLag, ASkippedDeadIntervalMovesTheHorizonWithoutATimeJump) {
  std::mt19937_64 rng(13);
  TestScanner scanner;
  Settings& s = scanner.settings;
  pair_settings(s);
  AcquisitionOptions o;
  o.events = 6000;
  o.bad_fraction = 0;
  const auto all = test::random_acquisition(scanner, rng, o);
  const std::uint64_t end = frame_time(all.back().bytes);
  const std::uint64_t t_begin = o.start_ticks + (end - o.start_ticks) / 3;
  const std::uint64_t t_end = o.start_ticks + 2 * (end - o.start_ticks) / 3;
  ASSERT_GT(t_end - t_begin, 10 * 20'000u);  // many times max_future
  std::vector<RawFrame> before, after, kept;
  for (const RawFrame& f : all) {
    const std::uint64_t t = frame_time(f.bytes);
    if (t < t_begin) before.push_back(f);
    if (t >= t_end) after.push_back(f);
    if (t < t_begin || t >= t_end) kept.push_back(f);
  }
  const BatchResult want = test::batch_process(scanner, kept);
  SlicerRig rig(s, scanner.calibration);
  const Slicer::Clock::time_point now{};
  rig.slicer.push(before.data(), before.size(), now);
  // Every board reached the interval's end (its frames there were dropped).
  const std::vector<std::uint64_t> reached(scanner.geometry().bdm_count(), t_end);
  rig.slicer.skip_dead(reached);
  rig.slicer.push(after.data(), after.size(), now);
  rig.slicer.finish();
  EXPECT_EQ(rig.counters.get(Counter::stream_time_jump), 0u);
  EXPECT_EQ(rig.counters.get(Counter::stream_late), 0u);
  EXPECT_EQ(rig.counters.get(Counter::stream_runs), 0u);
  expect_same(rig.sink.prompts(), want.prompts, "prompt");
  expect_same(rig.sink.delayed(), want.delayed, "delayed");
}

// Frames shed as dead time move their boards' clocks on; a board that has not reached the
// interval (none of its frames dropped yet) keeps holding the horizon: its frames from before
// the interval that arrive later are taken, not late.
TEST(SlicerLag, ABoardBehindADeadIntervalKeepsItsFramesBeforeIt) {
  std::mt19937_64 rng(17);
  TestScanner scanner;
  Settings& s = scanner.settings;
  pair_settings(s);
  AcquisitionOptions o;
  o.events = 6000;
  o.bad_fraction = 0;
  const auto all = test::random_acquisition(scanner, rng, o);
  const int behind = 3;
  const std::uint64_t end = frame_time(all.back().bytes);
  const std::uint64_t t_begin = o.start_ticks + (end - o.start_ticks) / 2;
  const std::uint64_t t_end = o.start_ticks + 3 * (end - o.start_ticks) / 4;
  const std::uint64_t behind_at = t_begin - 10'000;  // within max_future and the lag
  const SourceRule rule = make_source_rule(s);
  std::vector<RawFrame> first, behind_late, after, kept;
  const std::size_t bdms = scanner.geometry().bdm_count();
  std::vector<std::uint64_t> others_reached(bdms, 0), behind_reached(bdms, 0);
  for (const RawFrame& f : all) {
    const std::uint64_t t = frame_time(f.bytes);
    const int src = rule.source_of(f.bytes);
    const bool slow = src == behind;
    if (t >= t_begin && t < t_end) {  // shed as dead time
      auto& r = slow ? behind_reached : others_reached;
      if (src >= 0) r[src] = std::max(r[src], t + 1);
      continue;
    }
    kept.push_back(f);
    if (t >= t_end)
      after.push_back(f);
    else if (slow && t >= behind_at)
      behind_late.push_back(f);  // still on its way when the others' dead frames were shed
    else
      first.push_back(f);
  }
  ASSERT_GT(behind_late.size(), 5u);
  ASSERT_GT(behind_reached[behind], 0u);
  const BatchResult want = test::batch_process(scanner, kept);
  SlicerRig rig(s, scanner.calibration);
  const Slicer::Clock::time_point now{};
  rig.slicer.push(first.data(), first.size(), now);
  rig.slicer.skip_dead(others_reached);
  rig.slicer.push(behind_late.data(), behind_late.size(), now);
  rig.slicer.skip_dead(behind_reached);
  rig.slicer.push(after.data(), after.size(), now);
  rig.slicer.finish();
  EXPECT_EQ(rig.counters.get(Counter::stream_late), 0u);
  EXPECT_EQ(rig.counters.get(Counter::stream_time_jump), 0u);
  expect_same(rig.sink.prompts(), want.prompts, "prompt");
  expect_same(rig.sink.delayed(), want.delayed, "delayed");
}

}  // namespace
}  // namespace petdaq

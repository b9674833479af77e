// The CPU backend on several threads (core/parallel_engine.h) against one thread: records
// byte for byte, singles, t_begin/t_end, carry counts and every counter, for T = 2, 3, 7,
// with the size that goes parallel made tiny so that seams really happen (and asserted to).
// The window walk is also checked against the brute-force oracle (tests/core/oracle.h) on
// random inputs and on constructed cases with a seam inside a window, on a window edge,
// inside a delayed window and inside a run of equal times.
#include "core/parallel_engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/coincidence.h"
#include "core/cpu_backend.h"
#include "core/histograms.h"
#include "test_scanner.h"
#include "tests/core/oracle.h"

namespace petdaq {
namespace {

using test::TestScanner;

constexpr unsigned kThreadCounts[] = {2, 3, 7};

template <class T>
bool same_bytes(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

// ---- the window walk, engine against one thread and the oracle ----

struct WalkOutput {
  std::vector<CoincRecord> prompt_storage;
  std::vector<CoincRecord> delayed_storage;
  RecordBuffer prompts;
  RecordBuffer delayed;
  CoincidenceCounts counts;
  std::vector<std::size_t> carried;  // each call's return value

  explicit WalkOutput(std::size_t capacity) : prompt_storage(capacity), delayed_storage(capacity) {
    prompts = {prompt_storage.data(), capacity};
    delayed = {delayed_storage.data(), capacity};
  }
  std::vector<CoincRecord> prompt_records() const { return {prompts.data, prompts.data + prompts.size}; }
  std::vector<CoincRecord> delayed_records() const { return {delayed.data, delayed.data + delayed.size}; }
};

void expect_same(const WalkOutput& want, const WalkOutput& got) {
  EXPECT_TRUE(same_bytes(want.prompt_records(), got.prompt_records())) << "prompts";
  EXPECT_TRUE(same_bytes(want.delayed_records(), got.delayed_records())) << "delayed";
  EXPECT_EQ(want.prompts.overflow, got.prompts.overflow);
  EXPECT_EQ(want.delayed.overflow, got.delayed.overflow);
  EXPECT_EQ(want.counts.prompts, got.counts.prompts);
  EXPECT_EQ(want.counts.delayed, got.counts.delayed);
  EXPECT_EQ(want.counts.multiples, got.counts.multiples);
  EXPECT_EQ(want.counts.delayed_multiples, got.counts.delayed_multiples);
  EXPECT_EQ(want.carried, got.carried);
}

// Streams `s` through `find` (one thread or the engine) at the given horizons: each call
// sees the carry-over of the one before plus the singles below its horizon; then a final
// call. Horizons and the cut points do not depend on `find`.
template <class Find>
void stream(const std::vector<Single>& s, const std::vector<std::uint64_t>& horizons, Find find,
            WalkOutput& out) {
  std::vector<Single> buffer;
  std::size_t next = 0;
  for (const std::uint64_t horizon : horizons) {
    while (next < s.size() && s[next].time < horizon) buffer.push_back(s[next++]);
    const std::size_t carry = find(buffer.data(), buffer.size(), horizon, false, out);
    out.carried.push_back(carry);
    buffer.erase(buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(carry));
  }
  while (next < s.size()) buffer.push_back(s[next++]);
  out.carried.push_back(find(buffer.data(), buffer.size(), 0, true, out));
}

// Sorted singles with a mix of dense stretches (ties, gaps of exactly W, long runs of equal
// times), sparse ones and bursts, so that seams land everywhere.
std::vector<Single> random_singles(std::mt19937_64& rng, const CoincidenceParams& p, std::size_t n) {
  auto uniform = [&](std::uint64_t lo, std::uint64_t hi) {
    return std::uniform_int_distribution<std::uint64_t>(lo, hi)(rng);
  };
  const std::uint64_t w = p.window_ticks;
  std::vector<Single> s(n);
  std::uint64_t t = uniform(0, 1000);
  unsigned regime = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (uniform(0, 30) == 0) regime = static_cast<unsigned>(uniform(0, 3));
    switch (regime) {
      case 0: t += uniform(0, 3) == 0 ? 0 : uniform(0, w); break;                  // dense
      case 1: t += uniform(0, 4) == 0 ? w : uniform(0, 4 * w + 2); break;          // sparse
      case 2: t += uniform(0, 9) == 0 ? p.delayed_offset_ticks : uniform(0, w / 2); break;
      default: t += uniform(0, 7) == 0 ? uniform(w / 2, 2 * w) : 0; break;         // equal times
    }
    s[i].time = t;
    s[i].crystal = static_cast<std::uint32_t>(uniform(0, p.crystals_per_ring * 2 - 1));
    s[i].energy = static_cast<float>(400 + 50 * uniform(0, 5));
  }
  std::sort(s.begin(), s.end(), [](const Single& a, const Single& b) { return single_less(a, b); });
  return s;
}

TEST(ParallelEngine, WalkEqualsOneThreadAndTheOracleOnRandomInputs) {
  const Policy policies[] = {Policy::kill_multiples,          Policy::take_all_goods,
                             Policy::take_winner_of_goods,    Policy::take_winner_if_good,
                             Policy::take_winner_if_all_good, Policy::kill_all_if_multiple_goods};
  std::mt19937_64 rng(5150);
  std::vector<std::unique_ptr<ParallelEngine>> engines;
  constexpr std::size_t kCapacity = 100000;
  for (const unsigned t : kThreadCounts) {
    ParallelEngine::Sizes z;
    z.threads = t;
    z.record_capacity = kCapacity;
    z.delayed = true;
    z.min_parallel = 1;
    engines.push_back(std::make_unique<ParallelEngine>(z));
  }
  std::uint64_t prompts = 0, delayed_records = 0;
  for (const Policy policy : policies)
    for (const WindowMode mode : {WindowMode::first_open, WindowMode::every_single})
      for (const bool closed : {true, false})
        for (const bool delayed : {false, true})
          for (int rep = 0; rep < 4; ++rep) {
            CoincidenceParams p;
            p.window_ticks = std::uniform_int_distribution<std::uint64_t>(rep == 0 ? 0 : 1, 40)(rng);
            p.closed = closed;
            p.mode = mode;
            p.policy = policy;
            p.min_sector_difference = static_cast<std::uint32_t>(rep % 3);
            p.delayed = delayed;
            p.delayed_offset_ticks = p.window_ticks + std::uniform_int_distribution<std::uint64_t>(1, 80)(rng);
            p.sectors = 6;
            p.crystals_per_sector = 3;
            p.crystals_per_ring = 18;
            const std::vector<Single> s = random_singles(rng, p, 600 + 100 * static_cast<std::size_t>(rep));
            std::vector<std::uint64_t> horizons;
            std::uint64_t h = s.front().time;
            while (h < s.back().time) {
              h += std::uniform_int_distribution<std::uint64_t>(0, 40 * p.reach_ticks() + 50)(rng);
              horizons.push_back(h);
            }
            std::ostringstream what;
            what << to_string(policy) << " " << to_string(mode) << (closed ? " closed" : " half_open")
                 << " delayed " << delayed << " W " << p.window_ticks;
            SCOPED_TRACE(what.str());

            const oracle::Result want = oracle::coincidences(s, p);
            WalkOutput one(kCapacity);
            stream(s, horizons,
                   [&](const Single* x, std::size_t n, std::uint64_t hz, bool fin, WalkOutput& o) {
                     return find_coincidences(x, n, p, hz, fin, o.prompts, o.delayed, o.counts);
                   },
                   one);
            ASSERT_EQ(one.prompts.overflow + one.delayed.overflow, 0u);
            EXPECT_TRUE(same_bytes(want.prompts, one.prompt_records()));
            EXPECT_TRUE(same_bytes(want.delayed, one.delayed_records()));
            prompts += want.prompts.size();
            delayed_records += want.delayed.size();
            for (const auto& engine : engines) {
              SCOPED_TRACE(std::to_string(engine->threads()) + " threads");
              const std::uint64_t seams_before = engine->stats().coincidence_seams;
              WalkOutput many(kCapacity);
              stream(s, horizons,
                     [&](const Single* x, std::size_t n, std::uint64_t hz, bool fin, WalkOutput& o) {
                       return engine->find_coincidences(x, n, p, hz, fin, o.prompts, o.delayed,
                                                        o.counts);
                     },
                     many);
              expect_same(one, many);
              if (closed || p.window_ticks > 0)
                EXPECT_GT(engine->stats().coincidence_seams, seams_before);
            }
            if (::testing::Test::HasFailure()) return;
          }
  EXPECT_GT(prompts, 5000u);
  EXPECT_GT(delayed_records, 2000u);
}

// Four threads cut 8 resolvable singles near 2, 4 and 6; the search for a chain start moves
// each seam forward. Each case places the targets where a seam is tempting but wrong.
// Closed first_open windows of W ticks with delayed windows D later, every good pair taken,
// `sectors` BDMs of `per_sector` crystals around one ring.
CoincidenceParams delayed_take_all(std::uint64_t w, std::uint64_t d, std::uint32_t sectors,
                                   std::uint32_t per_sector) {
  CoincidenceParams p;
  p.window_ticks = w;
  p.delayed = true;
  p.delayed_offset_ticks = d;
  p.policy = Policy::take_all_goods;
  p.sectors = sectors;
  p.crystals_per_sector = per_sector;
  p.crystals_per_ring = sectors * per_sector;
  return p;
}

struct Constructed {
  const char* name;
  std::vector<std::uint64_t> times;
  std::size_t expect_seams;
};

TEST(ParallelEngine, SeamsInsideWindowsOnEdgesInDelayedWindowsAndEqualTimes) {
  CoincidenceParams p = delayed_take_all(10, 25, 4, 1);
  const std::vector<Constructed> cases = {
      // Targets 2, 4, 6 all fall inside windows; the only chain starts are at 3 (gap 11 > W)
      // and 7: a seam at the target would split a window.
      {"inside a window", {0, 5, 9, 20, 24, 27, 29, 100}, 2},
      // A gap of exactly W: closed windows hold it (no seam there); half-open ones do not.
      {"on a window edge", {0, 10, 20, 30, 40, 50, 60, 70}, 0},
      // Chain starts whose singles lie in the delayed window of an earlier opener: the seam
      // is taken, and the earlier segment reads past its end for the delayed members.
      {"inside a delayed window", {0, 1, 26, 27, 52, 53, 78, 79}, 3},
      // A long run of equal times holds the targets 4 and 6: no seam inside it, only the
      // chain start before it.
      {"inside equal times", {0, 1, 2, 30, 30, 30, 30, 30}, 1},
  };
  ParallelEngine::Sizes z;
  z.threads = 4;
  z.record_capacity = 256;
  z.delayed = true;
  z.min_parallel = 1;
  z.segments_per_thread = 1;  // the cut targets 2, 4 and 6 of the cases above
  ParallelEngine engine(z);
  for (const bool closed : {true, false}) {
    p.closed = closed;
    for (const WindowMode mode : {WindowMode::first_open, WindowMode::every_single}) {
      p.mode = mode;
      for (const Constructed& c : cases) {
        SCOPED_TRACE(std::string(c.name) + (closed ? " closed " : " half_open ") + to_string(mode));
        std::vector<Single> s;
        for (std::size_t i = 0; i < c.times.size(); ++i)
          s.push_back({c.times[i], static_cast<std::uint32_t>(i % 4), 500.0f + static_cast<float>(i)});
        const oracle::Result want = oracle::coincidences(s, p);
        WalkOutput one(256), many(256);
        one.carried.push_back(find_coincidences(s.data(), s.size(), p, 0, true, one.prompts,
                                                one.delayed, one.counts));
        const std::uint64_t before = engine.stats().coincidence_seams;
        many.carried.push_back(engine.find_coincidences(s.data(), s.size(), p, 0, true,
                                                        many.prompts, many.delayed, many.counts));
        expect_same(one, many);
        EXPECT_TRUE(same_bytes(want.prompts, many.prompt_records()));
        EXPECT_TRUE(same_bytes(want.delayed, many.delayed_records()));
        const std::uint64_t seams = engine.stats().coincidence_seams - before;
        if (mode == WindowMode::every_single) {
          EXPECT_EQ(seams, 3u);  // any index is a seam
        } else if (closed || std::string(c.name) != "on a window edge") {
          EXPECT_EQ(seams, c.expect_seams);
        } else {
          EXPECT_EQ(seams, 3u);  // half-open: a gap of exactly W starts a chain
        }
        EXPECT_GT(many.prompts.size + many.delayed.size, 0u);
      }
    }
  }
}

// A record buffer too small for a slice keeps the first records across segments and
// counts the rest, as on one thread.
TEST(ParallelEngine, FullBufferKeepsTheFirstRecordsAcrossSegments) {
  std::mt19937_64 rng(17);
  const CoincidenceParams p = delayed_take_all(12, 40, 6, 3);
  const std::vector<Single> s = random_singles(rng, p, 3000);
  for (const std::size_t capacity : {std::size_t{0}, std::size_t{7}, std::size_t{500}, std::size_t{1500}}) {
    for (const unsigned t : kThreadCounts) {
      SCOPED_TRACE(std::to_string(capacity) + " records, " + std::to_string(t) + " threads");
      ParallelEngine::Sizes z;
      z.threads = t;
      z.record_capacity = capacity;
      z.delayed = true;
      z.min_parallel = 1;
      ParallelEngine engine(z);
      WalkOutput one(capacity), many(capacity);
      one.carried.push_back(find_coincidences(s.data(), s.size(), p, 0, true, one.prompts,
                                              one.delayed, one.counts));
      many.carried.push_back(engine.find_coincidences(s.data(), s.size(), p, 0, true,
                                                      many.prompts, many.delayed, many.counts));
      expect_same(one, many);
      EXPECT_GT(many.prompts.overflow, 0u);
      EXPECT_GT(engine.stats().coincidence_seams, 0u);
    }
  }
}

// ---- the whole backend, T threads against one ----

struct Snapshot {
  std::uint64_t t_begin, t_end;
  std::vector<CoincRecord> prompts, delayed;
  std::vector<Single> singles;
  std::size_t carry_count, frames_taken, frames_dropped;
  std::uint64_t bound;
  bool split;
  CounterDelta counters;
  std::vector<std::uint64_t> bdm_singles, bdm_energy_rejected;

  Snapshot(const SliceResult& r, std::uint32_t bdm_count)
      : t_begin(r.t_begin),
        t_end(r.t_end),
        prompts(r.prompts, r.prompts + r.prompt_count),
        delayed(r.delayed, r.delayed + r.delayed_count),
        singles(r.singles, r.singles + r.single_count),
        carry_count(r.carry_count),
        frames_taken(r.frames_taken),
        frames_dropped(r.frames_dropped),
        bound(r.bound),
        split(r.split),
        counters(r.counters),
        bdm_singles(r.bdm_singles, r.bdm_singles + bdm_count),
        bdm_energy_rejected(r.bdm_energy_rejected, r.bdm_energy_rejected + bdm_count) {}
};

void expect_same(const Snapshot& a, const Snapshot& b) {
  EXPECT_EQ(a.t_begin, b.t_begin);
  EXPECT_EQ(a.t_end, b.t_end);
  EXPECT_TRUE(same_bytes(a.prompts, b.prompts)) << a.prompts.size() << " vs " << b.prompts.size();
  EXPECT_TRUE(same_bytes(a.delayed, b.delayed)) << a.delayed.size() << " vs " << b.delayed.size();
  EXPECT_TRUE(same_bytes(a.singles, b.singles)) << a.singles.size() << " vs " << b.singles.size();
  EXPECT_EQ(a.carry_count, b.carry_count);
  EXPECT_EQ(a.frames_taken, b.frames_taken);
  EXPECT_EQ(a.frames_dropped, b.frames_dropped);
  EXPECT_EQ(a.bound, b.bound);
  EXPECT_EQ(a.split, b.split);
  for (std::size_t i = 0; i < kCounterCount; ++i)
    EXPECT_EQ(a.counters.value[i], b.counters.value[i]) << counter_name(static_cast<Counter>(i));
  EXPECT_EQ(a.bdm_singles, b.bdm_singles);
  EXPECT_EQ(a.bdm_energy_rejected, b.bdm_energy_rejected);
}

struct BackendRun {
  std::vector<Snapshot> slices;
  std::vector<std::uint8_t> histogram_bins;
  ParallelStats stats;
  std::size_t outputs_lent = 0;  // slices' prompts, delayed and singles found in lent memory
};

// Lends pieces of one buffer of `room` bytes (none at all for 0), taken back once a slice is
// delivered, as petdaqd's message arena and the offline writer do.
class TestLender final : public ResultMemory {
 public:
  explicit TestLender(std::size_t room) : buffer_(room) {}
  void* lend(std::size_t bytes) override {
    if (bytes > buffer_.size() - used_) return nullptr;
    void* piece = buffer_.data() + used_;
    used_ += bytes;
    return piece;
  }
  bool holds(const void* p, std::size_t bytes) const {
    const auto* b = static_cast<const std::uint8_t*>(p);
    return bytes > 0 && b >= buffer_.data() && b + bytes <= buffer_.data() + used_;
  }
  void take_back() { used_ = 0; }

 private:
  std::vector<std::uint8_t> buffer_;
  std::size_t used_ = 0;
};

// Stages the frames (in arrival order) in chunks and cuts a slice after each at a bound a
// little behind the latest raw time staged, then a final slice. Each chunk is staged in
// `blocks` blocks; `deferred`: CpuBackend::defer_staging, whose tickets are staged only once
// the slice has taken them. `early`: the next chunk's first block is staged between a slice's
// submit and its collect (it belongs to the next slice).
BackendRun run_backend(const Settings& settings, const Calibration& calibration,
                const std::vector<RawFrame>& frames, std::size_t chunks, std::uint64_t lag_ticks,
                std::size_t min_parallel, bool deferred = false, std::size_t blocks = 1,
                bool early = false, TestLender* lender = nullptr) {
  CpuBackendOptions options;
  options.min_parallel_frames = min_parallel;
  CpuBackend backend(settings, calibration, options);
  backend.defer_staging(deferred);
  backend.set_result_memory(lender);
  const std::uint32_t bdm_count = Geometry::from(settings.scanner).bdm_count();
  BackendRun run;
  std::uint64_t latest = 0;
  const auto block_of = [&](std::size_t c, std::size_t b) {
    const std::size_t first = frames.size() * c / (chunks + 1);
    const std::size_t last = frames.size() * (c + 1) / (chunks + 1);
    return std::pair{first + (last - first) * b / blocks, first + (last - first) * (b + 1) / blocks};
  };
  std::size_t staged_early = 0;  // blocks of this chunk staged before the last collect
  for (std::size_t c = 0; c <= chunks; ++c) {
    const std::size_t first = frames.size() * c / (chunks + 1);
    const std::size_t last = frames.size() * (c + 1) / (chunks + 1);
    for (std::size_t i = first; i < last; ++i) latest = std::max(latest, frame_time(frames[i].bytes));
    std::uint64_t ticket = 0;
    for (std::size_t b = staged_early; b < blocks; ++b) {
      const auto [from, to] = block_of(c, b);
      ticket = backend.stage(frames.data() + from, to - from);
    }
    staged_early = 0;
    // Deferred (on several threads): the memory is the caller's until the slice takes it.
    if (!early)
      EXPECT_EQ(backend.staged(ticket), !deferred || backend.threads() == 1 || first == last);
    SliceRequest r;
    r.slice_id = c;
    r.run_start = c == 0;
    r.final = c == chunks;
    r.bound = latest > lag_ticks ? latest - lag_ticks : 0;
    backend.submit(r);
    if (early && c < chunks && blocks > 1) {
      const auto [from, to] = block_of(c + 1, 0);
      backend.stage(frames.data() + from, to - from);
      staged_early = 1;
    }
    // The slice's take has read every staged block once it is collected (on several
    // threads the convert stage runs it, piece by piece).
    const SliceResult& result = backend.collect();
    run.slices.emplace_back(result, bdm_count);
    if (lender) {
      run.outputs_lent += lender->holds(result.prompts, result.prompt_count * sizeof(CoincRecord)) +
                          lender->holds(result.delayed, result.delayed_count * sizeof(CoincRecord)) +
                          lender->holds(result.singles, result.single_count * sizeof(Single));
      lender->take_back();
    }
    EXPECT_TRUE(backend.staged(ticket));
  }
  if (const HistogramSet* h = backend.histograms())
    run.histogram_bins.assign(h->bins(), h->bins() + h->layout().bytes);
  run.stats = backend.parallel_stats();
  EXPECT_EQ(backend.threads(), std::max(1u, settings.backend_threads));
  return run;
}

void expect_same(const BackendRun& one, const BackendRun& many) {
  ASSERT_EQ(one.slices.size(), many.slices.size());
  for (std::size_t i = 0; i < one.slices.size(); ++i) {
    SCOPED_TRACE("slice " + std::to_string(i));
    expect_same(one.slices[i], many.slices[i]);
  }
  EXPECT_TRUE(same_bytes(one.histogram_bins, many.histogram_bins)) << "histograms";
}

// A random acquisition of 6 000 events in arrival order (up to 3 000 ticks out of order), as
// the backend tests below stream it.
std::vector<RawFrame> streamed_acquisition(const TestScanner& scanner, std::uint64_t seed,
                                           double triple_fraction = test::AcquisitionOptions{}.triple_fraction) {
  std::mt19937_64 rng(seed);
  test::AcquisitionOptions o;
  o.events = 6000;
  o.mean_gap_ticks = 120;
  o.triple_fraction = triple_fraction;
  return test::arrival_order(test::random_acquisition(scanner, rng, o), 3000, rng);
}

TEST(ParallelEngine, BackendStreamingEqualsOneThreadForEveryPolicyAndMode) {
  TestScanner scanner;
  const std::vector<RawFrame> frames = streamed_acquisition(scanner, 11, 0.15);
  Settings s = scanner.settings;
  s.stream.max_slice_frames = frames.size();
  s.stream.max_pending_frames = frames.size();
  const Policy policies[] = {Policy::kill_multiples,          Policy::take_all_goods,
                             Policy::take_winner_of_goods,    Policy::take_winner_if_good,
                             Policy::take_winner_if_all_good, Policy::kill_all_if_multiple_goods};
  std::size_t records = 0;
  for (const Policy policy : policies)
    for (const WindowMode mode : {WindowMode::first_open, WindowMode::every_single})
      for (const WindowEdge edge : {WindowEdge::closed, WindowEdge::half_open})
        for (const bool delayed : {false, true}) {
          s.coincidence.policy = policy;
          s.coincidence.window_mode = mode;
          s.coincidence.window_edge = edge;
          s.coincidence.delayed.enabled = delayed;
          // Histograms and the singles topic on half of the runs.
          s.output.histograms.enabled = policy == Policy::take_all_goods;
          s.output.singles.enabled = delayed;
          SCOPED_TRACE(std::string(to_string(policy)) + " " + to_string(mode) + " " +
                       (edge == WindowEdge::closed ? "closed" : "half_open") + " delayed " +
                       std::to_string(delayed));
          s.backend_threads = 1;
          const BackendRun one = run_backend(s, scanner.calibration, frames, 9, 4000, 1);
          for (const Snapshot& x : one.slices) records += x.prompts.size() + x.delayed.size();
          for (const unsigned t : kThreadCounts) {
            SCOPED_TRACE(std::to_string(t) + " threads");
            s.backend_threads = t;
            const BackendRun many = run_backend(s, scanner.calibration, frames, 9, 4000, 1);
            expect_same(one, many);
            EXPECT_EQ(many.stats.convert_calls, one.slices.size());
            EXPECT_GT(many.stats.sort_ranges, many.stats.convert_calls);
            EXPECT_GT(many.stats.coincidence_seams, 0u);
          }
          if (::testing::Test::HasFailure()) return;
        }
  EXPECT_GT(records, 50000u);
}

// The slice's take on several threads, whatever the store holds: all of it fits in a slice
// (one pass, the frames left in pieces for the convert stage), more than a slice but fewer
// below the bound (count, then copy), more below the bound than a slice takes (the split);
// each with blocks copied as staged and with deferred staging. Records, singles, counters
// and histograms are those of one thread.
TEST(ParallelEngine, TheTakeEqualsOneThreadWhateverTheStoreHolds) {
  TestScanner scanner;
  const std::vector<RawFrame> frames = streamed_acquisition(scanner, 31);
  Settings s = scanner.settings;
  s.stream.max_pending_frames = frames.size();
  s.output.histograms.enabled = true;
  s.output.singles.enabled = true;
  struct Case {
    const char* name;
    std::size_t slice_frames;
    std::uint64_t lag_ticks;
    bool splits;  // before the final slice (which takes the whole store)
    std::size_t min_parallel = 1;
  };
  // The last: a store big enough for the threads, a slice too small (its frames are joined).
  const Case cases[] = {{"store fits a slice", frames.size(), 4000, false},
                        {"store over a slice", frames.size() / 8, 60000, false},
                        {"split", frames.size() / 20, 4000, true},
                        {"few taken", frames.size(), 60000, false, frames.size() * 12 / 100}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    s.stream.max_slice_frames = c.slice_frames;
    s.backend_threads = 1;
    const BackendRun one =
        run_backend(s, scanner.calibration, frames, 9, c.lag_ticks, c.min_parallel);
    bool split = false;
    std::size_t taken = 0;
    for (std::size_t i = 0; i < one.slices.size(); ++i) {
      split |= one.slices[i].split && i + 1 < one.slices.size();
      taken += one.slices[i].frames_taken;
    }
    EXPECT_EQ(split, c.splits);
    EXPECT_GT(taken, frames.size() / 3);
    for (const unsigned t : kThreadCounts)
      for (const bool deferred : {false, true}) {
        SCOPED_TRACE(std::to_string(t) + " threads, deferred " + std::to_string(deferred));
        s.backend_threads = t;
        const BackendRun many = run_backend(s, scanner.calibration, frames, 9, c.lag_ticks,
                                            c.min_parallel, deferred, 3);
        expect_same(one, many);
        EXPECT_GT(many.stats.convert_calls, 0u);
        // A block staged between a slice's submit and its collect goes to the next slice.
        SCOPED_TRACE("a block staged before the collect");
        expect_same(one, run_backend(s, scanner.calibration, frames, 9, c.lag_ticks,
                                     c.min_parallel, deferred, 3, true));
      }
  }
}

// With memory lent for its outputs (petdaqd's message arena, the offline writer's memory),
// each slice's prompts, delayed and singles lie in a lent piece and are those of the
// backend's own buffers; where nothing is lent they stay in its own. On one thread and on
// several (where the threads copy them).
TEST(ParallelEngine, OutputsGoToLentMemoryUnchanged) {
  TestScanner scanner;
  const std::vector<RawFrame> frames = streamed_acquisition(scanner, 41);
  Settings s = scanner.settings;
  s.stream.max_slice_frames = frames.size();
  s.stream.max_pending_frames = frames.size();
  s.coincidence.delayed.enabled = true;
  s.output.histograms.enabled = true;
  s.output.singles.enabled = true;
  s.backend_threads = 1;
  const BackendRun own = run_backend(s, scanner.calibration, frames, 9, 4000, 1);
  std::size_t outputs = 0;
  for (const Snapshot& x : own.slices)
    outputs += !x.prompts.empty() + !x.delayed.empty() + !x.singles.empty();
  ASSERT_GT(outputs, 20u);
  for (const unsigned t : {1u, 3u}) {
    SCOPED_TRACE(std::to_string(t) + " threads");
    s.backend_threads = t;
    TestLender lender(64u << 20);
    const BackendRun lent = run_backend(s, scanner.calibration, frames, 9, 4000, 1, false, 1, false, &lender);
    expect_same(own, lent);
    EXPECT_EQ(lent.outputs_lent, outputs);
    TestLender none(0);
    const BackendRun refused = run_backend(s, scanner.calibration, frames, 9, 4000, 1, false, 1, false, &none);
    expect_same(own, refused);
    EXPECT_EQ(refused.outputs_lent, 0u);
  }
}

// A carry-over too big for the backend: the slice is resolved as if final through the same
// segments, and the count and t_end match one thread.
TEST(ParallelEngine, CarryOverflowEqualsOneThread) {
  TestScanner scanner;
  std::mt19937_64 rng(23);
  test::AcquisitionOptions o;
  o.events = 3000;
  o.mean_gap_ticks = 40;
  const std::vector<RawFrame> frames = test::random_acquisition(scanner, rng, o);
  Settings s = scanner.settings;
  s.stream.max_slice_frames = frames.size();
  s.stream.max_pending_frames = frames.size();
  s.stream.max_carry_singles = 50;
  s.coincidence.policy = Policy::take_all_goods;
  s.backend_threads = 1;
  // The bound lags far behind: the windows of the delayed reach stay open and overflow.
  const BackendRun one = run_backend(s, scanner.calibration, frames, 5, 20000, 1);
  std::uint64_t overflows = 0;
  for (const Snapshot& x : one.slices) overflows += x.counters[Counter::stream_carry_overflow];
  EXPECT_GT(overflows, 0u);
  for (const unsigned t : kThreadCounts) {
    SCOPED_TRACE(std::to_string(t) + " threads");
    s.backend_threads = t;
    const BackendRun many = run_backend(s, scanner.calibration, frames, 5, 20000, 1);
    expect_same(one, many);
    EXPECT_GT(many.stats.coincidence_calls, many.stats.convert_calls);  // the second calls
  }
}

// Below the size that goes parallel the engine is not used at all.
TEST(ParallelEngine, SmallSlicesStayOnOneThread) {
  TestScanner scanner;
  std::mt19937_64 rng(29);
  const std::vector<RawFrame> frames = test::random_acquisition(scanner, rng);
  Settings s = scanner.settings;
  s.stream.max_slice_frames = frames.size();
  s.backend_threads = 3;
  const BackendRun run = run_backend(s, scanner.calibration, frames, 4, 4000, frames.size() + 1);
  EXPECT_EQ(run.stats.convert_calls, 0u);
  EXPECT_EQ(run.stats.coincidence_calls, 0u);
}

TEST(ParallelEngine, AutomaticThreadCountLeavesTheReceiversAndTheWorkerTheirCores) {
  const unsigned cores = std::thread::hardware_concurrency();
  EXPECT_EQ(resolve_backend_threads(5, 1), 5u);
  EXPECT_EQ(resolve_backend_threads(0, 1), cores > 2 ? cores - 2 : 1u);
  EXPECT_EQ(resolve_backend_threads(0, 1000), 1u);
}

TEST(ThreadPool, EveryTaskRunsOnceAndExceptionsReachTheCaller) {
  for (const unsigned threads : {1u, 2u, 5u}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (const std::size_t tasks : {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{100}}) {
      std::vector<std::atomic<int>> ran(tasks);
      for (int round = 0; round < 20; ++round) pool.run(tasks, [&](std::size_t i) { ++ran[i]; });
      for (std::size_t i = 0; i < tasks; ++i) EXPECT_EQ(ran[i].load(), 20) << i;
    }
    std::atomic<int> ran{0};
    EXPECT_THROW(pool.run(8,
                          [&](std::size_t i) {
                            ++ran;
                            if (i == 3) throw std::runtime_error("task 3");
                          }),
                 std::runtime_error);
    EXPECT_EQ(ran.load(), 8);
    pool.run(2, [&](std::size_t) { ++ran; });  // still usable
    EXPECT_EQ(ran.load(), 10);
  }
}

// Runs far apart (the workers have gone to sleep) and back to back (they are spinning) alike:
// every task once, on a thread index below size(), each thread index on one thread only;
// the stats count every run and no more task time than the runs held.
TEST(ThreadPool, SleepingAndSpinningWorkersTakeEveryTaskWithTheirThreadIndex) {
  ThreadPool pool(4);
  for (int round = 0; round < 40; ++round) {
    if (round % 2 == 0)  // well past the spin: the workers sleep before this run
      std::this_thread::sleep_for(ThreadPool::kSpin * 20);
    std::vector<std::atomic<int>> ran(64);
    std::vector<std::atomic<std::thread::id>> owner(pool.size());
    std::atomic<int> wrong_thread{0};
    pool.run(ran.size(), [&](std::size_t task, std::size_t thread) {
      ++ran[task];
      ASSERT_LT(thread, pool.size());
      std::thread::id none{};
      if (!owner[thread].compare_exchange_strong(none, std::this_thread::get_id()) &&
          none != std::this_thread::get_id())
        ++wrong_thread;
    });
    for (std::size_t i = 0; i < ran.size(); ++i) ASSERT_EQ(ran[i].load(), 1) << round << " " << i;
    EXPECT_EQ(wrong_thread.load(), 0);
    // Index 0 is the caller's (which may find every task taken before it starts).
    if (owner[0].load() != std::thread::id{}) EXPECT_EQ(owner[0].load(), std::this_thread::get_id());
  }
  const ThreadPoolStats s = pool.stats();
  EXPECT_EQ(s.runs, 40u);
  EXPECT_GT(s.task_seconds, 0.0);
  EXPECT_LE(s.task_seconds, s.run_seconds * pool.size() * 1.01);
}

}  // namespace
}  // namespace petdaq

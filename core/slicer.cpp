// The slicer (DESIGN section 6): source clocks and horizon, held frames, the stage account,
// run tracking, and the chunk path beside the exact per-frame rules. Longer than the other
// rooms on purpose: the chunk path is correct only because it takes the common case of the
// per-frame rules, and the two are read together (core/slicer.h has the contract).
#include "core/slicer.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <utility>
#include <vector>

#include "core/geometry.h"

namespace petdaq {

namespace {

// Frames of a run whose median time fixes the reference for time jumps before the run has
// a horizon (one corrupt first timestamp must not become the reference). Few, so that they
// span far less than stream.max_future_ps at any real rate.
constexpr std::size_t kWarmupFrames = 64;
// Far-backwards frames each source must have sent before a clock reset is acted on, so one
// corrupt timestamp on a single-source scanner does not start a new run.
constexpr std::uint64_t kResetConfirmFrames = 4;
// A source of the run silent for this many stream.source_idle_ms no longer counts as
// evidence for or against a clock reset (a board that is off); one idle for less must make
// the reset too.
constexpr int kResetIgnoresSilentForIdles = 50;
// Frames in a row a source must send far ahead of the horizon before they are taken as its
// clock having moved on (the scanner paused while its clock ran) rather than corrupt stamps.
constexpr std::uint32_t kJumpConfirmFrames = 4;
// Frames between horizon updates inside a block that takes the per-frame pass.
constexpr std::size_t kHorizonBlockFrames = 4096;
// Frames push() copies per block.
constexpr std::size_t kCopyBlockFrames = 1u << 16;

constexpr std::uint64_t kNoLimit = std::numeric_limits<std::uint64_t>::max();

std::uint64_t sat_add(std::uint64_t a, std::uint64_t b) { return a > kNoLimit - b ? kNoLimit : a + b; }
std::uint64_t sat_sub(std::uint64_t a, std::uint64_t b) { return a > b ? a - b : 0; }

std::uint64_t key_of(const RawFrame& f) { return frame_time(f.bytes); }

using Clock = Slicer::Clock;

// Per-source clocks of one run and the horizon they allow.
struct SourceClocks {
  struct Source {
    std::uint64_t latest = 0;        // latest raw time accepted in this run
    bool sent = false;               // has sent in this run: it holds the horizon
    bool idle = false;               // silent for source_idle_ms: does not hold the horizon
    bool reset = false;              // jumped far backwards: its frames wait for the next run
    Clock::time_point reset_since{}; // wall clock of the episode's first far-backwards frame
    std::uint32_t ahead_streak = 0;  // frames in a row far ahead of the horizon
    std::uint64_t held = 0;          // its frames waiting for the next run
    Clock::time_point last_seen{};   // wall clock of its last frame
    bool woken = false;  // held the horizon again when the pause ended, not yet sent since
    bool lagging = false;          // too far behind the others: does not hold the horizon
    std::uint64_t lag_rejoin = 0;  // holds it again once this close to the leaders
  };
  std::vector<Source> sources;
  bool maybe_reset = false;  // some source may be waiting for the next run
  bool paused = false;       // every source that has sent is idle

  // A source sends again. After a pause of every source, the others that had sent hold the
  // horizon again at their latest time until they send or are idle once more: sources that
  // resume a little apart in wall-clock time lose nothing as late to the first one back.
  void resume(std::size_t src, Clock::time_point now) {
    Source& s = sources[src];
    s.woken = false;
    if (!paused) return;
    paused = false;
    for (std::size_t i = 0; i < sources.size(); ++i) {
      Source& o = sources[i];
      if (i == src || !o.sent || !o.idle || o.reset) continue;
      o.idle = false;
      o.woken = true;
      o.last_seen = now;
    }
  }

  // After poll() marked sources idle.
  void note_pause() {
    bool any_sent = false;
    for (const Source& s : sources) {
      if (!s.sent) continue;
      any_sent = true;
      if (!s.idle) return;
    }
    paused = any_sent;
  }

  explicit SourceClocks(std::uint32_t count) : sources(count) {}

  // The horizon the sources allow now (0: none yet).
  std::uint64_t horizon(std::uint64_t max_disorder_ticks) const {
    std::uint64_t lowest = kNoLimit;
    std::uint64_t highest = 0;
    bool any_live = false;
    bool any_sent = false;
    for (const Source& s : sources) {
      if (!s.sent) continue;
      any_sent = true;
      highest = std::max(highest, s.latest);
      if (s.idle || s.reset || s.lagging) continue;
      any_live = true;
      lowest = std::min(lowest, s.latest);
    }
    if (!any_sent) return 0;
    // With every source idle (or gone to the next run) what was received is complete.
    return any_live ? sat_sub(lowest, max_disorder_ticks) : sat_add(highest, 1);
  }

  // ---- lagging sources (DESIGN section 6) ----

  bool live(const Source& s) const { return s.sent && !s.idle && !s.reset; }

  // The leaders' time: the upper median of the live sources' latest times (one source far
  // ahead, or a few behind, do not move it). 0: no live source.
  std::uint64_t leaders_time(std::array<std::uint64_t, 256>& scratch) const {
    std::size_t n = 0;
    for (const Source& s : sources)
      if (live(s) && n < scratch.size()) scratch[n++] = s.latest;
    if (n == 0) return 0;
    std::nth_element(scratch.begin(), scratch.begin() + n / 2, scratch.begin() + n);
    return scratch[n / 2];
  }

  // A live source more than max_lag behind the leaders is lagging; a lagging one back within
  // its rejoin distance of them, and no longer behind the horizon `h` (which cannot go back),
  // holds the horizon again. Returns the sources newly lagging.
  std::uint32_t update_lag(std::uint64_t max_lag, std::uint64_t h,
                           std::array<std::uint64_t, 256>& scratch) {
    const std::uint64_t leaders = leaders_time(scratch);
    std::uint32_t declared = 0;
    for (Source& s : sources) {
      if (!live(s)) continue;
      const std::uint64_t gap = sat_sub(leaders, s.latest);
      if (s.lagging) {
        if (gap <= s.lag_rejoin && s.latest >= h) s.lagging = false;
      } else if (max_lag > 0 && gap > max_lag) {
        s.lagging = true;
        s.lag_rejoin = max_lag / 2;
        ++declared;
      }
    }
    return declared;
  }

  // The source holding the horizon, when another live source is ahead of it by more than
  // `margin`; -1 otherwise.
  int holding_back(std::uint64_t margin) const {
    int lowest = -1;
    std::uint64_t lo = kNoLimit, hi = 0;
    for (std::size_t i = 0; i < sources.size(); ++i) {
      const Source& s = sources[i];
      if (!live(s) || s.lagging) continue;
      hi = std::max(hi, s.latest);
      if (s.latest < lo) {
        lo = s.latest;
        lowest = static_cast<int>(i);
      }
    }
    return lowest >= 0 && hi > sat_add(lo, margin) ? lowest : -1;
  }

  bool any_lagging() const {
    for (const Source& s : sources)
      if (s.lagging) return true;
    return false;
  }

  bool any_reset() {
    if (!maybe_reset) return false;
    for (const Source& s : sources)
      if (s.reset) return true;
    maybe_reset = false;
    return false;
  }

  // Every source of the run reset, each has sent enough far-backwards frames and has sent
  // nothing else for `confirm` of wall-clock time: a burst of forged datagrams, however many,
  // cannot end a run while the genuine sources go on with their clock. An idle source is
  // evidence too (it must reset when it sends again: forged frames sent while the scanner
  // pauses start no run); only one silent for `silent` (a board that is off) is left out.
  bool reset_due(bool at_finish, std::size_t held, Clock::time_point now,
                 Clock::duration confirm, Clock::duration silent) const {
    bool any = false;
    for (const Source& s : sources) {
      if (s.reset) {
        if (!at_finish && (s.held < kResetConfirmFrames || now - s.reset_since < confirm))
          return false;
        any = true;
      } else if (s.sent && (!s.idle || now - s.last_seen < silent)) {
        return false;
      }
    }
    return any && held > 0;
  }

  void start_run() {
    for (Source& s : sources) {
      const Clock::time_point seen = s.last_seen;
      s = Source{};
      s.last_seen = seen;
    }
    maybe_reset = false;
    paused = false;
  }

  // What the per-frame pass would do for a source whose frames of one block all lie in the
  // range the common case allows.
  void took(std::uint8_t src, std::uint64_t max_time, Clock::time_point now) {
    resume(src, now);
    Source& s = sources[src];
    s.last_seen = now;
    s.idle = false;
    s.ahead_streak = 0;
    // A source that has not sent has latest 0, so max() is the per-frame rule.
    s.latest = std::max(s.latest, max_time);
    s.sent = true;
  }
};

// Frames of the next run, held until the reset is confirmed, in their order of arrival.
struct HeldFrames {
  std::unique_ptr<RawFrame[]> frames;
  std::size_t capacity;
  std::size_t count = 0;

  explicit HeldFrames(std::size_t cap)
      : frames(std::make_unique_for_overwrite<RawFrame[]>(cap)), capacity(cap) {}

  bool full() const { return count == capacity; }
  void add(const RawFrame& f) { frames[count++] = f; }
  // Drops the frames of one source (keeping the others' order); returns how many.
  std::size_t drop_source(std::uint8_t bdm) {
    std::size_t kept = 0;
    for (std::size_t i = 0; i < count; ++i)
      if (frames[i].bytes[frame_offset::bdm] != bdm) frames[kept++] = frames[i];
    const std::size_t dropped = count - kept;
    count = kept;
    return dropped;
  }
};

// What the backend holds: frames staged since the last cut, and an upper bound of all it
// holds (exact once every slice is collected).
struct StageAccount {
  std::size_t since_cut = 0;
  std::size_t held_upper = 0;
  std::uint64_t last_ticket = 0;
  // A cut at this horizon freed nothing (every staged frame waits for a lagging source): no
  // further cut is tried for room until the horizon moves or a split slice left frames below
  // its bound. Without it, every frame that finds the stage full would cost a slice.
  bool blocked = false;
  std::uint64_t blocked_at = 0;
};

// A block being classified frame by frame: the frames kept are rewritten to its front;
// those up to `staged` have gone to the backend.
struct Block {
  RawFrame* frames = nullptr;
  std::size_t kept = 0;
  std::size_t staged = 0;
};

}  // namespace

struct Slicer::Impl {
  Backend& backend;
  ResultSink& sink;
  Counters& counters;

  const std::uint32_t bdm_count;
  const SourceRule rule;
  const std::uint64_t max_disorder_ticks;
  const std::uint64_t max_future_ticks;
  const Clock::duration source_idle;
  const Clock::duration max_slice;
  const Clock::duration reset_confirm;
  const std::size_t slice_capacity;  // frames staged between two cuts
  const std::size_t cut_frames;      // a cut once this many are staged (<= slice_capacity)
  const std::size_t stage_capacity;  // frames the backend holds
  const std::uint64_t max_lag_ticks;    // stream.max_lag_ms in ticks (0: off)
  const std::size_t lag_stage_frames;   // stream.lag_stage_fraction of the stage (0: off)

  SourceClocks clocks;
  HeldFrames held;
  StageAccount stage;
  std::array<RawFrame, kWarmupFrames> warmup_frames{};
  std::array<std::uint64_t, kWarmupFrames> warmup_keys{};
  std::size_t warmup_count = 0;
  std::unique_ptr<RawFrame[]> copy;  // push()'s blocks
  const std::size_t copy_capacity;
  const std::uint64_t max_span_ticks;  // of one block push() cuts
  ChunkSummary copy_summary;
  Block* block = nullptr;  // the block under the per-frame pass, if any

  // Run tracking.
  std::uint64_t run = 0;
  std::uint64_t next_slice_id = 0;
  bool run_has_slices = false;  // the next slice is not the run's first
  bool run_delivered = false;   // the run has submitted at least one slice
  bool warm = false;            // the run has a horizon
  Clock::time_point warmup_since{};
  std::uint64_t h_cur = 0;      // raw-time horizon: frames below it go to the next slice
  std::uint64_t published = 0;  // raw-time bound of the last submitted slice
  Clock::time_point now{};
  Clock::time_point last_cut{};
  bool clock_started = false;
  bool replaying = false;
  bool run_finished = false;
  bool split_seen = false;  // a delivered slice left frames below its requested bound
  bool final_split = false;  // ... and it was the final slice of the run
  std::uint64_t final_slice_id = kNoLimit;
  CounterDelta stream_delta;
  // Lagging sources: scratch for the leaders' time, late frames per BDM since the last
  // flush, and the horizon at which the stage's share found no source to declare.
  std::array<std::uint64_t, 256> lag_scratch{};
  std::vector<std::uint64_t> bdm_late;
  bool bdm_late_any = false;
  std::uint64_t lag_stage_idle_at = kNoLimit;
  std::uint64_t lag_stage_leaders = 0;

  Impl(const Settings& s, Backend& b, ResultSink& out, Counters& c, std::size_t cut)
      : backend(b),
        sink(out),
        counters(c),
        bdm_count(Geometry::from(s.scanner).bdm_count()),
        rule(make_source_rule(s)),
        max_disorder_ticks(ps_to_ticks(s.stream.max_disorder_ps, s.scanner.tick_ps)),
        max_future_ticks(petdaq::max_future_ticks(s)),
        source_idle(std::chrono::duration_cast<Clock::duration>(
            std::chrono::duration<double, std::milli>(s.stream.source_idle_ms))),
        max_slice(std::chrono::duration_cast<Clock::duration>(
            std::chrono::duration<double, std::milli>(s.stream.max_slice_ms))),
        reset_confirm(std::chrono::duration_cast<Clock::duration>(
            std::chrono::duration<double, std::milli>(s.stream.reset_confirm_ms))),
        // Half a slice of new frames per cut leaves room for the frames an earlier cut left
        // staged, so that a slice rarely needs the backend's split.
        slice_capacity(std::max<std::size_t>(1, b.max_slice_frames() / 2)),
        cut_frames(cut == 0 ? slice_capacity : std::clamp<std::size_t>(cut, 1, slice_capacity)),
        stage_capacity(b.max_staged_frames()),
        max_lag_ticks(ps_to_ticks(s.stream.max_lag_ms * 1e9, s.scanner.tick_ps)),
        lag_stage_frames(static_cast<std::size_t>(s.stream.lag_stage_fraction *
                                                  static_cast<double>(b.max_staged_frames()))),
        clocks(bdm_count),
        held(std::max<std::uint64_t>(1, s.stream.max_pending_frames)),
        copy(std::make_unique_for_overwrite<RawFrame[]>(std::min(kCopyBlockFrames, b.max_slice_frames()))),
        copy_capacity(std::min(kCopyBlockFrames, b.max_slice_frames())),
        max_span_ticks(max_chunk_span_ticks(s)),
        bdm_late(bdm_count, 0) {
    if (b.max_slice_frames() == 0) throw std::invalid_argument("backend takes no frames per slice");
    if (stage_capacity < slice_capacity)
      throw std::invalid_argument("backend stages fewer frames than one slice takes");
  }

  // ---- slices ----

  void deliver_one() {
    const SliceResult& r = backend.collect();
    stage.held_upper -= std::min(stage.held_upper, r.frames_taken + r.frames_dropped);
    if (r.split) {
      counters.add(Counter::stream_split_slices);
      split_seen = true;
      if (r.slice_id == final_slice_id) {
        // A final slice that split was resolved as an ordinary one: the run goes on.
        final_split = true;
        run_has_slices = true;
      }
    }
    counters.add(r.counters);
    counters.add(Counter::stream_slices);
    if (r.bdm_singles)
      for (std::uint32_t b = 0; b < bdm_count; ++b) {
        if (r.bdm_singles[b]) counters.add_bdm_singles(b, r.bdm_singles[b]);
        if (r.bdm_energy_rejected[b]) counters.add_bdm_energy_rejected(b, r.bdm_energy_rejected[b]);
      }
    sink.on_slice(run, r);
  }

  void drain() {
    while (backend.in_flight() > 0) deliver_one();
  }

  // Every frame accepted so far must be staged before a cut (flush()).
  void cut(std::uint64_t bound, bool final) {
    while (backend.in_flight() >= backend.max_in_flight()) deliver_one();
    SliceRequest r;
    r.slice_id = next_slice_id++;
    r.bound = final ? kNoBound : bound;
    r.final = final;
    r.run_start = !run_has_slices;
    if (final) final_slice_id = r.slice_id;
    backend.submit(r);
    stage.since_cut = 0;
    run_has_slices = !final;
    run_delivered = true;
    published = std::max(published, final ? h_cur : bound);
    last_cut = now;
    if (backend.works_in_collect()) deliver_one();
  }

  // Stages frames that are accepted (the caller has flushed everything accepted before).
  void stage_frames(const RawFrame* f, std::size_t n) {
    if (n == 0) return;
    stage.last_ticket = backend.stage(f, n);
    stage.since_cut += n;
    stage.held_upper += n;
  }

  // Stages the kept frames of the block under the per-frame pass.
  void flush() {
    if (!block || block->kept == block->staged) return;
    stage_frames(block->frames + block->staged, block->kept - block->staged);
    block->staged = block->kept;
  }

  // Cuts (and waits) until `n` more frames may be staged, as far as the horizon allows;
  // returns how many may.
  std::size_t make_room(std::size_t n) {
    if (stage.since_cut > 0 && stage.since_cut + n > cut_frames) cut(h_cur, false);
    if (lag_stage_frames > 0 && stage.held_upper + n > lag_stage_frames) release_lagging(n);
    while (stage.held_upper + n > stage_capacity) {
      if (stage.blocked && h_cur == stage.blocked_at && !split_seen) break;
      const std::size_t before = stage.held_upper;
      cut(h_cur, false);
      drain();
      if (stage.held_upper >= before) {  // nothing more below the horizon
        stage.blocked = true;
        stage.blocked_at = h_cur;
        break;
      }
      stage.blocked = false;
    }
    return std::min({n, slice_capacity - stage.since_cut,
                     stage_capacity - std::min(stage_capacity, stage.held_upper)});
  }

  bool room_for_one() const {
    const std::size_t unstaged = block->kept - block->staged;
    return stage.since_cut + unstaged < slice_capacity && stage.held_upper + unstaged < stage_capacity;
  }

  // Before a frame is classified: a cut that its room needs comes first, so that a frame is
  // never classified against one published horizon and staged after a later one.
  void reserve() {
    if (room_for_one()) return;
    flush();
    make_room(1);
  }

  // Keeps a classified frame of the block under the per-frame pass.
  void keep(const RawFrame& f) {
    if (!room_for_one()) {
      stream_delta[Counter::stream_pending_full] += 1;
      return;
    }
    block->frames[block->kept++] = f;
  }

  void take_reserved(const RawFrame& f) {
    reserve();
    take(f);
  }

  void update_horizon() {
    if (!warm) return;
    update_lag();
    h_cur = std::max(h_cur, clocks.horizon(max_disorder_ticks));
  }

  // ---- lagging sources (DESIGN section 6) ----

  // The time rule: sources further than stream.max_lag_ms behind the leaders lag.
  void update_lag() {
    if (max_lag_ticks == 0 && !clocks.any_lagging()) return;
    stream_delta[Counter::stream_source_lagging] +=
        clocks.update_lag(max_lag_ticks, h_cur, lag_scratch);
  }

  // The room rule: the frames waiting for the horizon fill the share of the stage one
  // source's wait may, so the source holding it lags (as long as another is ahead of it).
  void release_lagging(std::size_t n) {
    // Nothing to declare last time, and neither the horizon nor the leaders moved since.
    const std::uint64_t leaders = clocks.leaders_time(lag_scratch);
    if (h_cur == lag_stage_idle_at && leaders == lag_stage_leaders && !split_seen) return;
    for (;;) {
      const std::size_t before = stage.held_upper;
      cut(h_cur, false);
      drain();
      if (stage.held_upper + n <= lag_stage_frames) return;
      // The cut freed frames (a split slice leaves the rest of them): cut again before the
      // frames left can be said to wait for a source.
      if (stage.held_upper < before) continue;
      const int src = clocks.holding_back(max_disorder_ticks);
      if (src < 0) {
        lag_stage_idle_at = h_cur;
        lag_stage_leaders = leaders;
        return;
      }
      declare_lagging(src);
    }
  }

  void declare_lagging(int src) {
    SourceClocks::Source& s = clocks.sources[static_cast<std::size_t>(src)];
    s.lagging = true;
    s.lag_rejoin = sat_sub(clocks.leaders_time(lag_scratch), s.latest) / 2;
    stream_delta[Counter::stream_source_lagging] += 1;
    h_cur = std::max(h_cur, clocks.horizon(max_disorder_ticks));
  }

  // The room rule for the ring: its chunks hold frames that wait for the horizon. The source
  // holding it lags when another live source is more than a chunk's span (half of
  // max_future) ahead of it.
  bool release_for_ring() {
    if (!warm || lag_stage_frames == 0) return false;
    const int src = clocks.holding_back(max_future_ticks / 2);
    if (src < 0) return false;
    flush();
    declare_lagging(src);
    cut(h_cur, false);
    drain();
    return true;
  }

  // A frame of a lagging source that goes on from its own clock: behind the published
  // horizon it is late (counted for its BDM), else kept. Its time moves the source's
  // latest, so that the source can catch up. False: the usual rules decide.
  bool lagging_frame(SourceClocks::Source& s, int src, const RawFrame& f, std::uint64_t key) {
    if (!s.lagging || sat_add(key, max_future_ticks) < s.latest) return false;
    const bool far_back = h_cur > max_future_ticks && key < h_cur - max_future_ticks;
    if (key >= published && !far_back) return false;
    if (key > s.latest) s.latest = key;
    if (key < published)
      count_late(src);
    else
      keep(f);
    return true;
  }

  void count_late(int src) {
    stream_delta[Counter::stream_late] += 1;
    if (src < 0) return;
    bdm_late[static_cast<std::size_t>(src)] += 1;
    bdm_late_any = true;
  }

  // ---- warm-up: the first frames of a run fix the time-jump reference ----

  void end_warmup() {
    if (warm) return;
    flush();
    std::uint64_t median = 0;
    if (warmup_count > 0) {
      std::array<std::uint64_t, kWarmupFrames> keys = warmup_keys;
      std::nth_element(keys.begin(), keys.begin() + warmup_count / 2, keys.begin() + warmup_count);
      median = keys[warmup_count / 2];
    }
    const std::uint64_t hi = sat_add(median, max_future_ticks);
    const std::uint64_t lo = sat_sub(median, max_future_ticks);
    std::size_t kept = 0;
    for (std::size_t i = 0; i < warmup_count; ++i) {
      const RawFrame f = warmup_frames[i];
      const std::uint64_t key = warmup_keys[i];
      if (key > hi || key < lo) {
        stream_delta[Counter::stream_time_jump] += 1;
        continue;
      }
      auto& s = clocks.sources[f.bytes[frame_offset::bdm]];
      if (!s.sent || key > s.latest) s.latest = key;
      s.sent = true;
      warmup_frames[kept++] = f;
    }
    warmup_count = 0;
    warm = true;
    h_cur = 0;
    published = 0;
    Block b{warmup_frames.data(), 0, 0};
    Block* outer = block;
    block = &b;
    for (std::size_t i = 0; i < kept; ++i) {
      reserve();
      keep(warmup_frames[i]);
    }
    flush();
    block = outer;
    backend.wait_staged(stage.last_ticket);  // the warm-up buffer serves the next run
    update_horizon();
  }

  // ---- clock reset ----

  void hold_for_next_run(const RawFrame& f, SourceClocks::Source& s) {
    if (held.full()) {
      stream_delta[Counter::stream_pending_full] += 1;
      return;
    }
    held.add(f);
    ++s.held;
  }

  void end_run(RunEnd reason) {
    flush();
    if (!warm) end_warmup();
    if (run_has_slices || stage.held_upper > 0) {
      do {
        final_split = false;
        cut(h_cur, true);
        drain();
      } while (final_split);
    }
    drain();
    if (run_delivered) sink.on_run_end(run, reason);
  }

  void start_run() {
    clocks.start_run();
    stage.blocked = false;
    run_has_slices = false;
    run_delivered = false;
    warm = false;
    warmup_count = 0;
    warmup_since = now;
    h_cur = 0;
    published = 0;
  }

  // Every live source jumped far backwards: the scanner's clock was reset. The run ends and
  // the held frames start the next one, in their order of arrival.
  void new_run(RunEnd reason) {
    end_run(reason);
    ++run;
    stream_delta[Counter::stream_runs] += 1;
    start_run();
    const std::size_t n = held.count;
    held.count = 0;
    Block b{held.frames.get(), 0, 0};
    Block* outer = block;
    block = &b;
    replaying = true;
    for (std::size_t i = 0; i < n; ++i) {
      const RawFrame f = held.frames[i];
      take_reserved(f);
    }
    replaying = false;
    flush();
    block = outer;
    backend.wait_staged(stage.last_ticket);  // the held buffer takes the next holds
    update_horizon();
  }

  // ---- one frame: the exact rules of DESIGN section 6 ----

  // A frame within max_future of its own source's latest time goes on from it: that source
  // runs ahead of a lagging one (another receiver's chunk not sealed yet, a sender that
  // drifts), which is no wild stamp however far ahead of the horizon it is (DESIGN 6).
  bool continues(const SourceClocks::Source& s, std::uint64_t key) const {
    return s.sent && key <= sat_add(s.latest, max_future_ticks);
  }

  void take(const RawFrame& f) {
    const int src = rule.source_of(f.bytes);
    if (src < 0) {
      // Not attributable to a source: the backend counts it as bad in the next slice.
      keep(f);
      return;
    }
    auto& s = clocks.sources[static_cast<std::size_t>(src)];
    // Idle by the last poll(), or by the clock now (the push may come first after a pause);
    // a source woken at the end of a pause counts as back from idle too.
    const bool was_idle = s.idle || s.woken || (s.sent && now - s.last_seen >= source_idle);
    clocks.resume(static_cast<std::size_t>(src), now);
    s.last_seen = now;
    s.idle = false;
    const std::uint64_t key = key_of(f);
    if (warm && lagging_frame(s, src, f, key)) return;

    if (!warm) {
      if (held.count + warmup_count >= held.capacity) {
        stream_delta[Counter::stream_pending_full] += 1;
        return;
      }
      if (warmup_count == 0) warmup_since = now;
      warmup_frames[warmup_count] = f;
      warmup_keys[warmup_count++] = key;
      if (warmup_count == kWarmupFrames) end_warmup();
      return;
    }

    const bool far_back = h_cur > max_future_ticks && key < h_cur - max_future_ticks;
    if (far_back && !replaying) {
      if (!s.reset) s.reset_since = now;
      s.reset = true;
      clocks.maybe_reset = true;
      hold_for_next_run(f, s);
      if (reset_due(false)) new_run(RunEnd::clock_reset);
      return;
    }
    if (s.reset && key > s.latest) {
      // The source's old clock is still running: its far-backwards frames were corrupt.
      s.reset = false;
      stream_delta[Counter::stream_late] += held.drop_source(static_cast<std::uint8_t>(src));
      s.held = 0;
    }
    if (key < published || far_back) {
      count_late(src);
      return;
    }
    // The horizon is brought up to date once per block of frames; a frame that looks far
    // ahead of it checks against the current one first.
    if (key > sat_add(h_cur, max_future_ticks)) update_horizon();
    if (key > sat_add(h_cur, max_future_ticks) && !continues(s, key)) {
      // A source back from silence, or one that keeps sending far ahead, has moved on with
      // the scanner's clock: its frames are taken. A lone far-ahead stamp is corrupt.
      if (!was_idle && ++s.ahead_streak < kJumpConfirmFrames) {
        stream_delta[Counter::stream_time_jump] += 1;
        return;
      }
    } else {
      s.ahead_streak = 0;
    }
    if (!s.sent || key > s.latest) s.latest = key;
    s.sent = true;
    keep(f);
  }

  // ---- a block ----

  // The summary shows nothing the per-frame rules would act on.
  bool common(const ChunkSummary& sum) {
    if (!warm || replaying || clocks.any_reset()) return false;
    const std::uint64_t hi = sat_add(h_cur, max_future_ticks);
    const std::uint64_t far_lo = h_cur > max_future_ticks ? h_cur - max_future_ticks : 0;
    const std::uint64_t lo = std::max(published, far_lo);
    for (std::uint32_t i = 0; i < sum.present_count; ++i) {
      const std::uint8_t src = sum.present[i];
      const SourceSpan& s = sum.sources[src];
      if (src >= bdm_count || s.min_time < lo) return false;
      // Every frame is within reach of the horizon or goes on from its source's latest time
      // (which only grows as the chunk's frames are taken): none is a time jump.
      if (s.max_time > hi && !continues(clocks.sources[src], s.max_time)) return false;
    }
    return true;
  }

  void take_block(RawFrame* frames, std::size_t n, const ChunkSummary& sum) {
    if (n == 0) return;
    const std::size_t room = n <= slice_capacity ? make_room(n) : 0;
    if (n <= slice_capacity && common(sum)) {
      // Every frame would be kept by the per-frame rules: those the stage has room for are
      // staged, the rest counted and dropped as the per-frame pass would (its sources' clocks
      // move all the same), without a pass over them.
      stage_frames(frames, room);
      stream_delta[Counter::stream_pending_full] += n - room;
      for (std::uint32_t i = 0; i < sum.present_count; ++i) {
        const std::uint8_t src = sum.present[i];
        clocks.took(src, sum.sources[src].max_time, now);
      }
      update_horizon();
      // Enough for a slice: cut now, at the horizon this block moved, rather than when the
      // next block comes.
      if (stage.since_cut >= cut_frames) cut(h_cur, false);
      return;
    }
    stream_delta[Counter::stream_exact_blocks] += 1;
    Block b{frames, 0, 0};
    Block* outer = block;
    block = &b;
    for (std::size_t i = 0; i < n; ++i) {
      take_reserved(frames[i]);
      // A large block must not leave everything waiting until its end.
      if ((i + 1) % kHorizonBlockFrames == 0) update_horizon();
    }
    flush();
    block = outer;
    update_horizon();
  }

  bool reset_due(bool at_finish) const {
    return clocks.reset_due(at_finish, held.count, now, reset_confirm,
                            source_idle * kResetIgnoresSilentForIdles);
  }

  void flush_counters() {
    counters.add(stream_delta);
    stream_delta = CounterDelta{};
    if (!bdm_late_any) return;
    for (std::uint32_t b = 0; b < bdm_count; ++b)
      if (bdm_late[b]) counters.add_bdm_late(b, std::exchange(bdm_late[b], 0));
    bdm_late_any = false;
  }

  void start_clock(Clock::time_point t) {
    now = t;
    if (!clock_started) {
      clock_started = true;
      last_cut = t;
      warmup_since = t;
      for (auto& s : clocks.sources) s.last_seen = t;
    }
  }

  void begin_push(Clock::time_point t, std::size_t n) {
    start_clock(t);
    if (n > 0 && run_finished) {
      ++run;
      run_finished = false;
    }
  }
};

Slicer::Slicer(const Settings& settings, Backend& backend, ResultSink& sink, Counters& counters,
               std::size_t cut_frames)
    : impl_(std::make_unique<Impl>(settings, backend, sink, counters, cut_frames)) {}

Slicer::~Slicer() = default;

std::uint64_t Slicer::push_block(RawFrame* frames, std::size_t n, const ChunkSummary& summary,
                                 Clock::time_point now) {
  Impl& m = *impl_;
  m.begin_push(now, n);
  const std::uint64_t before = m.stage.last_ticket;
  m.take_block(frames, n, summary);
  m.flush_counters();
  return m.stage.last_ticket != before ? m.stage.last_ticket : 0;
}

void Slicer::push(const RawFrame* frames, std::size_t n, Clock::time_point now) {
  Impl& m = *impl_;
  m.begin_push(now, n);
  for (std::size_t i = 0; i < n;) {
    // Blocks as a receiver would fill chunks (core/chunk_summary.h).
    const std::size_t k = std::min(m.copy_capacity, n - i);
    std::memcpy(m.copy.get(), frames + i, k * sizeof(RawFrame));
    const std::size_t piece = next_block(m.copy.get(), k, k, m.max_span_ticks, m.rule, m.copy_summary);
    const std::uint64_t before = m.stage.last_ticket;
    m.take_block(m.copy.get(), piece, m.copy_summary);
    if (m.stage.last_ticket != before) m.backend.wait_staged(m.stage.last_ticket);
    i += piece;
  }
  m.flush_counters();
}

bool Slicer::staged(std::uint64_t ticket) { return ticket == 0 || impl_->backend.staged(ticket); }

void Slicer::wait_staged(std::uint64_t ticket) {
  if (ticket != 0) impl_->backend.wait_staged(ticket);
}

void Slicer::poll(Clock::time_point now) {
  Impl& m = *impl_;
  m.start_clock(now);
  if (!m.warm && m.warmup_count > 0 && now - m.warmup_since >= m.max_slice) m.end_warmup();
  bool idle_changed = false;
  for (auto& s : m.clocks.sources) {
    if (s.sent && !s.idle && now - s.last_seen >= m.source_idle) {
      s.idle = true;
      m.stream_delta[Counter::stream_source_idle] += 1;
      idle_changed = true;
    }
  }
  if (idle_changed) {
    m.clocks.note_pause();
    m.update_horizon();
  }
  // A reset is confirmed by time as well as by frames.
  if (m.held.count > 0 && m.reset_due(false)) m.new_run(RunEnd::clock_reset);
  if (now - m.last_cut >= m.max_slice) {
    if (m.stage.since_cut > 0 || m.h_cur > m.published || m.split_seen) m.cut(m.h_cur, false);
    m.split_seen = false;
    m.last_cut = now;
    // Latency: whatever was submitted reaches the sink now.
    m.drain();
  }
  m.flush_counters();
}

void Slicer::finish() {
  Impl& m = *impl_;
  if (m.held.count > 0) {
    if (m.reset_due(true)) {
      m.new_run(RunEnd::clock_reset);
    } else {
      // A reset that not every live source made: those frames belong to no run.
      m.stream_delta[Counter::stream_late] += m.held.count;
      m.held.count = 0;
      for (auto& s : m.clocks.sources) s.held = 0;
    }
  }
  m.end_run(RunEnd::finished);
  // A later push() starts a new run; run_id() keeps naming the finished one until then.
  m.run_finished = m.run_finished || m.run_delivered;
  m.start_run();
  m.flush_counters();
}

bool Slicer::release_lagging_source() {
  Impl& m = *impl_;
  const bool declared = m.release_for_ring();
  m.flush_counters();
  return declared;
}

bool Slicer::source_lagging(std::uint32_t bdm) const {
  const auto& sources = impl_->clocks.sources;
  return bdm < sources.size() && sources[bdm].lagging;
}

void Slicer::skip_dead(std::span<const std::uint64_t> reached) {
  Impl& m = *impl_;
  if (!m.warm) return;
  auto& sources = m.clocks.sources;
  for (std::size_t b = 0; b < sources.size() && b < reached.size(); ++b) {
    auto& s = sources[b];
    if (reached[b] > 0 && s.sent && !s.reset && !s.lagging)
      s.latest = std::max(s.latest, reached[b] - 1);
  }
  m.update_horizon();
  m.flush_counters();
}

std::uint64_t Slicer::latest_time() const {
  std::uint64_t t = 0;
  for (const auto& s : impl_->clocks.sources)
    if (s.sent) t = std::max(t, s.latest);
  return t;
}

std::uint64_t Slicer::run_id() const { return impl_->run; }
std::uint64_t Slicer::horizon() const { return impl_->published; }
std::size_t Slicer::pending_frames() const {
  return impl_->stage.held_upper + impl_->held.count + impl_->warmup_count;
}

}  // namespace petdaq

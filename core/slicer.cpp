#include "core/slicer.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <vector>

#include "core/calibration.h"
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
// Frames in a row a source must send far ahead of the horizon before they are taken as its
// clock having moved on (the scanner paused while its clock ran) rather than corrupt stamps.
constexpr std::uint32_t kJumpConfirmFrames = 4;

// Frames between horizon updates inside one push().
constexpr std::size_t kHorizonBlockFrames = 4096;

constexpr std::uint64_t kNoLimit = std::numeric_limits<std::uint64_t>::max();

std::uint64_t sat_add(std::uint64_t a, std::uint64_t b) { return a > kNoLimit - b ? kNoLimit : a + b; }
std::uint64_t sat_sub(std::uint64_t a, std::uint64_t b) { return a > b ? a - b : 0; }

std::uint64_t key_of(const RawFrame& f) { return frame_time(f.bytes); }

}  // namespace

struct Slicer::Impl {
  struct Source {
    std::uint64_t latest = 0;       // latest raw time accepted in this run
    bool sent = false;              // has sent in this run: it holds the horizon
    bool idle = false;              // silent for source_idle_ms: does not hold the horizon
    bool reset = false;             // jumped far backwards: its frames wait for the next run
    std::uint32_t ahead_streak = 0;  // frames in a row far ahead of the horizon
    std::uint64_t held = 0;         // its frames waiting for the next run
    Clock::time_point last_seen{};  // wall clock of its last frame
  };

  Backend& backend;
  ResultSink& sink;
  Counters& counters;

  const std::uint32_t bdm_count;
  const bool check_markers;
  const std::uint8_t head_marker;
  const std::uint8_t tail_marker;
  const std::uint64_t max_disorder_ticks;
  const std::uint64_t max_future_ticks;
  const Clock::duration source_idle;
  const Clock::duration max_slice;
  const std::int64_t min_time_offset;
  const std::size_t slice_capacity;

  std::vector<Source> sources;
  // Frames not yet handed to a slice: those of this run waiting for the horizon at
  // [0, waiting), and those held for the next run at [capacity - held, capacity) (the
  // newest at the lowest index).
  // Left uninitialised: only the part in use is ever touched.
  std::unique_ptr<RawFrame[]> pending;
  const std::size_t pending_capacity;
  std::size_t waiting = 0;
  std::size_t held = 0;
  std::vector<std::uint64_t> warmup_keys;

  // The backend's input buffer of the next slice: every frame of this run below h_cur.
  RawFrame* input = nullptr;
  std::size_t input_count = 0;

  std::uint64_t run = 0;
  std::uint64_t next_slice_id = 0;
  bool run_has_slices = false;  // the next slice is not the run's first
  bool run_delivered = false;   // the run has submitted at least one slice
  bool warm = false;  // the run has a horizon
  std::size_t warmup_count = 0;
  Clock::time_point warmup_since{};
  std::uint64_t h_cur = 0;      // raw-time horizon: frames of this run below it are in `input`
  std::uint64_t published = 0;  // raw-time horizon of the last submitted slice
  Clock::time_point now{};
  Clock::time_point last_cut{};
  bool clock_started = false;
  bool replaying = false;
  bool run_finished = false;
  CounterDelta stream_delta;

  // The fast path's per-source summary of the frames it took since the last flush_fast().
  bool maybe_reset = false;  // some source may be waiting for the next run
  // source_of() as three tables, by the frame's bytes 0, 1 and 15: 1 where it passes.
  std::array<std::uint8_t, 256> fast_head_ok{};
  std::array<std::uint8_t, 256> fast_bdm_ok{};
  std::array<std::uint8_t, 256> fast_tail_ok{};
  std::array<std::uint64_t, 256> fast_latest{};  // latest time + 1 per source, 0: none
  bool fast_dirty = false;                        // fast_latest holds something

  Impl(const Settings& s, const Calibration& cal, Backend& b, ResultSink& out, Counters& c)
      : backend(b),
        sink(out),
        counters(c),
        bdm_count(Geometry::from(s.scanner).bdm_count()),
        check_markers(s.frame.check_markers),
        head_marker(s.frame.head_marker),
        tail_marker(s.frame.tail_marker),
        max_disorder_ticks(ps_to_ticks(s.stream.max_disorder_ps, s.scanner.tick_ps)),
        max_future_ticks(ps_to_ticks(s.stream.max_future_ps, s.scanner.tick_ps)),
        source_idle(std::chrono::duration_cast<Clock::duration>(
            std::chrono::duration<double, std::milli>(s.stream.source_idle_ms))),
        max_slice(std::chrono::duration_cast<Clock::duration>(
            std::chrono::duration<double, std::milli>(s.stream.max_slice_ms))),
        min_time_offset(cal.min_time_offset),
        slice_capacity(b.max_slice_frames()),
        sources(bdm_count),
        pending(std::make_unique_for_overwrite<RawFrame[]>(
            std::max<std::uint64_t>(1, s.stream.max_pending_frames))),
        pending_capacity(std::max<std::uint64_t>(1, s.stream.max_pending_frames)),
        warmup_keys(kWarmupFrames) {
    if (slice_capacity == 0) throw std::invalid_argument("backend takes no frames per slice");
    for (std::uint32_t v = 0; v < 256; ++v) {
      fast_head_ok[v] = !check_markers || (v >> 4) == head_marker;
      fast_tail_ok[v] = !check_markers || (v & 0x0F) == tail_marker;
      fast_bdm_ok[v] = v < bdm_count;
    }
  }

  // ---- classification ----

  // The source of a frame, or -1 when it cannot be attributed to one.
  int source_of(const RawFrame& f) const {
    const std::uint8_t head_du = f.bytes[frame_offset::head_du];
    const std::uint8_t frac_tail = f.bytes[frame_offset::temp_frac_tail];
    if (check_markers && ((head_du >> 4) != head_marker || (frac_tail & 0x0F) != tail_marker))
      return -1;
    const std::uint8_t bdm = f.bytes[frame_offset::bdm];
    return bdm < bdm_count ? bdm : -1;
  }

  std::uint64_t corrected(std::uint64_t raw_horizon) const {
    if (min_time_offset < 0) return sat_sub(raw_horizon, static_cast<std::uint64_t>(-min_time_offset));
    return sat_add(raw_horizon, static_cast<std::uint64_t>(min_time_offset));
  }

  // ---- slices ----

  void deliver_one() {
    const SliceResult& r = backend.collect();
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

  RawFrame* input_buffer() {
    if (!input) {
      // The next buffer may still belong to a slice in flight until one is collected.
      while (backend.in_flight() >= backend.max_in_flight()) deliver_one();
      input = backend.input_buffer();
    }
    return input;
  }

  void cut(std::uint64_t horizon_raw, bool final) {
    SliceRequest r;
    r.slice_id = next_slice_id++;
    r.frames = input_buffer();
    r.frame_count = input_count;
    r.horizon = corrected(horizon_raw);
    r.final = final;
    r.run_start = !run_has_slices;
    backend.submit(r);
    run_has_slices = !final;
    run_delivered = true;
    published = std::max(published, horizon_raw);
    input = nullptr;
    input_count = 0;
    last_cut = now;
  }

  void add_ready(const RawFrame& f) {
    input_buffer()[input_count++] = f;
    if (input_count == slice_capacity) cut(h_cur, false);
  }

  bool pending_full() {
    if (waiting + held < pending_capacity) return false;
    stream_delta[Counter::stream_pending_full] += 1;
    return true;
  }

  // Moves the waiting frames below h1 (all of them when `all`) into slices and raises the
  // horizon to h1. When they do not fit in the current slice, the slice takes the earliest
  // (nth_element by time) and is cut at the time of the first frame left out, so that later
  // slices still hold only frames at or after their predecessor's horizon.
  void release(std::uint64_t h1, bool all) {
    // The common case: whatever is ready fits in the slice, so no split is needed and one
    // pass moves the ready frames out and keeps the rest in their order.
    if (!all && waiting <= slice_capacity - input_count) {
      // Counts and pointers live in locals: the frame copies are byte stores, which the
      // compiler must assume may alias any member.
      RawFrame* const w = pending.get();
      const std::size_t n = waiting;
      std::size_t i = 0;
      while (i < n && key_of(w[i]) >= h1) ++i;
      if (i < n) {
        std::size_t kept = i;
        RawFrame* const in = input_buffer();
        std::size_t count = input_count;
        for (; i < n; ++i) {
          if (key_of(w[i]) < h1) {
            std::memcpy(&in[count++], &w[i], sizeof(RawFrame));
          } else {
            std::memcpy(&w[kept++], &w[i], sizeof(RawFrame));
          }
        }
        input_count = count;
        waiting = kept;
      }
      h_cur = std::max(h_cur, h1);
      if (input_count == slice_capacity) cut(h_cur, false);
      return;
    }
    while (true) {
      RawFrame* const w = pending.get();
      RawFrame* const mid =
          all ? w + waiting
              : std::partition(w, w + waiting, [h1](const RawFrame& f) { return key_of(f) < h1; });
      const std::size_t ready = static_cast<std::size_t>(mid - w);
      if (ready == 0) break;
      const std::size_t space = slice_capacity - input_count;
      if (space == 0) {
        cut(h_cur, false);
        continue;
      }
      const std::size_t take = std::min(ready, space);
      std::uint64_t cut_at = h1;
      if (take < ready) {
        std::nth_element(w, w + take, mid,
                         [](const RawFrame& a, const RawFrame& b) { return key_of(a) < key_of(b); });
        cut_at = key_of(w[take]);
      }
      RawFrame* in = input_buffer();
      std::memcpy(in + input_count, w, take * sizeof(RawFrame));
      input_count += take;
      std::memmove(w, w + take, (waiting - take) * sizeof(RawFrame));
      waiting -= take;
      if (take < ready) {
        h_cur = std::max(h_cur, cut_at);
        cut(h_cur, false);
        continue;
      }
      break;
    }
    if (!all) h_cur = std::max(h_cur, h1);
    if (input_count == slice_capacity) cut(h_cur, false);
  }

  void update_horizon() {
    if (!warm) return;
    std::uint64_t lowest = kNoLimit;
    std::uint64_t highest = 0;
    bool any_live = false;
    bool any_sent = false;
    for (const Source& s : sources) {
      if (!s.sent) continue;
      any_sent = true;
      highest = std::max(highest, s.latest);
      if (s.idle || s.reset) continue;
      any_live = true;
      lowest = std::min(lowest, s.latest);
    }
    if (!any_sent) return;
    // With every source idle (or gone to the next run) what was received is complete.
    const std::uint64_t candidate =
        any_live ? sat_sub(lowest, max_disorder_ticks) : sat_add(highest, 1);
    if (candidate > h_cur) release(candidate, false);
  }

  // ---- warm-up: the first frames of a run fix the time-jump reference ----

  void end_warmup() {
    if (warm) return;
    std::uint64_t median = 0;
    if (warmup_count > 0) {
      std::nth_element(warmup_keys.begin(), warmup_keys.begin() + warmup_count / 2,
                       warmup_keys.begin() + warmup_count);
      median = warmup_keys[warmup_count / 2];
    }
    const std::uint64_t hi = sat_add(median, max_future_ticks);
    const std::uint64_t lo = sat_sub(median, max_future_ticks);
    std::size_t kept = 0;
    for (std::size_t i = 0; i < waiting; ++i) {
      const RawFrame f = pending[i];
      const std::uint64_t key = key_of(f);
      if (key > hi || key < lo) {
        stream_delta[Counter::stream_time_jump] += 1;
        continue;
      }
      Source& s = sources[f.bytes[frame_offset::bdm]];
      if (!s.sent || key > s.latest) s.latest = key;
      s.sent = true;
      pending[kept++] = f;
    }
    waiting = kept;
    warmup_count = 0;
    warm = true;
    h_cur = 0;
    published = 0;
    update_horizon();
  }

  // ---- clock reset ----

  void hold_for_next_run(const RawFrame& f, Source& s) {
    if (pending_full()) return;
    pending[pending_capacity - 1 - held] = f;
    ++held;
    ++s.held;
  }

  void drop_held_of(std::uint8_t bdm) {
    // Keeps the others in arrival order (newest lowest).
    const std::size_t top = pending_capacity;
    std::size_t write = top;
    for (std::size_t read = top; read > top - held; --read) {
      const RawFrame& f = pending[read - 1];
      if (f.bytes[frame_offset::bdm] == bdm) continue;
      pending[--write] = f;
    }
    const std::size_t dropped = held - (top - write);
    stream_delta[Counter::stream_late] += dropped;
    held -= dropped;
    sources[bdm].held = 0;
  }

  bool reset_due(bool at_finish) const {
    bool any_reset = false;
    for (const Source& s : sources) {
      if (s.reset) {
        if (s.held < kResetConfirmFrames && !at_finish) return false;
        any_reset = true;
      } else if (s.sent && !s.idle) {
        return false;
      }
    }
    return any_reset && held > 0;
  }

  void end_run() {
    if (!warm) end_warmup();
    if (run_has_slices || input_count > 0 || waiting > 0) {
      release(kNoLimit, true);
      cut(h_cur, true);
    }
    drain();
    if (run_delivered) sink.on_run_end(run);
  }

  void start_run() {
    for (Source& s : sources) {
      const Clock::time_point seen = s.last_seen;
      s = Source{};
      s.last_seen = seen;
    }
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
  void new_run() {
    end_run();
    ++run;
    stream_delta[Counter::stream_runs] += 1;
    start_run();
    const std::size_t top = pending_capacity;
    const std::size_t n = held;
    std::reverse(pending.get() + (top - n), pending.get() + top);
    std::memmove(pending.get(), pending.get() + (top - n), n * sizeof(RawFrame));
    held = 0;
    // waiting is empty: each replayed frame adds at most one waiting frame, always at an
    // index at or below the one being read.
    replaying = true;
    for (std::size_t i = 0; i < n; ++i) {
      const RawFrame f = pending[i];
      take(f);
    }
    replaying = false;
    update_horizon();
  }

  // ---- one frame ----

  void take(const RawFrame& f) {
    const int src = source_of(f);
    if (src < 0) {
      // Not attributable to a source: the backend counts it as bad in the next slice.
      add_ready(f);
      return;
    }
    Source& s = sources[static_cast<std::size_t>(src)];
    // Idle by the last poll(), or by the clock now (the push may come first after a pause).
    const bool was_idle = s.idle || (s.sent && now - s.last_seen >= source_idle);
    s.last_seen = now;
    s.idle = false;
    const std::uint64_t key = key_of(f);

    if (!warm) {
      if (pending_full()) return;
      if (warmup_count == 0 && waiting == 0) warmup_since = now;
      pending[waiting++] = f;
      warmup_keys[warmup_count++] = key;
      if (warmup_count == kWarmupFrames) end_warmup();
      return;
    }

    const bool far_back = h_cur > max_future_ticks && key < h_cur - max_future_ticks;
    if (far_back && !replaying) {
      s.reset = true;
      maybe_reset = true;
      hold_for_next_run(f, s);
      if (reset_due(false)) new_run();
      return;
    }
    if (s.reset && key > s.latest) {
      // The source's old clock is still running: its far-backwards frames were corrupt.
      s.reset = false;
      drop_held_of(static_cast<std::uint8_t>(src));
    }
    if (key < published || far_back) {
      stream_delta[Counter::stream_late] += 1;
      return;
    }
    if (key > sat_add(h_cur, max_future_ticks)) {
      // The horizon is brought up to date once per block of frames; a frame that looks far
      // ahead of it checks against the current one first.
      update_horizon();
      // A source back from silence, or one that keeps sending far ahead, has moved on with
      // the scanner's clock: its frames are taken. A lone far-ahead stamp is corrupt.
      if (key > sat_add(h_cur, max_future_ticks) && !was_idle &&
          ++s.ahead_streak < kJumpConfirmFrames) {
        stream_delta[Counter::stream_time_jump] += 1;
        return;
      }
    } else {
      s.ahead_streak = 0;
    }
    if (!s.sent || key > s.latest) s.latest = key;
    s.sent = true;
    if (key < h_cur) {
      add_ready(f);
    } else if (!pending_full()) {
      pending[waiting++] = f;
    }
  }

  // ---- the fast path: frames that take() would just file ----

  // Applies what take() would have done to each source that sent frames through the fast
  // path (`now` is fixed for one push, so the order of those frames does not matter).
  void flush_fast() {
    if (!fast_dirty) return;
    fast_dirty = false;
    // A frame names its source in one byte: no more than 256 can have sent.
    const std::uint32_t n = std::min<std::uint32_t>(bdm_count, fast_latest.size());
    for (std::uint32_t b = 0; b < n; ++b) {
      if (fast_latest[b] == 0) continue;
      Source& s = sources[b];
      s.last_seen = now;
      s.idle = false;
      s.ahead_streak = 0;
      // A source that has not sent has latest 0, so max() is take()'s rule.
      s.latest = std::max(s.latest, fast_latest[b] - 1);
      s.sent = true;
      fast_latest[b] = 0;
    }
  }

  bool any_reset() {
    if (!maybe_reset) return false;
    for (const Source& s : sources)
      if (s.reset) return true;
    maybe_reset = false;
    return false;
  }

  // Takes frames [i, end) as long as each is the common case (attributable, run warm, no
  // source waiting for a reset, neither late, far back nor far ahead, room where it goes),
  // exactly as take() would. Returns the index of the first frame not taken.
  std::size_t take_fast(const RawFrame* frames, std::size_t i, std::size_t end) {
    if (!warm || replaying || any_reset()) return i;
    // Everything the loop reads lives in locals (frame copies are byte stores, which the
    // compiler must assume may alias any member).
    // The largest time is left to take(): fast_latest holds time + 1, 0 meaning none.
    const std::uint64_t hi = std::min(sat_add(h_cur, max_future_ticks), kNoLimit - 1);
    const std::uint64_t far_lo = h_cur > max_future_ticks ? h_cur - max_future_ticks : 0;
    const std::uint64_t lo = std::max(published, far_lo);
    if (lo > hi) return i;
    const std::uint64_t span = hi - lo;
    const std::uint64_t ready_below = h_cur;
    const std::uint8_t* const head_ok = fast_head_ok.data();
    const std::uint8_t* const bdm_ok = fast_bdm_ok.data();
    const std::uint8_t* const tail_ok = fast_tail_ok.data();
    std::uint64_t* const latest = fast_latest.data();
    RawFrame* const w = pending.get();
    std::size_t wait_n = waiting;
    // Each frame takes at most one pending place: with no room left the rest is take()'s
    // (which counts stream.pending_full).
    end = std::min(end, i + (pending_capacity - held - wait_n));
    const std::size_t begin = i;
    bool cut_now = false;
    for (; i < end; ++i) {
      const RawFrame& f = frames[i];
      const std::uint32_t bdm = f.bytes[frame_offset::bdm];
      if ((bdm_ok[bdm] & head_ok[f.bytes[frame_offset::head_du]] &
           tail_ok[f.bytes[frame_offset::temp_frac_tail]]) == 0)
        break;
      const std::uint64_t key = key_of(f);
      if (key - lo > span) break;  // outside [lo, hi]
      if (key < ready_below) {
        waiting = wait_n;
        std::memcpy(&input_buffer()[input_count++], &f, sizeof(RawFrame));
        if (input_count == slice_capacity) cut_now = true;
      } else {
        std::memcpy(&w[wait_n++], &f, sizeof(RawFrame));
      }
      latest[bdm] = std::max(latest[bdm], key + 1);
      if (cut_now) {
        ++i;
        break;
      }
    }
    waiting = wait_n;
    if (i != begin) fast_dirty = true;
    if (cut_now) {
      // The cut raises the published horizon: what is late changes.
      flush_fast();
      cut(h_cur, false);
    }
    return i;
  }

  // take() for frames [i, end), the common ones through take_fast().
  void take_range(const RawFrame* frames, std::size_t i, std::size_t end) {
    while (i < end) {
      const std::size_t j = take_fast(frames, i, end);
      if (j != i) {
        i = j;
        continue;
      }
      flush_fast();
      take(frames[i]);
      ++i;
    }
    flush_fast();
  }

  void flush_counters() {
    counters.add(stream_delta);
    stream_delta = CounterDelta{};
  }

  void start_clock(Clock::time_point t) {
    now = t;
    if (!clock_started) {
      clock_started = true;
      last_cut = t;
      warmup_since = t;
      for (Source& s : sources) s.last_seen = t;
    }
  }
};

Slicer::Slicer(const Settings& settings, const Calibration& calibration, Backend& backend,
               ResultSink& sink, Counters& counters)
    : impl_(std::make_unique<Impl>(settings, calibration, backend, sink, counters)) {}

Slicer::~Slicer() = default;

void Slicer::push(const RawFrame* frames, std::size_t n, Clock::time_point now) {
  Impl& m = *impl_;
  m.start_clock(now);
  if (n > 0 && m.run_finished) {
    ++m.run;
    m.run_finished = false;
  }
  for (std::size_t i = 0; i < n; i += kHorizonBlockFrames) {
    const std::size_t end = std::min(n, i + kHorizonBlockFrames);
    m.take_range(frames, i, end);
    // A large push must not leave everything waiting until its end.
    if (end - i == kHorizonBlockFrames) m.update_horizon();
  }
  m.update_horizon();
  m.flush_counters();
}

void Slicer::poll(Clock::time_point now) {
  Impl& m = *impl_;
  m.start_clock(now);
  if (!m.warm && m.warmup_count > 0 && now - m.warmup_since >= m.max_slice) m.end_warmup();
  bool idle_changed = false;
  for (auto& s : m.sources) {
    if (s.sent && !s.idle && now - s.last_seen >= m.source_idle) {
      s.idle = true;
      m.stream_delta[Counter::stream_source_idle] += 1;
      idle_changed = true;
    }
  }
  if (idle_changed) {
    if (m.held > 0 && m.reset_due(false))
      m.new_run();
    else
      m.update_horizon();
  }
  if (now - m.last_cut >= m.max_slice) {
    if (m.input_count > 0 || m.h_cur > m.published) m.cut(m.h_cur, false);
    m.last_cut = now;
    // Latency: whatever was submitted reaches the sink now.
    m.drain();
  }
  m.flush_counters();
}

void Slicer::finish() {
  Impl& m = *impl_;
  if (m.held > 0) {
    if (m.reset_due(true)) {
      m.new_run();
    } else {
      // A reset that not every live source made: those frames belong to no run.
      m.stream_delta[Counter::stream_late] += m.held;
      m.held = 0;
      for (auto& s : m.sources) s.held = 0;
    }
  }
  m.end_run();
  // A later push() starts a new run; run_id() keeps naming the finished one until then.
  m.run_finished = m.run_finished || m.run_delivered;
  m.start_run();
  m.flush_counters();
}

std::uint64_t Slicer::run_id() const { return impl_->run; }
std::uint64_t Slicer::horizon() const { return impl_->published; }
std::size_t Slicer::pending_frames() const {
  return impl_->waiting + impl_->held + impl_->input_count;
}

}  // namespace petdaq

// The slicer's slices, room and blocks, and its public face (core/slicer.h has the contract;
// the per-frame rules are in slicer_frames.cpp). The fast path for a block is correct only
// because it takes the common case of the per-frame rules: fast_path_allowed() is read
// together with Slicer::Impl::take().
#include "core/slicer.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "core/geometry.h"
#include "core/slicer_impl.h"
#include "core/stream_limits.h"

namespace petdaq {

namespace {

// Frames push() copies per block.
constexpr std::size_t kCopyBlockFrames = 1u << 16;

SlicerClock::duration ms(double v) {
  return std::chrono::duration_cast<SlicerClock::duration>(std::chrono::duration<double, std::milli>(v));
}

}  // namespace

SlicerLimits::SlicerLimits(const Settings& s, const Backend& b)
    : bdm_count(Geometry::from(s.scanner).bdm_count()),
      rule(make_source_rule(s)),
      max_disorder_ticks(ps_to_ticks(s.stream.max_disorder_ps, s.scanner.tick_ps)),
      max_future_ticks(petdaq::max_future_ticks(s)),
      source_idle(ms(s.stream.source_idle_ms)),
      max_slice(ms(s.stream.max_slice_ms)),
      reset_confirm(ms(s.stream.reset_confirm_ms)),
      max_lag_ticks(ps_to_ticks(s.stream.max_lag_ms * 1e9, s.scanner.tick_ps)),
      lag_stage_frames(static_cast<std::size_t>(s.stream.lag_stage_fraction *
                                                static_cast<double>(b.max_staged_frames()))) {}

void SlicerCounts::late(int src, std::uint64_t frames) {
  delta[Counter::stream_late] += frames;
  if (src < 0) return;
  bdm_late[static_cast<std::size_t>(src)] += frames;
  bdm_late_any = true;
}

void SlicerCounts::flush(Counters& counters) {
  counters.add(delta);
  delta = CounterDelta{};
  if (!bdm_late_any) return;
  for (std::uint32_t b = 0; b < bdm_late.size(); ++b)
    if (bdm_late[b]) counters.add_bdm_late(b, std::exchange(bdm_late[b], 0));
  bdm_late_any = false;
}

namespace {

std::size_t slice_capacity_of(const Backend& b) {
  return std::max<std::size_t>(1, slice_new_frames(b.max_slice_frames()));
}

std::size_t cut_frames_of(const Backend& b, std::size_t cut) {
  const std::size_t cap = slice_capacity_of(b);
  return cut == 0 ? cap : std::clamp<std::size_t>(cut, 1, cap);
}

}  // namespace

Slicer::Impl::Impl(const Settings& s, Backend& b, ResultSink& out, Counters& c, std::size_t cut,
                   Slicer::Delivery d)
    : backend(b),
      sink(out),
      counters(c),
      lim(s, b),
      clocks(lim.bdm_count),
      held(std::max<std::uint64_t>(1, s.stream.max_pending_frames)),
      stage(slice_capacity_of(b), cut_frames_of(b, cut), b.max_staged_frames()),
      counts(lim.bdm_count),
      copy{std::make_unique_for_overwrite<RawFrame[]>(std::min(kCopyBlockFrames, b.max_slice_frames())),
           std::min(kCopyBlockFrames, b.max_slice_frames()), max_chunk_span_ticks(s), ChunkSummary{}},
      delivery(d) {
  if (b.max_slice_frames() == 0) throw std::invalid_argument("backend takes no frames per slice");
  if (b.max_staged_frames() < slice_capacity_of(b))
    throw std::invalid_argument("backend stages fewer frames than one slice takes");
}

// ---- slices ----

void Slicer::Impl::deliver_one() {
  const SliceResult& r = backend.collect();
  stage.collected(r.frames_taken + r.frames_dropped);
  if (r.split) {
    counters.add(Counter::stream_split_slices);
    stage.note_split();
    runs.split(r.slice_id);
  }
  counters.add(r.counters);
  counters.add(Counter::stream_slices);
  if (r.bdm_singles)
    for (std::uint32_t b = 0; b < lim.bdm_count; ++b) {
      if (r.bdm_singles[b]) counters.add_bdm_singles(b, r.bdm_singles[b]);
      if (r.bdm_energy_rejected[b]) counters.add_bdm_energy_rejected(b, r.bdm_energy_rejected[b]);
    }
  if (r.bdm_dead)
    for (std::uint32_t b = 0; b < lim.bdm_count; ++b)
      if (r.bdm_dead[b]) counters.add_bdm_dead(b, r.bdm_dead[b]);
  // A slice that took every staged frame below its bound is done with the ranges that end
  // there (the slices after it have later bounds).
  if (!r.split) dead.drop_ended(r.bound);
  sink.on_slice(runs.id(), r);
}

void Slicer::Impl::drain() {
  while (backend.in_flight() > 0) deliver_one();
}

// Every frame accepted so far must be staged before a cut (flush()).
void Slicer::Impl::cut(std::uint64_t bound, bool final) {
  while (backend.in_flight() >= backend.max_in_flight()) deliver_one();
  SliceRequest request = runs.next(bound, final);
  request.dead = dead;
  backend.submit(request);
  stage.cut();
  h.published = std::max(h.published, final ? h.current : bound);
  wall.last_cut = wall.now;
  if (backend.works_in_collect()) deliver_one();
}

// Stages frames that are accepted (the caller has flushed everything accepted before).
void Slicer::Impl::stage_frames(const RawFrame* f, std::size_t n) {
  if (n == 0) return;
  stage.staged(n, backend.stage(f, n));
}

// Stages the kept frames of the block under the per-frame pass.
void Slicer::Impl::flush() {
  if (!block || block->kept == block->staged) return;
  stage_frames(block->frames + block->staged, block->kept - block->staged);
  block->staged = block->kept;
}

// Cuts (and waits) until `n` more frames may be staged, as far as the horizon allows;
// returns how many may.
std::size_t Slicer::Impl::make_room(std::size_t n) {
  if (stage.cut_before(n)) cut(h.current, false);
  if (lim.lag_stage_frames > 0 && stage.over(lim.lag_stage_frames, n)) release_lagging(n);
  while (stage.over_stage(n)) {
    if (stage.blocked(h.current)) break;
    const std::size_t before = stage.held();
    cut(h.current, false);
    drain();
    if (stage.held() >= before) {  // nothing more below the horizon
      stage.block_at(h.current);
      break;
    }
    stage.unblock();
  }
  return stage.room(n);
}

void Slicer::Impl::update_horizon() {
  if (!runs.warm()) return;
  update_lag();
  h.current = std::max(h.current, clocks.horizon(lim.max_disorder_ticks));
}

// ---- lagging sources (DESIGN section 6) ----

// The time rule: sources further than stream.max_lag_ms behind the leaders lag. A lagging
// source back near the leaders holds the horizon again when it is no more than half of
// max_future behind it: its frames behind the published horizon are late, and the horizon
// waits for the rest. A board that stays a little behind the others (a slower link) rejoins
// too, instead of losing every frame until the run ends; one far behind (the others gone
// idle meanwhile) does not, so that its backlog stays late and never looks like a reset.
void Slicer::Impl::update_lag() {
  if (lim.max_lag_ticks == 0 && !clocks.any_lagging()) return;
  counts.delta[Counter::stream_source_lagging] +=
      clocks.update_lag(lim.max_lag_ticks, h.current, lim.max_future_ticks / 2);
}

// The room rule: the frames waiting for the horizon fill the share of the stage one
// source's wait may, so the source holding it lags (as long as another is ahead of it).
void Slicer::Impl::release_lagging(std::size_t n) {
  // Nothing to declare last time, and neither the horizon nor the leaders moved since.
  const std::uint64_t leaders = clocks.leaders_time();
  if (h.current == lag_room.idle_at && leaders == lag_room.leaders && !stage.split_seen()) return;
  for (;;) {
    const std::size_t before = stage.held();
    cut(h.current, false);
    drain();
    if (!stage.over(lim.lag_stage_frames, n)) return;
    // The cut freed frames (a split slice leaves the rest of them): cut again before the
    // frames left can be said to wait for a source.
    if (stage.held() < before) continue;
    const int src = clocks.holding_back(lim.max_disorder_ticks);
    if (src < 0) {
      lag_room.idle_at = h.current;
      lag_room.leaders = leaders;
      return;
    }
    declare_lagging(src);
  }
}

void Slicer::Impl::declare_lagging(int src) {
  clocks.declare_lagging(static_cast<std::size_t>(src));
  counts.delta[Counter::stream_source_lagging] += 1;
  h.current = std::max(h.current, clocks.horizon(lim.max_disorder_ticks));
}

// The room rule for the ring: its chunks hold frames that wait for the horizon. The source
// holding it lags when another live source is more than a chunk's span (half of
// max_future) ahead of it.
bool Slicer::Impl::release_for_ring() {
  if (!runs.warm() || lim.lag_stage_frames == 0) return false;
  const int src = clocks.holding_back(lim.max_future_ticks / 2);
  if (src < 0) return false;
  flush();
  declare_lagging(src);
  cut(h.current, false);
  drain();
  return true;
}

// ---- a block ----

// The fast path is allowed when the summary shows nothing the per-frame rules would act on.
bool Slicer::Impl::fast_path_allowed(const ChunkSummary& sum) {
  if (!runs.warm() || runs.replaying || clocks.any_reset()) return false;
  const std::uint64_t lo = std::max(h.published, far_back_limit(h.current, lim.max_future_ticks));
  for (std::uint32_t i = 0; i < sum.present_count; ++i) {
    const std::uint8_t src = sum.present[i];
    const SourceSpan& s = sum.sources[src];
    if (src >= lim.bdm_count || s.min_time < lo) return false;
    // Every frame is within reach of the horizon or goes on from its source's latest time
    // (which only grows as the chunk's frames are taken): none is a time jump.
    if (is_time_jump(s.max_time, h.current, lim.max_future_ticks) && !continues(clocks[src], s.max_time))
      return false;
  }
  return true;
}

// A block of lagging sources' frames, every one behind the published horizon: the per-frame
// rules (lagging_frame) would count each late and move its source's clock to it, so that is
// done from the summary, without the pass — at the rate a board sends, the per-frame pass
// over a lagging board's frames alone could outrun the worker.
bool Slicer::Impl::late_block(const ChunkSummary& sum) {
  if (!runs.warm() || runs.replaying || clocks.any_reset() || sum.sourceless > 0 ||
      sum.present_count == 0)
    return false;
  for (std::uint32_t i = 0; i < sum.present_count; ++i) {
    const std::uint8_t src = sum.present[i];
    if (src >= lim.bdm_count) return false;
    const SourceClocks::Source& s = clocks[src];
    const SourceSpan& span = sum.sources[src];
    // Not far back of the source's clock before the block, nor of where the block moves it.
    if (!s.lagging || span.max_time >= h.published ||
        is_far_back(span.min_time, s.latest, lim.max_future_ticks) ||
        span.max_time - span.min_time > lim.max_future_ticks)
      return false;
  }
  for (std::uint32_t i = 0; i < sum.present_count; ++i) {
    const std::uint8_t src = sum.present[i];
    SourceClocks::Source& s = clocks[src];
    const SourceSpan& span = sum.sources[src];
    if (span.max_time > s.latest) s.latest = span.max_time;
    counts.late(src, span.frames);
  }
  return true;
}

void Slicer::Impl::take_block(RawFrame* frames, std::size_t n, const ChunkSummary& sum) {
  if (n == 0) return;
  if (late_block(sum)) return;
  const bool fits = n <= stage.slice_capacity();
  const std::size_t room = fits ? make_room(n) : 0;
  if (fits && fast_path_allowed(sum)) {
    // Every frame would be kept by the per-frame rules: those the stage has room for are
    // staged, the rest counted and dropped as the per-frame pass would (its sources' clocks
    // move all the same), without a pass over them.
    stage_frames(frames, room);
    counts.delta[Counter::stream_pending_full] += n - room;
    for (std::uint32_t i = 0; i < sum.present_count; ++i) {
      const std::uint8_t src = sum.present[i];
      clocks.took(src, sum.sources[src].max_time, wall.now);
    }
    update_horizon();
    // Enough for a slice: cut now, at the horizon this block moved, rather than when the
    // next block comes.
    if (stage.cut_due()) cut(h.current, false);
    return;
  }
  counts.delta[Counter::stream_exact_blocks] += 1;
  take_exact(frames, n);
  update_horizon();
}

void Slicer::Impl::start_clock(SlicerClock::time_point t) {
  wall.now = t;
  if (!wall.started) {
    wall.started = true;
    wall.last_cut = t;
    warmup.restart(t);
    clocks.seen_all(t);
  }
}

void Slicer::Impl::begin_push(SlicerClock::time_point t, std::size_t n) {
  start_clock(t);
  runs.push(n);
}

// ---- the public face ----

Slicer::Slicer(const Settings& settings, Backend& backend, ResultSink& sink, Counters& counters,
               std::size_t cut_frames, Delivery delivery)
    : impl_(std::make_unique<Impl>(settings, backend, sink, counters, cut_frames, delivery)) {}

Slicer::~Slicer() = default;

std::size_t Slicer::memory_bytes(const Settings& s, std::size_t max_slice_frames) {
  const std::size_t bdms = Geometry::from(s.scanner).bdm_count();
  return sizeof(Impl) + bdms * (sizeof(SourceClocks::Source) + sizeof(std::uint64_t)) +
         std::max<std::uint64_t>(1, s.stream.max_pending_frames) * sizeof(RawFrame) +
         std::min(kCopyBlockFrames, max_slice_frames) * sizeof(RawFrame);
}

std::uint64_t Slicer::push_block(RawFrame* frames, std::size_t n, const ChunkSummary& summary,
                                 Clock::time_point now) {
  Impl& m = *impl_;
  m.begin_push(now, n);
  const std::uint64_t before = m.stage.last_ticket();
  m.take_block(frames, n, summary);
  m.counts.flush(m.counters);
  return m.stage.last_ticket() != before ? m.stage.last_ticket() : 0;
}

void Slicer::push(const RawFrame* frames, std::size_t n, Clock::time_point now) {
  Impl& m = *impl_;
  m.begin_push(now, n);
  RawFrame* block = m.copy.frames.get();
  for (std::size_t i = 0; i < n;) {
    // Blocks as a receiver would fill chunks (core/chunk_summary.h).
    const std::size_t k = std::min(m.copy.capacity, n - i);
    std::memcpy(block, frames + i, k * sizeof(RawFrame));
    const std::size_t piece = next_block(block, k, k, m.copy.max_span_ticks, m.lim.rule, m.copy.summary);
    const std::uint64_t before = m.stage.last_ticket();
    m.take_block(block, piece, m.copy.summary);
    if (m.stage.last_ticket() != before) m.backend.wait_staged(m.stage.last_ticket());
    i += piece;
  }
  m.counts.flush(m.counters);
}

bool Slicer::staged(std::uint64_t ticket) { return ticket == 0 || impl_->backend.staged(ticket); }

void Slicer::wait_staged(std::uint64_t ticket) {
  if (ticket != 0) impl_->backend.wait_staged(ticket);
}

void Slicer::poll(Clock::time_point now) {
  Impl& m = *impl_;
  m.start_clock(now);
  if (!m.runs.warm() && m.warmup.count() > 0 && now - m.warmup.since() >= m.lim.max_slice) m.end_warmup();
  if (const std::uint32_t idle = m.clocks.mark_idle(now, m.lim.source_idle)) {
    m.counts.delta[Counter::stream_source_idle] += idle;
    m.update_horizon();
  }
  // A reset is confirmed by time as well as by frames.
  if (m.held.count() > 0 && m.reset_due(false)) m.new_run(RunEnd::clock_reset);
  if (now - m.wall.last_cut >= m.lim.max_slice) {
    if (m.stage.since_cut() > 0 || m.h.current > m.h.published || m.stage.split_seen())
      m.cut(m.h.current, false);
    m.stage.clear_split();
    m.wall.last_cut = now;
    // Latency: whatever was submitted reaches the sink now.
    if (m.delivery == Delivery::latency) m.drain();
  }
  m.counts.flush(m.counters);
}

void Slicer::finish() {
  Impl& m = *impl_;
  if (m.held.count() > 0) {
    if (m.reset_due(true)) {
      m.new_run(RunEnd::clock_reset);
    } else {
      // A reset that not every live source made: those frames belong to no run.
      m.counts.delta[Counter::stream_late] += m.held.release();
      m.clocks.forget_held();
    }
  }
  m.end_run(RunEnd::finished);
  // A later push() starts a new run; run_id() keeps naming the finished one until then.
  m.runs.finish();
  m.start_run();
  m.counts.flush(m.counters);
}

bool Slicer::release_lagging_source() {
  Impl& m = *impl_;
  const bool declared = m.release_for_ring();
  m.counts.flush(m.counters);
  return declared;
}

std::pair<std::uint64_t, std::uint64_t> Slicer::add_dead_range(std::uint64_t begin,
                                                                std::uint64_t end) {
  // Below the published horizon the frames are in slices already.
  begin = std::max(begin, impl_->h.published);
  if (end <= begin) return {0, 0};
  return impl_->dead.add(begin, end);
}

void Slicer::set_receiver_behind(std::uint32_t bdm, bool behind) {
  SourceClocks& clocks = impl_->clocks;
  if (bdm < clocks.size()) clocks[bdm].receiver_behind = behind;
}

double Slicer::receiver_wait_share() const {
  const Impl& m = *impl_;
  if (m.stage.stage_capacity() == 0 || !m.clocks.held_by_receiver_behind()) return 0;
  return static_cast<double>(m.stage.held()) / static_cast<double>(m.stage.stage_capacity());
}

bool Slicer::source_lagging(std::uint32_t bdm) const {
  const SourceClocks& clocks = impl_->clocks;
  return bdm < clocks.size() && clocks[bdm].lagging;
}

void Slicer::skip_dead(std::span<const std::uint64_t> reached) {
  Impl& m = *impl_;
  if (!m.runs.warm()) return;
  m.clocks.skip_dead(reached);
  m.update_horizon();
  m.counts.flush(m.counters);
}

std::uint64_t Slicer::latest_time() const { return impl_->clocks.latest_time(); }

std::uint64_t Slicer::run_id() const { return impl_->runs.id(); }
std::uint64_t Slicer::horizon() const { return impl_->h.published; }
std::size_t Slicer::pending_frames() const {
  return impl_->stage.held() + impl_->held.count() + impl_->warmup.count();
}

}  // namespace petdaq

// The slicer's exact per-frame rules (DESIGN section 6; core/slicer.h states them), the
// warm-up that fixes a run's first time reference, and the clock reset that starts a run.
#include <algorithm>

#include "core/slicer_impl.h"
#include "core/stream_limits.h"

namespace petdaq {

namespace {

// A source of the run silent for this many stream.source_idle_ms no longer counts as
// evidence for or against a clock reset (a board that is off); one idle for less must make
// the reset too.
constexpr int kResetIgnoresSilentForIdles = 50;
// Frames between horizon updates inside a block that takes the per-frame pass.
constexpr std::size_t kHorizonBlockFrames = 4096;
// Frames in a row a source must send far ahead of the horizon before they are taken as its
// clock having moved on (the scanner paused while its clock ran) rather than corrupt stamps.
constexpr std::uint32_t kJumpConfirmFrames = 4;

std::uint64_t key_of(const RawFrame& f) { return frame_time(f.bytes); }

}  // namespace

void Slicer::Impl::take_reserved(const RawFrame& f) {
  reserve();
  take(f);
}

void Slicer::Impl::take_exact(RawFrame* frames, std::size_t n) {
  exact_pass(frames, [&] {
    for (std::size_t i = 0; i < n; ++i) {
      take_reserved(frames[i]);
      // A large block must not leave everything waiting until its end.
      if ((i + 1) % kHorizonBlockFrames == 0) update_horizon();
    }
  });
}

// ---- one frame ----

void Slicer::Impl::take(const RawFrame& f) {
  const int src = lim.rule.source_of(f.bytes);
  if (src < 0) {
    // Not attributable to a source: the backend counts it as bad in the next slice.
    keep(f);
    return;
  }
  SourceClocks::Source& s = clocks[static_cast<std::size_t>(src)];
  const bool was_idle = clocks.saw(static_cast<std::size_t>(src), wall.now, lim.source_idle);
  const std::uint64_t key = key_of(f);
  if (!runs.warm()) {
    take_warmup(f, key);
    return;
  }
  if (lagging_frame(s, src, f, key)) return;
  const bool back = far_back(key);
  if (back && !runs.replaying) {
    hold_for_next_run(f, src);
    return;
  }
  if (s.reset && key > s.latest) {
    // The source's old clock is still running: its far-backwards frames were corrupt.
    s.reset = false;
    counts.delta[Counter::stream_late] += held.drop_source(static_cast<std::uint8_t>(src));
    s.held = 0;
  }
  if (key < h.published || back) {
    counts.late(src);
    return;
  }
  if (time_jump(s, key, was_idle)) {
    counts.delta[Counter::stream_time_jump] += 1;
    return;
  }
  s.accept(key);
  keep(f);
}

// A frame within max_future of its own source's latest time goes on from it: that source
// runs ahead of a lagging one (another receiver's chunk not sealed yet, a sender that
// drifts), which is no wild stamp however far ahead of the horizon it is (DESIGN 6).
bool Slicer::Impl::continues(const SourceClocks::Source& s, std::uint64_t key) const {
  return s.sent && !is_time_jump(key, s.latest, lim.max_future_ticks);
}

bool Slicer::Impl::far_back(std::uint64_t key) const {
  return is_far_back(key, h.current, lim.max_future_ticks);
}

// A frame far ahead of the horizon that does not go on from its source's latest time is a
// time jump, unless its source has moved on with the scanner's clock: back from silence, or
// sending far ahead kJumpConfirmFrames times in a row. A lone far-ahead stamp is corrupt.
bool Slicer::Impl::time_jump(SourceClocks::Source& s, std::uint64_t key, bool was_idle) {
  // The horizon is brought up to date once per block of frames; a frame that looks far
  // ahead of it checks against the current one first.
  if (is_time_jump(key, h.current, lim.max_future_ticks)) update_horizon();
  if (!is_time_jump(key, h.current, lim.max_future_ticks) || continues(s, key)) {
    s.ahead_streak = 0;
    return false;
  }
  return !was_idle && ++s.ahead_streak < kJumpConfirmFrames;
}

// A frame of a lagging source that goes on from its own clock: behind the published
// horizon it is late (counted for its BDM), else kept. Its time moves the source's
// latest, so that the source can catch up. False: the usual rules decide.
bool Slicer::Impl::lagging_frame(SourceClocks::Source& s, int src, const RawFrame& f,
                                 std::uint64_t key) {
  if (!s.lagging || is_far_back(key, s.latest, lim.max_future_ticks)) return false;
  if (key >= h.published && !far_back(key)) return false;
  if (key > s.latest) s.latest = key;
  if (key < h.published)
    counts.late(src);
  else
    keep(f);
  return true;
}

// ---- warm-up: the first frames of a run fix the time-jump reference ----

void Slicer::Impl::take_warmup(const RawFrame& f, std::uint64_t key) {
  if (held.count() + warmup.count() >= held.capacity()) {
    counts.delta[Counter::stream_pending_full] += 1;
    return;
  }
  warmup.add(f, key, wall.now);
  if (warmup.full()) end_warmup();
}

void Slicer::Impl::end_warmup() {
  if (runs.warm()) return;
  flush();
  const std::size_t n = warmup.count();
  const std::size_t kept = warmup.end(lim.max_future_ticks, [&](const RawFrame& f, std::uint64_t key) {
    clocks[f.bytes[frame_offset::bdm]].accept(key);
  });
  counts.delta[Counter::stream_time_jump] += n - kept;
  runs.set_warm();
  h = Horizons{};
  RawFrame* frames = warmup.frames();
  exact_pass(frames, [&] {
    for (std::size_t i = 0; i < kept; ++i) {
      reserve();
      keep(frames[i]);
    }
  });
  backend.wait_staged(stage.last_ticket());  // the warm-up buffer serves the next run
  update_horizon();
}

// ---- clock reset ----

// A frame far before the horizon: its source waits for the next run, and the frame is held
// for it. The run ends once the reset is confirmed.
void Slicer::Impl::hold_for_next_run(const RawFrame& f, int src) {
  const auto i = static_cast<std::size_t>(src);
  clocks.mark_reset(i, wall.now);
  if (held.add(f))
    ++clocks[i].held;
  else
    counts.delta[Counter::stream_pending_full] += 1;
  if (reset_due(false)) new_run(RunEnd::clock_reset);
}

bool Slicer::Impl::reset_due(bool at_finish) const {
  return clocks.reset_due(at_finish, held.count(), wall.now, lim.reset_confirm,
                          lim.source_idle * kResetIgnoresSilentForIdles);
}

void Slicer::Impl::end_run(RunEnd reason) {
  flush();
  if (!runs.warm()) end_warmup();
  if (runs.has_slices() || stage.held() > 0) {
    do {
      runs.clear_final_split();
      cut(h.current, true);
      drain();
    } while (runs.final_split());
  }
  drain();
  if (runs.delivered()) sink.on_run_end(runs.id(), reason);
}

void Slicer::Impl::start_run() {
  clocks.start_run();
  stage.unblock();
  runs.start();
  warmup.restart(wall.now);
  h = Horizons{};
  dead = DeadRanges{};
}

// Every live source jumped far backwards: the scanner's clock was reset. The run ends and
// the held frames start the next one, in their order of arrival.
void Slicer::Impl::new_run(RunEnd reason) {
  end_run(reason);
  runs.next_run();
  counts.delta[Counter::stream_runs] += 1;
  start_run();
  const std::size_t n = held.release();
  RawFrame* frames = held.data();
  exact_pass(frames, [&] {
    runs.replaying = true;
    for (std::size_t i = 0; i < n; ++i) {
      const RawFrame f = frames[i];
      take_reserved(f);
    }
    runs.replaying = false;
  });
  backend.wait_staged(stage.last_ticket());  // the held buffer takes the next holds
  update_horizon();
}

}  // namespace petdaq

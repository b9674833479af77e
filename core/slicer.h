// The streaming driver of DESIGN section 6, shared by every backend: it tracks each source's
// time, computes the horizon, cuts slices, drops and counts late frames and time jumps,
// detects a clock reset (new run), and hands each slice to the backend. Results come back
// in order through the ResultSink.
//
// The choices DESIGN section 6 leaves open, as made here:
// * Source = the frame's BDM byte. A frame whose markers (when checked) or BDM are bad has no
//   source: it goes straight into the next slice, where the backend counts it, and never
//   moves the horizon.
// * A source holds the horizon once it has sent in the current run and while it is not idle
//   (silent for stream.source_idle_ms; counted once per episode in stream.source_idle; it
//   rejoins with its next frame; after a pause of every source, the first frame back wakes
//   the others, which hold the horizon at their latest time again until they send or go idle
//   once more). horizon_raw = max(previous, min over those sources of their
//   latest raw time - max_disorder); with every source idle, everything received is complete.
//   A slice's bound is horizon_raw; the backend turns it into a corrected-time horizon with
//   calibration.min_time_offset (corrected_horizon(), core/frame_source.h).
// * The first 64 frames of a run wait until their median time is known: those more than
//   stream.max_future_ps from it are time jumps. After that, a frame more than max_future
//   ahead of the horizon is a time jump and one before the last published horizon is late
//   (both counted and dropped) — except that a source back from idle, or one that has sent
//   4 such frames in a row, has moved on with the scanner's clock (a pause with the clock
//   running, a long loss): its frames are taken again, at the cost of at most 3 counted
//   time jumps per source.
// * Clock reset: a frame more than max_future before the horizon puts its source into the
//   next run and is held. When every live source has sent at least 4 such frames and has
//   been in that state for stream.reset_confirm_ms of wall clock, the run ends with a final
//   slice (on_run_end, reason clock_reset), stream.runs and run_id go up by one and the held
//   frames start the new run in their order of arrival. A source whose old clock goes on
//   (a frame after its latest old-run time) was not reset: its held frames count as late —
//   which is what becomes of forged far-backwards datagrams: the genuine sources go on
//   within the confirmation time.
// * Frames reach the backend in blocks (ring chunks), staged as they arrive; a slice is a
//   raw-time bound, and the backend keeps the staged frames at or after it for later slices
//   (core/backend.h). A block whose summary (core/chunk_summary.h) shows every source's
//   frames inside [max(published horizon, horizon - max_future), horizon + max_future] with
//   the run warm and no source waiting for a reset takes the fast path: it is staged whole,
//   the slicer touches none of its frames. Any other block takes an exact pass per frame with
//   the rules above, rewriting the block in place to the frames it keeps.
// * A slice is cut when the frames staged since the last one would exceed half of
//   max_slice_frames (the other half is room for frames earlier cuts left staged),
//   when the backend's stage would exceed max_pending_frames (then the slicer also waits for
//   the slices in flight; frames that still find no room are counted in
//   stream.pending_full and dropped, and while the horizon stays where a cut freed nothing,
//   no further cut is tried for room: a lagging source then costs drops, not a slice per
//   block; a fast-path block is staged as far as there is room, the rest of it dropped), when poll() finds max_slice_ms passed (then, with
//   Delivery::latency, every submitted slice is also collected and delivered), and at
//   finish(). A cut is always
//   made before the block that needs the room is classified, so every frame staged after a
//   cut is at or after its bound. When more than max_slice_frames staged frames are below a
//   bound, the backend takes the earliest and says so (SliceResult::split); the next cut
//   takes the rest, and the end of a run cuts until nothing is left.
// * Lagging sources (a board whose link cannot keep up): a live source whose latest time is
//   more than stream.max_lag_ms behind the leaders' (the upper median of the live sources'
//   latest times) is lagging, checked whenever the horizon is brought up to date; so is the
//   source holding the horizon when the frames waiting for it fill stream.lag_stage_fraction
//   of the stage and another live source is ahead of it. A lagging source does not hold the
//   horizon (like an idle one); its frames that go on from its own clock are taken when at or
//   after the published horizon and late (stream.late, and per BDM) when behind it, and never
//   count as a clock reset or a time jump. Each episode is counted in stream.source_lagging.
//   It holds the horizon again once back within half of max_lag_ms of the leaders (half its
//   distance to them when the room rule declared it) and no more than half of max_future
//   behind the horizon (the others may have gone idle meanwhile: its frames stay late, never
//   a clock reset).
// * Frames held for the next run wait in a buffer of stream.max_pending_frames; a frame that
//   finds it full is counted in stream.pending_full and dropped.
// * After finish(), a later push() starts a new run (run_id + 1, not counted as a reset).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <span>

#include "core/backend.h"
#include "core/chunk_summary.h"
#include "core/counters.h"
#include "core/settings.h"

namespace petdaq {

class Slicer {
 public:
  using Clock = std::chrono::steady_clock;

  // When results reach the sink. `latency` (petdaqd): at each cut that max_slice_ms makes,
  // every slice submitted is collected, so that no result waits for the slices behind it.
  // `throughput` (files, where the clock is acquisition time and nobody waits): a slice is
  // collected when the backend's slices in flight need its place, and at finish(), so that
  // a device backend always has the next slices queued. The slices, and so every record,
  // are the same; only when they are delivered differs.
  enum class Delivery { latency, throughput };

  // `cut_frames`: new frames after which a slice is cut once the horizon allows (at most half
  // of the backend's max_slice_frames, which leaves room for what a cut leaves staged). 0:
  // that half, so that the slices, and petdaq-offline's files, are the same whatever the
  // backend and its threads. petdaqd passes the backend's preferred_slice_frames().
  Slicer(const Settings& settings, Backend& backend, ResultSink& sink, Counters& counters,
         std::size_t cut_frames = 0, Delivery delivery = Delivery::latency);
  ~Slicer();
  Slicer(const Slicer&) = delete;
  Slicer& operator=(const Slicer&) = delete;
  // Host memory it takes, from the settings and the backend's max_slice_frames: the frames
  // held for the next run, push()'s copy blocks, the per-source state.
  static std::size_t memory_bytes(const Settings& settings, std::size_t max_slice_frames);

  // Takes a block of frames (any source, any order within the allowed disorder) in memory
  // the caller owns, described by `summary` (ChunkSummary::add over exactly these frames).
  // May rewrite the block in place (to the frames it keeps), stages them with the backend
  // and returns the ticket of the last stage (0: none): the caller leaves the memory alone
  // until staged(ticket). Cuts and submits slices as needed; may wait for the backend.
  // Never allocates.
  std::uint64_t push_block(RawFrame* frames, std::size_t n, const ChunkSummary& summary,
                           Clock::time_point now);
  // The same for frames the slicer may not touch: it copies them, in blocks, and waits for
  // each block's stage (tests and tools that read files).
  void push(const RawFrame* frames, std::size_t n, Clock::time_point now);
  bool staged(std::uint64_t ticket);
  void wait_staged(std::uint64_t ticket);
  // Cuts a slice if stream.max_slice_ms has passed since the last one, and lets idle
  // sources stop holding the horizon back. Call at least every few milliseconds.
  void poll(Clock::time_point now);
  // End of the acquisition: resolves everything pending and delivers all results.
  void finish();

  // The ring is filling (the caller's high mark): when the room rule is on
  // (stream.lag_stage_fraction > 0) and another live source is more than half of
  // stream.max_future_ps ahead of the one holding the horizon, that one is lagging and a
  // slice is cut at the new horizon, which frees the chunks that waited for it. Returns
  // whether a source was declared (then the backlog was a lagging board, not an overload).
  bool release_lagging_source();
  // The source (BDM) is lagging (DESIGN section 6): it does not hold the horizon.
  bool source_lagging(std::uint32_t bdm) const;
  // The daemon's receiver of the source (BDM) is behind, or no longer (its socket held a
  // backlog when it sealed the source's last block): such a source is never declared
  // lagging, since it is the daemon that is late, not the board (DESIGN section 6).
  void set_receiver_behind(std::uint32_t bdm, bool behind);
  // The share of the stage that waits for the horizon while a source whose receiver is
  // behind holds it (0 when the source holding it is on time): the daemon's own backlog,
  // which overload shedding treats as it treats the ring's.
  double receiver_wait_share() const;
  // Frames were shed as dead time before the slicer (DESIGN section 6, "Overload"):
  // `reached[b]` is one past the latest time of source b's frames dropped (0: none). They
  // still tell where the source's clock is: each live source goes on from there. A source
  // with none dropped has not reached the interval and holds the horizon where it is.
  void skip_dead(std::span<const std::uint64_t> reached);
  // [begin, end) in raw ticks is dead for every board, and frames of it may be staged
  // already: a receiving socket lost datagrams there (DESIGN section 6, "Losses at a
  // socket"). Every slice from the next on drops its staged frames in it (FrameStatus::dead,
  // per BDM in bdm.dead). The part below the published horizon is in slices already and is
  // left out; ranges it meets are merged in. With DeadRanges::kMax ranges open and none met
  // it is refused. Returns the range it holds that covers what it was given ({0, 0}: none,
  // all of it below the horizon or refused), for the caller's accounting of dead time.
  std::pair<std::uint64_t, std::uint64_t> add_dead_range(std::uint64_t begin, std::uint64_t end);
  // The latest raw time taken in this run (the sources' latest, time jumps excluded; 0: none).
  std::uint64_t latest_time() const;

  std::uint64_t run_id() const;
  std::uint64_t horizon() const;  // last published raw-time horizon
  std::size_t pending_frames() const;  // staged, held for the next run, or in warm-up

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace petdaq

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
//   rejoins with its next frame). horizon_raw = max(previous, min over those sources of their
//   latest raw time - max_disorder); with every source idle, everything received is complete.
//   The backend gets horizon_raw + calibration.min_time_offset (clamped at 0).
// * The first 64 frames of a run wait until their median time is known: those more than
//   stream.max_future_ps from it are time jumps. After that, a frame more than max_future
//   ahead of the horizon is a time jump and one before the last published horizon is late
//   (both counted and dropped) — except that a source back from idle, or one that has sent
//   4 such frames in a row, has moved on with the scanner's clock (a pause with the clock
//   running, a long loss): its frames are taken again, at the cost of at most 3 counted
//   time jumps per source.
// * Clock reset: a frame more than max_future before the horizon puts its source into the
//   next run and is held. When every live source has sent at least 4 such frames, the run
//   ends with a final slice (on_run_end), stream.runs and run_id go up by one and the held
//   frames start the new run in their order of arrival. A source whose old clock goes on
//   (a frame after its latest old-run time) was not reset: its held frames count as late.
// * A slice is cut when the backend's input is full, when poll() finds max_slice_ms passed
//   (then every submitted slice is also collected and delivered), and at finish(). When the
//   horizon frees more frames than the slice can take, the slice takes the earliest
//   (nth_element) and its horizon is the time of the first frame left out.
// * Pending frames live in one buffer of stream.max_pending_frames; a frame that finds it
//   full is counted in stream.pending_full and dropped (cutting early would need a horizon
//   the sources have not reached).
// * After finish(), a later push() starts a new run (run_id + 1, not counted as a reset).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/backend.h"
#include "core/counters.h"
#include "core/settings.h"

namespace petdaq {

struct Calibration;

class ResultSink {
 public:
  virtual ~ResultSink() = default;
  // One resolved slice of run `run_id`, in order. Called on the slicer's thread.
  virtual void on_slice(std::uint64_t run_id, const SliceResult& result) = 0;
  // The run ended (clock reset or finish()); its last slice was delivered before.
  virtual void on_run_end(std::uint64_t run_id) { (void)run_id; }
};

class Slicer {
 public:
  using Clock = std::chrono::steady_clock;

  // min/max time offsets come from the calibration (corrected time = raw + offset).
  Slicer(const Settings& settings, const Calibration& calibration, Backend& backend,
         ResultSink& sink, Counters& counters);
  ~Slicer();
  Slicer(const Slicer&) = delete;
  Slicer& operator=(const Slicer&) = delete;

  // Takes frames (any source, any order within the allowed disorder). Cuts and submits
  // slices when enough frames are complete; may wait for the backend. Never allocates.
  void push(const RawFrame* frames, std::size_t n, Clock::time_point now);
  // Cuts a slice if stream.max_slice_ms has passed since the last one, and lets idle
  // sources stop holding the horizon back. Call at least every few milliseconds.
  void poll(Clock::time_point now);
  // End of the acquisition: resolves everything pending and delivers all results.
  void finish();

  std::uint64_t run_id() const;
  std::uint64_t horizon() const;  // last published raw-time horizon
  std::size_t pending_frames() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace petdaq

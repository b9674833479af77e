// The streaming driver of DESIGN section 6, shared by every backend: it tracks each source's
// time, computes the horizon, cuts slices, drops and counts late frames and time jumps,
// detects a clock reset (new run), and hands each slice to the backend. Results come back
// in order through the ResultSink.
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

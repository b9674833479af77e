// The interface the slicer drives (DESIGN sections 1 and 6): a backend turns the raw frames
// of one slice plus its own carry-over into coincidence records. Slices are submitted in
// order and collected in the same order; a backend may keep several in flight.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/counters.h"
#include "proto/frame.h"
#include "proto/records.h"

namespace petdaq {

class HistogramSet;

struct SliceRequest {
  std::uint64_t slice_id = 0;
  const RawFrame* frames = nullptr;  // the backend's input buffer handed out by input_buffer()
  std::size_t frame_count = 0;       // <= max_slice_frames()
  // Corrected-time horizon: every single of later slices has time >= horizon.
  std::uint64_t horizon = 0;
  // End of the run: resolve every window, emit everything, clear the carry-over.
  bool final = false;
  // First slice of a run: t_begin of its batch is 0 and the carry-over starts empty.
  bool run_start = false;
};

struct SliceResult {
  std::uint64_t slice_id = 0;
  // Batch interval of this slice's records: [t_begin, t_end). Consecutive slices of a run
  // tile time: t_begin of one is t_end of the one before (0 for the first of a run).
  // t_end = min(time of the first carried single, horizon); for a final slice,
  // max(t_begin, last single's time + 1).
  std::uint64_t t_begin = 0;
  std::uint64_t t_end = 0;
  const CoincRecord* prompts = nullptr;
  std::size_t prompt_count = 0;
  const CoincRecord* delayed = nullptr;
  std::size_t delayed_count = 0;
  std::size_t carry_count = 0;  // singles kept for the next slice
  // frame.*, single.*, coinc.*, stream.carry_overflow of this slice.
  //
  // Carry overflow, the same on every backend: when the carry-over left after resolving a
  // non-final slice would exceed stream.max_carry_singles, that slice is resolved as if it
  // were final (every window resolved, nothing carried, t_end as for a final slice) and
  // stream.carry_overflow is counted once. The run goes on: the next slice is not run_start
  // and its t_begin is this t_end.
  CounterDelta counters;
  // Per-BDM accepted singles and energy-rejected singles of this slice (bdm_count each).
  const std::uint64_t* bdm_singles = nullptr;
  const std::uint64_t* bdm_energy_rejected = nullptr;
  // The singles this slice resolved (every single before the carry-over), in the order of
  // DESIGN section 5; only with output.singles.enabled, else null and 0. Their times lie in
  // [t_begin, t_end).
  const Single* singles = nullptr;
  std::size_t single_count = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  // New frames one slice may hold.
  virtual std::size_t max_slice_frames() const = 0;
  // Slices that may be submitted and not yet collected.
  virtual std::size_t max_in_flight() const = 0;
  // The host buffer (max_slice_frames() frames; pinned on the GPU) that the next submit()
  // must pass as its frames. Valid until that slice is collected.
  virtual RawFrame* input_buffer() = 0;
  // Queues one slice; never blocks on the slice's own work.
  virtual void submit(const SliceRequest& request) = 0;
  // Waits for the oldest submitted slice; the result stays valid until the next submit() or
  // collect().
  virtual const SliceResult& collect() = 0;
  virtual std::size_t in_flight() const = 0;
  // Live histograms of the current run (core/histograms.h, DESIGN section 7); null when
  // output.histograms.enabled is off. They hold every collected slice since the run's first
  // slice (a backend may also hold slices still in flight) and are zeroed when a run_start
  // slice is processed. Valid until the next call on the backend.
  virtual const HistogramSet* histograms() { return nullptr; }
};

}  // namespace petdaq

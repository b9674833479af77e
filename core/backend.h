// The interface the slicer drives (DESIGN sections 1 and 6). Frames reach a backend as they
// arrive, in blocks (ring chunks) that it stages: the GPU backend copies them to the device,
// the CPU backend into its own store. A slice is a raw-time bound: it takes every staged
// frame below the bound (and every frame with no source), converts, orders and resolves them
// with its carry-over; the frames at or after the bound stay staged for a later slice.
// Slices are submitted in order and collected in the same order; a backend may keep several
// in flight.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/counters.h"
#include "core/dead_ranges.h"
#include "core/stream_limits.h"
#include "core/host_allocator.h"
#include "proto/frame.h"
#include "proto/records.h"

namespace petdaq {

class HistogramSet;
class ImageSet;
class PhaseTimer;

struct SliceRequest {
  std::uint64_t slice_id = 0;
  // Raw-time bound: the slice takes the staged frames below it (kNoBound: all of them).
  // Every frame staged after this request has a raw time at or after it.
  std::uint64_t bound = 0;
  // End of the run: take every staged frame (the bound is ignored), resolve every window,
  // emit everything, clear the carry-over.
  bool final = false;
  // First slice of a run: t_begin of its batch is 0 and the carry-over starts empty.
  bool run_start = false;
  // Dead ranges still open (the slicer's, core/dead_ranges.h): the slice's frames in them
  // are dropped as dead time (FrameStatus::dead), on every backend alike.
  DeadRanges dead;
};

struct SliceResult {
  std::uint64_t slice_id = 0;
  // Batch interval of this slice's records: [t_begin, t_end). Consecutive slices of a run
  // tile time: t_begin of one is t_end of the one before (0 for the first of a run).
  // t_end = min(time of the first carried single, horizon); for a final slice,
  // max(t_begin, last single's time + 1). The horizon is the corrected time of `bound`.
  std::uint64_t t_begin = 0;
  std::uint64_t t_end = 0;
  const CoincRecord* prompts = nullptr;
  std::size_t prompt_count = 0;
  const CoincRecord* delayed = nullptr;
  std::size_t delayed_count = 0;
  std::size_t carry_count = 0;  // singles kept for the next slice
  // Staged frames this slice took, and dropped (stream.pending_full: more than
  // max_slice_frames frames with one time stamp, which no slice can hold).
  std::size_t frames_taken = 0;
  std::size_t frames_dropped = 0;
  // The bound the slice used. It is below the requested one when more than max_slice_frames
  // staged frames were below that: the slice then takes the earliest (every frame below
  // the (m+1)-th smallest raw time of the frames with a source, m = max_slice_frames minus
  // the frames without one) and is not final even if asked to be; `split` says so, and the
  // rest stays staged for the next slice.
  std::uint64_t bound = 0;
  bool split = false;
  // frame.*, single.*, coinc.*, stream.carry_overflow, stream.pending_full of this slice.
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
  // Per-BDM frames dropped in the request's dead ranges (null: none could be).
  const std::uint64_t* bdm_dead = nullptr;
  // The singles this slice resolved (every single before the carry-over), in the order of
  // DESIGN section 5; only with output.singles.enabled, else null and 0. Their times lie in
  // [t_begin, t_end).
  const Single* singles = nullptr;
  std::size_t single_count = 0;
};

// Why a run ended.
enum class RunEnd {
  finished,     // the end of the acquisition (Slicer::finish(), or of the engine, on a reload)
  clock_reset,  // every live source went on with a new clock (core/slicer.h)
};

// Where the slicer (core/slicer.h) delivers the slices a backend resolved: petdaqd's worker,
// the .plm writer (core/plm_file.h), the offline tool's outputs.
class ResultSink {
 public:
  virtual ~ResultSink() = default;
  // One resolved slice of run `run_id`, in order. Called on the slicer's thread.
  virtual void on_slice(std::uint64_t run_id, const SliceResult& result) = 0;
  // The run ended; its last slice was delivered before.
  virtual void on_run_end(std::uint64_t run_id, RunEnd reason) {
    (void)run_id;
    (void)reason;
  }
};

// Memory the caller lends a backend for a slice's output, so that it can pass the output on
// without a copy (petdaqd publishes it as ZeroMQ message bodies, core/message_arena.h).
class ResultMemory {
 public:
  virtual ~ResultMemory() = default;
  // At least `bytes` for one output of the slice being collected (its prompts, delayed or
  // singles), or null: no room, the backend uses its own buffer. The caller takes the piece
  // back once it has delivered the slice.
  virtual void* lend(std::size_t bytes) = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  // Frames one slice may take (its buffers are sized from it, stream.max_slice_frames);
  // also the most frames that may be staged between two submits.
  virtual std::size_t max_slice_frames() const = 0;
  // New frames after which petdaqd's slicer cuts a slice when the horizon allows (it also
  // cuts every stream.max_slice_ms; core/slicer.h): at most half of max_slice_frames(),
  // which leaves room for what a cut leaves staged. The CPU backend asks for fewer, so that
  // a slice's arrays stay in its cores' caches.
  virtual std::size_t preferred_slice_frames() const { return slice_new_frames(max_slice_frames()); }
  // Frames the backend can hold staged at once (stream.max_pending_frames).
  virtual std::size_t max_staged_frames() const = 0;
  // Slices that may be submitted and not yet collected.
  virtual std::size_t max_in_flight() const = 0;
  // Does a slice's work run on the calling thread inside collect() (the CPU backend)? Then a
  // slice in flight overlaps with nothing, and the slicer collects each slice as soon as it
  // has submitted it, so that its records go out at once rather than at the next cut.
  virtual bool works_in_collect() const { return false; }
  // Threads the backend's work runs on (the CPU backend's backend_threads, resolved).
  virtual unsigned threads() const { return 1; }
  // For a caller that waits for every ticket (wait_staged) before it touches a staged
  // block again, as petdaq-offline does: the backend may then note a block at stage() and
  // copy it only when a slice takes it (the CPU backend, on its threads). Off by default;
  // a backend that copies at once anyway ignores it.
  virtual void defer_staging(bool on) { (void)on; }
  // Host memory for the frames the caller stages (the offline tool's reads), of the kind
  // this backend copies from fastest: page-locked by CUDA for the GPU backend, so that its
  // copies run at full speed and asynchronously. Null: any memory does (the caller keeps its
  // own kind).
  virtual std::unique_ptr<HostAllocator> make_stage_allocator() const { return nullptr; }
  // Queues a copy of `count` frames into the backend's stage and returns its ticket. The
  // caller leaves the memory untouched until staged(ticket) says the copy is done. Memory
  // from the backend's HostAllocator (the ring) is copied fastest.
  virtual std::uint64_t stage(const RawFrame* frames, std::size_t count) = 0;
  // Has the copy of this ticket (and of every earlier one) completed? Never blocks.
  virtual bool staged(std::uint64_t ticket) = 0;
  virtual void wait_staged(std::uint64_t ticket) = 0;
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
  // Live image of the current run (core/image.h, DESIGN section 7); null when
  // output.image.enabled is off. Same life as histograms().
  virtual const ImageSet* image() { return nullptr; }
  // The same without waiting, for periodic publications: a backend whose bins lie on a
  // device queues their copy to the host and returns null until it is in (the call after
  // returns it, as of the slices submitted when it was queued); a backend whose bins lie on
  // the host returns them at once.
  virtual const HistogramSet* histograms_snapshot() { return histograms(); }
  virtual const ImageSet* image_snapshot() { return image(); }

  // The thread that drives the backend times its phases there (core/phase_timer.h); a
  // backend that waits on a device marks those host waits as phases of their own
  // (count_wait, partition_wait, collect_wait, copy_out_wait). Null: nothing is timed.
  void set_phase_timer(PhaseTimer* timer) { phases_ = timer; }
  // Where collect() may put a slice's records and singles (SliceResult's pointers then point
  // into lent pieces). A backend that writes its output in place as it computes it (the CPU
  // backend) ignores it. Null: its own buffers.
  virtual void set_result_memory(ResultMemory* memory) { (void)memory; }

 protected:
  PhaseTimer* phases_ = nullptr;
};

}  // namespace petdaq

// The slicer's inside (core/slicer.h has the contract): the parts that own its state, and the
// steps that drive them. slicer.cpp holds slices, room and blocks; slicer_frames.cpp the
// exact per-frame rules, the warm-up and the clock reset.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/held_frames.h"
#include "core/run_track.h"
#include "core/slicer.h"
#include "core/source_clocks.h"
#include "core/stage_account.h"
#include "core/warmup_frames.h"

namespace petdaq {

using SlicerClock = Slicer::Clock;

// The settings the slicer's rules read, in ticks and wall-clock durations.
struct SlicerLimits {
  std::uint32_t bdm_count;
  SourceRule rule;
  std::uint64_t max_disorder_ticks;
  std::uint64_t max_future_ticks;
  SlicerClock::duration source_idle;
  SlicerClock::duration max_slice;
  SlicerClock::duration reset_confirm;
  std::uint64_t max_lag_ticks;   // stream.max_lag_ms in ticks (0: off)
  std::size_t lag_stage_frames;  // stream.lag_stage_fraction of the stage (0: off)

  SlicerLimits(const Settings& s, const Backend& b);
};

// The stream counters one push or poll adds up, flushed to Counters at its end.
struct SlicerCounts {
  CounterDelta delta;
  std::vector<std::uint64_t> bdm_late;  // late frames per BDM since the last flush
  bool bdm_late_any = false;

  explicit SlicerCounts(std::uint32_t bdm_count) : bdm_late(bdm_count, 0) {}
  void late(int src, std::uint64_t frames = 1);
  void flush(Counters& counters);
};

// The frames push() copies, cut into blocks as a receiver fills chunks.
struct CopyBlocks {
  std::unique_ptr<RawFrame[]> frames;
  std::size_t capacity;
  std::uint64_t max_span_ticks;  // of one block
  ChunkSummary summary;
};

// A block under the per-frame pass: the frames kept are rewritten to its front; those up to
// `staged` have gone to the backend.
struct Block {
  RawFrame* frames = nullptr;
  std::size_t kept = 0;
  std::size_t staged = 0;
};

// The raw-time horizons of the run.
struct Horizons {
  std::uint64_t current = 0;    // frames below it go to the next slice
  std::uint64_t published = 0;  // bound of the last submitted slice
};

struct Slicer::Impl {
  Backend& backend;
  ResultSink& sink;
  Counters& counters;
  const SlicerLimits lim;

  SourceClocks clocks;
  HeldFrames held;
  StageAccount stage;
  WarmupFrames warmup;
  RunTrack runs;
  Horizons h;
  SlicerCounts counts;
  CopyBlocks copy;
  Block* block = nullptr;  // the block under the per-frame pass, if any
  struct {
    SlicerClock::time_point now{};
    SlicerClock::time_point last_cut{};
    bool started = false;
  } wall;
  // The room rule's memory: the horizon and leaders' time at which it found no source to
  // declare.
  struct {
    std::uint64_t idle_at = ~std::uint64_t{0};
    std::uint64_t leaders = 0;
  } lag_room;

  const Slicer::Delivery delivery;
  // Stretches of raw time dead for every board whose frames may already be staged
  // (add_dead_range): each slice drops its frames in them, until a slice that did not split
  // took everything below a range's end.
  DeadRanges dead;

  Impl(const Settings& s, Backend& b, ResultSink& out, Counters& c, std::size_t cut,
       Slicer::Delivery d);

  // ---- slices and room (slicer.cpp) ----
  void deliver_one();
  void drain();
  void cut(std::uint64_t bound, bool final);
  void stage_frames(const RawFrame* f, std::size_t n);
  void flush();
  std::size_t make_room(std::size_t n);
  // Per frame of the exact pass, so here, where every caller inlines them.
  bool room_for_one() const { return stage.room_for_one(block->kept - block->staged); }
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
      counts.delta[Counter::stream_pending_full] += 1;
      return;
    }
    block->frames[block->kept++] = f;
  }
  void update_horizon();
  void update_lag();
  void release_lagging(std::size_t n);
  void declare_lagging(int src);
  bool release_for_ring();
  bool fast_path_allowed(const ChunkSummary& sum);
  bool late_block(const ChunkSummary& sum);
  void take_block(RawFrame* frames, std::size_t n, const ChunkSummary& sum);
  void start_clock(SlicerClock::time_point t);
  void begin_push(SlicerClock::time_point t, std::size_t n);

  // Runs `pass` over a block under the per-frame rules, the block before it (if any) saved
  // and restored around it; the frames it kept are staged before the restore.
  template <class Pass>
  void exact_pass(RawFrame* frames, Pass&& pass) {
    Block b{frames, 0, 0};
    struct Restore {
      Block*& slot;
      Block* outer;
      ~Restore() { slot = outer; }
    } restore{block, block};
    block = &b;
    pass();
    flush();
  }

  // ---- one frame, the warm-up and the clock reset (slicer_frames.cpp) ----
  void take(const RawFrame& f);
  void take_reserved(const RawFrame& f);
  // The per-frame pass over a block, rewriting it to the frames it keeps.
  void take_exact(RawFrame* frames, std::size_t n);
  bool continues(const SourceClocks::Source& s, std::uint64_t key) const;
  bool far_back(std::uint64_t key) const;
  bool lagging_frame(SourceClocks::Source& s, int src, const RawFrame& f, std::uint64_t key);
  void take_warmup(const RawFrame& f, std::uint64_t key);
  void end_warmup();
  void hold_for_next_run(const RawFrame& f, int src);
  bool time_jump(SourceClocks::Source& s, std::uint64_t key, bool was_idle);
  bool reset_due(bool at_finish) const;
  void end_run(RunEnd reason);
  void start_run();
  void new_run(RunEnd reason);
};

}  // namespace petdaq

// Overload shedding as scanner-wide dead time (DESIGN section 6, "Overload"). When the ring
// holds more than input.shed_high_fraction of its chunks, the worker opens a dead interval
// at the latest acquisition time it has taken and drops every frame of every source from it
// on, whole chunks by their summaries where it can, until the ring is back below
// input.shed_low_fraction; the interval then closes at the latest time it dropped. Frames of
// a closed interval that arrive later (another receiver's chunk, a disordered board) are
// dropped too. Each interval is published (topic `deadtime`) and its length makes the live
// fraction. Worker thread only; nothing allocates after construction.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/counters.h"
#include "core/frame_source.h"
#include "daemon/host_ring.h"
#include "proto/records.h"

namespace petdaq::daemon {

// The intervals a run closed: the last kRecent, still checked against later frames (the
// oldest overwritten), where the last one ended and the dead time they add up to.
class RunIntervals {
 public:
  static constexpr std::size_t kRecent = 32;
  void add(const DeadInterval& d) {
    total_ticks_ += d.t_end - d.t_begin;
    last_end_ = std::max(last_end_, d.t_end);  // a socket's loss may lie before the last
    recent_[next_] = d;
    next_ = (next_ + 1) % kRecent;
    count_ = std::min(count_ + 1, kRecent);
  }
  // A new run: none closed.
  void clear() {
    count_ = 0;
    next_ = 0;
    last_end_ = 0;
    total_ticks_ = 0;
  }
  // The recent intervals, [0, size()) in no particular order.
  std::size_t size() const { return count_; }
  DeadInterval& operator[](std::size_t i) { return recent_[i]; }
  const DeadInterval& operator[](std::size_t i) const { return recent_[i]; }
  std::uint64_t last_end() const { return last_end_; }  // 0: none
  std::uint64_t total_ticks() const { return total_ticks_; }

 private:
  std::array<DeadInterval, kRecent> recent_{};
  std::size_t count_ = 0;
  std::size_t next_ = 0;
  std::uint64_t last_end_ = 0;
  std::uint64_t total_ticks_ = 0;
};

// Closed intervals not yet published, oldest first: a ring of kCapacity whose oldest entry
// is overwritten if nobody takes them.
class IntervalQueue {
 public:
  static constexpr std::size_t kCapacity = 64;
  void push(const DeadInterval& d) {
    items_[(head_ + count_) % kCapacity] = d;
    if (count_ == kCapacity)
      head_ = (head_ + 1) % kCapacity;
    else
      ++count_;
  }
  // The oldest (false: none).
  bool pop(DeadInterval& out) {
    if (count_ == 0) return false;
    out = items_[head_];
    head_ = (head_ + 1) % kCapacity;
    --count_;
    return true;
  }

 private:
  std::array<DeadInterval, kCapacity> items_{};
  std::size_t head_ = 0;
  std::size_t count_ = 0;
};

class DeadTime {
 public:
  // `ring_chunks`: chunks in the ring; the marks are fractions of it.
  DeadTime(double high_fraction, double low_fraction, std::size_t ring_chunks,
           const SourceRule& rule, Counters& counters);

  // Before chunk `c` goes to the slicer: `in_use` ring chunks are out of the free queue and
  // `waiting` sealed ones wait for the worker. Opens an interval above the high mark, drops
  // the chunk's frames inside dead time (rewriting the chunk and its summary in place) and
  // counts them; closes the open interval once the backlog is below the low mark.
  // `latest_taken`: the latest raw time the slicer has taken (Slicer::latest_time(), so wild
  // stamps it dropped as time jumps do not count; 0: none); an interval opens after it, or,
  // when the run has taken nothing yet, at the first frame it drops. A frame more than
  // `max_future_ticks` past the latest frame the interval dropped is a wild stamp, not dead
  // time: it goes on to the slicer's time-jump rule and never stretches an interval.
  // Returns whether it dropped any of the chunk's frames (then last_reached() says how far).
  bool filter(Chunk& c, std::size_t in_use, std::size_t waiting, std::uint64_t latest_taken,
              std::uint64_t max_future_ticks);
  // [begin, end) (raw ticks) is dead for every board: a receiving socket lost datagrams
  // there (DESIGN section 6, "Losses at a socket"). Its parts not dead already become closed
  // intervals (stream.dead_intervals and stream.loss_intervals, published as any other), so
  // that frames in it that come later are dropped; the slicer drops those already staged.
  // Returns the intervals it made.
  std::size_t add_loss(std::uint64_t begin, std::uint64_t end);
  // The next interval closed since the last call (false: none).
  bool take_closed(DeadInterval& out);
  // A new run (clock reset, reload): the old run's intervals no longer apply; an open one
  // closes. Run totals restart.
  void new_run();

  bool shedding() const { return shedding_; }
  // Chunks in use at which an interval opens.
  std::size_t high_chunks() const { return high_chunks_; }
  // Chunks in use at or below which an interval closes.
  std::size_t low_chunks() const { return low_chunks_; }
  // End of the last interval closed in this run (0: none).
  std::uint64_t last_end() const { return closed_in_run_.last_end(); }
  // Per source (BDM), one past the latest time of its frames that the last filter() dropped
  // (0: none): frames shed still tell the slicer where their source's clock is.
  const std::vector<std::uint64_t>& last_reached() const { return reached_; }
  // Dead acquisition time of the run so far (the open interval up to now included), ticks.
  std::uint64_t run_dead_ticks() const;
  // Dead ticks since the last call (the interval's share for the rates document).
  std::uint64_t take_interval_dead_ticks();

 private:
  // `which` of the open interval (a recent closed one: its index in closed_in_run_).
  static constexpr std::size_t kRecent = RunIntervals::kRecent;

  bool in_dead(std::uint64_t t, std::size_t& which) const;
  void open(std::uint64_t latest_taken);
  // A stamp more than max_future past the interval's latest drop (its running end) is wild.
  std::uint64_t wild_after() const;
  bool wild(std::uint64_t t) const { return t > wild_after(); }
  void close_open();
  void drop_whole(Chunk& c, std::size_t which);
  void drop_frames(Chunk& c);
  void note_dropped(std::size_t which, std::uint64_t t_min, std::uint64_t t_max,
                    std::uint64_t frames);

  const std::size_t high_chunks_;
  const std::size_t low_chunks_;
  const SourceRule rule_;
  Counters& counters_;
  bool shedding_ = false;
  // The open interval [begin, end) while shedding; `end` follows the frames it drops.
  DeadInterval open_{};
  RunIntervals closed_in_run_;  // closed in this run
  IntervalQueue unpublished_;   // closed and not yet taken
  std::uint64_t reported_dead_ = 0;  // run_dead_ticks() at the last interval report
  std::vector<std::uint64_t> bdm_dropped_;  // per BDM, for one chunk
  std::vector<std::uint64_t> reached_;      // per BDM, for the last chunk filtered
  bool reached_any_ = false;
  bool begin_at_first_ = false;  // the open interval begins at the first frame it drops
  std::uint64_t max_future_ = 0;
};

}  // namespace petdaq::daemon

// The slicer's run tracking (DESIGN section 6): the run id (a clock reset, or a push after
// finish(), starts the next), the slice ids, whether the run has a horizon yet, and the final
// slice of a run that may split and leave the run going on. Its few ids and flags change
// together through these calls, so they stay in one class.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/backend.h"
#include "core/frame_source.h"

namespace petdaq {

class RunTrack {
 public:
  std::uint64_t id() const { return id_; }
  bool warm() const { return warm_; }        // the run has a horizon
  bool delivered() const { return delivered_; }  // it submitted at least one slice
  bool has_slices() const { return has_slices_; }  // the next slice is not the run's first
  // The held frames of a new run are being taken.
  bool replaying = false;

  void set_warm() { warm_ = true; }

  // The request for the next slice, bound `bound` (final: everything).
  SliceRequest next(std::uint64_t bound, bool final) {
    SliceRequest r;
    r.slice_id = next_slice_id_++;
    r.bound = final ? kNoBound : bound;
    r.final = final;
    r.run_start = !has_slices_;
    if (final) final_slice_id_ = r.slice_id;
    has_slices_ = !final;
    delivered_ = true;
    return r;
  }
  // Slice `slice_id` split (left frames below its bound). A final slice that split was
  // resolved as an ordinary one: the run goes on, and final_split() says so.
  void split(std::uint64_t slice_id) {
    if (slice_id != final_slice_id_) return;
    final_split_ = true;
    has_slices_ = true;
  }
  // Before each final cut of a run's end.
  void clear_final_split() { final_split_ = false; }
  bool final_split() const { return final_split_; }

  // A new run starts with a clock reset.
  void next_run() { ++id_; }
  // State of a run that has not started yet (id unchanged).
  void start() {
    has_slices_ = false;
    delivered_ = false;
    warm_ = false;
  }
  // finish(): a later push starts a new run; id() names the finished one until then.
  void finish() { finished_ = finished_ || delivered_; }
  void push(std::size_t n) {
    if (n > 0 && finished_) {
      ++id_;
      finished_ = false;
    }
  }

 private:
  std::uint64_t id_ = 0;
  std::uint64_t next_slice_id_ = 0;
  bool has_slices_ = false;
  bool delivered_ = false;
  bool warm_ = false;
  bool finished_ = false;
  bool final_split_ = false;
  std::uint64_t final_slice_id_ = ~std::uint64_t{0};
};

}  // namespace petdaq

// The slicer's account of what the backend holds (DESIGN section 6): the frames staged since
// the last cut, an upper bound of all it holds (exact once every slice is collected), the
// ticket of the last stage, and the rules a cut for room follows.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace petdaq {

class StageAccount {
 public:
  // `slice_capacity`: new frames between two cuts; `cut_frames` (<= slice_capacity): a cut
  // once this many are staged; `stage_capacity`: frames the backend holds.
  StageAccount(std::size_t slice_capacity, std::size_t cut_frames, std::size_t stage_capacity)
      : slice_capacity_(slice_capacity), cut_frames_(cut_frames), stage_capacity_(stage_capacity) {}

  std::size_t since_cut() const { return since_cut_; }
  std::size_t held() const { return held_upper_; }
  std::uint64_t last_ticket() const { return last_ticket_; }
  std::size_t cut_frames() const { return cut_frames_; }
  std::size_t slice_capacity() const { return slice_capacity_; }
  std::size_t stage_capacity() const { return stage_capacity_; }

  void staged(std::size_t n, std::uint64_t ticket) {
    last_ticket_ = ticket;
    since_cut_ += n;
    held_upper_ += n;
  }
  void cut() { since_cut_ = 0; }
  // A slice was collected that took or dropped `n` frames.
  void collected(std::size_t n) { held_upper_ -= std::min(held_upper_, n); }

  // `n` more frames would make too many for one cut: cut first.
  bool cut_before(std::size_t n) const { return since_cut_ > 0 && since_cut_ + n > cut_frames_; }
  // Enough frames for a slice.
  bool cut_due() const { return since_cut_ >= cut_frames_; }
  // `n` more frames exceed the backend's stage, or `share` of it.
  bool over_stage(std::size_t n) const { return held_upper_ + n > stage_capacity_; }
  bool over(std::size_t share, std::size_t n) const { return held_upper_ + n > share; }
  // Room for one more frame beside `unstaged` ones not staged yet.
  bool room_for_one(std::size_t unstaged) const {
    return since_cut_ + unstaged < slice_capacity_ && held_upper_ + unstaged < stage_capacity_;
  }
  // How many of `n` frames the slice and the stage have room for.
  std::size_t room(std::size_t n) const {
    return std::min({n, slice_capacity_ - since_cut_,
                     stage_capacity_ - std::min(stage_capacity_, held_upper_)});
  }

  // A cut at horizon `h` freed nothing (every staged frame waits for a lagging source): no
  // further cut is tried for room until the horizon moves or a split slice left frames below
  // its bound. Without it, every frame that finds the stage full would cost a slice.
  void block_at(std::uint64_t h) {
    blocked_ = true;
    blocked_at_ = h;
  }
  void unblock() { blocked_ = false; }
  bool blocked(std::uint64_t h) const { return blocked_ && h == blocked_at_ && !split_seen_; }

  // A delivered slice left frames below its requested bound (until the next timed cut).
  void note_split() { split_seen_ = true; }
  void clear_split() { split_seen_ = false; }
  bool split_seen() const { return split_seen_; }

 private:
  const std::size_t slice_capacity_;
  const std::size_t cut_frames_;
  const std::size_t stage_capacity_;
  std::size_t since_cut_ = 0;
  std::size_t held_upper_ = 0;
  std::uint64_t last_ticket_ = 0;
  bool blocked_ = false;
  std::uint64_t blocked_at_ = 0;
  bool split_seen_ = false;
};

}  // namespace petdaq

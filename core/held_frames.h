// Frames of the next run, held by the slicer until a clock reset is confirmed (DESIGN
// section 6), in their order of arrival, in a buffer of stream.max_pending_frames made once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "proto/frame.h"

namespace petdaq {

class HeldFrames {
 public:
  explicit HeldFrames(std::size_t capacity)
      : frames_(std::make_unique_for_overwrite<RawFrame[]>(capacity)), capacity_(capacity) {}

  std::size_t count() const { return count_; }
  std::size_t capacity() const { return capacity_; }
  bool full() const { return count_ == capacity_; }
  // Holds `f`; false (nothing held) when full.
  bool add(const RawFrame& f) {
    if (full()) return false;
    frames_[count_++] = f;
    return true;
  }
  // Drops the frames of one source (keeping the others' order); returns how many.
  std::size_t drop_source(std::uint8_t bdm) {
    std::size_t kept = 0;
    for (std::size_t i = 0; i < count_; ++i)
      if (frames_[i].bytes[frame_offset::bdm] != bdm) frames_[kept++] = frames_[i];
    const std::size_t dropped = count_ - kept;
    count_ = kept;
    return dropped;
  }
  // Empties the buffer; returns how many frames it held. Their memory stays readable at
  // data() until the next add().
  std::size_t release() {
    const std::size_t n = count_;
    count_ = 0;
    return n;
  }
  RawFrame* data() { return frames_.get(); }

 private:
  std::unique_ptr<RawFrame[]> frames_;
  std::size_t capacity_;
  std::size_t count_ = 0;
};

}  // namespace petdaq

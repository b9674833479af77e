// The CPU backend's store of staged frames (core/backend.h, stage()): frames in arrival
// order, copied in at once, or, deferred, noted where they lie until a take reads them or
// wait_staged() copies them (CpuBackend::defer_staging). Its buffer is made at construction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "proto/frame.h"

namespace petdaq {

class ParallelEngine;

class StagedStore {
 public:
  // A deferred block: staged, not copied to the store.
  struct Block {
    const RawFrame* frames;
    std::size_t count;
  };
  // Blocks a deferred stage remembers before it copies them anyway.
  static constexpr std::size_t kMaxDeferredBlocks = 1024;

  // `capacity`: the frames it holds (staged_frames_limit(), core/stream_limits.h). `engine`
  // (may be null) copies large blocks on its threads.
  StagedStore(std::size_t capacity, ParallelEngine* engine);
  static std::size_t memory_bytes(std::size_t capacity) { return capacity * sizeof(RawFrame); }

  std::size_t capacity() const { return capacity_; }
  // Frames staged: in the store, then in the deferred blocks.
  std::size_t held() const { return count_ + deferred_count_; }

  // Stages `count` frames and returns their ticket; throws std::invalid_argument when they do
  // not fit (the slicer never stages more: a caller that does has a bug, not bad data).
  std::uint64_t stage(const RawFrame* frames, std::size_t count);
  bool staged(std::uint64_t ticket) const { return ticket <= copied_; }
  // Notes blocks instead of copying them (only with an engine; copies what was noted first).
  void defer(bool on);
  // Copies the deferred blocks to the store, all at once (on the engine's threads).
  void copy_deferred();

  // The frames in the store, in arrival order; a take closes up what it keeps to the front
  // and sets the count.
  RawFrame* frames() { return frames_.get(); }
  std::size_t count() const { return count_; }
  void set_count(std::size_t n) { count_ = n; }

  // The deferred blocks, after the store's count() frames.
  std::size_t deferred_count() const { return deferred_count_; }
  const Block& deferred(std::size_t k) const { return deferred_[k]; }
  // Frames before block k among the deferred ones.
  std::size_t deferred_first(std::size_t k) const { return deferred_first_[k]; }
  // The deferred block holding deferred frame `at`.
  std::size_t deferred_block_at(std::size_t at) const;
  // A take has read every deferred block (what it keeps is in the store now): they are
  // staged.
  void deferred_taken();

 private:
  std::unique_ptr<RawFrame[]> frames_;
  std::size_t capacity_;
  ParallelEngine* engine_;
  std::size_t count_ = 0;
  std::uint64_t tickets_ = 0;
  std::uint64_t copied_ = 0;  // tickets up to this one are in the store
  bool defer_ = false;
  std::vector<Block> deferred_;
  std::vector<std::size_t> deferred_first_;  // [block + 1]: prefix sums of the counts
  std::size_t deferred_count_ = 0;
};

}  // namespace petdaq

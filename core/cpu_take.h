// The CPU backend's take (core/backend.h): a slice's staged frames below its bound move from
// the store into the slice's input, the rest keep their order in the store; more than
// max_slice_frames below the bound is the rare split. On one thread in one pass; on the
// engine's threads in pieces, or, when everything staged fits in a slice, piece by piece
// inside the convert stage (a planned one-pass take).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/frame_source.h"
#include "proto/frame.h"

namespace petdaq {

class ParallelEngine;
class StagedStore;

class SliceTake {
 public:
  // What the take gave the slice (SliceResult's frames_taken, frames_dropped, bound, split).
  struct Outcome {
    std::size_t taken = 0;
    std::size_t dropped = 0;  // more than max_slice_frames frames at the earliest time
    std::uint64_t bound = 0;
    bool split = false;
  };

  SliceTake(std::size_t max_slice_frames, const SourceRule& rule, StagedStore& store,
            ParallelEngine* engine);
  // The input of a slice and the split's keys, for `max_staged` staged frames.
  static std::size_t memory_bytes(std::size_t max_slice_frames, std::size_t max_staged) {
    return max_slice_frames * sizeof(RawFrame) + max_staged * sizeof(std::uint64_t);
  }

  // Takes the frames of a slice with this raw-time bound (kNoBound: all), or plans a
  // one-pass take that the convert stage runs (pending()).
  void take(std::uint64_t requested);
  const Outcome& outcome() const { return outcome_; }

  // ---- a planned one-pass take ----
  // Planned and not yet run: the slicer collects a CPU slice right after submitting it, and
  // anything that touches the staged frames before that runs it first (complete()).
  bool pending() const { return pending_; }
  void complete();
  // The pieces' first frames (in the store's sequence, and in the input) and counts.
  const std::size_t* piece_first() const { return piece_first_.data(); }
  const std::size_t* piece_taken() const { return piece_taken_.data(); }
  // One piece's take; returns its frames taken (ParallelEngine::PieceTake).
  static std::size_t run_piece(void* self, std::size_t j);
  // After every piece's take.
  void finish_one_pass();

  // ---- the slice's frames ----
  const RawFrame* input() const { return input_.get(); }
  // In pieces (piece j's piece_taken()[j] frames at piece_offset()[j], gaps between) or end
  // to end.
  bool in_pieces() const { return in_pieces_; }
  const std::size_t* piece_offset() const { return piece_offset_.data(); }
  // Puts the slice's frames end to end (for a slice too small for the threads).
  void join_pieces();

 private:
  void take_one_pass_here(std::uint64_t requested);
  void plan_one_pass(std::uint64_t requested);
  std::size_t take_piece(std::size_t j);
  void take_in_pieces(std::uint64_t requested);
  void take_split(std::uint64_t requested);
  std::size_t close_up_kept();
  void set_taken(std::size_t taken, std::size_t dropped, std::uint64_t bound, bool split);

  const std::size_t max_slice_frames_;
  const SourceRule rule_;
  StagedStore& store_;
  ParallelEngine* engine_;
  std::unique_ptr<RawFrame[]> input_;
  std::unique_ptr<std::uint64_t[]> split_keys_;  // raw times, for a slice that must split
  // The threaded take: per piece of the store, its first frame, the frames taken, their
  // place in the input, the frames kept.
  std::vector<std::size_t> piece_first_, piece_taken_, piece_offset_, piece_kept_;
  bool in_pieces_ = false;
  bool pending_ = false;
  Outcome outcome_;
};

}  // namespace petdaq

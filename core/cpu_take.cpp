#include "core/cpu_take.h"

#include <algorithm>
#include <cstring>

#include "core/cpu_store.h"
#include "core/parallel_engine.h"

namespace petdaq {

namespace {

// The frames of from[0, n) that a slice with this bound takes go to `taken`, the others to
// `kept`, each in order; returns how many were taken. `kept` may be `from` or before it (a
// close-up in place: each frame is read before anything is written where it was).
std::size_t split_frames(const RawFrame* from, std::size_t n, const SourceRule& rule,
                         std::uint64_t bound, RawFrame* taken, RawFrame* kept) {
  std::size_t t = 0, k = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (slice_takes(from[i].bytes, rule, bound))
      taken[t++] = from[i];
    else
      kept[k++] = from[i];
  }
  return t;
}

// Moves count[j] frames at first[j] of `frames` end to end to its front, in piece order;
// returns how many.
std::size_t close_up(RawFrame* frames, const std::vector<std::size_t>& first,
                     const std::vector<std::size_t>& count) {
  std::size_t at = 0;
  for (std::size_t j = 0; j < count.size(); ++j) {
    if (at != first[j]) std::memmove(frames + at, frames + first[j], count[j] * sizeof(RawFrame));
    at += count[j];
  }
  return at;
}

}  // namespace

SliceTake::SliceTake(std::size_t max_slice_frames, const SourceRule& rule, StagedStore& store,
                     ParallelEngine* engine)
    : max_slice_frames_(max_slice_frames),
      rule_(rule),
      store_(store),
      engine_(engine),
      input_(std::make_unique_for_overwrite<RawFrame[]>(max_slice_frames)),
      split_keys_(std::make_unique_for_overwrite<std::uint64_t[]>(store.capacity())) {
  if (engine) {
    piece_first_.resize(engine->pieces() + 1);
    piece_taken_.resize(engine->pieces());
    piece_offset_.resize(engine->pieces());
    piece_kept_.resize(engine->pieces());
  }
}

void SliceTake::take(std::uint64_t requested) {
  const std::size_t held = store_.held();
  if (engine_ && engine_->splits(held) && held <= max_slice_frames_) {
    plan_one_pass(requested);
    pending_ = true;  // run by the convert stage, piece by piece
    return;
  }
  store_.copy_deferred();
  if (engine_ && engine_->splits(store_.count())) {
    take_in_pieces(requested);
    return;
  }
  take_one_pass_here(requested);
}

// One pass in the common case: the frames below the bound go to the input while it has
// room, the others close up in the store.
void SliceTake::take_one_pass_here(std::uint64_t requested) {
  RawFrame* const st = store_.frames();
  RawFrame* const in = input_.get();
  const std::size_t n = store_.count();
  std::size_t taken = 0, kept = 0;
  bool more = false;  // frames below the bound found after the input was full: a split
  for (std::size_t i = 0; i < n; ++i) {
    const RawFrame& f = st[i];
    const bool takes = slice_takes(f.bytes, rule_, requested);
    if (takes && taken < max_slice_frames_) {
      in[taken++] = f;
    } else {
      st[kept++] = f;
      more |= takes;
    }
  }
  if (!more) {
    store_.set_count(kept);
    set_taken(taken, 0, requested, false);
    return;
  }
  // A split (rare): the frames go back to the store and are taken in three passes.
  std::memcpy(st + kept, in, taken * sizeof(RawFrame));
  take_split(requested);
}

// The take on the engine's threads when everything staged fits in a slice (the common
// case): one pass over the store's frames and then the deferred blocks', cut in pieces (a
// few per thread). Each piece copies the frames the slice takes to its own place in the
// input (its first index: no piece can overrun another) and the rest to its own place in
// the store, closed up (frame i of the sequence lies at store index i or later); the convert
// stage reads the input piece by piece, gaps and all (ParallelEngine::convert_pieces). The
// deferred blocks are thereby staged without a copy of their own. It runs in three steps,
// so that the convert stage can run each piece's take right before converting it: the
// pieces' bounds, one piece's split, and what follows once every piece is split.
void SliceTake::plan_one_pass(std::uint64_t requested) {
  const std::size_t pieces = piece_taken_.size();
  const std::size_t total = store_.held();
  for (std::size_t j = 0; j <= pieces; ++j) piece_first_[j] = piece_begin(total, pieces, j);
  set_taken(0, 0, requested, false);  // the count once the pieces are split
}

std::size_t SliceTake::run_piece(void* self, std::size_t j) {
  return static_cast<SliceTake*>(self)->take_piece(j);
}

std::size_t SliceTake::take_piece(std::size_t j) {
  RawFrame* const st = store_.frames();
  RawFrame* const in = input_.get();
  const std::size_t stored = store_.count();
  const std::uint64_t requested = outcome_.bound;
  const std::size_t begin = piece_first_[j], end = piece_first_[j + 1];
  std::size_t at = begin, t = 0;
  const auto split = [&](const RawFrame* from, std::size_t n) {
    t += split_frames(from, n, rule_, requested, in + begin + t, st + begin + (at - begin - t));
    at += n;
  };
  if (at < std::min(end, stored)) split(st + at, std::min(end, stored) - at);
  // The deferred block holding frame `at`, then the blocks after it.
  for (std::size_t b = at < end ? store_.deferred_block_at(at - stored) : 0; at < end; ++b) {
    const StagedStore::Block& block = store_.deferred(b);
    const std::size_t from = at - stored - store_.deferred_first(b);
    split(block.frames + from, std::min(block.count - from, end - at));
  }
  piece_taken_[j] = t;
  piece_kept_[j] = end - begin - t;
  return t;
}

void SliceTake::finish_one_pass() {
  const std::size_t pieces = piece_taken_.size();
  std::size_t taken = 0;
  for (std::size_t j = 0; j < pieces; ++j) {
    piece_offset_[j] = piece_first_[j];
    taken += piece_taken_[j];
  }
  store_.set_count(close_up_kept());
  store_.deferred_taken();
  set_taken(taken, 0, outcome_.bound, false);
  in_pieces_ = true;
  pending_ = false;
}

void SliceTake::complete() {
  if (!pending_) return;
  engine_->pool().run(piece_taken_.size(), [&](std::size_t j) { take_piece(j); });
  finish_one_pass();
}

// The take on the engine's threads when the store holds more than a slice: each piece of
// the store counts the frames the slice takes (more than max_slice_frames: the split), then
// copies them to their place in the input and closes up the rest in place.
void SliceTake::take_in_pieces(std::uint64_t requested) {
  RawFrame* const st = store_.frames();
  RawFrame* const in = input_.get();
  const std::size_t pieces = piece_taken_.size();
  for (std::size_t j = 0; j <= pieces; ++j) piece_first_[j] = piece_begin(store_.count(), pieces, j);
  engine_->pool().run(pieces, [&](std::size_t j) {
    const std::size_t end = piece_first_[j + 1];
    std::size_t n = 0;
    for (std::size_t i = piece_first_[j]; i < end; ++i) n += slice_takes(st[i].bytes, rule_, requested);
    piece_taken_[j] = n;
  });
  std::size_t taken = 0;
  for (std::size_t j = 0; j < pieces; ++j) {
    piece_offset_[j] = taken;
    taken += piece_taken_[j];
  }
  if (taken > max_slice_frames_) {
    take_split(requested);  // nothing has moved yet
    return;
  }
  engine_->pool().run(pieces, [&](std::size_t j) {
    const std::size_t begin = piece_first_[j], n = piece_first_[j + 1] - begin;
    piece_kept_[j] = n - split_frames(st + begin, n, rule_, requested, in + piece_offset_[j], st + begin);
  });
  store_.set_count(close_up_kept());
  set_taken(taken, 0, requested, false);
}

// The kept rest of each piece joins the store's front, in piece order; returns the count.
std::size_t SliceTake::close_up_kept() { return close_up(store_.frames(), piece_first_, piece_kept_); }

void SliceTake::join_pieces() {
  if (!in_pieces_) return;
  close_up(input_.get(), piece_offset_, piece_taken_);
  in_pieces_ = false;
}

void SliceTake::set_taken(std::size_t taken, std::size_t dropped, std::uint64_t bound, bool split) {
  in_pieces_ = false;
  outcome_ = Outcome{taken, dropped, bound, split};
}

// More than max_slice_frames staged frames are below `requested`: the slice takes those
// below the (m+1)-th smallest raw time of the frames with a source (m = max_slice_frames
// minus the frames without one).
void SliceTake::take_split(std::uint64_t requested) {
  RawFrame* const st = store_.frames();
  const std::size_t n = store_.count();
  std::uint64_t* const keys = split_keys_.get();
  std::size_t sourceless = 0;
  std::size_t keyed = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (rule_.source_of(st[i].bytes) < 0) {
      ++sourceless;
    } else {
      const std::uint64_t t = frame_time(st[i].bytes);
      if (requested == kNoBound || t < requested) keys[keyed++] = t;
    }
  }
  const std::size_t m = max_slice_frames_ - sourceless;
  std::nth_element(keys, keys + m, keys + keyed);
  const std::uint64_t bound = keys[m];
  // More than max_slice_frames frames share the earliest time: no slice can hold them.
  const bool drop = sourceless == 0 &&
                    std::none_of(keys, keys + keyed, [bound](std::uint64_t t) { return t < bound; });
  RawFrame* const in = input_.get();
  std::size_t taken = 0, kept = 0, dropped = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const RawFrame& f = st[i];
    if (slice_takes(f.bytes, rule_, bound)) {
      in[taken++] = f;
    } else if (drop && frame_time(f.bytes) == bound && rule_.source_of(f.bytes) >= 0) {
      ++dropped;
    } else {
      st[kept++] = f;
    }
  }
  store_.set_count(kept);
  set_taken(taken, dropped, bound, true);
}

}  // namespace petdaq

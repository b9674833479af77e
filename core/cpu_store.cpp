#include "core/cpu_store.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "core/parallel_engine.h"

namespace petdaq {

StagedStore::StagedStore(std::size_t capacity, ParallelEngine* engine)
    // Left uninitialised: pages nobody writes cost no memory and no start-up time.
    : frames_(std::make_unique_for_overwrite<RawFrame[]>(capacity)),
      capacity_(capacity),
      engine_(engine) {
  deferred_.reserve(kMaxDeferredBlocks);
  deferred_first_.reserve(kMaxDeferredBlocks + 1);
}

std::uint64_t StagedStore::stage(const RawFrame* frames, std::size_t count) {
  const std::size_t h = held();
  if (count > capacity_ - h)
    throw std::invalid_argument("CpuBackend::stage: " + std::to_string(count) +
                                " frames do not fit beside the " + std::to_string(h) +
                                " staged (stream.max_pending_frames = " +
                                std::to_string(capacity_) + ")");
  if (defer_) {
    if (deferred_.size() == kMaxDeferredBlocks) copy_deferred();
    if (count > 0) {
      if (deferred_.empty()) deferred_first_.push_back(0);
      deferred_.push_back({frames, count});
      deferred_count_ += count;
      deferred_first_.push_back(deferred_count_);
    }
    return ++tickets_;
  }
  RawFrame* const to = frames_.get() + count_;
  if (engine_ && engine_->splits_copy(count)) {
    engine_->copy_frames(to, frames, count);
  } else if (count > 0) {
    std::memcpy(to, frames, count * sizeof(RawFrame));
  }
  count_ += count;
  copied_ = ++tickets_;
  return tickets_;
}

void StagedStore::defer(bool on) {
  copy_deferred();
  defer_ = on && engine_;
}

void StagedStore::copy_deferred() {
  copied_ = tickets_;  // blocks of no frames are staged at once
  if (deferred_.empty()) return;
  RawFrame* const to = frames_.get() + count_;
  const std::size_t n = deferred_count_;
  if (engine_->splits_copy(n)) {
    const std::size_t pieces = engine_->pieces();
    engine_->pool().run(pieces, [&](std::size_t j) {
      std::size_t at = piece_begin(n, pieces, j);
      const std::size_t end = piece_begin(n, pieces, j + 1);
      // The block holding frame `at`, then the blocks after it up to `end`.
      for (std::size_t k = deferred_block_at(at); at < end; ++k) {
        const std::size_t from = at - deferred_first_[k];
        const std::size_t count = std::min(deferred_[k].count - from, end - at);
        std::memcpy(to + at, deferred_[k].frames + from, count * sizeof(RawFrame));
        at += count;
      }
    });
  } else {
    for (std::size_t k = 0; k < deferred_.size(); ++k)
      std::memcpy(to + deferred_first_[k], deferred_[k].frames, deferred_[k].count * sizeof(RawFrame));
  }
  count_ += n;
  deferred_.clear();
  deferred_first_.clear();
  deferred_count_ = 0;
}

std::size_t StagedStore::deferred_block_at(std::size_t at) const {
  return static_cast<std::size_t>(
      std::upper_bound(deferred_first_.begin(), deferred_first_.end(), at) -
      deferred_first_.begin() - 1);
}

void StagedStore::deferred_taken() {
  deferred_.clear();
  deferred_first_.clear();
  deferred_count_ = 0;
  copied_ = tickets_;
}

}  // namespace petdaq

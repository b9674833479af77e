// The worker's staging room (docs/daemon.md, "Ring, worker, backend"): the ring chunks staged
// with the backend whose copies may still be running, oldest first, in a fixed ring of one
// entry per ring chunk (nothing allocates after construction), and the high-water marks the
// `rates` document reports (`ring.sealed_max`, `ring.staging_max`).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "daemon/host_ring.h"

namespace petdaq::daemon {

class ChunkStaging {
 public:
  // `ring_chunks`: chunks in the ring, so at most that many staged at once.
  explicit ChunkStaging(std::size_t ring_chunks) : entries_(ring_chunks) {}

  // Chunk `c` goes back to the ring once the backend's copy `ticket` of it is done.
  void stage(Chunk* c, std::uint64_t ticket) {
    entries_[(head_ + count_) % entries_.size()] = {c, ticket};
    ++count_;
    staging_high_ = std::max(staging_high_, count_);
  }
  // Oldest first, hands each staged chunk whose copy `done(ticket)` says is finished to
  // `give(chunk)` (back to the ring); stops at the first whose copy is not.
  template <class Done, class Give>
  void release(Done&& done, Give&& give) {
    while (count_ > 0) {
      const Entry& e = entries_[head_];
      if (!done(e.ticket)) break;
      give(e.chunk);
      head_ = (head_ + 1) % entries_.size();
      --count_;
    }
  }
  std::size_t count() const { return count_; }

  // The worker takes a sealed chunk while `waiting` are sealed (the one taken included).
  void note_sealed(std::size_t waiting) { sealed_high_ = std::max(sealed_high_, waiting); }
  // The most sealed chunks waiting since the last call.
  std::size_t take_sealed_high() { return std::exchange(sealed_high_, 0); }
  // The most chunks staged since the last call; the next interval starts from those staged
  // now.
  std::size_t take_staging_high() { return std::exchange(staging_high_, count_); }

 private:
  struct Entry {
    Chunk* chunk = nullptr;
    std::uint64_t ticket = 0;
  };
  std::vector<Entry> entries_;
  std::size_t head_ = 0;
  std::size_t count_ = 0;
  std::size_t sealed_high_ = 0;
  std::size_t staging_high_ = 0;
};

}  // namespace petdaq::daemon

// The host ring between the receiver threads and the worker (DESIGN section 1): a fixed set
// of chunks taken at start-up, each filled by one receiver straight from recvmmsg, sealed
// when full or after input.flush_ms, handed to the worker in the order they were sealed
// (whichever receiver sealed them), and returned for reuse. Nothing is allocated after
// construction; when no chunk is free the receiver drops and counts.
#pragma once

#include <algorithm>
#include <atomic>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include <concurrentqueue/concurrentqueue.h>
#include <concurrentqueue/lightweightsemaphore.h>

#include "core/chunk_summary.h"
#include "core/host_allocator.h"
#include "proto/frame.h"

namespace petdaq::daemon {

using petdaq::HostAllocator;

// Anonymous mmap, locked with mlock when RLIMIT_MEMLOCK allows, plain (but pre-faulted)
// otherwise: the ring of the CPU backend. The GPU backend's ring comes from CUDA's
// page-locked memory (make_stage_allocator), which its copies need.
class LockedPageAllocator final : public HostAllocator {
 public:
  void* allocate(std::size_t bytes) override;
  void deallocate(void* p, std::size_t bytes) noexcept override;
  const char* kind() const override { return locked_ ? "mlock" : "plain"; }

 private:
  bool locked_ = true;
};

// A chunk's frames are contiguous from h_bytes: the receiver moves each datagram's frames
// down behind the previous ones, and records their summary as it goes.
struct Chunk {
  std::uint8_t* h_bytes = nullptr;
  std::size_t capacity_bytes = 0;
  std::size_t used_bytes = 0;  // frame_count * kFrameBytes: the receiver's write cursor
  std::uint64_t frame_count = 0;
  ChunkSummary summary;
  std::chrono::steady_clock::time_point first_rx{};  // first datagram written into it
  std::uint64_t seal_order = 0;                      // the ring's count of seals when sealed
  // Its receiver's socket held a backlog while it filled (the daemon was behind, not the
  // boards; DESIGN section 6, "Overload").
  bool receiver_behind = false;
  // Datagrams its receiver lost (the kernel's drops at the socket, or a full ring) before a
  // datagram it holds: the lost frames lie between `from` (the receiver's latest frame time
  // before them; 0: none yet) and `to` (the earliest of the datagram after them), up to the
  // boards' disorder. The worker makes that time dead for every board (DESIGN section 6,
  // "Losses at a socket"); more than kMaxLosses in one chunk merge into the last.
  struct Loss {
    std::uint64_t from = 0;
    std::uint64_t to = 0;
  };
  static constexpr std::uint32_t kMaxLosses = 4;
  std::array<Loss, kMaxLosses> losses{};
  std::uint32_t loss_count = 0;
  void add_loss(std::uint64_t from, std::uint64_t to) {
    if (loss_count < kMaxLosses) {
      losses[loss_count++] = {from, to};
      return;
    }
    Loss& last = losses[kMaxLosses - 1];
    last.from = std::min(last.from, from);
    last.to = std::max(last.to, to);
  }

  RawFrame* frames() { return reinterpret_cast<RawFrame*>(h_bytes); }
  const RawFrame* frames() const { return reinterpret_cast<const RawFrame*>(h_bytes); }
  void reset() {
    used_bytes = 0;
    frame_count = 0;
    summary.clear();
    receiver_behind = false;
    loss_count = 0;
  }
};

class HostRing {
 public:
  HostRing(std::size_t chunk_bytes, std::uint32_t chunk_count, std::size_t producers,
           HostAllocator& allocator);
  ~HostRing();
  HostRing(const HostRing&) = delete;
  HostRing& operator=(const HostRing&) = delete;

  std::size_t chunk_count() const { return chunks_.size(); }
  std::size_t chunk_bytes() const { return chunk_bytes_; }
  std::size_t free_approx() const { return free_.size_approx(); }
  std::size_t sealed_approx() const;

  // Receiver side: each receiver thread seals into a lane of its own (at most `producers` + 1
  // lanes; one more throws std::logic_error).
  struct Token {
    std::size_t lane;
  };
  std::unique_ptr<Token> make_sealed_token();
  Chunk* try_acquire() {
    Chunk* c = nullptr;
    const bool got = free_.try_dequeue(c);
    note_used(got ? in_use() : chunks_.size());
    return got ? c : nullptr;
  }
  void seal(Chunk* c, Token& token);

  // Worker side (one thread): the oldest sealed chunk of every lane, waiting at most
  // `timeout` for one.
  Chunk* wait_sealed(std::chrono::microseconds timeout) {
    return sealed_count_.wait(timeout.count()) ? take_oldest() : nullptr;
  }
  Chunk* try_sealed() { return sealed_count_.tryWait() ? take_oldest() : nullptr; }
  // Worker side only (its producer token is not shared).
  void release(Chunk* c);
  // The most chunks out of the free queue at once since the last call, as the receivers saw
  // it at each acquire (chunk_count(): one found none free), and at least as many as now.
  std::size_t take_used_high() {
    return std::max(used_high_.exchange(0, std::memory_order_relaxed), in_use());
  }
  // Any other thread (a receiver handing back an unused chunk at shutdown).
  void give_back(Chunk* c);

 private:
  std::size_t in_use() const {
    return chunks_.size() - std::min(chunks_.size(), free_.size_approx());
  }
  Chunk* take_oldest();

  // One receiver's sealed chunks, in the order it sealed them: a ring of room for every chunk,
  // written by that receiver only and read by the worker only.
  struct SealedLane {
    std::vector<Chunk*> slots;
    alignas(64) std::atomic<std::size_t> head{0};  // the worker's
    alignas(64) std::atomic<std::size_t> tail{0};  // the receiver's
    std::size_t size() const;
  };
  // Once per acquire: per chunk, or per recvmmsg batch while the ring is full.
  void note_used(std::size_t used) {
    std::size_t seen = used_high_.load(std::memory_order_relaxed);
    while (used > seen &&
           !used_high_.compare_exchange_weak(seen, used, std::memory_order_relaxed)) {
    }
  }

  HostAllocator& allocator_;
  std::size_t chunk_bytes_;
  std::vector<Chunk> chunks_;
  moodycamel::ConcurrentQueue<Chunk*> free_;
  // Sealed chunks: one lane per receiver, and a count of them all to wait on. The worker
  // takes the chunk sealed first among the lanes' oldest, so that no receiver's chunks wait
  // behind the others' (a queue that picks among its producers would leave one receiver's
  // boards behind the rest in data time whenever the worker is behind).
  std::vector<std::unique_ptr<SealedLane>> lanes_;
  std::atomic<std::size_t> lanes_made_{0};
  std::atomic<std::uint64_t> seals_{0};
  moodycamel::LightweightSemaphore sealed_count_;
  moodycamel::ProducerToken release_token_;
  alignas(64) std::atomic<std::size_t> used_high_{0};
};

}  // namespace petdaq::daemon

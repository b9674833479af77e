// The host ring between the receiver threads and the worker (DESIGN section 1): a fixed set
// of chunks taken at start-up, each filled by one receiver straight from recvmmsg, sealed
// when full or after input.flush_ms, handed to the worker, and returned for reuse. Nothing
// is allocated after construction; when no chunk is free the receiver drops and counts.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include <concurrentqueue/blockingconcurrentqueue.h>
#include <concurrentqueue/concurrentqueue.h>

#include "proto/frame.h"

namespace petdaq::daemon {

// Where ring memory comes from. Page-locked memory keeps the kernel from swapping the ring
// out under a burst; a GPU build could hand out cudaHostAlloc memory through the same
// interface.
class HostAllocator {
 public:
  virtual ~HostAllocator() = default;
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void deallocate(void* p, std::size_t bytes) noexcept = 0;
  // "mlock" or "plain": what the last allocation got (for the start-up log).
  virtual const char* kind() const = 0;
};

// Anonymous mmap, locked with mlock when RLIMIT_MEMLOCK allows, plain (but pre-faulted)
// otherwise.
class LockedPageAllocator final : public HostAllocator {
 public:
  void* allocate(std::size_t bytes) override;
  void deallocate(void* p, std::size_t bytes) noexcept override;
  const char* kind() const override { return locked_ ? "mlock" : "plain"; }

 private:
  bool locked_ = true;
};

// Frames of one datagram (or of several small ones moved together) inside a chunk.
struct FrameSpan {
  std::uint32_t offset_bytes;
  std::uint32_t frame_count;
};

struct Chunk {
  std::uint8_t* h_bytes = nullptr;
  std::size_t capacity_bytes = 0;
  std::size_t used_bytes = 0;  // receiver's write cursor
  FrameSpan* spans = nullptr;
  std::size_t span_count = 0;
  std::size_t span_capacity = 0;
  std::uint64_t frame_count = 0;
  std::chrono::steady_clock::time_point first_rx{};  // first datagram written into it

  const RawFrame* frames(const FrameSpan& s) const {
    return reinterpret_cast<const RawFrame*>(h_bytes + s.offset_bytes);
  }
  void reset() {
    used_bytes = 0;
    span_count = 0;
    frame_count = 0;
  }
};

class HostRing {
 public:
  // `min_span_bytes`: a span shorter than this is merged into the previous one by a copy,
  // which bounds the spans a chunk can need.
  static constexpr std::size_t kMinSpanBytes = 1024;

  HostRing(std::size_t chunk_bytes, std::uint32_t chunk_count, std::size_t producers,
           HostAllocator& allocator);
  ~HostRing();
  HostRing(const HostRing&) = delete;
  HostRing& operator=(const HostRing&) = delete;

  std::size_t chunk_count() const { return chunks_.size(); }
  std::size_t chunk_bytes() const { return chunk_bytes_; }
  std::size_t free_approx() const { return free_.size_approx(); }
  std::size_t sealed_approx() const { return sealed_.size_approx(); }

  // Receiver side. A producer token per receiver thread keeps the queues allocation-free.
  using Token = moodycamel::ProducerToken;
  std::unique_ptr<Token> make_sealed_token() { return std::make_unique<Token>(sealed_); }
  Chunk* try_acquire() {
    Chunk* c = nullptr;
    return free_.try_dequeue(c) ? c : nullptr;
  }
  void seal(Chunk* c, Token& token);

  // Worker side.
  Chunk* wait_sealed(std::chrono::microseconds timeout) {
    Chunk* c = nullptr;
    return sealed_.wait_dequeue_timed(c, timeout.count()) ? c : nullptr;
  }
  Chunk* try_sealed() {
    Chunk* c = nullptr;
    return sealed_.try_dequeue(c) ? c : nullptr;
  }
  // Worker side only (its producer token is not shared).
  void release(Chunk* c);
  // Any other thread (a receiver handing back an unused chunk at shutdown).
  void give_back(Chunk* c);

 private:
  HostAllocator& allocator_;
  std::size_t chunk_bytes_;
  std::vector<Chunk> chunks_;
  std::vector<FrameSpan> spans_;
  moodycamel::ConcurrentQueue<Chunk*> free_;
  moodycamel::BlockingConcurrentQueue<Chunk*> sealed_;
  moodycamel::ProducerToken release_token_;
};

}  // namespace petdaq::daemon

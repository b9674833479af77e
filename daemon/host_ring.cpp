#include "daemon/host_ring.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

namespace petdaq::daemon {

void* LockedPageAllocator::allocate(std::size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    throw std::runtime_error("cannot map " + std::to_string(bytes) +
                             " bytes for the host ring: " + std::strerror(errno));
  if (mlock(p, bytes) != 0) {
    locked_ = false;
    // Touch every page now so the first burst does not pay for page faults.
    std::memset(p, 0, bytes);
  }
  return p;
}

void LockedPageAllocator::deallocate(void* p, std::size_t bytes) noexcept {
  if (p) munmap(p, bytes);
}

namespace {
std::size_t queue_capacity(std::uint32_t chunk_count) { return std::size_t{chunk_count} + 64; }

// Frame indices inside a chunk are 32-bit.
std::size_t checked_chunk_bytes(std::size_t chunk_bytes) {
  if (chunk_bytes > 0xFFFF'FFFFull || chunk_bytes < 2048)
    throw std::runtime_error("input.ring_chunk_bytes: " + std::to_string(chunk_bytes) +
                             " is outside 2048 .. 4294967295");
  return chunk_bytes;
}
}  // namespace

HostRing::HostRing(std::size_t chunk_bytes, std::uint32_t chunk_count, std::size_t producers,
                   HostAllocator& allocator)
    : allocator_(allocator),
      chunk_bytes_(checked_chunk_bytes(chunk_bytes)),
      chunks_(chunk_count),
      free_(queue_capacity(chunk_count) * 2, 1, producers + 2),
      release_token_(free_) {
  for (std::size_t i = 0; i < producers + 1; ++i) {
    lanes_.push_back(std::make_unique<SealedLane>());
    lanes_.back()->slots.resize(std::size_t{chunk_count} + 1);
  }
  std::size_t made = 0;
  try {
    for (; made < chunks_.size(); ++made) {
      Chunk& c = chunks_[made];
      c.h_bytes = static_cast<std::uint8_t*>(allocator_.allocate(chunk_bytes));
      c.capacity_bytes = chunk_bytes;
      free_.enqueue(release_token_, &c);
    }
  } catch (...) {
    for (std::size_t i = 0; i < made; ++i) allocator_.deallocate(chunks_[i].h_bytes, chunk_bytes);
    throw;
  }
}

HostRing::~HostRing() {
  for (Chunk& c : chunks_) allocator_.deallocate(c.h_bytes, chunk_bytes_);
}

std::unique_ptr<HostRing::Token> HostRing::make_sealed_token() {
  const std::size_t lane = lanes_made_.fetch_add(1, std::memory_order_relaxed);
  if (lane >= lanes_.size())
    throw std::logic_error("HostRing: more sealing threads than the " +
                           std::to_string(lanes_.size()) + " lanes it was made for");
  return std::make_unique<Token>(Token{lane});
}

std::size_t HostRing::SealedLane::size() const {
  const std::size_t h = head.load(std::memory_order_acquire);
  const std::size_t t = tail.load(std::memory_order_acquire);
  return (t + slots.size() - h) % slots.size();
}

std::size_t HostRing::sealed_approx() const {
  std::size_t n = 0;
  for (const auto& lane : lanes_) n += lane->size();
  return n;
}

void HostRing::seal(Chunk* c, Token& token) {
  SealedLane& lane = *lanes_[token.lane];
  c->seal_order = seals_.fetch_add(1, std::memory_order_relaxed);
  // A lane has room for every chunk of the ring, so it is never full.
  const std::size_t t = lane.tail.load(std::memory_order_relaxed);
  lane.slots[t] = c;
  lane.tail.store((t + 1) % lane.slots.size(), std::memory_order_release);
  sealed_count_.signal();
}

// The semaphore counted a chunk in: some lane holds it (its slot was published before the
// signal). The oldest of the lanes' first chunks goes.
Chunk* HostRing::take_oldest() {
  for (;;) {
    SealedLane* best = nullptr;
    std::uint64_t best_order = ~std::uint64_t{0};
    for (const auto& lane : lanes_) {
      const std::size_t h = lane->head.load(std::memory_order_relaxed);
      if (h == lane->tail.load(std::memory_order_acquire)) continue;
      const Chunk* c = lane->slots[h];
      if (c->seal_order < best_order) {
        best_order = c->seal_order;
        best = lane.get();
      }
    }
    if (!best) continue;  // the signal came before this thread saw the slot: look again
    const std::size_t h = best->head.load(std::memory_order_relaxed);
    Chunk* c = best->slots[h];
    best->head.store((h + 1) % best->slots.size(), std::memory_order_release);
    return c;
  }
}

void HostRing::give_back(Chunk* c) {
  c->reset();
  free_.enqueue(c);
}

void HostRing::release(Chunk* c) {
  c->reset();
  if (!free_.try_enqueue(release_token_, c)) free_.enqueue(release_token_, c);
}

}  // namespace petdaq::daemon

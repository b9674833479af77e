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
      sealed_(queue_capacity(chunk_count) * (producers + 1), producers + 1, 2),
      release_token_(free_) {
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

void HostRing::seal(Chunk* c, Token& token) {
  // The queues were sized for every chunk at once, so try_enqueue cannot fail; enqueue is
  // the fallback that never loses a chunk.
  if (!sealed_.try_enqueue(token, c)) sealed_.enqueue(token, c);
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

// Where the host ring's memory comes from (DESIGN section 1). The CPU backend reads it
// where it lies; the GPU backend copies whole chunks to the device, which needs memory that
// CUDA has page-locked for it (gpu/pinned_allocator.h).
#pragma once

#include <cstddef>

namespace petdaq {

class HostAllocator {
 public:
  virtual ~HostAllocator() = default;
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void deallocate(void* p, std::size_t bytes) noexcept = 0;
  // What the last allocation got, for the start-up log: "cuda-pinned", "mlock" or "plain".
  virtual const char* kind() const = 0;
  // Page-locks memory the caller already holds (a file it mapped), read only, so that the
  // backend copies from it as fast as from its own allocations; false where this allocator
  // has nothing of the kind (copies from the memory then work as they are) or the system
  // refused. unlock() undoes a lock that succeeded, once the backend's copies from it are
  // done. Thread-safe.
  virtual bool lock_read_only(const void* p, std::size_t bytes) {
    (void)p;
    (void)bytes;
    return false;
  }
  virtual void unlock(const void* p) noexcept { (void)p; }
};

}  // namespace petdaq

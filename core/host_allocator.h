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
};

}  // namespace petdaq

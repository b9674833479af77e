// Checked CUDA calls and owning handles for device memory, pinned host memory, streams and
// events. Host code only; included by the CUDA translation units and the GPU benchmark.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>

namespace petdaq::cuda {

// A failed CUDA call: what() names the file, the line, the expression and the error.
class CudaError : public std::runtime_error {
 public:
  CudaError(cudaError_t code, const char* expression, const char* file, int line)
      : std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + expression +
                           " failed: " + cudaGetErrorName(code) + " (" +
                           cudaGetErrorString(code) + ")"),
        code_(code) {}
  cudaError_t code() const { return code_; }

 private:
  cudaError_t code_;
};

inline void check(cudaError_t code, const char* expression, const char* file, int line) {
  if (code != cudaSuccess) throw CudaError(code, expression, file, line);
}

}  // namespace petdaq::cuda

#define PETDAQ_CUDA_CHECK(expr) ::petdaq::cuda::check((expr), #expr, __FILE__, __LINE__)

// After a kernel launch: the launch error always; with PETDAQ_CUDA_SYNC_CHECK also every
// error of the kernel's execution, at the cost of a synchronisation per launch.
#if PETDAQ_CUDA_SYNC_CHECK
#define PETDAQ_CUDA_CHECK_LAUNCH(what)                                          \
  do {                                                                          \
    ::petdaq::cuda::check(cudaGetLastError(), what, __FILE__, __LINE__);        \
    ::petdaq::cuda::check(cudaDeviceSynchronize(), what, __FILE__, __LINE__);   \
  } while (0)
#else
#define PETDAQ_CUDA_CHECK_LAUNCH(what) \
  ::petdaq::cuda::check(cudaGetLastError(), what, __FILE__, __LINE__)
#endif

namespace petdaq::cuda {

// Deleters never throw: a failure while freeing is already past the point of recovery.
struct DeviceDeleter {
  void operator()(void* p) const noexcept { cudaFree(p); }
};
struct PinnedDeleter {
  void operator()(void* p) const noexcept { cudaFreeHost(p); }
};

template <class T>
using device_unique_ptr = std::unique_ptr<T[], DeviceDeleter>;
template <class T>
using pinned_unique_ptr = std::unique_ptr<T[], PinnedDeleter>;

template <class T>
device_unique_ptr<T> make_device(std::size_t count) {
  void* p = nullptr;
  PETDAQ_CUDA_CHECK(cudaMalloc(&p, (count ? count : 1) * sizeof(T)));
  return device_unique_ptr<T>(static_cast<T*>(p));
}

// Pinned host memory. `mapped`: kernels may also write it directly (through its device
// address), which is how results of a size only the device knows reach the host.
template <class T>
pinned_unique_ptr<T> make_pinned(std::size_t count, bool mapped = false) {
  void* p = nullptr;
  PETDAQ_CUDA_CHECK(cudaHostAlloc(&p, (count ? count : 1) * sizeof(T),
                                  mapped ? cudaHostAllocMapped : cudaHostAllocDefault));
  return pinned_unique_ptr<T>(static_cast<T*>(p));
}

template <class T>
T* device_address(const pinned_unique_ptr<T>& host) {
  void* d = nullptr;
  PETDAQ_CUDA_CHECK(cudaHostGetDevicePointer(&d, host.get(), 0));
  return static_cast<T*>(d);
}

// Host memory someone else allocated, page-locked by CUDA for as long as this lives, so that
// copies into it run asynchronously and at full speed. Destroy it before the memory is freed.
class HostRegistration {
 public:
  HostRegistration() = default;
  HostRegistration(void* p, std::size_t bytes) {
    PETDAQ_CUDA_CHECK(cudaHostRegister(p, bytes, cudaHostRegisterDefault));
    p_ = p;
  }
  ~HostRegistration() {
    if (p_) cudaHostUnregister(p_);
  }
  HostRegistration(HostRegistration&& o) noexcept : p_(o.p_) { o.p_ = nullptr; }
  HostRegistration& operator=(HostRegistration&& o) noexcept {
    if (this != &o) {
      if (p_) cudaHostUnregister(p_);
      p_ = o.p_;
      o.p_ = nullptr;
    }
    return *this;
  }
  HostRegistration(const HostRegistration&) = delete;
  HostRegistration& operator=(const HostRegistration&) = delete;

 private:
  void* p_ = nullptr;
};

class Stream {
 public:
  Stream() { PETDAQ_CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
  // A stream whose kernels the device schedules first (short work a host thread waits on).
  struct HighPriority {};
  explicit Stream(HighPriority) {
    int least = 0, greatest = 0;
    PETDAQ_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    PETDAQ_CUDA_CHECK(cudaStreamCreateWithPriority(&s_, cudaStreamNonBlocking, greatest));
  }
  ~Stream() {
    if (s_) cudaStreamDestroy(s_);
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

class Event {
 public:
  explicit Event(bool timing = true) {
    PETDAQ_CUDA_CHECK(cudaEventCreateWithFlags(&e_, timing ? cudaEventDefault
                                                           : cudaEventDisableTiming));
  }
  ~Event() {
    if (e_) cudaEventDestroy(e_);
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return e_; }

 private:
  cudaEvent_t e_ = nullptr;
};

}  // namespace petdaq::cuda

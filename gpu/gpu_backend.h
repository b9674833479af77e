// The CUDA backend (built only when a CUDA toolkit is found).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "core/backend.h"
#include "core/host_allocator.h"

namespace petdaq {

struct Settings;
struct Calibration;

// Is a CUDA device usable? On false, `reason` says why (no driver, no device, ...);
// on true, `reason` names the device.
bool gpu_device_usable(std::string& reason);

// Host memory page-locked by CUDA (cudaHostAlloc, portable): what the GPU backend copies
// from fastest and asynchronously.
std::unique_ptr<HostAllocator> make_cuda_host_allocator();

std::unique_ptr<Backend> make_gpu_backend(const Settings& settings, const Calibration& calibration);

// Host memory the GPU backend takes for these settings: the pinned record, singles and count
// buffers of each slice in flight, and the host copies of its histograms and image (its
// device memory is the GPU's).
std::size_t gpu_backend_host_bytes(const Settings& settings);

}  // namespace petdaq

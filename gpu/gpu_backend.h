// The CUDA backend (built only when a CUDA toolkit is found).
#pragma once

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

}  // namespace petdaq

// The CUDA backend (built only when a CUDA toolkit is found).
#pragma once

#include <memory>
#include <string>

#include "core/backend.h"

namespace petdaq {

struct Settings;
struct Calibration;

// Is a CUDA device usable? On false, `reason` says why (no driver, no device, ...);
// on true, `reason` names the device.
bool gpu_device_usable(std::string& reason);

std::unique_ptr<Backend> make_gpu_backend(const Settings& settings, const Calibration& calibration);

}  // namespace petdaq

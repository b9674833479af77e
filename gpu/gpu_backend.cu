#include "gpu/gpu_backend.h"

#include <stdexcept>

namespace petdaq {

bool gpu_device_usable(std::string& reason) {
  reason = "the CUDA backend is not built yet";
  return false;
}

std::unique_ptr<Backend> make_gpu_backend(const Settings&, const Calibration&) {
  throw std::runtime_error("the CUDA backend is not built yet");
}

}  // namespace petdaq

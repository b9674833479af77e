// Chooses the backend the configuration or the command line asks for: `gpu` when a CUDA
// device is usable, `cpu` otherwise under `auto`.
#pragma once

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "core/backend.h"
#include "core/host_allocator.h"
#include "core/parallel_engine.h"
#include "core/settings.h"
#include "gpu/gpu_stage_times.h"

namespace petdaq {

struct Calibration;

class BackendUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Is the GPU backend compiled in and is a CUDA device usable? `reason` says why not.
bool gpu_backend_usable(std::string& reason);

// `explanation` receives one line for the log ("backend gpu: NVIDIA H100 ..." or
// "backend cpu: auto, no CUDA device: ..."). Throws BackendUnavailable when `gpu` is asked
// for and cannot be had.
std::unique_ptr<Backend> make_backend(BackendKind kind, const Settings& settings,
                                      const Calibration& calibration, std::string& explanation);

// The stage times of a backend whose work runs on this host's cores (the CPU backend), and
// how its threads split the work (zeros on one thread); nullopt for any other backend.
struct HostStageWork {
  double take_s = 0, convert_s = 0, sort_s = 0, coincidence_s = 0;
  ParallelStats parallel;
};
std::optional<HostStageWork> host_stage_work(const Backend& backend);

// The device times of the slice the GPU backend collected last (gpu/gpu_stage_times.h);
// nullopt for any other backend (and in a build without CUDA).
std::optional<GpuStageTimes> device_stage_times(const Backend& backend);

// Host memory the backend make_backend() would choose for `kind` takes with these settings,
// as the backend reports it (CpuBackend::memory_bytes, gpu_backend_host_bytes).
std::size_t backend_host_bytes(BackendKind kind, const Settings& settings);

// Would make_backend() choose the GPU backend for `kind` on this machine?
bool backend_would_be_gpu(BackendKind kind);
// Host memory for frames staged before the backend exists (the daemon's ring): what
// Backend::make_stage_allocator() of the backend make_backend() would choose for `kind`
// gives (core/backend.h).
std::unique_ptr<HostAllocator> make_stage_allocator(BackendKind kind);

}  // namespace petdaq

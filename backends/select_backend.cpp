#include "backends/select_backend.h"

#include <string>
#include <type_traits>

#include "core/calibration.h"
#include "core/cpu_backend.h"
#if PETDAQ_HAVE_CUDA
#include "gpu/gpu_backend.h"
#endif

namespace petdaq {

bool gpu_backend_usable(std::string& reason) {
#if PETDAQ_HAVE_CUDA
  return gpu_device_usable(reason);
#else
  reason = "this build has no GPU backend (no CUDA toolkit when it was built)";
  return false;
#endif
}

std::unique_ptr<Backend> make_backend(BackendKind kind, const Settings& settings,
                                      const Calibration& calibration, std::string& explanation) {
  // The CPU backend says how many threads it runs on (backend_threads, resolved).
  const auto cpu = [&](std::string why) -> std::unique_ptr<Backend> {
    auto backend = std::make_unique<CpuBackend>(settings, calibration);
    const unsigned threads = backend->threads();
    explanation = "backend cpu (" + why + "), " + std::to_string(threads) +
                  (threads == 1 ? " thread" : " threads");
    return backend;
  };
  if (kind == BackendKind::cpu) return cpu("asked for");
  std::string reason;
  const bool usable = gpu_backend_usable(reason);
  if (!usable) {
    if (kind == BackendKind::gpu) throw BackendUnavailable("backend gpu unavailable: " + reason);
    return cpu("auto: " + reason);
  }
#if PETDAQ_HAVE_CUDA
  explanation = std::string("backend gpu (") + (kind == BackendKind::gpu ? "asked for" : "auto") +
                ": " + reason + ")";
  return make_gpu_backend(settings, calibration);
#else
  throw BackendUnavailable("backend gpu unavailable: " + reason);
#endif
}

// CpuBackend overrides Backend's threads() and defer_staging() by name and signature (its own
// declarations): a change to either would leave Backend's defaults in its place unnoticed.
static_assert(std::is_same_v<decltype(&CpuBackend::threads), unsigned (CpuBackend::*)() const>);
static_assert(std::is_same_v<decltype(&CpuBackend::defer_staging), void (CpuBackend::*)(bool)>);

std::optional<HostStageWork> host_stage_work(const Backend& backend) {
  const auto* cpu = dynamic_cast<const CpuBackend*>(&backend);
  if (!cpu) return std::nullopt;
  const CpuBackend::StageSeconds& st = cpu->stage_seconds();
  return HostStageWork{.take_s = st.take,
                       .convert_s = st.convert,
                       .sort_s = st.sort,
                       .coincidence_s = st.coincidence,
                       .parallel = cpu->parallel_stats()};
}

std::optional<GpuStageTimes> device_stage_times(const Backend& backend) {
#if PETDAQ_HAVE_CUDA
  GpuStageTimes t;
  if (gpu_last_stage_times(backend, t)) return t;
#else
  (void)backend;
#endif
  return std::nullopt;
}

std::size_t backend_host_bytes(BackendKind kind, const Settings& settings) {
#if PETDAQ_HAVE_CUDA
  if (backend_would_be_gpu(kind)) return gpu_backend_host_bytes(settings);
#endif
  return CpuBackend::memory_bytes(settings);
}

bool backend_would_be_gpu(BackendKind kind) {
  if (kind == BackendKind::cpu) return false;
  std::string reason;
  return gpu_backend_usable(reason);
}

std::unique_ptr<HostAllocator> make_stage_allocator(BackendKind kind) {
#if PETDAQ_HAVE_CUDA
  if (backend_would_be_gpu(kind)) return make_cuda_host_allocator();
#else
  (void)kind;
#endif
  return nullptr;
}

}  // namespace petdaq

// The worker's engine: the backend and the slicer of one set of settings, rebuilt by a reload
// (daemon/worker.cpp and daemon/worker_outputs.cpp share it).
#pragma once

#include <memory>
#include <string>

#include "backends/select_backend.h"
#include "core/calibration.h"
#include "core/counters.h"
#include "core/phase_timer.h"
#include "core/settings.h"
#include "core/slicer.h"
#include "core/timed_backend.h"

namespace petdaq::daemon {

struct WorkerEngine {
  Settings settings;
  Calibration calibration;
  std::unique_ptr<Backend> backend;
  // The backend as the slicer and the worker call it: its calls timed as worker phases.
  std::unique_ptr<TimedBackend> timed;
  std::unique_ptr<Slicer> slicer;
  std::string explanation;
  std::uint64_t max_future_ticks = 0;
  std::uint64_t max_disorder_ticks = 0;

  WorkerEngine(const Settings& s, Calibration c, BackendKind kind, ResultSink& sink,
               Counters& counters, PhaseTimer& phases, ResultMemory* memory)
      : settings(s), calibration(std::move(c)) {
    backend = make_backend(kind, settings, calibration, explanation);
    timed = std::make_unique<TimedBackend>(*backend, phases);
    timed->set_result_memory(memory);
    // Live slices at the backend's preferred size (the CPU backend's fit its caches); the
    // records do not depend on it.
    slicer = std::make_unique<Slicer>(settings, *timed, sink, counters,
                                      timed->preferred_slice_frames());
    max_future_ticks = petdaq::max_future_ticks(settings);
    max_disorder_ticks = ps_to_ticks(settings.stream.max_disorder_ps, settings.scanner.tick_ps);
  }
};

}  // namespace petdaq::daemon

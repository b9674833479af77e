// The worker thread: takes sealed ring chunks, feeds their frames to the slicer, polls it
// every few milliseconds, and publishes what comes back (coincidence batches, optional
// list-mode file, `rates` once a second). It also drives the systemd watchdog, so a worker
// that stops making progress is restarted. Its state lives in one part per room: staging,
// latency, run, sinks, status, views, overload, reload (daemon/worker_*.h).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/calibration.h"
#include "core/counters.h"
#include "core/histograms.h"
#include "core/image.h"
#include "core/phase_timer.h"
#include "core/plm_file.h"
#include "core/settings.h"
#include "core/slicer.h"
#include "daemon/catalogue.h"
#include "daemon/dead_time.h"
#include "daemon/file_sink.h"
#include "daemon/host_ring.h"
#include "daemon/loss_budget.h"
#include "daemon/publisher.h"
#include "daemon/raw_sink.h"
#include "daemon/rates.h"
#include "daemon/reload.h"
#include "daemon/run_id.h"
#include "daemon/worker_latency.h"
#include "daemon/worker_overload.h"
#include "daemon/worker_reload.h"
#include "daemon/worker_run.h"
#include "daemon/worker_sinks.h"
#include "daemon/worker_staging.h"
#include "daemon/worker_status.h"
#include "daemon/worker_views.h"

namespace petdaq::daemon {

class Worker final : public ResultSink {
 public:
  // Builds the backend (BackendKind from the command line or the config) and the slicer;
  // throws BackendUnavailable or std::runtime_error.
  Worker(const Settings& settings, Calibration calibration, BackendKind backend, HostRing& ring,
         Counters& counters, Publisher& publisher, bool print_rates,
         MessageArena* arena = nullptr);
  ~Worker() override;

  const std::string& backend_explanation() const;
  // The worker's thread runs on any of `cpus` (empty: anywhere).
  void start(const std::vector<int>& cpus = {});
  // Applies new settings between two chunks: the current run is finished and the slicer and
  // backend are rebuilt (the slicer cannot change windows mid-run); a new run starts.
  void reload(const Settings& reread);
  // Drains every sealed chunk, finishes the run, publishes the last results and rates.
  void stop();
  // The worker stopped on an error (a device error, say): it logged the reason and asked the
  // process to stop with SIGTERM; petdaqd then exits 1 so that systemd restarts it.
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  std::string final_report() const;
  // One line: each worker phase's seconds, calls and longest call over the whole run (for the
  // log at exit; the rates document has the same per interval). After stop() only.
  std::string phase_report() const;

  // Called on the worker thread with every `rates` document it publishes (the Prometheus
  // metrics keep the latest). Set before start().
  void set_rates_observer(std::function<void(const std::string&)> observer) {
    status_.rates.observer = std::move(observer);
  }

  // The named acquisitions (docs/operations.md): published in `rates`, as an `acquisition`
  // message at every change, and at the start of every list-mode file. Set before start().
  void set_acquisitions(const AcquisitionControl* acquisitions) {
    status_.acquisition.control = acquisitions;
  }

  // The run catalogue (output.catalogue.path): told of each run's start and end, every
  // `rates` document and every file written. Set before start().
  void set_catalogue(Catalogue* catalogue);

  void on_slice(std::uint64_t run_id, const SliceResult& result) override;
  void on_run_end(std::uint64_t run_id, RunEnd reason) override;

 private:
  using Engine = WorkerEngine;
  using Clock = std::chrono::steady_clock;

  void loop(Clock::time_point started);
  void take_chunk(Chunk* c);
  // Datagrams a receiver lost before a chunk's: that stretch of time is made dead for every
  // board (DESIGN section 6, "Losses at a socket").
  void note_loss(const Chunk::Loss& loss);
  // Gives back to the ring the chunks whose copy into the backend is done (all of them,
  // waiting, when `wait`).
  void release_staged(bool wait);
  void keep_alive(Clock::time_point now, bool force_rates);
  void tick(Clock::time_point now, bool force_rates);
  void publish_rates(Clock::time_point now);
  void publish_acquisition();
  void retire_latency(Clock::time_point now, bool all);
  // A reload that changes what the engine computes builds the next engine on a thread of its
  // own while this one goes on taking chunks; switch_engine() puts it in place once built.
  void apply_reload();
  void switch_engine();
  std::uint64_t published_run_id(std::uint64_t slicer_run) const {
    return run_.published(slicer_run);
  }
  // At a run's end (`run_end`): the run's bins, waited for, and its file. Otherwise the
  // periodic message, from the backend's snapshot: false while its copy is not in yet (the
  // worker never waits on the device for it; the next tick tries again).
  bool publish_histograms(std::uint64_t run_id, bool run_end);
  bool publish_image(std::uint64_t run_id, bool run_end);
  // Dead time (DESIGN section 6, "Overload"): the intervals closed since the last call, on
  // `deadtime` and into the list-mode file.
  void publish_dead_intervals();
  // The run's dead time and live fraction up to raw time `until` (RunState::note_dead_time),
  // while the run has a first prompt.
  void note_run_dead_time(std::uint64_t until);
  // Logs the BDMs that began or ended lagging since the last call (once per rates document).
  void note_lagging();

  // The worker's state, one part per room (daemon/worker_*.h); the thread's own below.
  HostRing& ring_;
  Counters& counters_;
  // The dead time socket losses may still make (daemon/loss_budget.h).
  LossBudget loss_budget_;
  std::unique_ptr<Engine> engine_;
  // The worker thread's time by phase (docs/daemon.md, "Worker phases"); written and read
  // on the worker thread only (phase_report() once it is joined).
  PhaseTimer phases_;
  ChunkStaging staging_;  // chunks whose copy into the backend may still run
  ChunkLatency latency_;  // chunks not yet behind the published horizon
  RunState run_;          // the published run: id, span, counter base, file, dead time
  WorkerSinks out_;       // publisher, list-mode file, raw capture, catalogue
  WorkerStatus status_;   // rates, alarms, acquisition, watchdog
  LiveViews views_;       // live histograms and image
  Overload overload_;     // dead time
  ReloadState reload_;    // re-read settings and the engines of a reload

  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> failed_{false};
};

}  // namespace petdaq::daemon

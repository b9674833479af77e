// The worker thread: takes sealed ring chunks, feeds their frames to the slicer, polls it
// every few milliseconds, and publishes what comes back (coincidence batches, optional
// list-mode file, `rates` once a second). It also drives the systemd watchdog, so a worker
// that stops making progress is restarted.
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
#include "daemon/publisher.h"
#include "daemon/raw_sink.h"
#include "daemon/rates.h"
#include "daemon/reload.h"
#include "daemon/run_id.h"

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
  void start();
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
    rates_observer_ = std::move(observer);
  }

  // The named acquisitions (docs/operations.md): published in `rates`, as an `acquisition`
  // message at every change, and at the start of every list-mode file. Set before start().
  void set_acquisitions(const AcquisitionControl* acquisitions) { acquisitions_ = acquisitions; }

  // The run catalogue (output.catalogue.path): told of each run's start and end, every
  // `rates` document and every file written. Set before start().
  void set_catalogue(Catalogue* catalogue);

  void on_slice(std::uint64_t run_id, const SliceResult& result) override;
  void on_run_end(std::uint64_t run_id, RunEnd reason) override;

 private:
  struct Engine;
  using Clock = std::chrono::steady_clock;

  void loop();
  void take_chunk(Chunk* c);
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
  std::uint64_t published_run_id(std::uint64_t slicer_run) const { return run_base_ + slicer_run; }
  void publish_histograms(std::uint64_t run_id, bool write_file);
  void publish_image(std::uint64_t run_id, bool write_file);
  // Dead time (DESIGN section 6, "Overload"): the intervals closed since the last call, on
  // `deadtime` and into the list-mode file.
  void publish_dead_intervals();
  // The run's dead time and live fraction up to raw time `until` (dead_s_run_,
  // live_fraction_run_), while the run has a first prompt.
  void note_run_dead_time(std::uint64_t until);
  // Logs the BDMs that began or ended lagging since the last call (once per rates document).
  void note_lagging();

  BackendKind backend_kind_;
  HostRing& ring_;
  Counters& counters_;
  Publisher& publisher_;
  bool print_rates_;
  // Lent to the backend for its results (published without a copy); null: off.
  MessageArena* arena_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<FileSink> file_;
  std::unique_ptr<RawSink> raw_;  // output.raw
  MessageBuilder builder_;
  bool publish_delayed_ = false;
  CounterBase run_counter_base_{};  // the counters when the current run began
  std::string run_file_stem_;       // the .plm holding the run's first message (its .pdh's name)
  bool publish_singles_ = false;  // output.singles.enabled: the `singles` topic
  bool file_singles_ = false;     // output.file.singles: kind-3 messages in the .plm files
  std::uint64_t run_base_ = first_run_id();
  std::uint64_t last_run_ = run_base_;

  RatesReporter rates_;
  AlarmMonitor alarms_;
  const AcquisitionControl* acquisitions_ = nullptr;
  std::uint64_t acquisition_version_ = 0;
  std::uint64_t acquisition_message_id_ = 0;
  std::optional<Acquisition> acquisition_;  // the open one, as last seen
  std::function<void(const std::string&)> rates_observer_;
  Catalogue* catalogue_ = nullptr;
  std::uint64_t catalogue_run_ = 0;  // the run the catalogue was last told started
  std::unique_ptr<DeadTime> dead_;
  std::uint64_t deadtime_message_id_ = 0;
  // The last run's dead time and live fraction, kept for the rates documents after it ended
  // (the final one at stop among them) until the next run has a prompt.
  double dead_s_run_ = 0;
  double live_fraction_run_ = 1;
  std::vector<std::uint8_t> lagging_;  // per BDM, as the last rates document said
  // The worker thread's time by phase (docs/daemon.md, "Worker phases"); written and read
  // on the worker thread only (phase_report() once it is joined).
  PhaseTimer phases_;
  LatencyWindow latency_;
  std::vector<double> temperature_degC_;
  std::uint64_t rates_message_id_ = 0;
  // The acquisition time a rates interval covered: from the slicer's horizon at the last
  // document, or from the run's first prompt when the run began inside the interval.
  std::uint64_t rates_horizon_ = 0;
  std::optional<std::uint64_t> run_first_prompt_;
  // The end of the run's last slice: with run_first_prompt_, the span the histograms cover.
  std::uint64_t run_slice_end_ = 0;
  Clock::time_point started_;
  Clock::time_point last_rates_;
  Clock::time_point last_poll_;
  Clock::time_point last_watchdog_;
  std::chrono::microseconds watchdog_interval_{0};

  // Live histograms (output.histograms) and the opt-in singles topic.
  std::vector<std::uint8_t> histogram_bytes_;  // reused: sized by the first message
  std::uint64_t histogram_message_id_ = 0;
  Clock::time_point last_histograms_;
  // Live image (output.image): the sliding window's snapshots and the reused message body.
  std::unique_ptr<ImageWindow> image_window_;
  std::vector<std::uint8_t> image_bytes_;
  std::uint64_t image_message_id_ = 0;
  Clock::time_point last_image_;

  // Chunks pushed and not yet behind the published horizon: when each arrived and the
  // latest raw time in it. Fixed capacity (four entries per ring chunk).
  struct Pending {
    Clock::time_point rx;
    std::uint64_t last_time;
  };
  std::vector<Pending> pending_;
  std::size_t pending_count_ = 0;

  // Chunks staged with the backend whose copies may still be running, oldest first (a ring
  // of one entry per ring chunk).
  struct Staging {
    Chunk* chunk = nullptr;
    std::uint64_t ticket = 0;
  };
  std::vector<Staging> staging_;
  std::size_t staging_head_ = 0;
  std::size_t staging_count_ = 0;
  // High-water marks since the last rates document: sealed chunks waiting (the one taken
  // included) when the worker takes one, and chunks in staging_.
  std::size_t sealed_high_ = 0;
  std::size_t staging_high_ = 0;

  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> failed_{false};
  std::atomic<bool> reload_requested_{false};
  std::mutex reload_mutex_;
  std::optional<Settings> reload_settings_;
  // The engine a reload is building (valid while it builds), what it changes, and the
  // engine it replaced, being destroyed off the worker thread.
  std::future<std::unique_ptr<Engine>> next_engine_;
  std::vector<std::string> next_live_;
  std::future<void> retired_engine_;
};

}  // namespace petdaq::daemon

// The `rates` document published once a second (its fields: DESIGN section 7): rates over
// the last interval, per-BDM singles and temperatures, every counter, queue depths and slice
// latency. Built with nlohmann-json once a second, outside the per-frame path.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/counters.h"
#include "core/dead_time.h"
#include "core/phase_timer.h"
#include "core/randoms.h"
#include "daemon/acquisition.h"
#include "daemon/alarms.h"

namespace petdaq::daemon {

// Slice latency samples (ms) of one interval, in a fixed array; past its capacity the
// samples of the interval are thinned (every other one kept), never grown.
class LatencyWindow {
 public:
  struct Stats {
    double p50_ms = 0, p99_ms = 0, max_ms = 0;
    std::size_t samples = 0;
  };
  void add(double ms);
  // Percentiles of the samples since the last call; starts a new interval.
  Stats take();

 private:
  static constexpr std::size_t kCapacity = 8192;
  std::array<double, kCapacity> samples_{};
  std::size_t count_ = 0;
  std::size_t stride_ = 1;  // keep one sample in stride_ once thinned
  std::size_t seen_ = 0;
  double max_ms_ = 0;
};

struct RatesSnapshot {
  std::uint64_t time_unix_ns = 0;
  double uptime_s = 0;
  double interval_s = 0;
  const char* backend = "cpu";
  std::uint64_t run_id = 0;
  std::uint32_t bdm_transaxial = 0;
  std::uint32_t bdm_axial = 0;
  const double* temperature_degC = nullptr;  // bdm_count entries, NaN when unknown
  std::size_t ring_chunks = 0;
  std::size_t ring_free = 0;
  std::size_t ring_used_max = 0;  // most chunks in use at once since the last document
  std::size_t sealed_max = 0;     // most sealed chunks waiting for the worker, at a take
  std::size_t staging_max = 0;    // most chunks whose copy into the backend was not done
  std::size_t pending_frames = 0;
  LatencyWindow::Stats latency;
  // Randoms estimates (docs/randoms.md): the running coincidence settings, and the
  // acquisition time the interval's data covered (horizon advance; 0 = unknown, then the
  // wall-clock interval stands in). The estimates are not linear in the rates, so they
  // need the acquisition's own rates, which differ when data are replayed faster.
  const RandomsSettings* randoms = nullptr;
  double acquisition_s = 0;
  // The calibrated dead-time model (docs/dead_time.md); null or kind none: live fractions 1.
  const DeadTimeModel* dead_time = nullptr;
  // The worker thread's phases (docs/daemon.md, "Worker phases") and its wall time; without
  // a timer the `worker.phases` object is empty.
  const PhaseTimer* phases = nullptr;
  double worker_s = 0;
  // The worker thread's CPU time and the times the kernel took the core from it while it
  // could run (getrusage RUSAGE_THREAD), cumulative.
  double worker_cpu_s = 0;
  std::uint64_t worker_involuntary_switches = 0;
  // Evaluates the built document and adds its `alarms` (none: an empty array).
  AlarmMonitor* alarms = nullptr;
  // The open acquisition (docs/operations.md), published as `acquisition`; null when none.
  const Acquisition* acquisition = nullptr;
  // Lagging sources (bdm_count entries, nonzero: lagging; null: none) and dead time
  // (DESIGN section 6): whether the worker is shedding now, and the live fraction of the run
  // and of the interval's acquisition time.
  const std::uint8_t* lagging = nullptr;
  bool shedding = false;
  double dead_s_run = 0;
  double live_fraction_run = 1;
  double live_fraction_interval = 1;
};

class RatesReporter {
 public:
  explicit RatesReporter(const Counters& counters);
  // Builds the document for the interval since the previous call.
  const std::string& build(const RatesSnapshot& s);
  // One line for STATUS= and --print-rates, from the last build().
  const std::string& summary() const { return summary_; }

 private:
  // The interval's coincidence rates and the randoms estimate the trues subtract.
  struct Coincidences {
    double prompts = 0, delayed = 0, best_randoms = 0, trues = 0;
    RandomsEstimates randoms;
  };
  double rate(Counter c, double interval_s) const;
  // Reads the counters and the per-BDM singles rates of the interval.
  void take_counters(const RatesSnapshot& s);
  Coincidences coincidences(const RatesSnapshot& s) const;
  // The document's parts (proto/rates_schema.h).
  nlohmann::ordered_json rates_object(const Coincidences& c, double interval_s) const;
  nlohmann::ordered_json live_time_object(const RatesSnapshot& s, double trues) const;
  nlohmann::ordered_json bdm_object(const RatesSnapshot& s) const;
  nlohmann::ordered_json counters_object() const;
  nlohmann::ordered_json queues_object(const RatesSnapshot& s) const;
  void write_summary(const RatesSnapshot& s, const Coincidences& c);

  const Counters& counters_;
  CounterDelta now_{};
  CounterDelta before_{};
  std::vector<std::uint64_t> bdm_before_;
  std::vector<double> bdm_rate_;  // singles per second of acquisition, per BDM
  // Wall-clock interval / acquisition time it covered: the randoms estimates and the
  // per-BDM rates are on the acquisition's clock, published per wall-clock second.
  double to_acq_ = 1.0;
  std::string json_;
  std::string summary_;
};

}  // namespace petdaq::daemon

// The worker's status room: what its `rates` documents, `acquisition` messages and the
// systemd watchdog need between two publications (docs/daemon.md, "The `rates` document").
#pragma once

#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/counters.h"
#include "core/settings.h"
#include "daemon/acquisition.h"
#include "daemon/alarms.h"
#include "daemon/notify.h"
#include "daemon/rates.h"

namespace petdaq::daemon {

// The `rates` document's state: its builder, its interval, what is read from the frames
// between two documents (the boards' temperatures) and the boards' lagging state as the last
// document said.
struct RatesState {
  using Clock = std::chrono::steady_clock;
  RatesState(const Counters& counters, bool print_rates)
      : reporter(counters),
        print(print_rates),
        temperature_degC(counters.bdm_count(), NAN),
        lagging(counters.bdm_count(), 0) {}

  RatesReporter reporter;
  bool print;  // --print-rates: the summary on stderr too
  // Called with every document (the Prometheus metrics keep the latest).
  std::function<void(const std::string&)> observer;
  std::uint64_t message_id = 0;
  // The acquisition time an interval covered: from the slicer's horizon at the last
  // document, or from the run's first prompt when the run began inside the interval.
  std::uint64_t horizon = 0;
  Clock::time_point started;  // the worker's start
  Clock::time_point last;     // the last document
  std::vector<double> temperature_degC;  // per BDM, the latest reading
  std::vector<std::uint8_t> lagging;     // per BDM, as the last document said
};

// The named acquisitions (docs/operations.md) as the worker last published them.
struct AcquisitionState {
  const AcquisitionControl* control = nullptr;  // null: none
  std::uint64_t version = 0;                    // of `control` when last published
  std::uint64_t message_id = 0;
  std::optional<Acquisition> open;  // the open one, as last seen
  // Whether the acquisitions changed since they were last published.
  bool changed() const { return control && control->version() != version; }
};

// The systemd watchdog: told the worker is alive at most every half of WatchdogSec
// (never without one).
class Watchdog {
 public:
  using Clock = std::chrono::steady_clock;
  Watchdog() : interval_(watchdog_interval()) {}
  void start(Clock::time_point now) { last_ = now; }
  void keep_alive(Clock::time_point now) {
    if (interval_.count() > 0 && now - last_ >= interval_) {
      notify_watchdog();
      last_ = now;
    }
  }

 private:
  std::chrono::microseconds interval_{0};
  Clock::time_point last_;
};

struct WorkerStatus {
  WorkerStatus(const Counters& counters, const AlarmSettings& alarm_settings, bool print_rates)
      : rates(counters, print_rates), alarms(alarm_settings) {}
  RatesState rates;
  AlarmMonitor alarms;
  AcquisitionState acquisition;
  Watchdog watchdog;
};

}  // namespace petdaq::daemon

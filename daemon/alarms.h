// Alarms on the `rates` document (docs/operations.md, "Alarms"): thresholds of the
// configuration's `alarms` section, evaluated once per document. An alarm is raised when its
// cause is seen in an interval and clears at the first interval without it; each raise and
// clear is a line in the journal (warning, notice). The active alarms are published in the
// document's `alarms` array, which petdaq-top, petdaq-web and the Prometheus metrics show.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/settings.h"

namespace petdaq::daemon {

struct Alarm {
  std::string name;     // data_loss, file_loss, live_fraction, board_rate_low, ...
  std::string subject;  // "scanner", "bdm 5", ...
  std::string message;  // one line a person reads
  double value = 0;
  double threshold = 0;
  std::uint64_t since_unix_ns = 0;
};

// Every alarm name, for documentation and the Prometheus series (0 or 1 for each).
inline constexpr const char* kAlarmNames[] = {
    "data_loss",      "file_loss",        "live_fraction",  "board_rate_low", "board_rate_high",
    "board_temperature", "hot_crystals", "dead_crystals", "lagging_board"};

class AlarmMonitor {
 public:
  explicit AlarmMonitor(const AlarmSettings& settings) : settings_(settings) {}
  void set_settings(const AlarmSettings& settings) { settings_ = settings; }
  // The hot and dead crystals of the last histograms (output.histograms on).
  void set_crystal_health(std::uint32_t hot, std::uint32_t dead) { crystals_ = {hot, dead}; }
  // Evaluates a built document (its `interval_s`, `counters`, `bdm`, live fraction and
  // lagging flags) and writes its `alarms` array.
  void evaluate(nlohmann::ordered_json& doc, std::uint64_t time_unix_ns);
  const std::vector<Alarm>& active() const { return active_list_; }

 private:
  void raise(const std::string& name, const std::string& subject, std::string message,
             double value, double threshold);

  AlarmSettings settings_;
  std::optional<std::pair<std::uint32_t, std::uint32_t>> crystals_;
  std::map<std::string, std::uint64_t> counters_before_;
  std::map<std::pair<std::string, std::string>, Alarm> active_;  // by (name, subject)
  std::map<std::pair<std::string, std::string>, Alarm> seen_;    // this interval's
  std::vector<Alarm> active_list_;
  std::uint64_t now_ns_ = 0;
};

// The counters whose growth is data lost on the way in (data_loss) and on the way to disk
// (file_loss).
inline constexpr const char* kDataLossCounters[] = {
    "rx.kernel_drops", "rx.ring_full",          "rx.seq_missing",          "stream.pending_full",
    "stream.late",     "stream.carry_overflow", "coinc.records_overflow"};
inline constexpr const char* kFileLossCounters[] = {"out.file_dropped_bytes",
                                                    "out.raw_lost_frames"};

// The scanner's live fraction of a `rates` document's interval, where it has one (the rule
// the live_fraction alarm and the run catalogue share).
std::optional<double> rates_live_fraction(const nlohmann::ordered_json& doc);

}  // namespace petdaq::daemon

// The `rates` document petdaqd publishes once a second (DESIGN section 7 has the schema), read
// into plain values for the display. Missing optional parts stay empty; a document that is
// not JSON, or not version 1, is refused with a message.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace petdaq::top {

class RatesError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Rates {
  int version = 0;
  std::uint64_t time_unix_ns = 0;
  double uptime_s = 0;
  std::string backend;
  std::uint64_t run_id = 0;
  double interval_s = 0;
  // Per second over the last interval.
  double frames = 0, singles = 0, prompts = 0, delayed = 0, trues = 0, multiples = 0;
  double randoms_fraction = 0, necr = 0;
  // The randoms estimate behind `trues` and its method (docs/randoms.md); absent from
  // documents of daemons that publish only the delayed window.
  std::optional<double> randoms, randoms_singles_rate, randoms_singles_prompts;
  std::string randoms_method;
  std::uint32_t bdm_transaxial = 0, bdm_axial = 0;
  std::vector<double> bdm_singles_per_s;
  std::vector<std::optional<double>> bdm_temperature_degC;
  // Lagging boards (DESIGN section 6) and their late frames; the dead time of an overload.
  std::vector<bool> bdm_lagging;
  std::vector<std::uint64_t> bdm_late;
  // Per board, what its receiving socket lost (bdm.ring_full + bdm.socket_kernel_drops):
  // cumulative; empty from a daemon that does not publish them.
  std::vector<std::uint64_t> bdm_socket_losses;
  std::optional<double> live_fraction_interval, live_fraction_run;
  bool shedding = false;
  std::vector<std::pair<std::string, std::uint64_t>> counters;  // sorted by name
  std::optional<std::uint64_t> ring_chunks, ring_free, pending_frames;
  std::optional<double> latency_p50_ms, latency_p99_ms, latency_max_ms;
  // The active alarms (docs/operations.md), each "name (subject): message".
  std::vector<std::string> alarms;

  std::optional<std::uint64_t> counter(std::string_view name) const;
};

// The boards whose socket losses (Rates::bdm_socket_losses) grew from `before` to `now`: their
// data has gaps since the document before (none on the first document, `before` empty).
std::vector<bool> boards_losing(const std::vector<std::uint64_t>& before,
                                const std::vector<std::uint64_t>& now);

Rates parse_rates(std::string_view json_text);

// Counters whose growth means data was refused or lost; these are highlighted when non-zero.
// Everything else (throughput, physics counts) is informational. Unknown names count as
// problems, so a new drop counter is never hidden.
bool is_problem_counter(std::string_view name);

}  // namespace petdaq::top

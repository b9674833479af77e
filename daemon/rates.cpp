#include "daemon/rates.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace petdaq::daemon {

void LatencyWindow::add(double ms) {
  max_ms_ = std::max(max_ms_, ms);
  if (seen_++ % stride_ != 0) return;
  if (count_ == kCapacity) {
    for (std::size_t i = 0; i < kCapacity / 2; ++i) samples_[i] = samples_[2 * i];
    count_ = kCapacity / 2;
    stride_ *= 2;
  }
  samples_[count_++] = ms;
}

LatencyWindow::Stats LatencyWindow::take() {
  Stats s;
  s.samples = seen_;
  s.max_ms = max_ms_;
  if (count_ > 0) {
    auto at = [&](double q) {
      const auto k = static_cast<std::size_t>(q * static_cast<double>(count_ - 1) + 0.5);
      std::nth_element(samples_.begin(), samples_.begin() + k, samples_.begin() + count_);
      return samples_[k];
    };
    s.p50_ms = at(0.50);
    s.p99_ms = at(0.99);
  }
  count_ = 0;
  seen_ = 0;
  stride_ = 1;
  max_ms_ = 0;
  return s;
}

RatesReporter::RatesReporter(const Counters& counters)
    : counters_(counters),
      bdm_before_(counters.bdm_count(), 0),
      bdm_rate_(counters.bdm_count(), 0.0) {
  json_.reserve(4096 + 64 * std::size_t{counters.bdm_count()} + 48 * kCounterCount +
                200 * kPhaseCount);
  summary_.reserve(256);
}

double RatesReporter::rate(Counter c, double interval_s) const {
  if (interval_s <= 0) return 0;
  return static_cast<double>(now_[c] - before_[c]) / interval_s;
}

namespace {
// JSON has no NaN or infinity.
double finite(double v) { return std::isfinite(v) ? v : 0.0; }
}  // namespace

const std::string& RatesReporter::build(const RatesSnapshot& s) {
  for (std::size_t i = 0; i < kCounterCount; ++i) now_.value[i] = counters_.get(static_cast<Counter>(i));
  const double dt = s.interval_s;
  const double prompts = rate(Counter::coinc_prompts, dt);
  const double delayed = rate(Counter::coinc_delayed, dt);
  const std::uint32_t bdm_count = counters_.bdm_count();
  // Randoms estimates on the acquisition's clock, published per wall-clock second.
  const double to_acq = s.acquisition_s > 0 && dt > 0 ? dt / s.acquisition_s : 1.0;
  for (std::uint32_t b = 0; b < bdm_count; ++b) {
    const std::uint64_t n = counters_.bdm_singles(b);
    bdm_rate_[b] = dt > 0 ? static_cast<double>(n - bdm_before_[b]) / dt * to_acq : 0.0;
    bdm_before_[b] = n;
  }
  RandomsEstimates randoms;  // without settings: the delayed window alone
  randoms.best_per_s = delayed * to_acq;
  if (s.randoms)
    randoms = estimate_randoms(*s.randoms, bdm_rate_, prompts * to_acq, delayed * to_acq);
  const double best_randoms = randoms.best_per_s / to_acq;
  const double trues = prompts - best_randoms;
  const double randoms_fraction = prompts > 0 ? best_randoms / prompts : 0.0;
  const double necr = prompts > 0 ? trues * trues / prompts : 0.0;

  // The fields and their types are listed once, in DESIGN section 7 ("`rates` document
  // fields"); daemon_unit_test checks a built document against that table.
  nlohmann::ordered_json doc;
  doc["version"] = 1;
  doc["time_unix_ns"] = s.time_unix_ns;
  doc["uptime_s"] = s.uptime_s;
  doc["backend"] = s.backend;
  doc["run_id"] = s.run_id;
  doc["interval_s"] = dt;
  doc["rates"] = {{"frames", rate(Counter::rx_frames, dt)},
                  {"singles", rate(Counter::single_accepted, dt)},
                  {"prompts", prompts},
                  {"delayed", delayed},
                  {"trues", trues},
                  {"multiples", rate(Counter::coinc_multiples, dt)},
                  {"randoms_fraction", finite(randoms_fraction)},
                  {"necr", finite(necr)},
                  {"randoms", finite(best_randoms)},
                  {"randoms_method", randoms_method_name(randoms.best)},
                  {"randoms_singles_rate", finite(randoms.singles_rate_per_s / to_acq)}};
  doc["rates"]["randoms_singles_prompts"] =
      randoms.singles_prompts.modelled
          ? nlohmann::ordered_json(finite(randoms.singles_prompts.randoms_per_s / to_acq))
          : nlohmann::ordered_json(nullptr);
  // Live time from the per-BDM singles on the acquisition's clock and the calibrated model.
  static const DeadTimeModel kNoModel;
  const DeadTimeModel& dead_model = s.dead_time ? *s.dead_time : kNoModel;
  const LiveTime live = live_time(dead_model, bdm_rate_);
  nlohmann::ordered_json live_bdm = nlohmann::ordered_json::array();
  for (const double f : live.bdm) live_bdm.push_back(f);
  doc["live_time_model"] = {
      {"model", dead_time_kind_name(dead_model.kind)},
      {"bdm_live_fraction", std::move(live_bdm)},
      {"singles_live_fraction", live.singles},
      {"coincidence_live_fraction", live.coincidences},
      {"trues_corrected", finite(trues / live.coincidences)},
      {"saturated_bdms", live.saturated_bdms}};
  nlohmann::ordered_json singles = nlohmann::ordered_json::array();
  nlohmann::ordered_json temperatures = nlohmann::ordered_json::array();
  for (std::uint32_t b = 0; b < bdm_count; ++b) {
    singles.push_back(bdm_rate_[b] / to_acq);
    const double t = s.temperature_degC ? s.temperature_degC[b] : NAN;
    temperatures.push_back(std::isfinite(t) ? nlohmann::ordered_json(t) : nullptr);
  }
  nlohmann::ordered_json lagging = nlohmann::ordered_json::array();
  nlohmann::ordered_json late = nlohmann::ordered_json::array();
  nlohmann::ordered_json dead = nlohmann::ordered_json::array();
  nlohmann::ordered_json taken = nlohmann::ordered_json::array();
  for (std::uint32_t b = 0; b < bdm_count; ++b) {
    lagging.push_back(s.lagging != nullptr && s.lagging[b] != 0);
    taken.push_back(counters_.bdm_singles(b) + counters_.bdm_energy_rejected(b));
    late.push_back(counters_.bdm_late(b));
    dead.push_back(counters_.bdm_dead(b));
  }
  doc["bdm"] = {{"transaxial", s.bdm_transaxial},
                {"axial", s.bdm_axial},
                {"singles_per_s", std::move(singles)},
                {"temperature_degC", std::move(temperatures)},
                {"lagging", std::move(lagging)},
                {"frames_taken", std::move(taken)},
                {"late", std::move(late)},
                {"dead", std::move(dead)}};
  doc["deadtime"] = {{"shedding", s.shedding},
                     {"dead_s_run", finite(s.dead_s_run)},
                     {"live_fraction_run", finite(s.live_fraction_run)},
                     {"live_fraction_interval", finite(s.live_fraction_interval)}};
  nlohmann::ordered_json& counters = doc["counters"] = nlohmann::ordered_json::object();
  for (std::size_t i = 0; i < kCounterCount; ++i)
    counters[std::string(counter_name(static_cast<Counter>(i)))] = now_.value[i];
  doc["queues"] = {{"ring_chunks", s.ring_chunks},
                   {"ring_free", s.ring_free},
                   {"ring_used_max", s.ring_used_max},
                   {"sealed_max", s.sealed_max},
                   {"staging_max", s.staging_max},
                   {"pending_frames", s.pending_frames},
                   {"subscribers", now_[Counter::out_zmq_connects] - now_[Counter::out_zmq_disconnects]}};
  doc["latency_ms"] = {
      {"p50", s.latency.p50_ms}, {"p99", s.latency.p99_ms}, {"max", s.latency.max_ms}};
  nlohmann::ordered_json& worker = doc["worker"] = {
      {"seconds", s.worker_s},
      {"cpu_seconds", s.worker_cpu_s},
      {"involuntary_switches", s.worker_involuntary_switches}};
  nlohmann::ordered_json& phases = worker["phases"] = nlohmann::ordered_json::object();
  if (s.phases)
    for (std::size_t i = 0; i < kPhaseCount; ++i) {
      const auto p = static_cast<Phase>(i);
      const PhaseTimer::Stats& st = s.phases->stats(p);
      phases[std::string(phase_name(p))] = {
          {"seconds", static_cast<double>(st.total_ns) * 1e-9},
          {"calls", st.calls},
          {"max_ms", static_cast<double>(st.interval_max_ns) * 1e-6},
          {"max_ms_since_start", static_cast<double>(st.max_ns) * 1e-6},
          {"log2_us", st.log2_us}};
    }
  if (s.acquisition) {
    const Acquisition& a = *s.acquisition;
    doc["acquisition"] = {{"id", a.id},
                          {"name", a.name},
                          {"subject", a.subject},
                          {"isotope", a.isotope},
                          {"activity_MBq", a.activity_MBq ? nlohmann::ordered_json(*a.activity_MBq)
                                                          : nlohmann::ordered_json(nullptr)},
                          {"operator", a.operator_name},
                          {"started_unix_ns", a.started_unix_ns},
                          {"annotations", a.annotations.size()}};
  } else {
    doc["acquisition"] = nullptr;
  }
  if (s.alarms)
    s.alarms->evaluate(doc, s.time_unix_ns);
  else
    doc["alarms"] = nlohmann::ordered_json::array();
  json_ = doc.dump();

  summary_.clear();
  fmt::format_to(std::back_inserter(summary_),
                 "run {} | frames {:.3g}/s singles {:.3g}/s prompts {:.3g}/s delayed {:.3g}/s | "
                 "drops ring {} kernel {} | live {:.3f} | latency p99 {:.1f} ms",
                 s.run_id, rate(Counter::rx_frames, dt), rate(Counter::single_accepted, dt),
                 prompts, delayed, now_[Counter::rx_ring_full], now_[Counter::rx_kernel_drops],
                 s.live_fraction_interval, s.latency.p99_ms);
  before_ = now_;
  return json_;
}

}  // namespace petdaq::daemon

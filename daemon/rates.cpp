#include "daemon/rates.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "proto/rates_schema.h"

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

using Json = nlohmann::ordered_json;
namespace rd = rates_doc;

// JSON has no NaN or infinity.
double finite(double v) { return std::isfinite(v) ? v : 0.0; }

Json deadtime_object(const RatesSnapshot& s) {
  return {{rd::deadtime::shedding, s.shedding},
          {rd::deadtime::dead_s_run, finite(s.dead_s_run)},
          {rd::deadtime::live_fraction_run, finite(s.live_fraction_run)},
          {rd::deadtime::live_fraction_interval, finite(s.live_fraction_interval)}};
}

Json latency_object(const LatencyWindow::Stats& latency) {
  return {{rd::latency_ms::p50, latency.p50_ms},
          {rd::latency_ms::p99, latency.p99_ms},
          {rd::latency_ms::max, latency.max_ms}};
}

Json worker_object(const RatesSnapshot& s) {
  Json worker = {{rd::worker::seconds, s.worker_s},
                 {rd::worker::cpu_seconds, s.worker_cpu_s},
                 {rd::worker::involuntary_switches, s.worker_involuntary_switches}};
  Json& phases = worker[rd::worker::phases] = Json::object();
  if (s.phases)
    for (std::size_t i = 0; i < kPhaseCount; ++i) {
      const auto p = static_cast<Phase>(i);
      const PhaseTimer::Stats& st = s.phases->stats(p);
      phases[std::string(phase_name(p))] = {
          {rd::phase::seconds, static_cast<double>(st.total_ns) * 1e-9},
          {rd::phase::calls, st.calls},
          {rd::phase::max_ms, static_cast<double>(st.interval_max_ns) * 1e-6},
          {rd::phase::max_ms_since_start, static_cast<double>(st.max_ns) * 1e-6},
          {rd::phase::log2_us, st.log2_us}};
    }
  return worker;
}

Json acquisition_object(const Acquisition* acquisition) {
  if (!acquisition) return nullptr;
  const Acquisition& a = *acquisition;
  return {{rd::acquisition::id, a.id},
          {rd::acquisition::name, a.name},
          {rd::acquisition::subject, a.subject},
          {rd::acquisition::isotope, a.isotope},
          {rd::acquisition::activity_MBq, a.activity_MBq ? Json(*a.activity_MBq) : Json(nullptr)},
          {rd::acquisition::operator_name, a.operator_name},
          {rd::acquisition::started_unix_ns, a.started_unix_ns},
          {rd::acquisition::annotations, a.annotations.size()}};
}

}  // namespace

void RatesReporter::take_counters(const RatesSnapshot& s) {
  for (std::size_t i = 0; i < kCounterCount; ++i)
    now_.value[i] = counters_.get(static_cast<Counter>(i));
  const double dt = s.interval_s;
  for (std::uint32_t b = 0; b < counters_.bdm_count(); ++b) {
    const std::uint64_t n = counters_.bdm_singles(b);
    bdm_rate_[b] = dt > 0 ? static_cast<double>(n - bdm_before_[b]) / dt * to_acq_ : 0.0;
    bdm_before_[b] = n;
  }
}

RatesReporter::Coincidences RatesReporter::coincidences(const RatesSnapshot& s) const {
  const double dt = s.interval_s;
  Coincidences c;
  c.prompts = rate(Counter::coinc_prompts, dt);
  c.delayed = rate(Counter::coinc_delayed, dt);
  c.randoms.best_per_s = c.delayed * to_acq_;  // without settings: the delayed window alone
  if (s.randoms)
    c.randoms = estimate_randoms(*s.randoms, bdm_rate_, c.prompts * to_acq_, c.delayed * to_acq_);
  c.best_randoms = c.randoms.best_per_s / to_acq_;
  c.trues = c.prompts - c.best_randoms;
  return c;
}

Json RatesReporter::rates_object(const Coincidences& c, double dt) const {
  const double randoms_fraction = c.prompts > 0 ? c.best_randoms / c.prompts : 0.0;
  const double necr = c.prompts > 0 ? c.trues * c.trues / c.prompts : 0.0;
  return {{rd::rates::frames, rate(Counter::rx_frames, dt)},
          {rd::rates::singles, rate(Counter::single_accepted, dt)},
          {rd::rates::prompts, c.prompts},
          {rd::rates::delayed, c.delayed},
          {rd::rates::trues, c.trues},
          {rd::rates::multiples, rate(Counter::coinc_multiples, dt)},
          {rd::rates::randoms_fraction, finite(randoms_fraction)},
          {rd::rates::necr, finite(necr)},
          {rd::rates::randoms, finite(c.best_randoms)},
          {rd::rates::randoms_method, randoms_method_name(c.randoms.best)},
          {rd::rates::randoms_singles_rate, finite(c.randoms.singles_rate_per_s / to_acq_)},
          {rd::rates::randoms_singles_prompts,
           c.randoms.singles_prompts.modelled
               ? Json(finite(c.randoms.singles_prompts.randoms_per_s / to_acq_))
               : Json(nullptr)}};
}

// Live time from the per-BDM singles on the acquisition's clock and the calibrated model.
Json RatesReporter::live_time_object(const RatesSnapshot& s, double trues) const {
  static const DeadTimeModel kNoModel;
  const DeadTimeModel& model = s.dead_time ? *s.dead_time : kNoModel;
  const LiveTime live = live_time(model, bdm_rate_);
  Json bdm = Json::array();
  for (const double f : live.bdm) bdm.push_back(f);
  return {{rd::live_time_model::model, dead_time_kind_name(model.kind)},
          {rd::live_time_model::bdm_live_fraction, std::move(bdm)},
          {rd::live_time_model::singles_live_fraction, live.singles},
          {rd::live_time_model::coincidence_live_fraction, live.coincidences},
          {rd::live_time_model::trues_corrected, finite(trues / live.coincidences)},
          {rd::live_time_model::saturated_bdms, live.saturated_bdms}};
}

Json RatesReporter::bdm_object(const RatesSnapshot& s) const {
  Json singles = Json::array(), temperatures = Json::array(), lagging = Json::array(),
       taken = Json::array(), late = Json::array(), dead = Json::array(),
       ring_full = Json::array(), socket_kernel_drops = Json::array();
  for (std::uint32_t b = 0; b < counters_.bdm_count(); ++b) {
    singles.push_back(bdm_rate_[b] / to_acq_);
    const double t = s.temperature_degC ? s.temperature_degC[b] : NAN;
    temperatures.push_back(std::isfinite(t) ? Json(t) : nullptr);
    lagging.push_back(s.lagging != nullptr && s.lagging[b] != 0);
    taken.push_back(counters_.bdm_singles(b) + counters_.bdm_energy_rejected(b));
    late.push_back(counters_.bdm_late(b));
    dead.push_back(counters_.bdm_dead(b));
    ring_full.push_back(counters_.bdm_ring_full(b));
    socket_kernel_drops.push_back(counters_.bdm_socket_kernel_drops(b));
  }
  return {{rd::bdm::transaxial, s.bdm_transaxial},
          {rd::bdm::axial, s.bdm_axial},
          {rd::bdm::singles_per_s, std::move(singles)},
          {rd::bdm::temperature_degC, std::move(temperatures)},
          {rd::bdm::lagging, std::move(lagging)},
          {rd::bdm::frames_taken, std::move(taken)},
          {rd::bdm::late, std::move(late)},
          {rd::bdm::dead, std::move(dead)},
          {rd::bdm::ring_full, std::move(ring_full)},
          {rd::bdm::socket_kernel_drops, std::move(socket_kernel_drops)}};
}

Json RatesReporter::counters_object() const {
  Json counters = Json::object();
  for (std::size_t i = 0; i < kCounterCount; ++i)
    counters[std::string(counter_name(static_cast<Counter>(i)))] = now_.value[i];
  return counters;
}

Json RatesReporter::queues_object(const RatesSnapshot& s) const {
  return {{rd::queues::ring_chunks, s.ring_chunks},
          {rd::queues::ring_free, s.ring_free},
          {rd::queues::ring_used_max, s.ring_used_max},
          {rd::queues::sealed_max, s.sealed_max},
          {rd::queues::staging_max, s.staging_max},
          {rd::queues::pending_frames, s.pending_frames},
          {rd::queues::subscribers,
           now_[Counter::out_zmq_connects] - now_[Counter::out_zmq_disconnects]}};
}

void RatesReporter::write_summary(const RatesSnapshot& s, const Coincidences& c) {
  const double dt = s.interval_s;
  summary_.clear();
  fmt::format_to(std::back_inserter(summary_),
                 "run {} | frames {:.3g}/s singles {:.3g}/s prompts {:.3g}/s delayed {:.3g}/s | "
                 "drops ring {} kernel {} | live {:.3f} | latency p99 {:.1f} ms",
                 s.run_id, rate(Counter::rx_frames, dt), rate(Counter::single_accepted, dt),
                 c.prompts, c.delayed, now_[Counter::rx_ring_full], now_[Counter::rx_kernel_drops],
                 s.live_fraction_interval, s.latency.p99_ms);
}

const std::string& RatesReporter::build(const RatesSnapshot& s) {
  const double dt = s.interval_s;
  // Randoms estimates on the acquisition's clock, published per wall-clock second.
  to_acq_ = s.acquisition_s > 0 && dt > 0 ? dt / s.acquisition_s : 1.0;
  take_counters(s);
  const Coincidences c = coincidences(s);

  // The members in the order of DESIGN section 7 (proto/rates_schema.h); daemon_unit_test
  // checks a built document against that table.
  Json doc;
  doc[rd::doc::version] = rd::kVersion;
  doc[rd::doc::time_unix_ns] = s.time_unix_ns;
  doc[rd::doc::uptime_s] = s.uptime_s;
  doc[rd::doc::backend] = s.backend;
  doc[rd::doc::run_id] = s.run_id;
  doc[rd::doc::interval_s] = dt;
  doc[rd::doc::rates] = rates_object(c, dt);
  doc[rd::doc::live_time_model] = live_time_object(s, c.trues);
  doc[rd::doc::bdm] = bdm_object(s);
  doc[rd::doc::deadtime] = deadtime_object(s);
  doc[rd::doc::counters] = counters_object();
  doc[rd::doc::queues] = queues_object(s);
  doc[rd::doc::latency_ms] = latency_object(s.latency);
  doc[rd::doc::worker] = worker_object(s);
  doc[rd::doc::acquisition] = acquisition_object(s.acquisition);
  if (s.alarms)
    s.alarms->evaluate(doc, s.time_unix_ns);
  else
    doc[rd::doc::alarms] = Json::array();
  json_ = doc.dump();

  write_summary(s, c);
  before_ = now_;
  return json_;
}

}  // namespace petdaq::daemon

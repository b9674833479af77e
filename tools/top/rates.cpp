#include "tools/top/rates.h"

#include <algorithm>
#include <array>

#include <nlohmann/json.hpp>

#include "proto/rates_schema.h"

namespace petdaq::top {

std::optional<std::uint64_t> Rates::counter(std::string_view name) const {
  for (const auto& [n, v] : counters) {
    if (n == name) return v;
  }
  return std::nullopt;
}

namespace {

using Json = nlohmann::json;
namespace rd = rates_doc;

const Json* member(const Json* parent, const char* key) {
  if (!parent || !parent->is_object()) return nullptr;
  const auto it = parent->find(key);
  return it == parent->end() ? nullptr : &*it;
}

std::optional<double> optional_number(const Json* parent, const char* key) {
  const Json* v = member(parent, key);
  if (v && v->is_number()) return v->get<double>();
  return std::nullopt;
}

double number_or(const Json* parent, const char* key, double fallback) {
  return optional_number(parent, key).value_or(fallback);
}

std::uint64_t to_count(double v) {
  if (!(v >= 0)) return 0;
  if (v >= 18446744073709551615.0) return UINT64_MAX;
  return static_cast<std::uint64_t>(v);
}

std::uint64_t count_of(const Json& v) {
  return v.is_number_unsigned() ? v.get<std::uint64_t>() : to_count(v.get<double>());
}

}  // namespace

Rates parse_rates(std::string_view json_text) {
  Json doc;
  try {
    doc = Json::parse(json_text);
  } catch (const Json::parse_error& e) {
    throw RatesError(std::string("rates document is not valid JSON: ") + e.what());
  }
  if (!doc.is_object()) throw RatesError("rates document is not a JSON object");
  Rates r;
  const Json* version = member(&doc, rd::doc::version);
  if (!version || !version->is_number()) throw RatesError("rates document has no version");
  r.version = static_cast<int>(version->get<double>());
  if (r.version != rd::kVersion) {
    throw RatesError("rates document version " + std::to_string(r.version) +
                     " is not supported (expected " + std::to_string(rd::kVersion) + ")");
  }
  if (const Json* t = member(&doc, rd::doc::time_unix_ns); t && t->is_number())
    r.time_unix_ns = count_of(*t);
  r.uptime_s = number_or(&doc, rd::doc::uptime_s, 0);
  if (const Json* b = member(&doc, rd::doc::backend); b && b->is_string())
    r.backend = b->get<std::string>();
  if (const Json* id = member(&doc, rd::doc::run_id); id && id->is_number())
    r.run_id = count_of(*id);
  r.interval_s = number_or(&doc, rd::doc::interval_s, 0);

  const Json* rates = member(&doc, rd::doc::rates);
  r.frames = number_or(rates, rd::rates::frames, 0);
  r.singles = number_or(rates, rd::rates::singles, 0);
  r.prompts = number_or(rates, rd::rates::prompts, 0);
  r.delayed = number_or(rates, rd::rates::delayed, 0);
  r.trues = number_or(rates, rd::rates::trues, r.prompts - r.delayed);
  r.multiples = number_or(rates, rd::rates::multiples, 0);
  r.randoms_fraction =
      number_or(rates, rd::rates::randoms_fraction, r.prompts > 0 ? r.delayed / r.prompts : 0.0);
  r.necr = number_or(rates, rd::rates::necr, r.prompts > 0 ? r.trues * r.trues / r.prompts : 0.0);
  r.randoms = optional_number(rates, rd::rates::randoms);
  r.randoms_singles_rate = optional_number(rates, rd::rates::randoms_singles_rate);
  r.randoms_singles_prompts = optional_number(rates, rd::rates::randoms_singles_prompts);
  if (const Json* m = member(rates, rd::rates::randoms_method); m && m->is_string())
    r.randoms_method = m->get<std::string>();

  if (const Json* bdm = member(&doc, rd::doc::bdm); bdm && bdm->is_object()) {
    r.bdm_transaxial =
        static_cast<std::uint32_t>(std::max(0.0, number_or(bdm, rd::bdm::transaxial, 0)));
    r.bdm_axial = static_cast<std::uint32_t>(std::max(0.0, number_or(bdm, rd::bdm::axial, 0)));
    if (const Json* s = member(bdm, rd::bdm::singles_per_s); s && s->is_array()) {
      for (const auto& v : *s) r.bdm_singles_per_s.push_back(v.is_number() ? v.get<double>() : 0.0);
    }
    if (const Json* t = member(bdm, rd::bdm::temperature_degC); t && t->is_array()) {
      for (const auto& v : *t) {
        r.bdm_temperature_degC.push_back(v.is_number() ? std::optional<double>(v.get<double>())
                                                       : std::nullopt);
      }
    }
    if (const Json* l = member(bdm, rd::bdm::lagging); l && l->is_array())
      for (const auto& v : *l) r.bdm_lagging.push_back(v.is_boolean() && v.get<bool>());
    if (const Json* l = member(bdm, rd::bdm::late); l && l->is_array())
      for (const auto& v : *l) r.bdm_late.push_back(v.is_number() ? count_of(v) : 0);
    for (const auto key : {rd::bdm::ring_full, rd::bdm::socket_kernel_drops})
      if (const Json* l = member(bdm, key); l && l->is_array()) {
        r.bdm_socket_losses.resize(std::max(r.bdm_socket_losses.size(), l->size()), 0);
        for (std::size_t b = 0; b < l->size(); ++b)
          if ((*l)[b].is_number()) r.bdm_socket_losses[b] += count_of((*l)[b]);
      }
  }
  if (const Json* c = member(&doc, rd::doc::counters); c && c->is_object()) {
    for (const auto& [name, v] : c->items()) {
      if (v.is_number()) r.counters.emplace_back(name, count_of(v));
    }
    // nlohmann::json keeps object members sorted by name.
  }
  if (const Json* q = member(&doc, rd::doc::queues); q && q->is_object()) {
    if (auto v = optional_number(q, rd::queues::ring_chunks)) r.ring_chunks = to_count(*v);
    if (auto v = optional_number(q, rd::queues::ring_free)) r.ring_free = to_count(*v);
    if (auto v = optional_number(q, rd::queues::pending_frames)) r.pending_frames = to_count(*v);
  }
  if (const Json* d = member(&doc, rd::doc::deadtime); d && d->is_object()) {
    r.live_fraction_interval = optional_number(d, rd::deadtime::live_fraction_interval);
    r.live_fraction_run = optional_number(d, rd::deadtime::live_fraction_run);
    if (const Json* sh = member(d, rd::deadtime::shedding); sh && sh->is_boolean())
      r.shedding = sh->get<bool>();
  }
  const Json* lat = member(&doc, rd::doc::latency_ms);
  r.latency_p50_ms = optional_number(lat, rd::latency_ms::p50);
  r.latency_p99_ms = optional_number(lat, rd::latency_ms::p99);
  r.latency_max_ms = optional_number(lat, rd::latency_ms::max);
  if (const Json* a = member(&doc, rd::doc::alarms); a && a->is_array()) {
    for (const Json& alarm : *a) {
      if (!alarm.is_object()) continue;
      auto text = [&](const char* key) {
        const auto it = alarm.find(key);
        return it != alarm.end() && it->is_string() ? it->get<std::string>() : std::string();
      };
      r.alarms.push_back(text(rd::alarm::name) + " (" + text(rd::alarm::subject) +
                         "): " + text(rd::alarm::message));
    }
  }
  return r;
}

bool is_problem_counter(std::string_view name) {
  // stream.source_idle is normal at the end of every acquisition, and stream.exact_blocks
  // counts blocks the slicer took frame by frame (nothing lost), so neither is a problem.
  static constexpr std::array<std::string_view, 20> informational = {
      "rx.datagrams",        "rx.bytes",        "rx.frames",
      "single.accepted",     "single.energy_rejected",
      "stream.runs",         "stream.slices",   "stream.source_idle", "stream.exact_blocks",
      "coinc.prompts",       "coinc.delayed",   "coinc.multiples",
      "coinc.delayed_multiples", "out.messages", "out.file_bytes", "out.raw_bytes",
      "out.zmq_subscriptions", "out.zmq_connects", "out.zmq_disconnects", "ctl.commands"};
  return std::find(informational.begin(), informational.end(), name) == informational.end();
}

std::vector<bool> boards_losing(const std::vector<std::uint64_t>& before,
                                const std::vector<std::uint64_t>& now) {
  std::vector<bool> losing(now.size(), false);
  for (std::size_t b = 0; b < now.size() && b < before.size(); ++b) losing[b] = now[b] > before[b];
  return losing;
}

}  // namespace petdaq::top

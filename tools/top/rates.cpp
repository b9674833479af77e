#include "tools/top/rates.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>

#include "tools/top/json.h"

namespace petdaq::top {

std::optional<std::uint64_t> Rates::counter(std::string_view name) const {
  for (const auto& [n, v] : counters) {
    if (n == name) return v;
  }
  return std::nullopt;
}

namespace {

double number_or(const json::Value* parent, std::string_view key, double fallback) {
  const json::Value* v = parent ? parent->find(key) : nullptr;
  return v && v->is_number() ? v->as_number() : fallback;
}

std::optional<double> optional_number(const json::Value* parent, std::string_view key) {
  const json::Value* v = parent ? parent->find(key) : nullptr;
  if (v && v->is_number()) return v->as_number();
  return std::nullopt;
}

std::uint64_t to_count(double v) {
  if (!(v >= 0)) return 0;
  if (v >= 18446744073709551615.0) return UINT64_MAX;
  return static_cast<std::uint64_t>(v);
}

}  // namespace

Rates parse_rates(std::string_view json_text) {
  json::Value doc;
  try {
    doc = json::parse(json_text);
  } catch (const json::ParseError& e) {
    throw RatesError(std::string("rates document is not valid JSON: ") + e.what());
  }
  if (!doc.is_object()) throw RatesError("rates document is not a JSON object");
  Rates r;
  const json::Value* version = doc.find("version");
  if (!version || !version->is_number()) throw RatesError("rates document has no version");
  r.version = static_cast<int>(version->as_number());
  if (r.version != 1) {
    throw RatesError("rates document version " + std::to_string(r.version) +
                     " is not supported (expected 1)");
  }
  r.time_unix_ns = to_count(number_or(&doc, "time_unix_ns", 0));
  r.uptime_s = number_or(&doc, "uptime_s", 0);
  if (const json::Value* b = doc.find("backend"); b && b->is_string()) r.backend = b->as_string();
  r.run_id = to_count(number_or(&doc, "run_id", 0));
  r.interval_s = number_or(&doc, "interval_s", 0);

  const json::Value* rates = doc.find("rates");
  r.frames = number_or(rates, "frames", 0);
  r.singles = number_or(rates, "singles", 0);
  r.prompts = number_or(rates, "prompts", 0);
  r.delayed = number_or(rates, "delayed", 0);
  r.trues = number_or(rates, "trues", r.prompts - r.delayed);
  r.multiples = number_or(rates, "multiples", 0);
  r.randoms_fraction =
      number_or(rates, "randoms_fraction", r.prompts > 0 ? r.delayed / r.prompts : 0.0);
  r.necr = number_or(rates, "necr", r.prompts > 0 ? r.trues * r.trues / r.prompts : 0.0);

  if (const json::Value* bdm = doc.find("bdm"); bdm && bdm->is_object()) {
    r.bdm_transaxial = static_cast<std::uint32_t>(std::max(0.0, number_or(bdm, "transaxial", 0)));
    r.bdm_axial = static_cast<std::uint32_t>(std::max(0.0, number_or(bdm, "axial", 0)));
    if (const json::Value* s = bdm->find("singles_per_s"); s && s->is_array()) {
      for (const auto& v : s->as_array()) r.bdm_singles_per_s.push_back(v.is_number() ? v.as_number() : 0.0);
    }
    if (const json::Value* t = bdm->find("temperature_degC"); t && t->is_array()) {
      for (const auto& v : t->as_array()) {
        r.bdm_temperature_degC.push_back(v.is_number() ? std::optional<double>(v.as_number())
                                                       : std::nullopt);
      }
    }
  }
  if (const json::Value* c = doc.find("counters"); c && c->is_object()) {
    for (const auto& [name, v] : c->as_object()) {
      if (v.is_number()) r.counters.emplace_back(name, to_count(v.as_number()));
    }
  }
  if (const json::Value* q = doc.find("queues"); q && q->is_object()) {
    if (auto v = optional_number(q, "ring_chunks")) r.ring_chunks = to_count(*v);
    if (auto v = optional_number(q, "ring_free")) r.ring_free = to_count(*v);
    if (auto v = optional_number(q, "pending_frames")) r.pending_frames = to_count(*v);
  }
  const json::Value* lat = doc.find("latency_ms");
  r.latency_p50_ms = optional_number(lat, "p50");
  r.latency_p99_ms = optional_number(lat, "p99");
  r.latency_max_ms = optional_number(lat, "max");
  return r;
}

bool is_problem_counter(std::string_view name) {
  // stream.source_idle is normal at the end of every acquisition, so it is not a problem.
  static constexpr std::array<std::string_view, 17> informational = {
      "rx.datagrams",        "rx.bytes",        "rx.frames",
      "single.accepted",     "single.energy_rejected",
      "stream.runs",         "stream.slices",   "stream.source_idle",
      "coinc.prompts",       "coinc.delayed",   "coinc.multiples",
      "coinc.delayed_multiples", "out.messages", "out.file_bytes",
      "out.zmq_subscriptions", "out.zmq_connects", "out.zmq_disconnects"};
  return std::find(informational.begin(), informational.end(), name) == informational.end();
}

std::string si(double value) {
  char buf[32];
  const double a = std::fabs(value);
  const char* prefix = "";
  double v = value;
  if (a >= 1e9) {
    v = value / 1e9;
    prefix = " G";
  } else if (a >= 1e6) {
    v = value / 1e6;
    prefix = " M";
  } else if (a >= 1e3) {
    v = value / 1e3;
    prefix = " k";
  }
  const double av = std::fabs(v);
  if (*prefix == '\0') {
    std::snprintf(buf, sizeof buf, av >= 100 || v == std::floor(v) ? "%.0f" : "%.1f", v);
  } else {
    std::snprintf(buf, sizeof buf, av >= 100 ? "%.0f%s" : av >= 10 ? "%.1f%s" : "%.2f%s", v,
                  prefix);
  }
  return buf;
}

}  // namespace petdaq::top

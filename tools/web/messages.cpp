#include "tools/web/messages.h"

#include <cmath>
#include <optional>

#include <nlohmann/json.hpp>

#include "tools/top/rates.h"

namespace petdaq::web {

namespace {

using nlohmann::json;

[[noreturn]] void refuse(const std::string& why) { throw MalformedRates(why); }

const json* member(const json& parent, const char* key) {
  const auto it = parent.find(key);
  return it == parent.end() ? nullptr : &*it;
}

// A member that must be an object when present.
const json* object_member(const json& parent, const char* key) {
  const json* v = member(parent, key);
  if (v && !v->is_object()) refuse(std::string(key) + " is not an object");
  return v;
}

std::optional<double> number(const json& parent, const char* where, const char* key) {
  const json* v = member(parent, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) refuse(std::string(where) + key + " is not a number");
  const double d = v->get<double>();
  if (!std::isfinite(d)) refuse(std::string(where) + key + " is not finite");
  return d;
}

double required_number(const json& parent, const char* where, const char* key) {
  const auto v = number(parent, where, key);
  if (!v) refuse(std::string(where) + key + " is missing");
  return *v;
}

std::optional<std::uint64_t> count(const json& parent, const char* where, const char* key) {
  const json* v = member(parent, key);
  if (!v) return std::nullopt;
  if (!v->is_number_unsigned()) refuse(std::string(where) + key + " is not a count");
  return v->get<std::uint64_t>();
}

}  // namespace

RatesUpdate RatesMessageBuilder::build(std::string_view document) {
  json doc = json::parse(document, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) refuse("not valid JSON");
  if (!doc.is_object()) refuse("not a JSON object");
  const auto version = count(doc, "", "version");
  if (!version) refuse("version is missing");
  if (*version != 1) refuse("version " + std::to_string(*version) + " is not supported");

  json out = json::object();
  out["type"] = "rates";
  out["run_id"] = count(doc, "", "run_id").value_or(0);
  const std::uint64_t time_unix_ns = count(doc, "", "time_unix_ns").value_or(0);
  out["time_unix_ns"] = time_unix_ns;
  out["uptime_s"] = number(doc, "", "uptime_s").value_or(0);
  out["interval_s"] = number(doc, "", "interval_s").value_or(0);
  const json* backend = member(doc, "backend");
  if (backend && !backend->is_string()) refuse("backend is not a string");
  out["backend"] = backend ? backend->get<std::string>() : std::string();

  const json* rates = object_member(doc, "rates");
  if (!rates) refuse("rates is missing");
  RatePoint p;
  p.t_unix_s = static_cast<double>(time_unix_ns) * 1e-9;
  p.singles = required_number(*rates, "rates.", "singles");
  p.prompts = required_number(*rates, "rates.", "prompts");
  p.delayed = required_number(*rates, "rates.", "delayed");
  // Derived the daemon's way (docs/daemon.md) when a publisher leaves them out.
  p.trues = number(*rates, "rates.", "trues").value_or(p.prompts - p.delayed);
  p.necr = number(*rates, "rates.", "necr").value_or(p.prompts > 0 ? p.trues * p.trues / p.prompts : 0.0);
  out["rates"] = {
      {"frames", number(*rates, "rates.", "frames").value_or(0)},
      {"singles", p.singles},
      {"prompts", p.prompts},
      {"delayed", p.delayed},
      {"trues", p.trues},
      {"multiples", number(*rates, "rates.", "multiples").value_or(0)},
      {"randoms_fraction", number(*rates, "rates.", "randoms_fraction")
                               .value_or(p.prompts > 0 ? p.delayed / p.prompts : 0.0)},
      {"necr", p.necr}};

  json bdm_out = nullptr;
  if (const json* bdm = object_member(doc, "bdm")) {
    const std::uint64_t trans = count(*bdm, "bdm.", "transaxial").value_or(0);
    const std::uint64_t axial = count(*bdm, "bdm.", "axial").value_or(0);
    const json* singles = member(*bdm, "singles_per_s");
    if (!singles || !singles->is_array()) refuse("bdm.singles_per_s is not an array");
    if (singles->size() != trans * axial) {
      refuse("bdm.singles_per_s has " + std::to_string(singles->size()) +
             " entries, transaxial x axial is " + std::to_string(trans * axial));
    }
    json s = json::array();
    for (const json& v : *singles) {
      if (!v.is_number()) refuse("bdm.singles_per_s holds a value that is not a number");
      s.push_back(v.get<double>());
    }
    json t = json::array();
    if (const json* temps = member(*bdm, "temperature_degC")) {
      if (!temps->is_array() || temps->size() != singles->size())
        refuse("bdm.temperature_degC is not an array of one entry per BDM");
      for (const json& v : *temps) {
        if (!v.is_number() && !v.is_null())
          refuse("bdm.temperature_degC holds a value that is neither a number nor null");
        t.push_back(v);
      }
    }
    bdm_out = {{"transaxial", trans}, {"axial", axial}, {"singles_per_s", std::move(s)},
               {"temperature_degC", std::move(t)}};
  }
  out["bdm"] = std::move(bdm_out);

  // Counters arrive as an object; the page gets every counter, and the non-zero loss
  // counters (the rule petdaq-top uses) with their growth since the previous document.
  std::map<std::string, std::uint64_t, std::less<>> counters;
  if (const json* c = object_member(doc, "counters")) {
    for (const auto& [name, v] : c->items()) {
      if (!v.is_number_unsigned()) refuse("counters." + name + " is not a count");
      counters.emplace(name, v.get<std::uint64_t>());
    }
  }
  json all = json::object();
  json problems = json::array();
  for (const auto& [name, value] : counters) {
    all[name] = value;
    if (value == 0 || !top::is_problem_counter(name)) continue;
    const auto before = previous_counters_.find(name);
    // A counter that went back means petdaqd restarted: its growth is unknown, not negative.
    const std::uint64_t increase =
        before != previous_counters_.end() && value >= before->second ? value - before->second : 0;
    problems.push_back({{"name", name}, {"value", value}, {"increase", increase}});
  }
  out["counters"] = std::move(all);
  out["problems"] = std::move(problems);

  json queues = nullptr;
  if (const json* q = object_member(doc, "queues")) {
    queues = json::object();
    for (const char* key : {"ring_chunks", "ring_free", "pending_frames"}) {
      if (const auto v = count(*q, "queues.", key)) queues[key] = *v;
    }
  }
  out["queues"] = std::move(queues);
  json latency = nullptr;
  if (const json* l = object_member(doc, "latency_ms")) {
    latency = json::object();
    for (const char* key : {"p50", "p99", "max"}) {
      if (const auto v = number(*l, "latency_ms.", key)) latency[key] = *v;
    }
  }
  out["latency_ms"] = std::move(latency);

  previous_counters_ = std::move(counters);
  return {out.dump(), p};
}

namespace {
json point_json(const RatePoint& p) {
  return {{"t", p.t_unix_s},         {"singles", p.singles}, {"prompts", p.prompts},
          {"delayed", p.delayed},    {"trues", p.trues},     {"necr", p.necr}};
}
}  // namespace

std::string history_message(const std::deque<RatePoint>& points) {
  json list = json::array();
  for (const RatePoint& p : points) list.push_back(point_json(p));
  return json{{"type", "history"}, {"points", std::move(list)}}.dump();
}

std::string_view state_name(FeedState s) {
  switch (s) {
    case FeedState::waiting: return "waiting";
    case FeedState::live: return "live";
    case FeedState::no_data: return "no-data";
  }
  return "waiting";
}

std::string status_message(const ServerStatus& s) {
  json counters = json::object();
  for (std::size_t i = 0; i < kWebCounterCount; ++i)
    counters[std::string(kWebCounterNames[i])] = s.counters ? s.counters->get(i) : 0;
  json out = {{"type", "status"},
              {"state", state_name(s.state)},
              {"stale_after_s", s.stale_after_s},
              {"endpoint", s.endpoint},
              {"clients", s.clients},
              {"counters", std::move(counters)}};
  out["age_s"] = s.age_s >= 0 ? json(s.age_s) : json(nullptr);
  return out.dump();
}

}  // namespace petdaq::web

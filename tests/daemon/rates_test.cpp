// The `rates` document (daemon/rates.h): latency percentiles, the randoms estimates on the
// acquisition clock, the fields and types of DESIGN section 7, and the live time of a
// dead-time model.
#include "daemon/rates.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/counters.h"
#include "core/dead_time.h"
#include "core/phase_timer.h"
#include "core/randoms.h"
#include "core/settings.h"
#include "daemon/alarms.h"

namespace petdaq::daemon {
namespace {

using namespace std::chrono_literals;

TEST(LatencyWindow, Percentiles) {
  LatencyWindow w;
  for (int i = 1; i <= 1000; ++i) w.add(i);
  const auto s = w.take();
  EXPECT_EQ(s.samples, 1000u);
  EXPECT_NEAR(s.p50_ms, 500, 1);
  EXPECT_NEAR(s.p99_ms, 990, 1);
  EXPECT_EQ(s.max_ms, 1000);
  EXPECT_EQ(w.take().samples, 0u);  // a new interval
  // Past its capacity it thins the samples but keeps the shape and the maximum.
  for (int i = 0; i < 100000; ++i) w.add(i % 100);
  w.add(5000);
  const auto t = w.take();
  EXPECT_NEAR(t.p50_ms, 50, 2);
  EXPECT_EQ(t.max_ms, 5000);
}

// The randoms estimates of the rates document (docs/randoms.md) are core/randoms.h on the
// interval's per-BDM singles and prompt rates, taken on the acquisition's clock: data
// replayed twice as fast (0.5 s of acquisition in a 1 s interval) have twice the rates.
TEST(RatesReporter, RandomsEstimatesOnTheAcquisitionClock) {
  Settings settings;
  Counters counters(settings.scanner.bdm_transaxial * settings.scanner.bdm_axial);
  std::vector<double> acq_rate(counters.bdm_count());
  for (std::uint32_t b = 0; b < counters.bdm_count(); ++b) {
    counters.add_bdm_singles(b, 100'000 + 1000 * b);
    acq_rate[b] = (100'000.0 + 1000.0 * b) / 0.5;
  }
  counters.add(Counter::coinc_prompts, 300'000);
  counters.add(Counter::coinc_delayed, 40'000);
  RatesReporter reporter(counters);
  RatesSnapshot snap;
  snap.interval_s = 1.0;
  snap.acquisition_s = 0.5;
  const RandomsSettings rs = RandomsSettings::from(settings);
  snap.randoms = &rs;
  nlohmann::json doc = nlohmann::json::parse(reporter.build(snap));

  const RandomsEstimates e = estimate_randoms(rs, acq_rate, 600'000.0, 80'000.0);
  ASSERT_TRUE(e.singles_prompts.modelled);
  const auto rate = [&](const char* key) { return doc.at("rates").at(key).get<double>(); };
  EXPECT_EQ(doc["rates"]["randoms_method"], "singles_prompts") << doc;
  EXPECT_NEAR(rate("randoms_singles_rate"), 0.5 * e.singles_rate_per_s, 1e-3);
  EXPECT_NEAR(rate("randoms_singles_prompts"), 0.5 * e.singles_prompts.randoms_per_s, 1e-3);
  EXPECT_NEAR(rate("randoms"), 0.5 * e.singles_prompts.randoms_per_s, 1e-3);
  EXPECT_NEAR(rate("trues"), 300'000.0 - 0.5 * e.singles_prompts.randoms_per_s, 1e-3);
  EXPECT_GT(rate("randoms"), 1000.0);
  ASSERT_FALSE(doc["bdm"]["singles_per_s"].empty()) << doc;
  EXPECT_NEAR(doc["bdm"]["singles_per_s"][0].get<double>(), 100'000.0, 1e-3) << "wall-clock rates";

  // A policy the model does not cover (a winner policy with a sector rule): the delayed
  // window, and no singles-prompts figure.
  Settings winner = settings;
  winner.coincidence.policy = Policy::take_winner_of_goods;
  winner.coincidence.min_sector_difference = 2;
  const RandomsSettings rw = RandomsSettings::from(winner);
  snap.randoms = &rw;
  counters.add(Counter::coinc_prompts, 300'000);
  counters.add(Counter::coinc_delayed, 40'000);
  doc = nlohmann::json::parse(reporter.build(snap));
  EXPECT_EQ(doc["rates"]["randoms_method"], "delayed") << doc;
  EXPECT_TRUE(doc["rates"]["randoms_singles_prompts"].is_null()) << doc;
  EXPECT_NEAR(rate("trues"), 260'000.0, 1e-3);
}

// The `rates` fields of DESIGN section 7, read from its table: path -> type.
std::map<std::string, std::string> rates_schema() {
  std::ifstream in(std::string(PETDAQ_SOURCE_DIR) + "/docs/DESIGN.md");
  std::map<std::string, std::string> fields;
  std::string line;
  bool in_table = false;
  while (std::getline(in, line)) {
    if (line.starts_with("`rates` document fields")) in_table = true;
    if (!in_table) continue;
    if (line.starts_with("| `")) {
      const auto name_end = line.find("` |", 3);
      const auto type_end = line.find(" |", name_end + 3);
      fields[line.substr(3, name_end - 3)] = line.substr(name_end + 4, type_end - name_end - 4);
    } else if (!fields.empty() && !line.starts_with("|")) {
      break;
    }
  }
  return fields;
}

bool has_type(const nlohmann::json& v, const std::string& type) {
  if (type == "integer") return v.is_number_integer();
  if (type == "boolean") return v.is_boolean();
  if (type == "array of boolean") {
    if (!v.is_array()) return false;
    for (const auto& e : v)
      if (!e.is_boolean()) return false;
    return true;
  }
  if (type == "number") return v.is_number();
  if (type == "number or null") return v.is_number() || v.is_null();
  if (type == "string") return v.is_string();
  if (type == "array of number" || type == "array of number or null") {
    if (!v.is_array()) return false;
    for (const auto& e : v)
      if (!e.is_number() && !(e.is_null() && type.ends_with("or null"))) return false;
    return true;
  }
  if (type == "object or null") return v.is_object() || v.is_null();
  if (type == "array of object") {
    if (!v.is_array()) return false;
    for (const auto& e : v)
      if (!e.is_object()) return false;
    return true;
  }
  if (type == "array of integer") {
    if (!v.is_array()) return false;
    for (const auto& e : v)
      if (!e.is_number_integer()) return false;
    return true;
  }
  return false;
}

// Checks every leaf of `doc` under `prefix` against the schema; the members of `counters` and
// `worker.phases` are written `<name>` there.
void check_leaves(const nlohmann::json& doc, const std::string& prefix,
                  const std::map<std::string, std::string>& schema, std::set<std::string>& seen) {
  const bool named = prefix == "counters." || prefix == "worker.phases.";
  for (const auto& [key, value] : doc.items()) {
    const std::string path = prefix + (named ? "<name>" : key);
    if (!schema.count(path) && value.is_object()) {
      check_leaves(value, path + ".", schema, seen);
      continue;
    }
    ASSERT_TRUE(schema.count(path)) << path << " is published but not in DESIGN section 7";
    EXPECT_TRUE(has_type(value, schema.at(path))) << path << " is not " << schema.at(path);
    seen.insert(path);
  }
}

TEST(RatesDocument, MatchesTheSchemaInTheDesign) {
  const auto schema = rates_schema();
  ASSERT_GT(schema.size(), 20u) << "the table in docs/DESIGN.md section 7 was not found";
  Counters counters(3);
  counters.add(Counter::rx_frames, 1000);
  counters.add(Counter::coinc_prompts, 40);
  counters.add(Counter::coinc_delayed, 10);
  RatesReporter reporter(counters);
  const double temperatures[3] = {31.5, NAN, 33.0};
  RatesSnapshot snap;
  snap.time_unix_ns = 1763768000000000000ull;
  snap.uptime_s = 2;
  snap.interval_s = 2;
  snap.bdm_transaxial = 3;
  snap.bdm_axial = 1;
  snap.temperature_degC = temperatures;
  snap.ring_chunks = 64;
  snap.ring_free = 60;
  snap.ring_used_max = 7;
  snap.sealed_max = 5;
  snap.staging_max = 2;
  // A worker that spent 3 ms waiting for a chunk, then 2 ms in a submit of which 1.5 ms was
  // a count wait.
  const PhaseTimer::Clock::time_point t0{};
  PhaseTimer phases(t0);
  phases.enter(Phase::wait_chunk, t0);
  phases.leave(t0 + 3ms);
  phases.enter(Phase::submit, t0 + 3ms);
  phases.enter(Phase::count_wait, t0 + 3250us);
  phases.leave(t0 + 4750us);
  phases.leave(t0 + 5ms);
  snap.phases = &phases;
  snap.worker_s = phases.wall_seconds(t0 + 6ms);
  snap.worker_cpu_s = 0.004;
  snap.worker_involuntary_switches = 3;
  counters.add(Counter::rx_ring_full, 2);
  AlarmMonitor alarms{AlarmSettings{}};
  snap.alarms = &alarms;
  const nlohmann::json doc = nlohmann::json::parse(reporter.build(snap));
  ASSERT_EQ(doc["alarms"].size(), 1u) << "the ring's drops raise data_loss";
  for (const auto& [key, value] : doc["alarms"][0].items())
    EXPECT_TRUE(schema.count("alarms[]." + key) &&
                has_type(value, schema.at("alarms[]." + key)))
        << "alarms[]." << key;

  // Every leaf of the document is in the table with its type, and nothing in the table is
  // missing from the document.
  std::set<std::string> seen;
  for (const auto& [key, value] : doc["alarms"][0].items()) seen.insert("alarms[]." + key);
  check_leaves(doc, "", schema, seen);
  for (const auto& [path, type] : schema) EXPECT_TRUE(seen.count(path)) << path << " is missing";
  ASSERT_EQ(doc["worker"]["phases"].size(), kPhaseCount);
  const auto& submit = doc["worker"]["phases"]["submit"];
  EXPECT_NEAR(submit["seconds"].get<double>(), 0.0005, 1e-12);
  EXPECT_EQ(submit["calls"], 1);
  EXPECT_NEAR(submit["max_ms"].get<double>(), 0.5, 1e-9);
  EXPECT_EQ(submit["log2_us"][9], 1);  // 500 µs in [256, 512)
  EXPECT_NEAR(doc["worker"]["phases"]["count_wait"]["seconds"].get<double>(), 0.0015, 1e-12);
  EXPECT_NEAR(doc["worker"]["phases"]["wait_chunk"]["max_ms_since_start"].get<double>(), 3.0, 1e-9);
  EXPECT_EQ(doc["worker"]["phases"]["loop"]["calls"], 0);
  EXPECT_DOUBLE_EQ(doc["worker"]["seconds"].get<double>(), 0.006);
  EXPECT_DOUBLE_EQ(doc["worker"]["cpu_seconds"].get<double>(), 0.004);
  EXPECT_EQ(doc["worker"]["involuntary_switches"], 3);
  EXPECT_EQ(doc["queues"]["ring_used_max"], 7);
  EXPECT_EQ(doc["queues"]["sealed_max"], 5);
  EXPECT_EQ(doc["queues"]["staging_max"], 2);

  // The values: every counter by name, rates over the interval, null for an unknown temperature.
  ASSERT_EQ(doc["counters"].size(), kCounterCount);
  for (std::size_t i = 0; i < kCounterCount; ++i)
    EXPECT_EQ(doc["counters"][std::string(counter_name(static_cast<Counter>(i)))],
              counters.get(static_cast<Counter>(i)));
  EXPECT_EQ(doc["version"], 1);
  EXPECT_EQ(doc["time_unix_ns"], 1763768000000000000ull);
  EXPECT_DOUBLE_EQ(doc["rates"]["frames"].get<double>(), 500.0);
  EXPECT_DOUBLE_EQ(doc["rates"]["trues"].get<double>(), 15.0);
  EXPECT_DOUBLE_EQ(doc["rates"]["randoms_fraction"].get<double>(), 0.25);
  EXPECT_EQ(doc["bdm"]["temperature_degC"][0], 31.5);
  EXPECT_TRUE(doc["bdm"]["temperature_degC"][1].is_null());
  EXPECT_EQ(doc["bdm"]["singles_per_s"].size(), 3u);
  EXPECT_EQ(doc["queues"]["ring_free"], 60);
}

// The live time of a calibrated dead-time model from the per-BDM singles rates; without a
// model every fraction is 1 and the model is named "none".
TEST(RatesDocument, LiveTimeFromTheDeadTimeModel) {
  Counters counters(2);
  counters.add(Counter::coinc_prompts, 200);
  counters.add_bdm_singles(0, 200'000);  // 100 000 /s over 2 s
  counters.add_bdm_singles(1, 400'000);  // 200 000 /s
  RatesSnapshot snap;
  snap.interval_s = 2;
  snap.bdm_transaxial = 2;
  snap.bdm_axial = 1;
  {
    RatesReporter reporter(counters);
    const nlohmann::json doc = nlohmann::json::parse(reporter.build(snap));
    EXPECT_EQ(doc["live_time_model"]["model"], "none");
    EXPECT_DOUBLE_EQ(doc["live_time_model"]["coincidence_live_fraction"].get<double>(), 1.0);
    EXPECT_DOUBLE_EQ(doc["live_time_model"]["trues_corrected"].get<double>(),
                     doc["rates"]["trues"].get<double>());
  }
  const DeadTimeModel model{DeadTimeKind::non_paralysable, {1e-6, 1e-6}};
  snap.dead_time = &model;
  RatesReporter reporter(counters);
  const nlohmann::json doc = nlohmann::json::parse(reporter.build(snap));
  const auto& live = doc["live_time_model"];
  EXPECT_EQ(live["model"], "non_paralysable");
  EXPECT_NEAR(live["bdm_live_fraction"][0].get<double>(), 0.9, 1e-12);  // 1 − m τ
  EXPECT_NEAR(live["bdm_live_fraction"][1].get<double>(), 0.8, 1e-12);
  const double singles = 3e5 / (1e5 / 0.9 + 2e5 / 0.8);
  EXPECT_NEAR(live["singles_live_fraction"].get<double>(), singles, 1e-12);
  EXPECT_NEAR(live["coincidence_live_fraction"].get<double>(), singles * singles, 1e-12);
  EXPECT_NEAR(live["trues_corrected"].get<double>(),
              doc["rates"]["trues"].get<double>() / (singles * singles), 1e-9);
  EXPECT_EQ(live["saturated_bdms"], 0);
}

}  // namespace
}  // namespace petdaq::daemon

// petdaq-web's messages to the page, built from given rates documents (the test publisher's,
// tests/tools/test_messages.h) and histogram files (the project's writer,
// tests/tools/web_histograms.h) and checked against the document or the bins themselves; the
// refusals, each counted; and the intake's framing checks and bounded hand-over.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "proto/records.h"
#include "core/geometry.h"
#include "proto/topics.h"
#include "tests/tools/test_messages.h"
#include "tests/tools/web_histograms.h"
#include "tools/web/intake.h"
#include "tools/web/messages.h"
#include "tools/web/server.h"

namespace {

using namespace petdaq;
using namespace petdaq::web;
using nlohmann::json;

TEST(WebRatesMessage, CarriesEveryFieldOfTheDocument) {
  const std::string text = test::test_rates_json(4);
  const json doc = json::parse(text);
  RatesMessageBuilder builder;
  const RatesUpdate u = builder.build(text);
  const json m = json::parse(u.message);

  EXPECT_EQ(m["type"], "rates");
  EXPECT_EQ(m["run_id"], doc["run_id"]);
  EXPECT_EQ(m["backend"], doc["backend"]);
  EXPECT_EQ(m["time_unix_ns"], doc["time_unix_ns"]);
  EXPECT_EQ(m["uptime_s"], doc["uptime_s"]);
  EXPECT_EQ(m["interval_s"], doc["interval_s"]);
  for (const char* k : {"frames", "singles", "prompts", "delayed", "trues", "multiples",
                        "randoms_fraction", "necr"}) {
    EXPECT_EQ(m["rates"][k], doc["rates"][k]) << k;
  }
  // The trues' label names the estimate the daemon subtracted.
  EXPECT_EQ(m["randoms_method"], doc["rates"]["randoms_method"]);
  EXPECT_EQ(m["randoms_method"], "singles_prompts");
  EXPECT_EQ(m["bdm"]["transaxial"], doc["bdm"]["transaxial"]);
  EXPECT_EQ(m["bdm"]["axial"], doc["bdm"]["axial"]);
  EXPECT_EQ(m["bdm"]["singles_per_s"], doc["bdm"]["singles_per_s"]);
  EXPECT_EQ(m["bdm"]["temperature_degC"], doc["bdm"]["temperature_degC"]);
  EXPECT_TRUE(m["bdm"]["temperature_degC"][5].is_null());
  EXPECT_EQ(m["counters"], doc["counters"]);
  EXPECT_EQ(m["queues"], doc["queues"]);
  EXPECT_EQ(m["latency_ms"], doc["latency_ms"]);

  // The plotted point: the document's clock and rates.
  EXPECT_DOUBLE_EQ(u.point.t_unix_s, doc["time_unix_ns"].get<double>() * 1e-9);
  EXPECT_EQ(u.point.singles, doc["rates"]["singles"].get<double>());
  EXPECT_EQ(u.point.prompts, doc["rates"]["prompts"].get<double>());
  EXPECT_EQ(u.point.delayed, doc["rates"]["delayed"].get<double>());
  EXPECT_EQ(u.point.trues, doc["rates"]["trues"].get<double>());
  EXPECT_EQ(u.point.necr, doc["rates"]["necr"].get<double>());
}

TEST(WebRatesMessage, ListsNonZeroLossCountersWithTheirGrowth) {
  json doc = json::parse(test::test_rates_json(0));
  RatesMessageBuilder builder;
  // First document: rx.datagrams and rx.frames are throughput, stream.late and
  // out.zmq_refused are zero; no growth is known yet.
  json m = json::parse(builder.build(doc.dump()).message);
  EXPECT_EQ(m["problems"], json::parse(R"([{"name":"rx.kernel_drops","value":7,"increase":0},
                                           {"name":"rx.seq_missing","value":3,"increase":0}])"));
  doc["counters"]["rx.kernel_drops"] = 9;
  doc["counters"]["stream.late"] = 4;
  doc["counters"]["rx.datagrams"] = 100000;
  m = json::parse(builder.build(doc.dump()).message);
  EXPECT_EQ(m["problems"], json::parse(R"([{"name":"rx.kernel_drops","value":9,"increase":2},
                                           {"name":"rx.seq_missing","value":3,"increase":0},
                                           {"name":"stream.late","value":4,"increase":4}])"));
  // A counter that went back (petdaqd restarted): no growth, not a negative one.
  doc["counters"]["rx.kernel_drops"] = 1;
  m = json::parse(builder.build(doc.dump()).message);
  EXPECT_EQ(m["problems"][0], json::parse(R"({"name":"rx.kernel_drops","value":1,"increase":0})"));
  // A name the page has never heard of is shown: a new drop counter is never hidden.
  doc["counters"]["rx.something_new"] = 2;
  m = json::parse(builder.build(doc.dump()).message);
  EXPECT_EQ(m["problems"][2], json::parse(R"({"name":"rx.something_new","value":2,"increase":0})"));
}

// Lagging boards and dead time (DESIGN section 6) reach the page as published; a lagging
// array of the wrong length or type is refused like the other per-BDM arrays.
TEST(WebRatesMessage, CarriesLaggingBoardsAndTheLiveFraction) {
  json doc = json::parse(test::test_rates_json(4));
  const std::size_t n = doc["bdm"]["singles_per_s"].size();
  json lagging = json::array();
  for (std::size_t b = 0; b < n; ++b) lagging.push_back(b == 5);
  doc["bdm"]["lagging"] = lagging;
  doc["deadtime"] = {{"shedding", true}, {"dead_s_run", 0.25}, {"live_fraction_run", 0.875},
                     {"live_fraction_interval", 0.5}};
  RatesMessageBuilder builder;
  const json m = json::parse(builder.build(doc.dump()).message);
  EXPECT_EQ(m["bdm"]["lagging"], lagging);
  EXPECT_EQ(m["deadtime"]["live_fraction_run"], 0.875);
  EXPECT_EQ(m["deadtime"]["live_fraction_interval"], 0.5);
  EXPECT_EQ(m["deadtime"]["shedding"], true);
  doc["bdm"]["lagging"] = json::array({true});
  EXPECT_THROW(builder.build(doc.dump()), std::exception);
  doc["bdm"]["lagging"] = json::array();
  for (std::size_t b = 0; b < n; ++b) doc["bdm"]["lagging"].push_back(1);
  EXPECT_THROW(builder.build(doc.dump()), std::exception);
  // A document without them (an older daemon) has neither.
  doc = json::parse(test::test_rates_json(4));
  const json old = json::parse(builder.build(doc.dump()).message);
  EXPECT_FALSE(old["bdm"].contains("lagging"));
  EXPECT_TRUE(old["deadtime"].is_null());
}

// A board whose receiving socket lost datagrams since the previous document is "dropping"
// (petdaq-top's rule): not on the first document, not for losses long past; an array of the
// wrong length or type is refused and leaves the builder as it was.
TEST(WebRatesMessage, MarksTheBoardsWhoseSocketLostDatagrams) {
  json doc = json::parse(test::test_rates_json(4));
  const std::size_t n = doc["bdm"]["singles_per_s"].size();
  doc["bdm"]["ring_full"] = json::array();
  doc["bdm"]["socket_kernel_drops"] = json::array();
  for (std::size_t b = 0; b < n; ++b) {
    doc["bdm"]["ring_full"].push_back(b == 2 ? 5 : 0);
    doc["bdm"]["socket_kernel_drops"].push_back(b % 2 ? 9 : 0);
  }
  RatesMessageBuilder builder;
  json m = json::parse(builder.build(doc.dump()).message);
  EXPECT_EQ(m["bdm"]["dropping"], json(std::vector<bool>(n, false)));
  doc["bdm"]["socket_kernel_drops"][3] = 12;  // board 3's socket lost 3 more
  json bad = doc;
  bad["bdm"]["ring_full"] = json::array({1});
  EXPECT_THROW(builder.build(bad.dump()), std::exception);
  bad["bdm"]["ring_full"] = json::array();
  for (std::size_t b = 0; b < n; ++b) bad["bdm"]["ring_full"].push_back(-1);
  EXPECT_THROW(builder.build(bad.dump()), std::exception);
  m = json::parse(builder.build(doc.dump()).message);
  std::vector<bool> want(n, false);
  want[3] = true;
  EXPECT_EQ(m["bdm"]["dropping"], json(want));
  m = json::parse(builder.build(doc.dump()).message);  // nothing more lost
  EXPECT_EQ(m["bdm"]["dropping"], json(std::vector<bool>(n, false)));
  const json old = json::parse(builder.build(test::test_rates_json(4)).message);
  EXPECT_FALSE(old["bdm"].contains("dropping"));
}

TEST(WebRatesMessage, DerivesTruesRandomsAndNecrWhenMissing) {
  json doc = json::parse(test::test_rates_json(0));
  doc["rates"] = {{"singles", 1000.0}, {"prompts", 400.0}, {"delayed", 100.0}};
  doc.erase("bdm");
  doc.erase("queues");
  doc.erase("latency_ms");
  RatesMessageBuilder builder;
  const json m = json::parse(builder.build(doc.dump()).message);
  EXPECT_DOUBLE_EQ(m["rates"]["trues"].get<double>(), 300.0);
  EXPECT_EQ(m["randoms_method"], "delayed");  // derived here: prompts − delayed
  EXPECT_DOUBLE_EQ(m["rates"]["randoms_fraction"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(m["rates"]["necr"].get<double>(), 300.0 * 300.0 / 400.0);
  EXPECT_EQ(m["rates"]["frames"], 0.0);
  EXPECT_TRUE(m["bdm"].is_null());
  EXPECT_TRUE(m["queues"].is_null());
  EXPECT_TRUE(m["latency_ms"].is_null());
}

TEST(WebRatesMessage, RefusesMalformedDocumentsWithTheReason) {
  const json good = json::parse(test::test_rates_json(0));
  auto with = [&](const char* pointer, json value) {
    json d = good;
    d[json::json_pointer(pointer)] = std::move(value);
    return d.dump();
  };
  auto without = [&](const char* key) {
    json d = good;
    d.erase(key);
    return d.dump();
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"version\": 1, \"rates\": ", "not valid JSON"},
      {"", "not valid JSON"},
      {"[1, 2]", "not a JSON object"},
      {without("version"), "version is missing"},
      {with("/version", 2), "version 2 is not supported"},
      {with("/version", "1"), "version is not a count"},
      {without("rates"), "rates is missing"},
      {with("/rates", json::array()), "rates is not an object"},
      {with("/rates/prompts", "many"), "rates.prompts is not a number"},
      {[&] { json d = good; d["rates"].erase("singles"); return d.dump(); }(),
       "rates.singles is missing"},
      {with("/backend", 7), "backend is not a string"},
      {with("/bdm/axial", 3), "bdm.singles_per_s has 24 entries, transaxial x axial is 36"},
      {with("/bdm/singles_per_s/3", "x"), "bdm.singles_per_s holds a value that is not a number"},
      {with("/bdm/temperature_degC/0", "hot"), "neither a number nor null"},
      {with("/bdm/temperature_degC", json::array({1.0})), "one entry per BDM"},
      {with("/counters/rx.frames", -1), "counters.rx.frames is not a count"},
      {with("/counters/rx.frames", 1.5), "counters.rx.frames is not a count"},
      {with("/queues/ring_free", "full"), "queues.ring_free is not a count"},
      {with("/latency_ms/p99", nullptr), "latency_ms.p99 is not a number"},
  };
  RatesMessageBuilder builder;
  json first = good;
  first["counters"]["rx.kernel_drops"] = 5;
  builder.build(first.dump());
  for (const auto& [text, reason] : cases) {
    try {
      builder.build(text);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const MalformedRates& e) {
      EXPECT_NE(std::string(e.what()).find(reason), std::string::npos)
          << "got '" << e.what() << "', expected '" << reason << "'";
    }
  }
  // A refused document leaves the builder as it was: growth is still since the last good one.
  const json m = json::parse(builder.build(good.dump()).message);
  EXPECT_EQ(m["problems"][0]["value"], 7);
  EXPECT_EQ(m["problems"][0]["increase"], 2);
}

TEST(WebMessages, HistoryAndStatus) {
  std::deque<RatePoint> points = {{100.0, 1, 2, 3, 4, 5}, {101.0, 6, 7, 8, 9, 10}};
  const json h = json::parse(history_message(points));
  EXPECT_EQ(h, json::parse(R"({"type":"history","points":[
      {"t":100.0,"singles":1.0,"prompts":2.0,"delayed":3.0,"trues":4.0,"necr":5.0},
      {"t":101.0,"singles":6.0,"prompts":7.0,"delayed":8.0,"trues":9.0,"necr":10.0}]})"));
  EXPECT_EQ(json::parse(history_message({}))["points"], json::array());

  WebCounters counters;
  counters.add(WebCounter::rates_malformed, 3);
  counters.add(WebCounter::clients_dropped_slow);
  ServerStatus s;
  s.state = FeedState::no_data;
  s.age_s = 7.5;
  s.stale_after_s = 5;
  s.endpoint = "tcp://127.0.0.1:5556";
  s.clients = 2;
  s.counters = &counters;
  json st = json::parse(status_message(s));
  EXPECT_EQ(st["type"], "status");
  EXPECT_EQ(st["state"], "no-data");
  EXPECT_EQ(st["age_s"], 7.5);
  EXPECT_EQ(st["stale_after_s"], 5.0);
  EXPECT_EQ(st["endpoint"], "tcp://127.0.0.1:5556");
  EXPECT_EQ(st["clients"], 2);
  ASSERT_EQ(st["counters"].size(), kWebCounterCount);
  for (std::string_view name : kWebCounterNames) {
    const std::uint64_t expected = name == "web.rates_malformed" ? 3 : name == "web.clients_dropped_slow" ? 1 : 0;
    EXPECT_EQ(st["counters"][std::string(name)], expected) << name;
  }
  s.state = FeedState::waiting;
  s.age_s = -1;
  st = json::parse(status_message(s));
  EXPECT_EQ(st["state"], "waiting");
  EXPECT_TRUE(st["age_s"].is_null());
  EXPECT_EQ(state_name(FeedState::live), "live");
}

// ---- histograms ----

std::string as_text(const std::vector<std::uint8_t>& bytes) {
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

std::vector<std::uint64_t> counts_of(const json& j) { return j["counts"].get<std::vector<std::uint64_t>>(); }

// Where the page puts DU (b, d) in the mosaic: the column and row of its crystals in the
// crystal map (Geometry's crystal ids), counted in DUs.
std::pair<std::uint64_t, std::uint64_t> du_place(const Geometry& g, std::uint32_t b, std::uint32_t d) {
  const std::uint32_t c = g.crystal_id(b, d, 0);
  return {(c % g.crystals_per_ring()) / g.crystal_transaxial, (c / g.crystals_per_ring()) / g.crystal_axial};
}

TEST(WebHistogramsMessage, CarriesTheFilesHistogramsBinForBin) {
  const Settings settings = test::web_histogram_settings();
  HistogramSet set(make_histogram_layout(settings));
  test::fill_web_histograms(set);
  const auto file = test::web_histogram_file(set, settings, 42);
  const json m = json::parse(histograms_message(as_text(file)));
  const HistogramLayout& l = set.layout();
  const Geometry& g = l.geometry;
  const std::uint64_t p = g.position_size;

  EXPECT_EQ(m["type"], "histograms");
  EXPECT_EQ(m["run_id"], 42);
  EXPECT_EQ(m["backend"], "cpu");
  EXPECT_EQ(m["scanner"]["bdm_transaxial"], 3);
  EXPECT_EQ(m["scanner"]["crystal_axial"], 4);
  EXPECT_EQ(m["scanner"]["position_size"], 10);
  EXPECT_EQ(m["energy_window_keV"], json::array({settings.energy_window.low_keV, settings.energy_window.high_keV}));

  // Every DU's flood map at full resolution, tiled as its crystals sit round the ring.
  const json& tiles = m["flood_tiles"];
  EXPECT_EQ(tiles["bin"], 1);
  EXPECT_EQ(tiles["tile"], p);
  EXPECT_EQ(tiles["columns"], 6);  // 3 BDMs x 2 DUs round the ring
  EXPECT_EQ(tiles["rows"], 4);     // 2 BDMs x 2 DUs along the axis
  ASSERT_EQ(tiles["width"], 6 * p);
  ASSERT_EQ(tiles["height"], 4 * p);
  const auto mosaic = counts_of(tiles);
  ASSERT_EQ(mosaic.size(), 6 * p * 4 * p);
  std::vector<std::uint64_t> summed(p * p, 0);
  std::uint64_t flood_max = 0;
  for (std::uint32_t b = 0; b < g.bdm_count(); ++b) {
    for (std::uint32_t d = 0; d < g.du_per_bdm(); ++d) {
      const auto [col, row] = du_place(g, b, d);
      for (std::uint64_t y = 0; y < p; ++y) {
        for (std::uint64_t x = 0; x < p; ++x) {
          const std::uint64_t v = set.at(Hist::flood, ((std::uint64_t{b} * g.du_per_bdm() + d) * p + y) * p + x);
          ASSERT_EQ(mosaic[(row * p + y) * 6 * p + col * p + x], v) << b << " " << d << " " << y << " " << x;
          summed[y * p + x] += v;
          flood_max = std::max(flood_max, v);
        }
      }
    }
  }
  EXPECT_EQ(tiles["total"], set.sum(Hist::flood));
  EXPECT_EQ(tiles["max"], flood_max);
  EXPECT_EQ(counts_of(m["flood_sum"]), summed);
  EXPECT_EQ(m["flood_sum"]["width"], p);
  EXPECT_EQ(m["flood_sum"]["total"], set.sum(Hist::flood));

  // Accepted singles per crystal: rows are rings, columns the crystals round a ring.
  const json& map = m["crystal_singles"];
  ASSERT_EQ(map["width"], g.crystals_per_ring());
  ASSERT_EQ(map["height"], g.ring_count());
  const auto crystals = counts_of(map);
  for (std::uint32_t c = 0; c < g.crystal_count(); ++c) {
    const CrystalAddress a = g.address_of(c);
    EXPECT_EQ(g.crystal_id(a.bdm, a.du, a.crystal), c);
    EXPECT_EQ(crystals[c], set.at(Hist::crystal_singles, c)) << c;
  }
  EXPECT_EQ(map["total"], set.sum(Hist::crystal_singles));

  // The energy spectrum summed over crystals, in keV; the prompt and delayed Δt in ps.
  const json& e = m["energy_keV"];
  EXPECT_EQ(e["unit"], "keV");
  EXPECT_EQ(e["lo"], 0.0);
  EXPECT_DOUBLE_EQ(e["width"].get<double>(), 1000.0 / 50);
  const auto spectrum = counts_of(e);
  ASSERT_EQ(spectrum.size(), l.energy_bins);
  for (std::uint32_t i = 0; i < l.energy_bins; ++i) {
    std::uint64_t sum = 0;
    for (std::uint32_t c = 0; c < l.crystal_count; ++c) sum += set.at(Hist::energy_keV, std::size_t{c} * l.energy_bins + i);
    EXPECT_EQ(spectrum[i], sum) << i;
  }
  EXPECT_EQ(e["total"], set.sum(Hist::energy_keV));
  for (const auto& [key, h] : {std::pair{"dt_prompt", Hist::dt_prompt}, std::pair{"dt_delayed", Hist::dt_delayed}}) {
    const json& dt = m[key];
    EXPECT_EQ(dt["unit"], "ps");
    EXPECT_DOUBLE_EQ(dt["width"].get<double>(), l.dt_bin_ticks * settings.scanner.tick_ps) << key;
    const auto bins = counts_of(dt);
    ASSERT_EQ(bins.size(), l.dt_bins) << key;
    for (std::uint32_t i = 0; i < l.dt_bins; ++i) EXPECT_EQ(bins[i], set.at(h, i)) << key << " " << i;
  }
}

// The signed Δt bin for bin, and a file as written before version 3 (no signed Δt: no CTR,
// the rest as before).
TEST(WebHistogramsMessage, CarriesTheSignedDtAndReadsFilesWithoutIt) {
  const Settings settings = test::web_histogram_settings();
  HistogramSet set(make_histogram_layout(settings));
  test::fill_web_histograms(set);
  auto file = test::web_histogram_file(set, settings, 42);
  const HistogramLayout& l = set.layout();
  json m = json::parse(histograms_message(as_text(file)));
  for (const auto& [key, h] : {std::pair{"tof_prompt", Hist::tof_prompt}, std::pair{"tof_delayed", Hist::tof_delayed}}) {
    const auto bins = counts_of(m[key]);
    ASSERT_EQ(bins.size(), l.tof_bins) << key;
    for (std::uint32_t i = 0; i < l.tof_bins; ++i) EXPECT_EQ(bins[i], set.at(h, i)) << key << " " << i;
    EXPECT_DOUBLE_EQ(m[key]["lo"].get<double>(),
                     (-static_cast<double>(l.tof_half) * l.dt_bin_ticks - 0.5) * settings.scanner.tick_ps);
  }
  EXPECT_EQ(m["figures"]["signed_tof"], true);
  EXPECT_EQ(m["figures"]["energy_resolution"]["crystals"], l.crystal_count);

  file[4] = 2;  // version 2, and the signed Δt histograms renamed away
  for (const Hist h : {Hist::tof_prompt, Hist::tof_delayed, Hist::du_pair_tof_prompt, Hist::du_pair_tof_delayed})
    file[kHistHeaderBytes + static_cast<std::size_t>(h) * kHistDescriptorBytes] = 'x';
  m = json::parse(histograms_message(as_text(file)));
  EXPECT_TRUE(m["tof_prompt"].is_null());
  EXPECT_TRUE(m["tof_delayed"].is_null());
  EXPECT_EQ(m["figures"]["signed_tof"], false);
  EXPECT_TRUE(m["figures"]["ctr"].is_null());
  EXPECT_EQ(counts_of(m["dt_prompt"]).size(), l.dt_bins);
}

TEST(WebHistogramsMessage, SumsBlocksAndBinsToStayWithinItsLimits) {
  const Settings settings = test::web_histogram_settings();
  HistogramSet set(make_histogram_layout(settings));
  test::fill_web_histograms(set);
  const auto file = test::web_histogram_file(set, settings, 1);
  HistogramLimits limits;
  limits.max_tile_side = 4;      // 10 pixels in blocks of 3: 3, 3, 3 and 1
  limits.max_sum_side = 64;
  limits.max_image_pixels = 100;  // the crystal map's 18 x 16 in blocks of 2: 9 x 8
  limits.max_spectrum_bins = 16;  // 50 energy bins merged by 4 into 13
  const json m = json::parse(histograms_message(as_text(file), limits));
  const Geometry& g = set.layout().geometry;
  const std::uint64_t p = g.position_size;

  const json& tiles = m["flood_tiles"];
  EXPECT_EQ(tiles["bin"], 3);
  ASSERT_EQ(tiles["tile"], 4);
  ASSERT_EQ(tiles["width"], 6 * 4);
  const auto mosaic = counts_of(tiles);
  std::vector<std::uint64_t> expected(mosaic.size(), 0);
  for (std::uint32_t b = 0; b < g.bdm_count(); ++b)
    for (std::uint32_t d = 0; d < g.du_per_bdm(); ++d) {
      const auto [col, row] = du_place(g, b, d);
      for (std::uint64_t y = 0; y < p; ++y)
        for (std::uint64_t x = 0; x < p; ++x)
          expected[(row * 4 + y / 3) * 24 + col * 4 + x / 3] +=
              set.at(Hist::flood, ((std::uint64_t{b} * g.du_per_bdm() + d) * p + y) * p + x);
    }
  EXPECT_EQ(mosaic, expected);
  EXPECT_EQ(m["flood_sum"]["bin"], 1);

  const json& map = m["crystal_singles"];
  EXPECT_EQ(map["bin"], 2);
  ASSERT_EQ(map["width"], 9);
  ASSERT_EQ(map["height"], 8);
  std::vector<std::uint64_t> crystals(72, 0);
  for (std::uint32_t c = 0; c < g.crystal_count(); ++c)
    crystals[(c / g.crystals_per_ring() / 2) * 9 + (c % g.crystals_per_ring()) / 2] += set.at(Hist::crystal_singles, c);
  EXPECT_EQ(counts_of(map), crystals);

  const json& e = m["energy_keV"];
  EXPECT_EQ(e["merged"], 4);
  EXPECT_DOUBLE_EQ(e["width"].get<double>(), 4 * 1000.0 / 50);
  const auto spectrum = counts_of(e);
  ASSERT_EQ(spectrum.size(), 13u);
  std::vector<std::uint64_t> merged(13, 0);
  for (std::uint32_t c = 0; c < set.layout().crystal_count; ++c)
    for (std::uint32_t i = 0; i < 50; ++i) merged[i / 4] += set.at(Hist::energy_keV, std::size_t{c} * 50 + i);
  EXPECT_EQ(spectrum, merged);
  EXPECT_LE(counts_of(m["dt_prompt"]).size(), 16u);
  EXPECT_EQ(m["dt_prompt"]["total"], set.sum(Hist::dt_prompt));
}

TEST(WebHistogramsMessage, RefusesBodiesItCannotReadWithTheReason) {
  const Settings settings = test::web_histogram_settings();
  HistogramSet set(make_histogram_layout(settings));
  const std::string good = as_text(test::web_histogram_file(set, settings, 1));
  std::vector<std::uint8_t> no_scanner;
  encode_histogram_file(set, settings, 1, "{\"run_id\":1}", no_scanner);
  Settings other = settings;
  other.scanner.position_size = 11;
  std::vector<std::uint8_t> disagreeing;
  encode_histogram_file(set, settings, 1, histogram_metadata_json(other, 1, "cpu", nullptr), disagreeing);
  std::string bad_magic = good;
  bad_magic[0] = 'X';
  const std::vector<std::pair<std::string, std::string>> cases = {
      {std::string(256, 'x'), "bad magic"},
      {good.substr(0, 40), "shorter than the 64-byte header"},
      {good.substr(0, good.size() - 1), "truncated"},
      {bad_magic, "bad magic"},
      {as_text(no_scanner), "no scanner"},
      {as_text(disagreeing), "flood axis 2 has 10 bins, the scanner's position_size is 11"},
  };
  for (const auto& [body, reason] : cases) {
    try {
      histograms_message(body);
      ADD_FAILURE() << "accepted a body expected to fail with: " << reason;
    } catch (const HistogramFileError& e) {
      EXPECT_NE(std::string(e.what()).find(reason), std::string::npos)
          << "got '" << e.what() << "', expected '" << reason << "'";
    }
  }
}

// The intake's checks of what arrives, one message at a time, without a publisher.
class WebIntakeTest : public ::testing::Test {
 protected:
  ServerOptions options() {
    ServerOptions o;
    o.listen = {boost::asio::ip::make_address("127.0.0.1"), 0};
    return o;
  }
  WebCounters counters;
  Server server{options(), counters};
  Intake intake{"inproc://nobody", server, counters};

  void take(std::vector<std::string> frames) {
    std::vector<std::string_view> views(frames.begin(), frames.end());
    intake.take(views.data(), views.size());
  }
  static std::string header(std::uint32_t magic = kMessageMagic,
                            MessageKind kind = MessageKind{}, std::uint32_t publisher_id = 0) {
    MessageHeader h;
    h.magic = magic;
    h.publisher_id = publisher_id;
    h.kind = static_cast<std::uint16_t>(kind);
    std::string bytes(kMessageHeaderBytes, '\0');
    encode_message_header(h, reinterpret_cast<std::uint8_t*>(bytes.data()));
    return bytes;
  }
};

TEST_F(WebIntakeTest, CountsAndSkipsWhatItCannotUse) {
  const std::string doc = test::test_rates_json(0);
  take({std::string(topic::rates), header(), doc});
  take({std::string(topic::rates), header(), "{\"version\": 1, \"rates\": "});
  take({std::string(topic::rates), header(), "{\"version\": 2}"});
  take({std::string(topic::rates), header(0x12345678), doc});             // wrong magic
  take({std::string(topic::rates), header().substr(0, 60), doc});         // short header
  take({std::string(topic::rates), doc});                                 // two frames
  take({std::string(topic::rates), header(), doc, "extra"});              // four frames
  take({"ratesX", header(), doc});                      // a topic that merely starts alike
  const Settings settings = test::web_histogram_settings();
  HistogramSet set(make_histogram_layout(settings));
  const std::string pdh = as_text(test::web_histogram_file(set, settings, 1));
  const std::string hist_header = header(kMessageMagic, MessageKind::histograms);
  take({"histograms", hist_header, pdh});                       // good
  take({"histograms", hist_header, std::string(256, 'x')});     // not a histogram file
  take({"histograms", hist_header, pdh.substr(0, pdh.size() - 8)});  // truncated
  take({"histograms", header(), pdh});                          // kind 0, not histograms
  take({"histograms", header(0x12345678, MessageKind::histograms), pdh});  // wrong magic
  take({"histograms", "anything"});                             // two frames
  take({"histogramsX", hist_header, pdh});                      // a topic that merely starts alike
  EXPECT_EQ(counters.get(WebCounter::rates_received), 1u);
  EXPECT_EQ(counters.get(WebCounter::rates_malformed), 2u);
  EXPECT_EQ(counters.get(WebCounter::messages_malformed), 5u);
  EXPECT_EQ(counters.get(WebCounter::histograms_received), 7u);
  EXPECT_EQ(counters.get(WebCounter::histograms_malformed), 6u);
  EXPECT_EQ(counters.get(WebCounter::updates_dropped), 0u);
}

// Another publisher on the endpoint (petdaqd restarted, or another process took it) is
// counted; messages of header version 1 (publisher_id 0) are taken and change nothing.
TEST_F(WebIntakeTest, CountsEveryChangeOfPublisher) {
  const std::string doc = test::test_rates_json(0);
  take({std::string(topic::rates), header(kMessageMagic, MessageKind{}, 7), doc});
  take({std::string(topic::rates), header(kMessageMagic, MessageKind{}, 7), doc});
  take({std::string(topic::rates), header(kMessageMagic, MessageKind{}, 0), doc});
  EXPECT_EQ(counters.get(WebCounter::publisher_changes), 0u);
  take({std::string(topic::rates), header(kMessageMagic, MessageKind{}, 9), doc});
  take({std::string(topic::rates), header(kMessageMagic, MessageKind{}, 7), doc});
  EXPECT_EQ(counters.get(WebCounter::publisher_changes), 2u);
  EXPECT_EQ(counters.get(WebCounter::rates_received), 5u);
}

TEST_F(WebIntakeTest, NeverQueuesWithoutBoundWhenTheServerLoopIsBehind) {
  // The server loop is not running: the first 64 updates wait for it, the rest are dropped
  // and counted, and taking them never blocks.
  const std::string doc = test::test_rates_json(0);
  for (int i = 0; i < 100; ++i) take({std::string(topic::rates), header(), doc});
  EXPECT_EQ(counters.get(WebCounter::rates_received), 100u);
  EXPECT_EQ(counters.get(WebCounter::updates_dropped), 36u);
}

}  // namespace

// petdaq-web's messages to the page, built from given rates documents (the test publisher's,
// tests/tools/test_messages.h) and checked field by field against the document itself; the
// refusals, each counted; and the intake's framing checks and bounded hand-over.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "proto/records.h"
#include "proto/topics.h"
#include "tests/tools/test_messages.h"
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

TEST(WebRatesMessage, DerivesTruesRandomsAndNecrWhenMissing) {
  json doc = json::parse(test::test_rates_json(0));
  doc["rates"] = {{"singles", 1000.0}, {"prompts", 400.0}, {"delayed", 100.0}};
  doc.erase("bdm");
  doc.erase("queues");
  doc.erase("latency_ms");
  RatesMessageBuilder builder;
  const json m = json::parse(builder.build(doc.dump()).message);
  EXPECT_DOUBLE_EQ(m["rates"]["trues"].get<double>(), 300.0);
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
  static std::string header(std::uint32_t magic = kMessageMagic) {
    MessageHeader h;
    h.magic = magic;
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
  take({std::string(topic::histograms), header(), std::string(256, 'x')});
  take({std::string(topic::histograms), "anything"});
  EXPECT_EQ(counters.get(WebCounter::rates_received), 1u);
  EXPECT_EQ(counters.get(WebCounter::rates_malformed), 2u);
  EXPECT_EQ(counters.get(WebCounter::messages_malformed), 5u);
  EXPECT_EQ(counters.get(WebCounter::histograms_received), 2u);
  EXPECT_EQ(counters.get(WebCounter::histograms_unparsed), 2u);
  EXPECT_EQ(counters.get(WebCounter::updates_dropped), 0u);
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

// Operating petdaqd beside a scanner (docs/operations.md): the alarms on the `rates`
// document, raised and cleared; the Prometheus metrics, as families, over HTTP, and scraped by
// Debian's Prometheus server from a running daemon, which then answers queries.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/test_scanner.h"
#include "daemon/alarms.h"
#include "daemon/metrics.h"
#include "core/plm_file.h"
#include "daemon_harness.h"
#include "tests/support/files.h"
#include "tests/support/wait.h"

namespace petdaq::test {
namespace {

using namespace std::chrono_literals;
using Json = nlohmann::ordered_json;
using daemon::AlarmMonitor;

// A rates document with the fields the alarms read.
Json rates_doc(std::uint64_t ring_full, std::vector<double> singles,
               std::vector<Json> temperatures = {}) {
  Json doc;
  doc["version"] = 1;
  doc["time_unix_ns"] = 1'000'000'000ull;
  doc["interval_s"] = 1.0;
  doc["counters"] = {{"rx.frames", 1000}, {"rx.ring_full", ring_full}, {"stream.late", 0}};
  Json t = Json::array();
  for (auto& v : temperatures) t.push_back(v);
  doc["bdm"] = {{"transaxial", singles.size()}, {"axial", 1}, {"singles_per_s", singles},
                {"temperature_degC", t}};
  return doc;
}

std::vector<std::string> names(const Json& doc) {
  std::vector<std::string> out;
  for (const Json& a : doc["alarms"]) out.push_back(a["name"].get<std::string>() + "/" +
                                                    a["subject"].get<std::string>());
  return out;
}

TEST(Alarms, DataLossIsRaisedWhileTheDropCountersGrowAndClearsWhenTheyStop) {
  AlarmMonitor m(AlarmSettings{});
  Json d1 = rates_doc(0, {100, 100});
  m.evaluate(d1, 1);
  EXPECT_TRUE(d1["alarms"].empty());
  Json d2 = rates_doc(5, {100, 100});
  m.evaluate(d2, 2);
  ASSERT_EQ(names(d2), std::vector<std::string>{"data_loss/scanner"});
  EXPECT_EQ(d2["alarms"][0]["value"].get<double>(), 5.0);
  Json d3 = rates_doc(9, {100, 100});
  m.evaluate(d3, 3);
  ASSERT_EQ(names(d3), std::vector<std::string>{"data_loss/scanner"});
  EXPECT_EQ(d3["alarms"][0]["since_unix_ns"].get<std::uint64_t>(), 2u) << "raised at 2, still on";
  Json d4 = rates_doc(9, {100, 100});
  m.evaluate(d4, 4);
  EXPECT_TRUE(d4["alarms"].empty()) << "no new loss: cleared";
}

TEST(Alarms, ALossBelowTheThresholdRaisesNothing) {
  AlarmSettings s;
  s.max_losses_per_s = 10;
  AlarmMonitor m(s);
  Json d1 = rates_doc(0, {1});
  m.evaluate(d1, 1);
  Json d2 = rates_doc(10, {1});
  m.evaluate(d2, 2);
  EXPECT_TRUE(d2["alarms"].empty());
  Json d3 = rates_doc(21, {1});
  m.evaluate(d3, 3);
  EXPECT_EQ(names(d3), std::vector<std::string>{"data_loss/scanner"});
}

TEST(Alarms, BoardRatesTemperaturesAndLaggingNameTheBoard) {
  AlarmSettings s;
  s.board_min_singles_per_s = 50;
  s.board_max_singles_per_s = 1000;
  s.board_max_temperature_degC = 45;
  AlarmMonitor m(s);
  Json doc = rates_doc(0, {100, 10, 5000}, {Json(30.0), Json(nullptr), Json(47.5)});
  doc["bdm"]["lagging"] = {false, true, false};
  m.evaluate(doc, 1);
  EXPECT_EQ(names(doc), (std::vector<std::string>{"board_rate_high/bdm 2", "board_rate_low/bdm 1",
                                                  "board_temperature/bdm 2",
                                                  "lagging_board/bdm 1"}));
  // An idle scanner (every board at 0) is not a silent board.
  Json idle = rates_doc(0, {0, 0, 0});
  m.evaluate(idle, 2);
  EXPECT_TRUE(idle["alarms"].empty());
}

TEST(Alarms, LiveFractionAndCrystalsFollowTheirThresholds) {
  AlarmSettings s;
  s.min_live_fraction = 0.95;
  s.max_dead_crystals = 2;
  AlarmMonitor m(s);
  m.set_crystal_health(1, 3);
  Json doc = rates_doc(0, {1});
  doc["deadtime"] = {{"live_fraction_interval", 0.9}};
  m.evaluate(doc, 1);
  EXPECT_EQ(names(doc), (std::vector<std::string>{"dead_crystals/scanner", "hot_crystals/scanner",
                                                  "live_fraction/scanner"}));
  m.set_crystal_health(0, 2);
  Json ok = rates_doc(0, {1});
  ok["deadtime"] = {{"live_fraction_interval", 0.99}};
  m.evaluate(ok, 2);
  EXPECT_TRUE(ok["alarms"].empty());
}

std::string metric_text(const std::vector<prometheus::MetricFamily>& families) {
  std::string out;
  for (const auto& f : families)
    for (const auto& m : f.metric) {
      out += f.name;
      for (const auto& l : m.label) out += "|" + l.name + "=" + l.value;
      out += " " + std::to_string(f.type == prometheus::MetricType::Counter ? m.counter.value
                                                                             : m.gauge.value) +
             "\n";
    }
  return out;
}

TEST(Metrics, EveryCounterRateBoardAndAlarmBecomesASeries) {
  Json doc = rates_doc(3, {100, 250});
  doc["rates"] = {{"prompts", 12.5}, {"randoms_fraction", 0.25}, {"randoms_method", "delayed"}};
  doc["latency_ms"] = {{"p99", 20.0}};
  doc["alarms"] = Json::array({{{"name", "data_loss"}, {"subject", "scanner"}}});
  doc["dead_time"] = {{"live_fraction", 0.5}, {"per_board", {1, 2}}};
  const std::string text = metric_text(daemon::rates_metric_families(doc.dump()));
  EXPECT_NE(text.find("petdaq_rx_frames_total 1000.0"), std::string::npos) << text;
  EXPECT_NE(text.find("petdaq_rx_ring_full_total 3.0"), std::string::npos) << text;
  EXPECT_NE(text.find("petdaq_prompts_per_second 12.5"), std::string::npos) << text;
  EXPECT_NE(text.find("petdaq_randoms_fraction 0.25"), std::string::npos) << text;
  EXPECT_NE(text.find("petdaq_randoms_method_info|method=delayed 1.0"), std::string::npos) << text;
  EXPECT_NE(text.find("petdaq_bdm_singles_per_second|bdm=1 250.0"), std::string::npos) << text;
  EXPECT_NE(text.find("petdaq_slice_latency_p99_seconds 0.02"), std::string::npos) << text;
  EXPECT_NE(text.find("petdaq_alarm_active|alarm=data_loss 1.0"), std::string::npos) << text;
  EXPECT_NE(text.find("petdaq_alarm_active|alarm=live_fraction 0.0"), std::string::npos) << text;
  EXPECT_NE(text.find("petdaq_dead_time_live_fraction 0.5"), std::string::npos) << text;
  EXPECT_NE(text.find("petdaq_dead_time_per_board|bdm=1 2.0"), std::string::npos) << text;
  EXPECT_TRUE(daemon::rates_metric_families("{not json").empty());
}

// GET over a plain socket: the whole response (status line, headers, body); "" on failure.
std::string http_get(std::uint16_t port, const std::string& target) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return "";
  }
  const std::string request = "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  (void)!::write(fd, request.data(), request.size());
  std::string out;
  char buf[65536];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  return out;
}

TEST(Metrics, ServedInPrometheusTextFormatOverHttp) {
  daemon::MetricsExporter exporter("127.0.0.1:0");
  ASSERT_GT(exporter.port(), 0);
  exporter.update(rates_doc(7, {1}).dump());
  const std::string r = http_get(static_cast<std::uint16_t>(exporter.port()), "/metrics");
  EXPECT_TRUE(r.starts_with("HTTP/1.1 200 OK")) << r;
  EXPECT_NE(r.find("Content-Type: text/plain; version=0.0.4"), std::string::npos) << r;
  EXPECT_NE(r.find("# TYPE petdaq_rx_ring_full_total counter"), std::string::npos) << r;
  EXPECT_NE(r.find("\npetdaq_rx_ring_full_total 7"), std::string::npos) << r;
  const std::string missing = http_get(static_cast<std::uint16_t>(exporter.port()), "/other");
  EXPECT_TRUE(missing.starts_with("HTTP/1.1 404")) << missing;
  // An address that is taken is refused by name.
  EXPECT_THROW(
      {
        const std::string taken = "127.0.0.1:" + std::to_string(exporter.port());
        daemon::MetricsExporter second(taken);
      },
      std::runtime_error);
}

// The value of a Prometheus instant query with one result, or nullopt.
std::optional<double> prometheus_value(std::uint16_t port, const std::string& query) {
  std::string encoded;
  for (unsigned char c : query) {
    if (std::isalnum(c) || c == '_') {
      encoded.push_back(static_cast<char>(c));
    } else {
      char hex[4];
      std::snprintf(hex, sizeof hex, "%%%02X", c);
      encoded += hex;
    }
  }
  const std::string r = http_get(port, "/api/v1/query?query=" + encoded);
  const auto body = r.find("\r\n\r\n");
  if (body == std::string::npos) return std::nullopt;
  try {
    const auto doc = nlohmann::json::parse(r.substr(body + 4));
    const auto& result = doc.at("data").at("result");
    if (result.size() != 1) return std::nullopt;
    return std::stod(result[0].at("value")[1].get<std::string>());
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

TEST(Operations, PrometheusScrapesPetdaqdAndAnAlarmIsRaisedAndCleared) {
  const std::filesystem::path prometheus = "/usr/bin/prometheus";
  if (!std::filesystem::exists(prometheus))
    GTEST_SKIP() << "Debian's prometheus server is not installed (apt-get install prometheus)";
  TestScanner scanner;
  DaemonConfig daemon;
  daemon.udp_port = free_udp_port();
  daemon.zmq_endpoint = "ipc://" + (scanner.dir / "pub.sock").string();
  const std::uint16_t metrics_port = free_tcp_port();
  daemon.output_extra = "  metrics:\n    listen: 127.0.0.1:" + std::to_string(metrics_port) + "\n";
  // Any board sending raises board_rate_high; silence clears it.
  daemon.extra = "alarms:\n  board_max_singles_per_s: 1\n";
  const auto config = scanner.write_config();
  std::ofstream(config, std::ios::app) << daemon_yaml(daemon);

  const std::uint16_t prometheus_port = free_tcp_port();
  const auto prom_config = scanner.dir / "prometheus.yml";
  std::ofstream(prom_config) << "global:\n  scrape_interval: 200ms\n  scrape_timeout: 200ms\n"
                                "scrape_configs:\n  - job_name: petdaqd\n    static_configs:\n"
                                "      - targets: ['127.0.0.1:" << metrics_port << "']\n";

  DaemonProcess d(config, scanner.dir / "petdaqd.log");
  Subscriber sub(daemon.zmq_endpoint);
  ASSERT_TRUE(sub.wait_rates([](const std::string&) { return true; }, 20s).has_value()) << d.log();
  Child server({prometheus.string(), "--config.file=" + prom_config.string(),
                "--storage.tsdb.path=" + (scanner.dir / "tsdb").string(),
                "--web.listen-address=127.0.0.1:" + std::to_string(prometheus_port)},
               scanner.dir / "prometheus.log", scanner.dir / "prometheus.log");

  // The server is up and scraping before any data flows.
  std::optional<double> up;
  wait_until([&] {
    up = prometheus_value(prometheus_port, "up{job=\"petdaqd\"}");
    return up.value_or(0) == 1;
  }, 60s, 100ms);
  ASSERT_EQ(up.value_or(0), 1.0) << read_text(scanner.dir / "prometheus.log");

  std::mt19937_64 rng(5);
  AcquisitionOptions o;
  o.events = 20000;
  const std::vector<RawFrame> frames = random_acquisition(scanner, rng, o);
  const auto datagrams = make_datagrams(frames, Framing::raw, 50, 4);
  UdpSender tx;
  tx.send(datagrams, daemon.udp_port, static_cast<double>(datagrams.size()) / 3);  // 3 s of data
  const auto raised = sub.wait_rates(
      [](const std::string& j) { return j.find("\"board_rate_high\"") != std::string::npos; }, 20s);
  ASSERT_TRUE(raised.has_value()) << d.log();

  // The server scraped the daemon: every frame counted, and the alarm's series is 1 while
  // it is raised (or was, in the range queried).
  std::optional<double> frames_seen;
  wait_until([&] {
    frames_seen = prometheus_value(prometheus_port, "petdaq_rx_frames_total{job=\"petdaqd\"}");
    return frames_seen && *frames_seen == static_cast<double>(frames.size());
  }, 60s, 100ms);
  ASSERT_TRUE(frames_seen.has_value()) << "no answer from prometheus:\n"
                                       << read_text(scanner.dir / "prometheus.log");
  EXPECT_EQ(*frames_seen, static_cast<double>(frames.size()));
  std::optional<double> alarm_max;
  wait_until([&] {
    alarm_max = prometheus_value(prometheus_port,
                                 "max_over_time(petdaq_alarm_active{alarm=\"board_rate_high\"}[1m])");
    return alarm_max.value_or(0) != 0;
  }, 20s, 100ms);
  EXPECT_EQ(alarm_max.value_or(-1), 1.0);

  // Silence: the alarm clears in the document, the journal line says so, and the series
  // returns to 0.
  const auto cleared = sub.wait_rates(
      [](const std::string& j) { return j.find("\"board_rate_high\"") == std::string::npos; }, 20s);
  ASSERT_TRUE(cleared.has_value());
  std::optional<double> alarm_now;
  wait_until([&] {
    alarm_now = prometheus_value(prometheus_port, "petdaq_alarm_active{alarm=\"board_rate_high\"}");
    return alarm_now.value_or(1) == 0;
  }, 20s, 100ms);
  EXPECT_EQ(alarm_now.value_or(-1), 0.0);
  d.signal(SIGTERM);
  ASSERT_EQ(d.wait_for(15s).value_or(-1), 0) << d.log();
  EXPECT_NE(d.log().find("alarm raised: board_rate_high (bdm"), std::string::npos) << d.log();
  EXPECT_NE(d.log().find("alarm cleared: board_rate_high (bdm"), std::string::npos) << d.log();
}

// petdaq-ctl run to completion: its exit code and what it printed (stdout and stderr).
std::pair<int, std::string> ctl(const std::filesystem::path& dir, std::vector<std::string> args) {
  static int n = 0;
  const auto out = dir / ("ctl" + std::to_string(n++) + ".out");
  args.insert(args.begin(), PETDAQ_CTL_BINARY);
  Child c(args, out, out);
  const int rc = c.wait_for(20s).value_or(-1);
  return {rc, read_text(out)};
}

// Every message of a list-mode file, whatever its kind.
std::vector<std::pair<MessageHeader, std::string>> plm_messages(const std::filesystem::path& file) {
  const std::string bytes = read_text(file);
  std::vector<std::pair<MessageHeader, std::string>> out;
  for (std::size_t at = kPlmHeaderBytes; at + kMessageHeaderBytes <= bytes.size();) {
    const MessageHeader h =
        decode_message_header(reinterpret_cast<const std::uint8_t*>(bytes.data() + at));
    const std::size_t body = std::size_t{h.record_count} * h.record_size;
    if (at + kMessageHeaderBytes + body > bytes.size()) break;
    out.emplace_back(h, bytes.substr(at + kMessageHeaderBytes, body));
    at += kMessageHeaderBytes + body;
  }
  return out;
}

TEST(Operations, AcquisitionsAreNamedAnnotatedStoppedAndRefusedClearly) {
  TestScanner scanner;
  DaemonConfig daemon;
  daemon.udp_port = free_udp_port();
  daemon.zmq_endpoint = "ipc://" + (scanner.dir / "pub.sock").string();
  daemon.file_directory = scanner.dir / "out";
  std::filesystem::create_directories(daemon.file_directory);
  const std::string control = "ipc://" + (scanner.dir / "control.sock").string();
  daemon.output_extra = "  control:\n    endpoint: " + control + "\n";
  const auto config = scanner.write_config();
  std::ofstream(config, std::ios::app) << daemon_yaml(daemon);
  const std::string c = config.string();

  DaemonProcess d(config, scanner.dir / "petdaqd.log");
  Subscriber sub(daemon.zmq_endpoint);
  ASSERT_TRUE(sub.wait_rates([](const std::string&) { return true; }, 20s).has_value()) << d.log();
  auto [rc, out] = ctl(scanner.dir, {"-c", c, "status"});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("no acquisition is open"), std::string::npos) << out;
  std::tie(rc, out) = ctl(scanner.dir, {"-c", c, "stop"});
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("refused: no acquisition is open"), std::string::npos) << out;
  std::tie(rc, out) = ctl(scanner.dir, {"-c", c, "start", "--name", "   "});
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("refused: name must not be blank"), std::string::npos) << out;
  std::tie(rc, out) = ctl(scanner.dir, {"-c", c, "start", "--name", "mouse-17", "--subject", "M17",
                                        "--isotope", "F-18", "--activity-MBq", "12.5",
                                        "--operator", "alice"});
  ASSERT_EQ(rc, 0) << out << d.log();
  EXPECT_NE(out.find("started acquisition 1 'mouse-17', subject M17, isotope F-18"),
            std::string::npos) << out;
  std::tie(rc, out) = ctl(scanner.dir, {"-c", c, "start", "--name", "another"});
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("refused: acquisition 'mouse-17' (id 1) is open"), std::string::npos) << out;
  std::tie(rc, out) = ctl(scanner.dir, {"-c", c, "annotate", "injection"});
  EXPECT_EQ(rc, 0) << out;
  std::tie(rc, out) = ctl(scanner.dir, {"--endpoint", control, "status", "--json"});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("\"text\": \"injection\""), std::string::npos) << out;
  // An unknown subcommand is a usage error, named.
  std::tie(rc, out) = ctl(scanner.dir, {"-c", c, "pause"});
  EXPECT_EQ(rc, 2) << out;

  // Data during the acquisition, which `rates` names.
  std::mt19937_64 rng(9);
  AcquisitionOptions o;
  o.events = 5000;
  const std::vector<RawFrame> frames = random_acquisition(scanner, rng, o);
  UdpSender tx;
  tx.send(make_datagrams(frames, Framing::raw, 50, 4), daemon.udp_port);
  const auto named = sub.wait_rates(
      [&](const std::string& j) {
        const auto doc = nlohmann::json::parse(j);
        return doc["acquisition"].is_object() && doc["acquisition"]["name"] == "mouse-17" &&
               json_counter(j, "rx.frames") >= frames.size();
      },
      20s);
  ASSERT_TRUE(named.has_value()) << d.log();
  std::tie(rc, out) = ctl(scanner.dir, {"-c", c, "stop"});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("stopped acquisition 1 'mouse-17'"), std::string::npos) << out;
  // A second one left open when the daemon stops: ended by the stop, and said so.
  std::tie(rc, out) = ctl(scanner.dir, {"-c", c, "start", "--name", "phantom-2"});
  EXPECT_EQ(rc, 0) << out;
  const auto counted = sub.wait_rates(
      [](const std::string& j) {
        return json_counter(j, "ctl.commands") >= 9 && json_counter(j, "ctl.refused") >= 3;
      },
      20s);
  ASSERT_TRUE(counted.has_value());
  EXPECT_EQ(json_counter(*counted, "ctl.refused"), 3u);
  d.signal(SIGTERM);
  ASSERT_EQ(d.wait_for(15s).value_or(-1), 0) << d.log();
  EXPECT_NE(d.log().find("acquisition 2 'phantom-2' ended by the daemon's stop"), std::string::npos)
      << d.log();
  ASSERT_TRUE(sub.wait_drained(10s));

  // Subscribers saw each change as an `acquisition` message; the list-mode file holds them,
  // the closing one included.
  std::vector<nlohmann::json> published;
  for (const Published& p : sub.messages())
    if (p.topic == topic::acquisition) {
      EXPECT_EQ(p.header.kind, static_cast<std::uint16_t>(MessageKind::acquisition));
      published.push_back(nlohmann::json::parse(p.body));
    }
  ASSERT_GE(published.size(), 4u);  // start, annotate, stop, start (+ the stop at exit)
  EXPECT_EQ(published.front()["name"], "mouse-17");
  EXPECT_EQ(published.front()["subject"], "M17");
  EXPECT_EQ(published.front()["activity_MBq"], 12.5);
  EXPECT_EQ(published.back()["name"], "phantom-2");
  EXPECT_EQ(published.back()["end_reason"], "daemon stopped");
  EXPECT_EQ(published.back()["open"], false);
  std::vector<nlohmann::json> in_files;
  for (const auto& entry : std::filesystem::directory_iterator(daemon.file_directory))
    if (entry.path().extension() == ".plm")
      for (const auto& [h, body] : plm_messages(entry.path()))
        if (h.kind == static_cast<std::uint16_t>(MessageKind::acquisition))
          in_files.push_back(nlohmann::json::parse(body));
  ASSERT_FALSE(in_files.empty());
  EXPECT_EQ(in_files.back()["name"], "phantom-2");
  EXPECT_EQ(in_files.back()["end_reason"], "daemon stopped");
  bool annotated = false;
  for (const auto& a : in_files)
    annotated = annotated || (a["name"] == "mouse-17" && a["annotations"].size() == 1 &&
                              a["annotations"][0]["text"] == "injection");
  EXPECT_TRUE(annotated);
}

}  // namespace
}  // namespace petdaq::test

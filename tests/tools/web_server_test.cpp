// petdaq-web run as a person would: its command line, the files it serves, WebSocket
// clients fed from the test publisher, slow clients dropped, and 50 clients that do not slow
// its ZeroMQ intake.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>

#include <nlohmann/json.hpp>

#include "tests/tools/tool_harness.h"
#include "tests/tools/test_messages.h"
#include "tests/tools/web_histograms.h"
#include "tests/tools/web_support.h"
#include "tools/web/messages.h"

namespace {

using namespace petdaq;
using namespace petdaq::test;
using nlohmann::json;

std::string web() { return (bin_dir() / "petdaq-web").string(); }
std::string publisher() { return (bin_dir() / "petdaq-test-publisher").string(); }

json status(const WebServer& w) { return json::parse(http_request(w.port(), "/status.json").body); }
std::uint64_t counter(const WebServer& w, const char* name) {
  return status(w)["counters"][name].get<std::uint64_t>();
}

TEST(WebServer, CommandLine) {
  ScratchDir dir;
  EXPECT_EQ(run_command({web(), "--help"}, dir / "o", dir / "e"), 0);
  const std::string help = read_text(dir / "o");
  for (const char* option : {"--config", "--endpoint", "--listen", "--stale-after-s", "--version"})
    EXPECT_NE(help.find(option), std::string::npos) << option;
  EXPECT_EQ(run_command({web(), "--version"}, dir / "o", dir / "e"), 0);
  EXPECT_NE(read_text(dir / "o").find("petdaq-web (petdaq) 0."), std::string::npos);
  // A usage error names the program.
  EXPECT_EQ(run_command({web(), "--no-such-option"}, dir / "o", dir / "e"), 2);
  EXPECT_EQ(read_text(dir / "e").rfind("petdaq-web: ", 0), 0u) << read_text(dir / "e");
  // Usage errors: exit 2, naming the option.
  for (const auto& [args, name] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--listen", "localhost"}, "--listen"},
           {{"--listen", "nohost:80"}, "--listen"},
           {{"--listen", "127.0.0.1:99999"}, "--listen"},
           {{"--stale-after-s", "0"}, "--stale-after-s"},
           {{"--config", (dir / "missing.yaml").string()}, "--config"},
           {{"-c", (dir / "missing.yaml").string()}, "--config"},  // -c as in every tool
           {{"--no-such-option"}, "--no-such-option"}}) {
    std::vector<std::string> argv = {web()};
    argv.insert(argv.end(), args.begin(), args.end());
    EXPECT_EQ(run_command(argv, dir / "o", dir / "e"), 2) << name;
    EXPECT_NE(read_text(dir / "e").find(name), std::string::npos) << read_text(dir / "e");
  }
  // A configuration that is refused is an error naming the key.
  {
    std::ofstream(dir / "bad.yaml") << "output:\n  zmq:\n    endpoint: 5\n    nonsense: 1\n";
    EXPECT_EQ(run_command({web(), "--config", (dir / "bad.yaml").string()}, dir / "o", dir / "e"), 2);
    EXPECT_NE(read_text(dir / "e").find("nonsense"), std::string::npos) << read_text(dir / "e");
  }
}

TEST(WebServer, TakesTheEndpointFromTheConfigAndLogsANonLoopbackAddress) {
  ScratchDir dir;
  const std::string endpoint = dir.ipc("from-config");
  std::ofstream(dir / "petdaq.yaml") << read_text(source_dir() / "config" / "petdaq.yaml")
                                     << "\n";
  // The default configuration with only the endpoint changed.
  std::string text = read_text(dir / "petdaq.yaml");
  const std::string key = "endpoint: tcp://127.0.0.1:5556";
  ASSERT_NE(text.find(key), std::string::npos);
  text.replace(text.find(key), key.size(), "endpoint: " + endpoint);
  std::ofstream(dir / "petdaq.yaml") << text;
  Child w({web(), "--config", (dir / "petdaq.yaml").string(), "--listen", "0.0.0.0:0"},
          dir / "o", dir / "e");
  ASSERT_TRUE(wait_until([&] { return read_text(dir / "e").find("page at") != std::string::npos; }))
      << read_text(dir / "e");
  const std::string log = read_text(dir / "e");
  EXPECT_NE(log.find("rates from " + endpoint), std::string::npos) << log;
  EXPECT_NE(log.find("not loopback"), std::string::npos) << log;
  w.signal(SIGTERM);
  EXPECT_EQ(w.wait_for(std::chrono::seconds(10)), 0);
  EXPECT_NE(read_text(dir / "e").find("final counters: web.rates_received=0"), std::string::npos);
}

TEST(WebServer, ServesThePageReadOnly) {
  ScratchDir dir;
  WebServer w(dir, dir.ipc("pub"));
  ASSERT_NE(w.port(), 0) << w.log();
  const auto page = source_dir() / "tools" / "web" / "page";
  HttpReply r = http_request(w.port(), "/");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, read_text(page / "index.html"));
  EXPECT_EQ(r.content_type, "text/html; charset=utf-8");
  EXPECT_EQ(http_request(w.port(), "/app.js").body, read_text(page / "app.js"));
  EXPECT_EQ(http_request(w.port(), "/style.css").body, read_text(page / "style.css"));
  const std::filesystem::path chartjs = "/usr/share/javascript/chart.js/chart.min.js";
  if (std::filesystem::exists(chartjs)) {
    EXPECT_EQ(http_request(w.port(), "/chart.js").body, read_text(chartjs));
  }
  EXPECT_EQ(http_request(w.port(), "/../etc/passwd").status, 404);
  EXPECT_EQ(http_request(w.port(), "/rates.json").status, 503);  // nothing received yet
  EXPECT_EQ(http_request(w.port(), "/", web_net::http::verb::post).status, 405);
  EXPECT_EQ(http_request(w.port(), "/status.json", web_net::http::verb::delete_).status, 405);
  const json s = status(w);
  EXPECT_EQ(s["state"], "waiting");
  EXPECT_EQ(s["counters"]["web.http_refused"], 4);
}

TEST(WebServer, PushesRatesToThePageAndCountsWhatItSkips) {
  ScratchDir dir;
  const std::string ep = dir.ipc("pub");
  WebServer w(dir, ep, {"--stale-after-s", "1"});
  WsClient page(w.port(), "/ws");
  // On connecting: the (empty) history, then the status.
  auto m = page.read();
  ASSERT_TRUE(m);
  EXPECT_EQ(json::parse(*m), json::parse(R"({"type":"history","points":[]})"));
  m = page.read();
  ASSERT_TRUE(m);
  EXPECT_EQ(json::parse(*m)["state"], "waiting");

  Child pub({publisher(), "--endpoint", ep, "--wait-subscriptions", "2", "--bad-first",
             "--opaque-histograms", "3", "--rates-count", "5", "--interval-ms", "20"},
            dir / "pub.out", dir / "pub.err");
  std::vector<json> rates;
  bool live = false;
  while (rates.size() < 5) {
    m = page.read();
    ASSERT_TRUE(m) << "after " << rates.size() << " rates messages";
    const json j = json::parse(*m);
    if (j["type"] == "rates") rates.push_back(j);
    if (j["type"] == "status" && j["state"] == "live") live = true;
  }
  EXPECT_TRUE(live);
  for (std::size_t i = 0; i < rates.size(); ++i) {
    const json doc = json::parse(test_rates_json(i));
    EXPECT_EQ(rates[i]["time_unix_ns"], doc["time_unix_ns"]);
    EXPECT_EQ(rates[i]["rates"]["prompts"], doc["rates"]["prompts"]);
  }
  EXPECT_EQ(pub.wait_for(std::chrono::seconds(10)), 0);
  // The feed stops: "no-data" after --stale-after-s.
  bool no_data = false;
  while (!no_data && (m = page.read())) {
    const json j = json::parse(*m);
    no_data = j["type"] == "status" && j["state"] == "no-data";
  }
  EXPECT_TRUE(no_data);
  const json s = status(w);
  EXPECT_EQ(s["state"], "no-data");
  EXPECT_EQ(s["counters"]["web.rates_received"], 5);
  EXPECT_EQ(s["counters"]["web.rates_malformed"], 1);
  EXPECT_EQ(s["counters"]["web.histograms_received"], 3);
  EXPECT_EQ(s["counters"]["web.histograms_malformed"], 3);
  EXPECT_EQ(s["counters"]["web.clients_accepted"], 1);
  EXPECT_EQ(s["counters"]["web.clients_dropped_slow"], 0);
  EXPECT_EQ(s["clients"], 1);
  EXPECT_EQ(json::parse(http_request(w.port(), "/rates.json").body), rates.back());
  // The three opaque histograms messages were refused: there is no histograms message to serve.
  EXPECT_EQ(http_request(w.port(), "/histograms.json").status, 503);

  // A page opened now gets the history of the five documents, then the latest one.
  WsClient late(w.port(), "/ws");
  m = late.read();
  ASSERT_TRUE(m);
  const json h = json::parse(*m);
  ASSERT_EQ(h["points"].size(), 5u);
  EXPECT_DOUBLE_EQ(h["points"][4]["t"].get<double>(),
                   json::parse(test_rates_json(4))["time_unix_ns"].get<double>() * 1e-9);
  m = late.read();
  ASSERT_TRUE(m);
  EXPECT_EQ(json::parse(*m), rates.back());
  EXPECT_NE(w.log().find("rates document skipped: not valid JSON"), std::string::npos);
}

TEST(WebServer, SendsHistogramsAndTheLatestToAPageThatJoinsLater) {
  ScratchDir dir;
  const std::string ep = dir.ipc("pub");
  WebServer w(dir, ep);
  const Settings settings = web_histogram_settings();
  HistogramSet set(make_histogram_layout(settings));
  fill_web_histograms(set);
  const auto bytes = web_histogram_file(set, settings, 9);
  const std::filesystem::path pdh = dir / "known.pdh";
  write_histogram_file(pdh, bytes);
  const json expected = json::parse(
      web::histograms_message(std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size())));
  EXPECT_EQ(http_request(w.port(), "/histograms.json").status, 503);

  Child pub({publisher(), "--endpoint", ep, "--wait-subscriptions", "2", "--rates",
             "--interval-ms", "50", "--duration-s", "30", "--histograms", pdh.string()},
            dir / "pub.out", dir / "pub.err");
  ASSERT_TRUE(wait_until([&] { return counter(w, "web.histograms_received") >= 2; })) << w.log();
  EXPECT_EQ(counter(w, "web.histograms_malformed"), 0u);
  EXPECT_EQ(json::parse(http_request(w.port(), "/histograms.json").body), expected);
  // A page that connects now: history, the latest rates, the latest histograms, the status;
  // then histograms again as they come.
  WsClient late(w.port(), "/ws");
  std::vector<std::string> types;
  int histograms_seen = 0;
  while (histograms_seen < 2) {
    const auto m = late.read();
    ASSERT_TRUE(m) << "after " << types.size() << " messages";
    const json j = json::parse(*m);
    types.push_back(j["type"]);
    if (j["type"] == "histograms") {
      EXPECT_EQ(j, expected);
      ++histograms_seen;
    }
  }
  ASSERT_GE(types.size(), 4u);
  EXPECT_EQ((std::vector<std::string>(types.begin(), types.begin() + 4)),
            (std::vector<std::string>{"history", "rates", "histograms", "status"}));
  pub.signal(SIGTERM);
  pub.wait_for(std::chrono::seconds(5));
}

TEST(WebServer, FiftyClientsDoNotSlowTheIntakeAndSlowOnesAreDropped) {
  ScratchDir dir;
  const std::string ep = dir.ipc("pub");
  WebServer w(dir, ep, {"--client-queue", "64"});
  ASSERT_NE(w.port(), 0) << w.log();
  constexpr int kSlow = 49;
  constexpr long kDocuments = 3000;
  // 49 tabs that never read, with small receive buffers so they fill quickly.
  std::vector<std::unique_ptr<WsClient>> slow;
  for (int i = 0; i < kSlow; ++i) slow.push_back(std::make_unique<WsClient>(w.port(), "/ws", 4096));
  // One tab that reads everything, on its own thread.
  std::atomic<long> last_time_seen{-1};
  std::atomic<bool> closed{false};
  WsClient reader(w.port(), "/ws");
  std::thread reading([&] {
    while (auto m = reader.read(std::chrono::seconds(20))) {
      const json j = json::parse(*m);
      if (j["type"] == "rates") {
        const auto seq = static_cast<long>((j["time_unix_ns"].get<std::uint64_t>() -
                                            1763768000000000000ull) / 1000000000ull);
        last_time_seen = seq;
        if (seq == kDocuments - 1) return;
      }
    }
    closed = true;
  });
  ASSERT_TRUE(wait_until([&] { return status(w)["clients"] == kSlow + 1; })) << status(w).dump();

  // About 1000 documents a second for 3 s: ZeroMQ keeps 1000 per side, so an intake held up
  // for a second or more would lose documents.
  const auto start = std::chrono::steady_clock::now();
  Child pub({publisher(), "--endpoint", ep, "--wait-subscriptions", "2", "--rates-count",
             std::to_string(kDocuments), "--interval-ms", "1"},
            dir / "pub.out", dir / "pub.err");
  EXPECT_EQ(pub.wait_for(std::chrono::seconds(60)), 0);
  EXPECT_TRUE(wait_until([&] { return counter(w, "web.rates_received") == kDocuments; }))
      << status(w).dump();
  const double took_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  reading.join();
  EXPECT_FALSE(closed) << "the reading client was dropped after document " << last_time_seen;
  EXPECT_EQ(last_time_seen, kDocuments - 1);
  const json s = status(w);
  EXPECT_EQ(s["counters"]["web.rates_received"], kDocuments);
  EXPECT_EQ(s["counters"]["web.rates_malformed"], 0);
  EXPECT_EQ(s["counters"]["web.updates_dropped"], 0);
  EXPECT_EQ(s["counters"]["web.clients_accepted"], kSlow + 1);
  EXPECT_EQ(s["counters"]["web.clients_dropped_slow"], kSlow);
  EXPECT_EQ(s["clients"], 1);
  std::printf("petdaq-web took %ld documents from ZeroMQ in %.2f s with %d clients (%d slow, "
              "dropped)\n", kDocuments, took_s, kSlow + 1, kSlow);
}

TEST(WebServer, DropsAClientWhoseWriteStalls) {
  // A queue longer than all the documents sent, so only the write time-out can drop it.
  ScratchDir dir;
  const std::string ep = dir.ipc("pub");
  WebServer w(dir, ep, {"--client-queue", "4096", "--client-timeout-s", "0.5"});
  WsClient stalled(w.port(), "/ws", 4096);
  ASSERT_TRUE(wait_until([&] { return status(w)["clients"] == 1; }));
  Child pub({publisher(), "--endpoint", ep, "--wait-subscriptions", "2", "--rates-count", "1500",
             "--interval-ms", "1"},
            dir / "pub.out", dir / "pub.err");
  EXPECT_TRUE(wait_until([&] { return counter(w, "web.clients_dropped_slow") == 1; }))
      << status(w).dump();
  EXPECT_EQ(pub.wait_for(std::chrono::seconds(30)), 0);
  EXPECT_TRUE(wait_until([&] { return counter(w, "web.rates_received") == 1500; }));
  EXPECT_EQ(status(w)["clients"], 0);
}

// A client costs a bounded amount: connections past --max-connections are closed at once and
// counted (and the page is still served), a WebSocket message or request past
// --max-message-bytes ends its connection and is counted, and a page of another site (its
// Origin) or a name that is not this machine's (DNS rebinding) gets 403.
TEST(WebServer, BoundsConnectionsAndMessagesAndRefusesOtherOrigins) {
  ScratchDir dir;
  WebServer w(dir, dir.ipc("nobody"),
              {"--max-connections", "8", "--max-message-bytes", "4096", "--allowed-origin",
               "http://viewer.example:9000"});
  ASSERT_NE(w.port(), 0) << w.log();
  namespace asio = web_net::asio;
  using web_net::tcp;
  {
    // 20 idle connections: 8 are kept, 12 closed at once (the client reads end-of-file).
    asio::io_context io;
    std::vector<std::unique_ptr<tcp::socket>> held;
    for (int i = 0; i < 20; ++i) {
      held.push_back(std::make_unique<tcp::socket>(io));
      held.back()->connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), w.port()));
    }
    int closed = 0;
    const bool settled = wait_until([&] {
      closed = 0;
      for (auto& s : held) {
        s->non_blocking(true);
        char c;
        boost::system::error_code ec;
        const std::size_t n = s->read_some(asio::buffer(&c, 1), ec);
        if (ec == asio::error::eof || ec == asio::error::connection_reset || (!ec && n == 0))
          ++closed;
      }
      return closed == 12;
    }, std::chrono::seconds(5));
    EXPECT_TRUE(settled) << closed << " of 20 connections closed, expected 12";
  }
  // The held connections are gone: the page is served again.
  EXPECT_TRUE(wait_until([&] {
    try {
      return http_request(w.port(), "/").status == 200;
    } catch (const std::exception&) {
      return false;
    }
  }));
  EXPECT_EQ(counter(w, "web.connections_refused"), 12u);

  // A large WebSocket message ends that client's connection.
  {
    WsClient big(w.port(), "/ws");
    ASSERT_TRUE(wait_until([&] { return status(w)["clients"] == 1; }));
    try {
      big.write(std::string(100 * 1024, 'x'));
      while (big.read(std::chrono::seconds(5))) {
      }
    } catch (const std::exception&) {
      // The server may close before the whole message is written.
    }
  }
  EXPECT_TRUE(wait_until([&] { return counter(w, "web.messages_too_large") == 1; }))
      << status(w).dump();
  // So does a request with 100 KiB of headers.
  {
    asio::io_context io;
    tcp::socket s(io);
    s.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), w.port()));
    const std::string req = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Filler: " +
                            std::string(100 * 1024, 'y') + "\r\n\r\n";
    boost::system::error_code ec;
    asio::write(s, asio::buffer(req), ec);
  }
  EXPECT_TRUE(wait_until([&] { return counter(w, "web.messages_too_large") == 2; }))
      << status(w).dump();

  // Origins: none (not a browser), the page's own and a listed one are taken; another
  // site's page is refused at the handshake.
  const std::string own = "http://127.0.0.1:" + std::to_string(w.port());
  for (const std::string& origin : {std::string(), own, std::string("http://viewer.example:9000")}) {
    WsClient ok(w.port(), "/ws", std::nullopt, origin);
    EXPECT_TRUE(ok.read(std::chrono::seconds(5)).has_value()) << origin;
  }
  EXPECT_THROW(WsClient(w.port(), "/ws", std::nullopt, "http://evil.example"), std::exception);
  EXPECT_THROW(WsClient(w.port(), "/ws", std::nullopt, "null"), std::exception);
  EXPECT_EQ(http_request(w.port(), "/rates.json", web_net::http::verb::get, "127.0.0.1",
                         "http://evil.example")
                .status,
            403);
  // DNS rebinding: another site's name pointed at this machine.
  EXPECT_EQ(http_request(w.port(), "/status.json", web_net::http::verb::get,
                         "evil.example:" + std::to_string(w.port()))
                .status,
            403);
  EXPECT_EQ(http_request(w.port(), "/", web_net::http::verb::get, "viewer.example:9000").status,
            200);
  EXPECT_EQ(counter(w, "web.origin_refused"), 4u);
}

}  // namespace

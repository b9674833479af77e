// petdaq-web: the scanner's live view in a browser. Subscribes to petdaqd's `rates` (and
// `histograms`) topics and serves one page that updates over a WebSocket. See docs/tools.md.
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <boost/asio/ip/address.hpp>

#include "common/cli.h"
#include "core/settings.h"
#include "tools/web/intake.h"
#include "tools/web/runs.h"
#include "tools/web/server.h"

namespace {

using namespace petdaq;
using namespace petdaq::web;
namespace fs = std::filesystem;
using tcp = boost::asio::ip::tcp;

// "127.0.0.1:8080", "[::1]:8080", "0.0.0.0:0" (0: any free port).
bool parse_listen(const std::string& text, tcp::endpoint& out, std::string& why) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos) {
    why = "expected ADDRESS:PORT, got '" + text + "'";
    return false;
  }
  std::string host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  boost::system::error_code ec;
  const auto address = boost::asio::ip::make_address(host, ec);
  if (ec) {
    why = "'" + host + "' is not an IP address";
    return false;
  }
  const std::string port = text.substr(colon + 1);
  unsigned long p = 0;
  try {
    std::size_t used = 0;
    p = std::stoul(port, &used);
    if (used != port.size()) throw std::invalid_argument(port);
  } catch (const std::exception&) {
    p = 65536;
  }
  if (port.empty() || p > 65535) {
    why = "'" + port + "' is not a port number";
    return false;
  }
  out = tcp::endpoint(address, static_cast<unsigned short>(p));
  return true;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error(p.string() + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The page's files sit in share/petdaq/web beside the bin/ folder the program runs from: in
// the build tree and in an installed prefix alike.
fs::path default_web_root() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return exe.parent_path().parent_path() / "share" / "petdaq" / "web";
}

}  // namespace

int main(int argc, char** argv) {
  cli::App app("petdaq-web",
               "The scanner's live view in a browser: rates and histograms of petdaqd over a "
               "WebSocket. See docs/tools.md.");
  std::filesystem::path config;
  std::string endpoint, listen_text = "127.0.0.1:8080", catalogue;
  std::string web_root, chartjs = "/usr/share/javascript/chart.js/chart.min.js";
  double stale_after_s = 5, client_timeout_s = 10;
  std::size_t history_points = 600, client_queue = 16;
  std::size_t max_connections = 64, max_message_bytes = 16384;
  std::vector<std::string> allowed_origins;
  tcp::endpoint listen;
  cli::add_config(app, config,
                  "petdaqd's configuration: the ZeroMQ endpoint is its output.zmq.endpoint")
      ->check(CLI::ExistingFile);
  cli::add_endpoint(app, endpoint);
  app.add_option("--catalogue", catalogue,
                 "the run catalogue shown on the Runs page (default: output.catalogue.path of "
                 "--config)");
  app.add_option("--listen", listen_text,
                 "ADDRESS:PORT the page is served on; anything but loopback is logged as a "
                 "deliberate choice; port 0 takes a free one")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](std::string& v) {
            tcp::endpoint unused;
            std::string why;
            return parse_listen(v, unused, why) ? std::string() : why;
          },
          "ADDRESS:PORT"));
  app.add_option("--stale-after-s", stale_after_s,
                 "seconds without a rates document before the page shows 'no data'")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  app.add_option("--history-points", history_points,
                 "rates documents kept for the plots (one a second: 600 = 10 minutes)")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{1}, std::size_t{86400}));
  app.add_option("--client-queue", client_queue,
                 "messages waiting for one browser before it is dropped as too slow")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{4}, std::size_t{4096}));
  app.add_option("--client-timeout-s", client_timeout_s,
                 "a browser whose write has not completed after this long is dropped")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  app.add_option("--max-connections", max_connections,
                 "HTTP and WebSocket connections open at once; more are closed at once "
                 "(web.connections_refused); keep it below the descriptor limit")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{1}, std::size_t{100000}));
  app.add_option("--max-message-bytes", max_message_bytes,
                 "the largest HTTP request or WebSocket message taken from a client "
                 "(web.messages_too_large)")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{1024}, std::size_t{1} << 24));
  app.add_option("--allowed-origin", allowed_origins,
                 "a web origin (http://host:port) whose pages may read the data, besides the "
                 "page's own; its host is also accepted as a name for this machine; repeat for "
                 "several (web.origin_refused counts the others)")
      ->type_name("ORIGIN")
      ->check(CLI::Validator(
          [](std::string& v) {
            return v.starts_with("http://") || v.starts_with("https://")
                       ? std::string()
                       : std::string("an origin is http://host[:port] or https://host[:port]");
          },
          "ORIGIN"));
  app.add_option("--web-root", web_root,
                 "folder with index.html, app.js, style.css (default: share/petdaq/web beside "
                 "the program's bin/)")
      ->check(CLI::ExistingDirectory);
  app.add_option("--chartjs", chartjs, "Chart.js as installed by Debian's libjs-chart.js")
      ->capture_default_str();
  if (const auto rc = app.parse_or_exit(argc, argv)) return *rc;
  {
    std::string why;  // checked by the validator above
    parse_listen(listen_text, listen, why);
  }

  if (endpoint.empty() && !config.empty()) {
    try {
      endpoint = load_settings(config).output.zmq.endpoint;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "petdaq-web: %s\n", e.what());
      return 2;
    }
  }
  if (catalogue.empty() && !config.empty()) {
    try {
      catalogue = load_settings(config).output.catalogue.path.string();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "petdaq-web: %s\n", e.what());
      return 2;
    }
  }
  if (endpoint.empty()) endpoint = ZmqSettings{}.endpoint;

  ServerOptions options;
  options.listen = listen;
  options.zmq_endpoint = endpoint;
  options.stale_after = std::chrono::milliseconds(static_cast<long long>(stale_after_s * 1000));
  options.history_points = history_points;
  options.client_queue = client_queue;
  options.max_connections = max_connections;
  options.max_message_bytes = max_message_bytes;
  options.allowed_origins = allowed_origins;
  options.client_write_timeout =
      std::chrono::milliseconds(static_cast<long long>(client_timeout_s * 1000));
  options.dynamic = [runs = RunsPage(catalogue)](const std::string& target)
      -> std::optional<std::tuple<int, std::string, std::string>> {
    auto a = runs.answer(target);
    if (!a) return std::nullopt;
    return std::make_tuple(a->status, std::move(a->content_type), std::move(a->body));
  };
  const fs::path root = web_root.empty() ? default_web_root() : fs::path(web_root);
  try {
    const std::string html = read_file(root / "index.html");
    options.files["/"] = {"text/html; charset=utf-8", html};
    options.files["/index.html"] = {"text/html; charset=utf-8", html};
    options.files["/app.js"] = {"text/javascript; charset=utf-8", read_file(root / "app.js")};
    options.files["/style.css"] = {"text/css; charset=utf-8", read_file(root / "style.css")};
  } catch (const std::exception& e) {
    std::fprintf(stderr, "petdaq-web: the page's files: %s (--web-root)\n", e.what());
    return 1;
  }
  try {
    options.files["/chart.js"] = {"text/javascript; charset=utf-8", read_file(chartjs)};
  } catch (const std::exception& e) {
    // The numbers still show; only the plots need Chart.js.
    std::fprintf(stderr, "petdaq-web: no plots: %s (install libjs-chart.js, or --chartjs)\n",
                 e.what());
  }

  WebCounters counters;
  try {
    Server server(options, counters);
    Intake intake(endpoint, server, counters);
    const tcp::endpoint at = server.local_endpoint();
    const std::string host = at.address().is_v6() ? "[" + at.address().to_string() + "]"
                                                  : at.address().to_string();
    if (!at.address().is_loopback()) {
      std::fprintf(stderr,
                   "petdaq-web: listening on %s, not loopback: the page can be opened from other "
                   "machines (--listen; a deliberate choice)\n",
                   host.c_str());
    }
    std::fprintf(stderr, "petdaq-web: rates from %s; page at http://%s:%u/\n", endpoint.c_str(),
                 host.c_str(), static_cast<unsigned>(at.port()));

    std::atomic<bool> stop{false};
    std::thread intake_thread([&] { intake.run(stop); });
    server.run();
    stop = true;
    intake_thread.join();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "petdaq-web: %s\n", e.what());
    return 1;
  }
  std::string final_line;
  for (std::size_t i = 0; i < kWebCounterCount; ++i)
    final_line += " " + std::string(kWebCounterNames[i]) + "=" + std::to_string(counters.get(i));
  std::fprintf(stderr, "petdaq-web: final counters:%s\n", final_line.c_str());
  return 0;
}

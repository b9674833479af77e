// petdaq-web's HTTP and WebSocket side (Boost.Beast, one thread): serves the page's files
// from memory and pushes every update to every connected page. Nothing here waits for a
// client: each WebSocket client has a bounded queue, and a client whose queue is full or
// whose write has stalled is dropped and counted (web.clients_dropped_slow). What a client
// may cost is bounded: connections at most max_connections (more are closed at once,
// web.connections_refused), requests and WebSocket messages at most max_message_bytes
// (web.messages_too_large). A browser page of another site cannot read the data: a request
// whose Origin is not the page's own or one of allowed_origins, or whose Host names another
// machine than an address or one of allowed_origins' (DNS rebinding), is refused with 403
// (web.origin_refused).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "tools/web/messages.h"
#include "tools/web/web_counters.h"

namespace petdaq::web {

struct StaticFile {
  std::string content_type;
  std::string body;
};

struct ServerOptions {
  boost::asio::ip::tcp::endpoint listen;
  std::string zmq_endpoint;  // shown on the page
  std::chrono::milliseconds stale_after{5000};
  std::size_t history_points = 600;
  std::size_t client_queue = 16;  // messages waiting per client before it is dropped
  std::chrono::milliseconds client_write_timeout{10000};
  std::size_t max_connections = 64;       // HTTP and WebSocket together
  std::size_t max_message_bytes = 16384;  // one request (headers and body) or WebSocket message
  // Origins ("http://host:port") besides the page's own whose pages may read the data; their
  // hosts are also accepted in the Host header.
  std::vector<std::string> allowed_origins;
  std::map<std::string, StaticFile> files;  // by request path, e.g. "/" and "/app.js"
  // Other GET paths (the Runs page): the status, content type and body, or nullopt.
  std::function<std::optional<std::tuple<int, std::string, std::string>>(const std::string&)>
      dynamic;
};

class Hub;

class Server {
 public:
  // Binds the listening socket; throws std::runtime_error naming the address.
  Server(ServerOptions options, WebCounters& counters);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  boost::asio::ip::tcp::endpoint local_endpoint() const;

  // Any thread; returns at once. The update is handed to the server loop; if the loop is
  // far behind, it is dropped and counted (web.updates_dropped) instead of queued forever.
  void post_rates(RatesUpdate update);
  // The same for a {"type":"histograms",...} message: broadcast, and kept for pages that
  // connect later.
  void post_histograms(std::string message);
  // The page's "image" message: sent to every page, and to each page that connects later.
  void post_image(std::string message);

  // Runs the server loop on the calling thread until stop() or SIGINT/SIGTERM.
  void run();
  // Any thread.
  void stop();

 private:
  static constexpr int kMaxPendingUpdates = 64;
  // Reserves a place in the server loop's queue; false (counted) when it is full.
  bool reserve_update();
  boost::asio::io_context io_;
  std::unique_ptr<Hub> hub_;
  std::unique_ptr<boost::asio::ip::tcp::acceptor> acceptor_;
  std::atomic<int> pending_updates_{0};
  WebCounters& counters_;
};

}  // namespace petdaq::web

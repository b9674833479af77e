// For the tests of petdaq-web: starting it on a free port, plain HTTP GETs and WebSocket
// clients (Boost.Beast, synchronous); waiting on conditions is tests/support/wait.h's wait_until.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>

#include "tests/tools/tool_harness.h"

namespace petdaq::test {

namespace web_net {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;
}  // namespace web_net

// petdaq-web on 127.0.0.1, a free port, subscribed to `endpoint`; waits for its start line.
class WebServer {
 public:
  WebServer(const ScratchDir& dir, const std::string& endpoint,
            std::vector<std::string> extra = {})
      : err_(dir / "web.err") {
    std::vector<std::string> argv = {(bin_dir() / "petdaq-web").string(), "--endpoint", endpoint,
                                      "--listen", "127.0.0.1:0"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    child_.emplace(argv, dir / "web.out", err_);
    const std::regex at("page at http://127\\.0\\.0\\.1:([0-9]+)/");
    wait_until([&] {
      std::smatch m;
      const std::string text = read_text(err_);
      if (!std::regex_search(text, m, at)) return !child_->running();
      port_ = static_cast<std::uint16_t>(std::stoi(m[1]));
      return true;
    });
  }
  std::uint16_t port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/"; }
  std::string log() const { return read_text(err_); }
  Child& child() { return *child_; }

 private:
  std::filesystem::path err_;
  std::optional<Child> child_;
  std::uint16_t port_ = 0;
};

struct HttpReply {
  int status = 0;
  std::string body;
  std::string content_type;
};

inline HttpReply http_request(std::uint16_t port, const std::string& target,
                              web_net::http::verb method = web_net::http::verb::get,
                              const std::string& host = "127.0.0.1",
                              const std::string& origin = "") {
  using namespace web_net;
  asio::io_context io;
  beast::tcp_stream stream(io);
  stream.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  http::request<http::string_body> req(method, target, 11);
  req.set(http::field::host, host);
  if (!origin.empty()) req.set(http::field::origin, origin);
  http::write(stream, req);
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  http::read(stream, buffer, res);
  beast::error_code ec;
  stream.socket().shutdown(tcp::socket::shutdown_both, ec);
  return {static_cast<int>(res.result_int()), res.body(),
          std::string(res[http::field::content_type])};
}

// A WebSocket client. With a small receive buffer and no reads it is the slow client the
// server must drop.
class WsClient {
 public:
  // `origin`: the Origin header a browser page would send (none by default).
  WsClient(std::uint16_t port, const std::string& target,
           std::optional<int> receive_buffer_bytes = std::nullopt,
           const std::string& origin = "")
      : ws_(io_) {
    using namespace web_net;
    if (!origin.empty())
      ws_.set_option(websocket::stream_base::decorator(
          [origin](websocket::request_type& r) { r.set(http::field::origin, origin); }));
    auto& socket = beast::get_lowest_layer(ws_).socket();
    socket.open(tcp::v4());
    if (receive_buffer_bytes) socket.set_option(asio::socket_base::receive_buffer_size(*receive_buffer_bytes));
    socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
    ws_.handshake("127.0.0.1:" + std::to_string(port), target);
  }
  void write(const std::string& text) {
    ws_.text(true);
    ws_.write(web_net::asio::buffer(text));
  }
  // The next message; nullopt when the connection closed, or after `limit` (it is closed
  // then).
  std::optional<std::string> read(std::chrono::milliseconds limit = std::chrono::seconds(10)) {
    using namespace web_net;
    std::optional<std::string> out;
    bool done = false;
    beast::flat_buffer buffer;
    ws_.async_read(buffer, [&](beast::error_code ec, std::size_t) {
      done = true;
      if (!ec) out = beast::buffers_to_string(buffer.data());
    });
    io_.restart();
    io_.run_for(limit);
    if (!done) {
      beast::error_code ec;
      beast::get_lowest_layer(ws_).socket().close(ec);
      io_.restart();
      io_.run();
    }
    return out;
  }

 private:
  web_net::asio::io_context io_;
  web_net::websocket::stream<web_net::beast::tcp_stream> ws_;
};

}  // namespace petdaq::test

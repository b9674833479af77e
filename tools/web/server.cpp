#include "tools/web/server.h"

#include <algorithm>
#include <cctype>
#include <deque>
#include <optional>
#include <stdexcept>
#include <vector>

#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>

namespace petdaq::web {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using Message = std::shared_ptr<const std::string>;

namespace {
// A small kernel send buffer, so a client that stops reading fills it and its queue within
// seconds instead of hiding megabytes in the socket.
constexpr int kClientSendBufferBytes = 64 * 1024;
constexpr auto kTick = std::chrono::milliseconds(250);
constexpr auto kStatusEvery = std::chrono::milliseconds(1000);
constexpr auto kHttpTimeout = std::chrono::seconds(30);
// After a failed accept (no descriptor left): wait this long instead of spinning.
constexpr auto kAcceptBackoff = std::chrono::milliseconds(100);

// One connection's place under max_connections, given back when the session ends. The count
// is shared, so that it outlives the hub (handlers may be destroyed after it).
class Slot {
 public:
  explicit Slot(std::shared_ptr<std::size_t> count) : count_(std::move(count)) { ++*count_; }
  ~Slot() { --*count_; }
  Slot(const Slot&) = delete;
  Slot& operator=(const Slot&) = delete;

 private:
  std::shared_ptr<std::size_t> count_;
};

// "host" of "host:port" or "[v6]:port".
std::string host_part(std::string_view host_port) {
  if (host_port.starts_with('[')) {
    const auto end = host_port.find(']');
    return std::string(host_port.substr(1, end == std::string_view::npos ? std::string_view::npos
                                                                        : end - 1));
  }
  return std::string(host_port.substr(0, host_port.rfind(':')));
}

bool is_address_or_localhost(const std::string& host) {
  if (host == "localhost") return true;
  beast::error_code ec;
  asio::ip::make_address(host, ec);
  return !ec;
}

std::string lower(beast::string_view s) {
  std::string out(s.data(), s.size());
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}
}  // namespace

class WsSession;

// The state of the server loop: the sessions, the latest document, the history and the
// feed's state. Touched only on the loop's thread.
class Hub {
 public:
  Hub(asio::io_context& io, ServerOptions options, WebCounters& counters)
      : io_(io), options_(std::move(options)), counters_(counters), timer_(io) {}

  void start();
  void stop() { timer_.cancel(); }
  void take_rates(RatesUpdate update);
  void take_histograms(std::string message);
  void take_image(std::string message);

  // Sessions call these while the loop runs (never from their destructors: the hub may be
  // gone when the io_context destroys the last handlers).
  void join(const std::shared_ptr<WsSession>& s);
  void leave(const WsSession* s);
  std::size_t client_queue() const { return options_.client_queue; }
  const ServerOptions& options() const { return options_; }
  // Whether a request may be answered: its Host is an address, localhost or an allowed
  // origin's host, and its Origin (if any) is the page's own or an allowed one.
  bool allowed(const http::request<http::string_body>& req) const;
  // A connection's place, or null when max_connections are open (counted).
  std::unique_ptr<Slot> take_slot();
  WebCounters& counters() { return counters_; }
  // The response to a plain HTTP request.
  http::response<http::string_body> respond(const http::request<http::string_body>& req);

 private:
  void tick();
  FeedState state(Clock::time_point now) const;
  std::string status_text(Clock::time_point now) const;
  void broadcast(const Message& m);

  asio::io_context& io_;
  ServerOptions options_;
  WebCounters& counters_;
  asio::steady_timer timer_;
  std::vector<std::weak_ptr<WsSession>> sessions_;
  // A copy to walk: a send may drop (and unlist) a session.
  std::vector<std::shared_ptr<WsSession>> scratch_;
  void snapshot();
  std::deque<RatePoint> history_;
  Message latest_;
  Message latest_histograms_;
  Message latest_image_;
  Clock::time_point last_data_{};
  Clock::time_point last_status_{};
  bool have_data_ = false;
  FeedState announced_ = FeedState::waiting;
  std::shared_ptr<std::size_t> connections_ = std::make_shared<std::size_t>(0);
};

class WsSession : public std::enable_shared_from_this<WsSession> {
 public:
  WsSession(tcp::socket socket, Hub& hub, std::unique_ptr<Slot> slot)
      : ws_(std::move(socket)), hub_(hub), slot_(std::move(slot)) {}
  ~WsSession() {
    beast::error_code ec;
    beast::get_lowest_layer(ws_).socket().close(ec);
  }

  void start(http::request<http::string_body> req) {
    beast::error_code ec;
    beast::get_lowest_layer(ws_).socket().set_option(
        asio::socket_base::send_buffer_size(kClientSendBufferBytes), ec);
    beast::get_lowest_layer(ws_).expires_never();
    auto timeouts = websocket::stream_base::timeout::suggested(beast::role_type::server);
    timeouts.keep_alive_pings = true;  // a page that only listens still answers pings
    ws_.set_option(timeouts);
    ws_.set_option(websocket::stream_base::decorator(
        [](websocket::response_type& r) { r.set(http::field::server, "petdaq-web"); }));
    ws_.text(true);
    // The page sends nothing the server acts on: a large message is refused, not kept.
    ws_.read_message_max(hub_.options().max_message_bytes);
    ws_.async_accept(req, beast::bind_front_handler(&WsSession::on_accept, shared_from_this()));
  }

  void send(const Message& m) {
    if (!open_) return;
    if (queue_.size() >= hub_.client_queue()) {
      drop();
      return;
    }
    queue_.push_back(m);
    if (!writing_) write_next();
  }

  bool stalled(Clock::time_point now, std::chrono::milliseconds limit) const {
    return open_ && writing_ && now - write_started_ > limit;
  }

  void drop() {
    if (!open_) return;
    hub_.counters().add(WebCounter::clients_dropped_slow);
    close();
  }

 private:
  void on_accept(beast::error_code ec) {
    if (ec) return;
    open_ = true;
    hub_.counters().add(WebCounter::clients_accepted);
    hub_.join(shared_from_this());
    read();
  }

  // The page sends nothing the server acts on (read-only); reading keeps pings and the
  // closing handshake working.
  void read() {
    ws_.async_read(in_, beast::bind_front_handler(&WsSession::on_read, shared_from_this()));
  }
  void on_read(beast::error_code ec, std::size_t) {
    if (ec) {
      if (ec == websocket::error::message_too_big)
        hub_.counters().add(WebCounter::messages_too_large);
      close();
      return;
    }
    in_.consume(in_.size());
    read();
  }

  void write_next() {
    writing_ = true;
    write_started_ = Clock::now();
    in_flight_ = queue_.front();  // stays alive until the write's handler runs
    queue_.pop_front();
    ws_.async_write(asio::buffer(*in_flight_),
                    beast::bind_front_handler(&WsSession::on_write, shared_from_this()));
  }
  void on_write(beast::error_code ec, std::size_t) {
    writing_ = false;
    in_flight_.reset();
    if (ec) {
      close();
      return;
    }
    if (open_ && !queue_.empty()) write_next();
  }

  void close() {
    if (!open_) return;
    open_ = false;
    hub_.leave(this);
    queue_.clear();
    beast::error_code ec;
    beast::get_lowest_layer(ws_).socket().shutdown(tcp::socket::shutdown_both, ec);
    beast::get_lowest_layer(ws_).socket().close(ec);
  }

  websocket::stream<beast::tcp_stream> ws_;
  Hub& hub_;
  std::unique_ptr<Slot> slot_;
  beast::flat_buffer in_;
  std::deque<Message> queue_;
  Message in_flight_;
  bool open_ = false;
  bool writing_ = false;
  Clock::time_point write_started_{};
};

class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(tcp::socket socket, Hub& hub, std::unique_ptr<Slot> slot)
      : stream_(std::move(socket)),
        hub_(hub),
        slot_(std::move(slot)),
        buffer_(hub.options().max_message_bytes) {}

  void read() {
    parser_.emplace();
    // Headers and body together within max_message_bytes (the buffer's limit too).
    parser_->header_limit(static_cast<std::uint32_t>(hub_.options().max_message_bytes));
    parser_->body_limit(hub_.options().max_message_bytes);
    stream_.expires_after(kHttpTimeout);
    http::async_read(stream_, buffer_, *parser_,
                     beast::bind_front_handler(&HttpSession::on_read, shared_from_this()));
  }

 private:
  void on_read(beast::error_code ec, std::size_t) {
    if (ec) {
      if (ec == http::error::header_limit || ec == http::error::body_limit ||
          ec == http::error::buffer_overflow)
        hub_.counters().add(WebCounter::messages_too_large);
      stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
      return;
    }
    req_ = parser_->release();
    if (!hub_.allowed(req_)) {
      hub_.counters().add(WebCounter::origin_refused);
      res_ = {http::status::forbidden, req_.version()};
      res_.set(http::field::server, "petdaq-web");
      res_.set(http::field::content_type, "text/plain; charset=utf-8");
      res_.body() = "petdaq-web: this page's origin or host is not allowed (--allowed-origin)\n";
      res_.keep_alive(false);
      res_.prepare_payload();
      http::async_write(stream_, res_,
                        beast::bind_front_handler(&HttpSession::on_write, shared_from_this()));
      return;
    }
    if (websocket::is_upgrade(req_) && req_.target() == "/ws") {
      std::make_shared<WsSession>(stream_.release_socket(), hub_, std::move(slot_))
          ->start(std::move(req_));
      return;
    }
    res_ = hub_.respond(req_);
    http::async_write(stream_, res_,
                      beast::bind_front_handler(&HttpSession::on_write, shared_from_this()));
  }
  void on_write(beast::error_code ec, std::size_t) {
    if (ec || res_.need_eof()) {
      stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
      return;
    }
    read();
  }

  beast::tcp_stream stream_;
  Hub& hub_;
  std::unique_ptr<Slot> slot_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::request<http::string_body> req_;
  http::response<http::string_body> res_;
};

class Listener : public std::enable_shared_from_this<Listener> {
 public:
  Listener(asio::io_context& io, tcp::acceptor& acceptor, Hub& hub)
      : io_(io), acceptor_(acceptor), hub_(hub), backoff_(io) {}
  void accept() {
    acceptor_.async_accept(io_, beast::bind_front_handler(&Listener::on_accept, shared_from_this()));
  }

 private:
  void on_accept(beast::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted) return;
    if (ec) {
      // Out of descriptors (or another transient error): try again a little later, so the
      // loop goes on serving the connections it has instead of spinning here.
      backoff_.expires_after(kAcceptBackoff);
      backoff_.async_wait([self = shared_from_this()](beast::error_code e) {
        if (!e) self->accept();
      });
      return;
    }
    if (auto slot = hub_.take_slot()) {
      std::make_shared<HttpSession>(std::move(socket), hub_, std::move(slot))->read();
    } else {
      beast::error_code ignored;
      socket.close(ignored);  // over max_connections: closed at once (counted)
    }
    accept();
  }
  asio::io_context& io_;
  tcp::acceptor& acceptor_;
  Hub& hub_;
  asio::steady_timer backoff_;
};

// ---------------- Hub ----------------

void Hub::start() { tick(); }

std::unique_ptr<Slot> Hub::take_slot() {
  if (*connections_ >= options_.max_connections) {
    counters_.add(WebCounter::connections_refused);
    return nullptr;
  }
  return std::make_unique<Slot>(connections_);
}

bool Hub::allowed(const http::request<http::string_body>& req) const {
  const std::string host = lower(req[http::field::host]);
  auto listed = [&](const std::string& origin) {
    for (const auto& o : options_.allowed_origins)
      if (lower(o) == origin) return true;
    return false;
  };
  auto listed_host = [&](const std::string& h) {
    for (const auto& o : options_.allowed_origins) {
      const std::string lo = lower(o);
      const auto at = lo.find("://");
      if (at != std::string::npos && lo.substr(at + 3) == h) return true;
    }
    return false;
  };
  // A name that is not this machine's address: a page of another site that made its name
  // point here (DNS rebinding) would otherwise be same-origin.
  if (!host.empty() && !is_address_or_localhost(host_part(host)) && !listed_host(host))
    return false;
  const auto origin_field = req.find(http::field::origin);
  if (origin_field == req.end()) return true;  // not a browser page's request
  const std::string origin = lower(origin_field->value());
  return origin == "http://" + host || listed(origin);
}

void Hub::join(const std::shared_ptr<WsSession>& s) {
  sessions_.push_back(s);
  s->send(std::make_shared<const std::string>(history_message(history_)));
  if (latest_) s->send(latest_);
  if (latest_histograms_) s->send(latest_histograms_);
  if (latest_image_) s->send(latest_image_);
  s->send(std::make_shared<const std::string>(status_text(Clock::now())));
}

void Hub::take_rates(RatesUpdate update) {
  const Clock::time_point now = Clock::now();
  have_data_ = true;
  last_data_ = now;
  history_.push_back(update.point);
  while (history_.size() > options_.history_points) history_.pop_front();
  latest_ = std::make_shared<const std::string>(std::move(update.message));
  broadcast(latest_);
  if (announced_ != FeedState::live) {
    announced_ = FeedState::live;
    last_status_ = now;
    broadcast(std::make_shared<const std::string>(status_text(now)));
  }
}

void Hub::take_histograms(std::string message) {
  latest_histograms_ = std::make_shared<const std::string>(std::move(message));
  broadcast(latest_histograms_);
}

void Hub::take_image(std::string message) {
  latest_image_ = std::make_shared<const std::string>(std::move(message));
  broadcast(latest_image_);
}

FeedState Hub::state(Clock::time_point now) const {
  if (!have_data_) return FeedState::waiting;
  return now - last_data_ > options_.stale_after ? FeedState::no_data : FeedState::live;
}

std::string Hub::status_text(Clock::time_point now) const {
  ServerStatus s;
  s.state = state(now);
  s.age_s = have_data_ ? std::chrono::duration<double>(now - last_data_).count() : -1.0;
  s.stale_after_s = std::chrono::duration<double>(options_.stale_after).count();
  s.endpoint = options_.zmq_endpoint;
  s.clients = static_cast<std::size_t>(std::count_if(
      sessions_.begin(), sessions_.end(), [](const auto& w) { return !w.expired(); }));
  s.counters = &counters_;
  return status_message(s);
}

void Hub::leave(const WsSession* s) {
  std::erase_if(sessions_, [s](const std::weak_ptr<WsSession>& w) {
    const auto p = w.lock();
    return !p || p.get() == s;
  });
}

void Hub::snapshot() {
  scratch_.clear();
  for (const auto& w : sessions_) {
    if (auto p = w.lock()) scratch_.push_back(std::move(p));
  }
}

void Hub::broadcast(const Message& m) {
  snapshot();
  for (const auto& s : scratch_) s->send(m);
  scratch_.clear();
}

void Hub::tick() {
  const Clock::time_point now = Clock::now();
  snapshot();
  for (const auto& s : scratch_) {
    if (s->stalled(now, options_.client_write_timeout)) s->drop();
  }
  scratch_.clear();
  const FeedState st = state(now);
  if (st != announced_ || now - last_status_ >= kStatusEvery) {
    announced_ = st;
    last_status_ = now;
    broadcast(std::make_shared<const std::string>(status_text(now)));
  }
  timer_.expires_after(kTick);
  timer_.async_wait([this](beast::error_code ec) {
    if (!ec) tick();
  });
}

http::response<http::string_body> Hub::respond(const http::request<http::string_body>& req) {
  counters_.add(WebCounter::http_requests);
  http::response<http::string_body> res;
  res.version(req.version());
  res.keep_alive(req.keep_alive());
  res.set(http::field::server, "petdaq-web");
  res.set(http::field::cache_control, "no-cache");
  const auto plain = [&](http::status status, std::string text) {
    counters_.add(WebCounter::http_refused);
    res.result(status);
    res.set(http::field::content_type, "text/plain; charset=utf-8");
    res.body() = std::move(text);
  };
  std::string target(req.target());
  target = target.substr(0, target.find('?'));
  if (req.method() != http::verb::get && req.method() != http::verb::head) {
    // Read-only: nothing on this server changes anything.
    plain(http::status::method_not_allowed, "petdaq-web is read-only\n");
    res.set(http::field::allow, "GET, HEAD");
  } else if (target == "/status.json") {
    res.result(http::status::ok);
    res.set(http::field::content_type, "application/json");
    res.body() = status_text(Clock::now());
  } else if (target == "/rates.json") {
    if (latest_) {
      res.result(http::status::ok);
      res.set(http::field::content_type, "application/json");
      res.body() = *latest_;
    } else {
      plain(http::status::service_unavailable, "no rates document yet\n");
    }
  } else if (target == "/histograms.json") {
    if (latest_histograms_) {
      res.result(http::status::ok);
      res.set(http::field::content_type, "application/json");
      res.body() = *latest_histograms_;
    } else {
      plain(http::status::service_unavailable, "no histograms message yet\n");
    }
  } else if (auto dynamic = options_.dynamic ? options_.dynamic(target) : std::nullopt) {
    auto& [status, type, body] = *dynamic;
    if (status != 200) counters_.add(WebCounter::http_refused);
    res.result(static_cast<http::status>(status));
    res.set(http::field::content_type, type);
    res.body() = std::move(body);
  } else if (const auto it = options_.files.find(target); it != options_.files.end()) {
    res.result(http::status::ok);
    res.set(http::field::content_type, it->second.content_type);
    res.body() = it->second.body;
  } else {
    plain(http::status::not_found, "not found\n");
  }
  res.prepare_payload();
  if (req.method() == http::verb::head) res.body().clear();
  return res;
}

// ---------------- Server ----------------

Server::Server(ServerOptions options, WebCounters& counters) : counters_(counters) {
  const tcp::endpoint listen = options.listen;
  hub_ = std::make_unique<Hub>(io_, std::move(options), counters);
  acceptor_ = std::make_unique<tcp::acceptor>(io_);
  beast::error_code ec;
  acceptor_->open(listen.protocol(), ec);
  if (!ec) acceptor_->set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_->bind(listen, ec);
  if (!ec) acceptor_->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    throw std::runtime_error("cannot listen on " + listen.address().to_string() + ":" +
                             std::to_string(listen.port()) + ": " + ec.message());
  }
}

Server::~Server() = default;

tcp::endpoint Server::local_endpoint() const { return acceptor_->local_endpoint(); }

bool Server::reserve_update() {
  if (pending_updates_.fetch_add(1, std::memory_order_relaxed) >= kMaxPendingUpdates) {
    pending_updates_.fetch_sub(1, std::memory_order_relaxed);
    counters_.add(WebCounter::updates_dropped);
    return false;
  }
  return true;
}

void Server::post_histograms(std::string message) {
  if (!reserve_update()) return;
  asio::post(io_, [this, m = std::move(message)]() mutable {
    pending_updates_.fetch_sub(1, std::memory_order_relaxed);
    hub_->take_histograms(std::move(m));
  });
}

void Server::post_image(std::string message) {
  if (!reserve_update()) return;
  asio::post(io_, [this, m = std::move(message)]() mutable {
    pending_updates_.fetch_sub(1, std::memory_order_relaxed);
    hub_->take_image(std::move(m));
  });
}

void Server::post_rates(RatesUpdate update) {
  if (!reserve_update()) return;
  asio::post(io_, [this, u = std::move(update)]() mutable {
    pending_updates_.fetch_sub(1, std::memory_order_relaxed);
    hub_->take_rates(std::move(u));
  });
}

void Server::run() {
  asio::signal_set signals(io_, SIGINT, SIGTERM);
  signals.async_wait([this](beast::error_code ec, int) {
    if (!ec) stop();
  });
  std::make_shared<Listener>(io_, *acceptor_, *hub_)->accept();
  hub_->start();
  io_.run();
}

void Server::stop() {
  asio::post(io_, [this] {
    beast::error_code ec;
    acceptor_->close(ec);
    hub_->stop();
    io_.stop();
  });
}

}  // namespace petdaq::web

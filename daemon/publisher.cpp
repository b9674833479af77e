#include "daemon/publisher.h"

#include <malloc.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <linux/sockios.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <random>
#include <stdexcept>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "daemon/preflight.h"

namespace petdaq::daemon {

bool subscription_can_match(std::string_view subscription) {
  for (std::string_view t : topic::all)
    if (t.starts_with(subscription)) return true;
  return false;
}

namespace {
// Subscription messages taken per send(). libzmq moves every message that arrives into its
// own unbounded queue whenever the socket is used, so the queue is emptied each time; a
// peer that fills it faster than this is flooding, and the socket is reset.
constexpr int kSubscriptionsPerService = 8192;
// Inbound messages a peer may have queued before libzmq stops reading its connection.
constexpr int kInboundHwm = 1024;
constexpr auto kTrimDelay = std::chrono::milliseconds(200);
// How often the connections' send queues are looked at, and how long one may stay the same
// (not empty, not drained) before its subscriber counts as stalled.
constexpr auto kLookEvery = std::chrono::milliseconds(250);
constexpr auto kStalledAfter = std::chrono::seconds(1);

// A body copied outside the arena: this header, then the bytes. libzmq's free function
// gives the bytes back to the publisher's count of held bytes (which it shares).
struct HeldCopy {
  std::shared_ptr<std::atomic<std::uint64_t>> held;
  std::size_t bytes;
  static void let_go(void* /*data*/, void* hint) {
    auto* c = static_cast<HeldCopy*>(hint);
    c->held->fetch_sub(c->bytes, std::memory_order_relaxed);
    c->~HeldCopy();
    std::free(c);
  }
};
constexpr std::size_t kHeldCopyHeader = (sizeof(HeldCopy) + 63) / 64 * 64;

std::uint32_t draw_instance_id() {
  std::random_device rd;
  std::uint32_t id = 0;
  while (id == 0) id = static_cast<std::uint32_t>(rd());
  return id;
}

bool same_address(const sockaddr_storage& a, socklen_t alen, const sockaddr_storage& b,
                  socklen_t blen) {
  return alen == blen && std::memcmp(&a, &b, alen) == 0;
}
}  // namespace

Publisher::Publisher(const ZmqSettings& zmq_settings, Counters& counters, MessageArena* arena)
    : settings_(zmq_settings),
      counters_(counters),
      arena_(arena),
      context_(1),
      instance_id_(draw_instance_id()),
      held_(std::make_shared<std::atomic<std::uint64_t>>(0)) {
  peers_.list.reserve(256);
  if (const auto holder = ipc_endpoint_in_use(zmq_settings.endpoint))
    throw std::runtime_error("cannot bind ZeroMQ PUB to " + zmq_settings.endpoint + ": " + *holder);
  endpoint_ = zmq_settings.endpoint;
  if (!zmq_settings.curve_secret_key_file.empty()) {
    CurveKeys keys = load_curve_keys(zmq_settings);
    zap_ = std::make_unique<ZapHandler>(context_, std::move(keys.client_public));
    curve_secret_z85_ = keys.server_secret_z85;
  }
  open();
}

Publisher::~Publisher() = default;

void Publisher::open() {
  socket_ = zmq::socket_t(context_, zmq::socket_type::xpub);
  socket_.set(zmq::sockopt::sndhwm, settings_.send_hwm);
  socket_.set(zmq::sockopt::rcvhwm, kInboundHwm);
  // The limit applies to the handshake too: CURVE's commands are a few hundred bytes (and
  // only clients that hold a listed key get as far as subscribing).
  socket_.set(zmq::sockopt::maxmsgsize,
              curve_secret_z85_.empty() ? kMaxSubscriptionBytes : kMaxCurveMessageBytes);
  // Give the last messages time to reach subscribers when the daemon stops.
  socket_.set(zmq::sockopt::linger, 2000);
  socket_.set(zmq::sockopt::xpub_manual, true);
  if (!curve_secret_z85_.empty()) {
    socket_.set(zmq::sockopt::curve_server, true);
    socket_.set(zmq::sockopt::curve_secretkey, curve_secret_z85_);
    socket_.set(zmq::sockopt::zap_domain, "petdaq");
  }
  monitor_.endpoint =
      "inproc://petdaq-publisher-monitor-" + std::to_string(monitor_.generation++);
  if (zmq_socket_monitor(socket_.handle(), monitor_.endpoint.c_str(),
                         ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED |
                             ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                             ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                             ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) != 0)
    throw std::runtime_error(std::string("ZeroMQ socket monitor: ") + zmq_strerror(zmq_errno()));
  monitor_.socket = zmq::socket_t(context_, zmq::socket_type::pair);
  monitor_.socket.connect(monitor_.endpoint);
  try {
    socket_.bind(endpoint_);
  } catch (const zmq::error_t& e) {
    throw std::runtime_error("cannot bind ZeroMQ PUB to " + endpoint_ + ": " + e.what());
  }
  // The endpoint actually bound (a wildcard port resolved).
  endpoint_ = socket_.get(zmq::sockopt::last_endpoint);
  peers_.subscribers = 0;
  refused_live_ = 0;
}

void Publisher::take_subscription(const zmq::message_t& m) {
  const auto* data = static_cast<const char*>(m.data());
  if (m.size() == 0 || (data[0] != 0 && data[0] != 1)) {
    counters_.add(Counter::out_zmq_subscriptions_refused);  // not a subscription at all
    return;
  }
  const std::string_view topic_prefix(data + 1, m.size() - 1);
  const bool subscribe = data[0] == 1;
  if (!subscription_can_match(topic_prefix)) {
    if (subscribe) {
      counters_.add(Counter::out_zmq_subscriptions_refused);
      ++refused_live_;
    }
    return;
  }
  // Manual mode: the option applies to the peer whose message was received last.
  if (subscribe) {
    socket_.set(zmq::sockopt::subscribe, topic_prefix);
    counters_.add(Counter::out_zmq_subscriptions);
  } else {
    socket_.set(zmq::sockopt::unsubscribe, topic_prefix);
  }
}

bool Publisher::take_monitor_event() {
  zmq::message_t event;
  zmq::message_t address;
  if (!monitor_.socket.recv(event, zmq::recv_flags::dontwait)) return false;
  if (event.more()) (void)monitor_.socket.recv(address, zmq::recv_flags::none);
  if (event.size() < sizeof(std::uint16_t) + sizeof(std::uint32_t)) return true;
  std::uint16_t id;
  std::memcpy(&id, event.data(), sizeof id);
  std::uint32_t value;  // the connection's descriptor for these events
  std::memcpy(&value, static_cast<const char*>(event.data()) + sizeof id, sizeof value);
  const int fd = static_cast<int>(value);
  if (id == ZMQ_EVENT_ACCEPTED || id == ZMQ_EVENT_DISCONNECTED) {
    // A descriptor is used again only once its connection ended: forget the old one.
    std::erase_if(peers_.list, [fd](const Peer& p) { return p.fd == fd; });
  }
  if (id == ZMQ_EVENT_ACCEPTED) {
    ++peers_.subscribers;
    counters_.add(Counter::out_zmq_connects);
    Peer p;
    p.fd = fd;
    p.local_len = sizeof p.local;
    p.remote_len = sizeof p.remote;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&p.local), &p.local_len) == 0 &&
        ::getpeername(fd, reinterpret_cast<sockaddr*>(&p.remote), &p.remote_len) == 0)
      peers_.list.push_back(p);
  } else if (id == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH || id == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL ||
             id == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) {
    counters_.add(Counter::out_zmq_auth_refused);  // a key not listed, or no CURVE at all
  } else if (id == ZMQ_EVENT_DISCONNECTED) {
    if (peers_.subscribers > 0) --peers_.subscribers;
    counters_.add(Counter::out_zmq_disconnects);
    // What a peer's connection held (its queues, its subscriptions) is freed now.
    if (!trim_after_) trim_after_ = std::chrono::steady_clock::now() + kTrimDelay;
  }
  return true;
}

void Publisher::service() {
  zmq::message_t m;
  int taken = 0;
  for (; taken < kSubscriptionsPerService; ++taken) {
    if (!socket_.recv(m, zmq::recv_flags::dontwait)) break;
    take_subscription(m);
  }
  const bool flooded = taken == kSubscriptionsPerService;
  for (int i = 0; i < 256; ++i)
    if (!take_monitor_event()) break;
  // Every peer is gone, and with them what libzmq kept for their subscriptions.
  if (peers_.subscribers == 0) refused_live_ = 0;
  const auto now = std::chrono::steady_clock::now();
  if (refused_live_ > kMaxRefusedSubscriptions || flooded) {
    // libzmq keeps every subscription a peer sent until its connection ends, and XPUB can
    // tell neither which peer sent what nor close one: every connection is closed, the
    // listening socket is kept (a close and a new bind would leave the endpoint free for a
    // moment, to another process).
    const std::uint64_t dropped = drop_peers([](const Peer&) { return true; });
    spdlog::warn("ZeroMQ: {}; closed {} connection(s) to free what they hold (subscribers "
                 "reconnect)",
                 flooded ? fmt::format("more than {} subscription messages at once",
                                       kSubscriptionsPerService)
                         : fmt::format("more than {} subscriptions that match no topic",
                                       kMaxRefusedSubscriptions),
                 dropped);
    counters_.add(Counter::out_zmq_resets);
    refused_live_ = 0;
    if (!trim_after_) trim_after_ = now + kTrimDelay;
  }
  if (now - peers_.last_look >= kLookEvery) look_at_queues(now);
  // libzmq frees a closed connection's memory on its own threads, a little later: then the
  // heap that refused subscriptions took is handed back to the system.
  if (trim_after_ && now >= *trim_after_) {
    malloc_trim(0);
    trim_after_.reset();
  }
}

bool Publisher::still_same(const Peer& p) {
  sockaddr_storage local{}, remote{};
  socklen_t local_len = sizeof local, remote_len = sizeof remote;
  return ::getsockname(p.fd, reinterpret_cast<sockaddr*>(&local), &local_len) == 0 &&
         ::getpeername(p.fd, reinterpret_cast<sockaddr*>(&remote), &remote_len) == 0 &&
         same_address(local, local_len, p.local, p.local_len) &&
         same_address(remote, remote_len, p.remote, p.remote_len);
}

template <class Which>
std::uint64_t Publisher::drop_peers(Which which) {
  // Events not yet read may say that a descriptor was closed (and may be in use again).
  for (int i = 0; i < 256; ++i)
    if (!take_monitor_event()) break;
  std::uint64_t dropped = 0;
  for (const Peer& p : peers_.list) {
    if (!which(p) || !still_same(p)) continue;
    // The connection ends as if the peer had closed it: libzmq's I/O thread reads the end,
    // closes the descriptor and frees the connection's queues and subscriptions.
    if (::shutdown(p.fd, SHUT_RDWR) == 0) ++dropped;
  }
  return dropped;
}

void Publisher::look_at_queues(std::chrono::steady_clock::time_point now) {
  peers_.last_look = now;
  for (Peer& p : peers_.list) {
    int outq = 0;
    if (::ioctl(p.fd, SIOCOUTQ, &outq) != 0) outq = 0;
    if (outq == 0 || outq != p.outq) p.outq_since = now;
    p.outq = outq;
  }
}

bool Publisher::admit_held(std::size_t bytes, std::chrono::steady_clock::time_point now) {
  if (held_->load(std::memory_order_relaxed) + bytes <= settings_.held_bytes_max) return true;
  counters_.add(Counter::out_zmq_over_budget);
  // A subscriber whose queue has not moved for a while is what keeps the bytes held.
  const std::uint64_t dropped = drop_peers([now](const Peer& p) {
    return p.outq > 0 && now - p.outq_since >= kStalledAfter;
  });
  if (dropped > 0) {
    counters_.add(Counter::out_zmq_stalled_dropped, dropped);
    spdlog::warn("ZeroMQ: message bodies held for subscribers reached output.zmq.held_bytes_max "
                 "({} bytes); disconnected {} subscriber(s) that took nothing for {} s",
                 settings_.held_bytes_max, dropped,
                 std::chrono::duration<double>(kStalledAfter).count());
    if (!trim_after_) trim_after_ = now + kTrimDelay;
  }
  return false;
}

bool Publisher::send(std::string_view topic, const MessageHeader& header, const void* body,
                     std::size_t body_bytes) {
  service();
  // A constant topic goes out without a copy (no free function: libzmq never frees it).
  zmq::message_t topic_msg(const_cast<char*>(topic.data()), topic.size(), nullptr, nullptr);
  std::uint8_t h[kMessageHeaderBytes];
  encode_message_header(stamp(header), h);
  // The body is made first: one that would pass the budget is not sent at all.
  std::optional<zmq::message_t> body_msg = body_message(body, body_bytes);
  if (!body_msg) return false;
  // Without ZMQ_XPUB_NODROP a send is refused only on an error, never because a
  // subscriber is slow: that subscriber alone misses the message.
  if (!socket_.send(topic_msg, zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
    counters_.add(Counter::out_zmq_refused);
    return false;
  }
  socket_.send(zmq::const_buffer(h, sizeof h), zmq::send_flags::sndmore);
  socket_.send(*body_msg, zmq::send_flags::none);
  counters_.add(Counter::out_messages);
  return true;
}

std::optional<zmq::message_t> Publisher::body_message(const void* body, std::size_t bytes) {
  if (arena_ && bytes > 0) {
    void* hint = nullptr;
    if (void* piece = arena_->hold_or_copy(body, bytes, hint))
      return zmq::message_t(piece, bytes, &MessageArena::let_go_message, hint);
  }
  // libzmq keeps a body this small inside the message itself (no allocation).
  if (bytes <= kInlineBodyBytes) return zmq::message_t(body, bytes);
  // A copy of its own, counted against output.zmq.held_bytes_max until libzmq lets go.
  if (!admit_held(bytes, std::chrono::steady_clock::now())) return std::nullopt;
  void* mem = std::malloc(kHeldCopyHeader + bytes);
  if (!mem) {
    counters_.add(Counter::out_zmq_over_budget);
    return std::nullopt;
  }
  auto* copy = new (mem) HeldCopy{held_, bytes};
  auto* data = static_cast<std::uint8_t*>(mem) + kHeldCopyHeader;
  std::memcpy(data, body, bytes);
  held_->fetch_add(bytes, std::memory_order_relaxed);
  if (arena_) counters_.add(Counter::out_message_copies);
  return zmq::message_t(data, bytes, &HeldCopy::let_go, copy);
}

}  // namespace petdaq::daemon

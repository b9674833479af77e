#include "daemon/publisher.h"

#include <malloc.h>

#include <chrono>
#include <cstring>
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
}  // namespace

Publisher::Publisher(const ZmqSettings& zmq_settings, Counters& counters, MessageArena* arena)
    : settings_(zmq_settings), counters_(counters), arena_(arena), context_(1) {
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
  monitor_endpoint_ = "inproc://petdaq-publisher-monitor-" + std::to_string(generation_++);
  if (zmq_socket_monitor(socket_.handle(), monitor_endpoint_.c_str(),
                         ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED |
                             ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                             ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                             ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) != 0)
    throw std::runtime_error(std::string("ZeroMQ socket monitor: ") + zmq_strerror(zmq_errno()));
  monitor_ = zmq::socket_t(context_, zmq::socket_type::pair);
  monitor_.connect(monitor_endpoint_);
  try {
    socket_.bind(endpoint_);
  } catch (const zmq::error_t& e) {
    throw std::runtime_error("cannot bind ZeroMQ PUB to " + endpoint_ + ": " + e.what());
  }
  // A wildcard port is bound again to the same port after a reset.
  endpoint_ = socket_.get(zmq::sockopt::last_endpoint);
  subscribers_ = 0;
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
  if (!monitor_.recv(event, zmq::recv_flags::dontwait)) return false;
  if (event.more()) (void)monitor_.recv(address, zmq::recv_flags::none);
  if (event.size() < sizeof(std::uint16_t)) return true;
  std::uint16_t id;
  std::memcpy(&id, event.data(), sizeof id);
  if (id == ZMQ_EVENT_ACCEPTED) {
    ++subscribers_;
    counters_.add(Counter::out_zmq_connects);
  } else if (id == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH || id == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL ||
             id == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) {
    counters_.add(Counter::out_zmq_auth_refused);  // a key not listed, or no CURVE at all
  } else if (id == ZMQ_EVENT_DISCONNECTED) {
    if (subscribers_ > 0) --subscribers_;
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
  if (subscribers_ == 0) refused_live_ = 0;
  const auto now = std::chrono::steady_clock::now();
  if (refused_live_ > kMaxRefusedSubscriptions || flooded) {
    spdlog::warn("ZeroMQ: {}; closing every connection to free what they hold (subscribers "
                 "reconnect)",
                 flooded ? fmt::format("more than {} subscription messages at once",
                                       kSubscriptionsPerService)
                         : fmt::format("more than {} subscriptions that match no topic",
                                       kMaxRefusedSubscriptions));
    counters_.add(Counter::out_zmq_resets);
    counters_.add(Counter::out_zmq_disconnects, subscribers_);  // every connection goes
    monitor_.close();
    socket_.set(zmq::sockopt::linger, 0);
    socket_.close();
    open();
    if (!trim_after_) trim_after_ = now + kTrimDelay;
  }
  // libzmq frees a closed connection's memory on its own threads, a little later: then the
  // heap that refused subscriptions took is handed back to the system.
  if (trim_after_ && now >= *trim_after_) {
    malloc_trim(0);
    trim_after_.reset();
  }
}

bool Publisher::send(std::string_view topic, const MessageHeader& header, const void* body,
                     std::size_t body_bytes) {
  service();
  // A constant topic goes out without a copy (no free function: libzmq never frees it).
  zmq::message_t topic_msg(const_cast<char*>(topic.data()), topic.size(), nullptr, nullptr);
  std::uint8_t h[kMessageHeaderBytes];
  encode_message_header(header, h);
  // Without ZMQ_XPUB_NODROP a send is refused only on an error, never because a
  // subscriber is slow: that subscriber alone misses the message.
  if (!socket_.send(topic_msg, zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
    counters_.add(Counter::out_zmq_refused);
    return false;
  }
  socket_.send(zmq::const_buffer(h, sizeof h), zmq::send_flags::sndmore);
  socket_.send(body_message(body, body_bytes), zmq::send_flags::none);
  counters_.add(Counter::out_messages);
  return true;
}

zmq::message_t Publisher::body_message(const void* body, std::size_t bytes) {
  if (arena_ && bytes > 0) {
    if (arena_->owns(body))
      return zmq::message_t(const_cast<void*>(body), bytes, &MessageArena::let_go_message,
                            arena_->hold(body));
    if (void* piece = arena_->lend(bytes)) {
      std::memcpy(piece, body, bytes);
      // The message takes over the lend's hold.
      void* hint = arena_->hold(piece);
      arena_->let_go(piece);
      return zmq::message_t(piece, bytes, &MessageArena::let_go_message, hint);
    }
    counters_.add(Counter::out_message_copies);
  }
  return zmq::message_t(body, bytes);
}

}  // namespace petdaq::daemon

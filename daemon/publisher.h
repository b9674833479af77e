// The ZeroMQ publishing side of DESIGN section 7: three-frame messages (topic, 64-byte
// header, body) on an XPUB socket. Sends never wait and never wait for the slowest reader:
// each subscriber has its own queue of output.zmq.send_hwm messages, and a message that does
// not fit a subscriber's full queue is dropped for that subscriber alone (it sees the gap in
// message_id). Subscriptions are handled by hand (ZMQ_XPUB_MANUAL): only a prefix of a topic
// the daemon publishes is applied; anything else can never match, is refused and counted,
// and a peer that piles refused subscriptions up cannot grow the daemon's memory past
// kMaxRefusedSubscriptions (every connection is closed and the subscribers reconnect; the
// listening socket stays bound all along, so no other process can take the endpoint).
// Bodies that are not in the message arena (rates documents, histograms, batches when the
// arena is full) are copied into memory of their own, and all of them together never hold
// more than output.zmq.held_bytes_max: a message that would pass it
// is refused for every subscriber (out.zmq_over_budget), and a subscriber whose connection
// has not drained for a second is then disconnected (out.zmq_stalled_dropped), which frees
// what it held. Every header carries the publisher's instance id (publisher_id).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <optional>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <sys/socket.h>
#include <vector>

#include <zmq.hpp>

#include "core/counters.h"
#include "core/message_arena.h"
#include "core/settings.h"
#include "daemon/curve.h"
#include "proto/records.h"
#include "proto/topics.h"

namespace petdaq::daemon {

// A subscription can match something only if it is a prefix of a published topic.
bool subscription_can_match(std::string_view subscription);

class Publisher {
 public:
  // Refused subscriptions (since the last reset, while any subscriber is connected) past
  // which the socket is closed and bound again, freeing what libzmq keeps for them. One
  // costs at most kMaxSubscriptionBytes of trie nodes in libzmq's bookkeeping.
  static constexpr std::uint64_t kMaxRefusedSubscriptions = 4096;
  static constexpr std::int64_t kMaxSubscriptionBytes = 64;
  static constexpr std::int64_t kMaxCurveMessageBytes = 1024;
  // Bodies up to this size are kept inside libzmq's message (no allocation, no budget).
  static constexpr std::size_t kInlineBodyBytes = 32;
  // The most that the copied bodies libzmq still holds take: output.zmq.held_bytes_max.
  static std::size_t memory_bytes(const Settings& s) { return s.output.zmq.held_bytes_max; }

  // Binds output.zmq.endpoint; throws std::runtime_error naming the endpoint (also when an
  // ipc:// endpoint is already served by another process). With CURVE keys configured only
  // the listed clients can subscribe (daemon/curve.h).
  // With an arena, message bodies go out without a copy inside libzmq: a body that lies in a
  // piece of it as it is (the piece is held until libzmq lets go), any other one copied into
  // a piece first; with no room there, libzmq copies it (out.message_copies).
  Publisher(const ZmqSettings& zmq, Counters& counters, MessageArena* arena = nullptr);
  ~Publisher();
  Publisher(const Publisher&) = delete;
  Publisher& operator=(const Publisher&) = delete;

  // `topic` must outlive the process (one of the constants above): it is sent without a
  // copy. The header is copied into the message; the body as the constructor says, because
  // the backend reuses its record buffers for the next slice. Returns false when the socket
  // refused it (counted).
  bool send(std::string_view topic, const MessageHeader& header, const void* body,
            std::size_t body_bytes);

  // The random nonzero number every header carries (MessageHeader::publisher_id).
  std::uint32_t instance_id() const { return instance_id_; }
  // `h` as send() publishes it: this version, this publisher's id.
  MessageHeader stamp(MessageHeader h) const {
    h.version = kMessageVersion;
    h.publisher_id = instance_id_;
    return h;
  }
  // Bytes of message bodies outside the arena that libzmq still holds (any thread).
  std::uint64_t held_bytes() const { return held_->load(std::memory_order_relaxed); }

  const std::string& endpoint() const { return endpoint_; }
  // Connected subscribers (peers accepted and not yet gone), as of the last send().
  std::uint64_t subscribers() const { return peers_.subscribers; }

 private:
  void open();
  // Applies or refuses the subscriptions that arrived, and follows connections.
  void service();
  // A connection libzmq accepted (the fd of its monitor event), as it was then.
  struct Peer {
    int fd = -1;
    sockaddr_storage local{}, remote{};
    socklen_t local_len = 0, remote_len = 0;
    int outq = 0;  // bytes not yet taken by the peer at the last look
    std::chrono::steady_clock::time_point outq_since{};  // since when outq has not changed
  };
  // Whether `p.fd` is still the connection accepted (not a descriptor used again since).
  static bool still_same(const Peer& p);
  // Closes the connections that `which` selects (libzmq sees them end and frees what they
  // held); returns how many.
  template <class Which>
  std::uint64_t drop_peers(Which which);
  void look_at_queues(std::chrono::steady_clock::time_point now);
  bool admit_held(std::size_t bytes, std::chrono::steady_clock::time_point now);
  void take_subscription(const zmq::message_t& m);
  // Null when the body would pass output.zmq.held_bytes_max (counted).
  std::optional<zmq::message_t> body_message(const void* body, std::size_t bytes);
  bool take_monitor_event();  // false when none was waiting

  ZmqSettings settings_;
  Counters& counters_;
  MessageArena* arena_;
  zmq::context_t context_;
  std::unique_ptr<ZapHandler> zap_;  // CURVE only; outlives the socket
  std::string curve_secret_z85_;
  zmq::socket_t socket_;
  // The socket's monitor: the connections libzmq accepts and closes (a new inproc endpoint
  // each time the socket is opened again).
  struct Monitor {
    zmq::socket_t socket;
    std::string endpoint;
    unsigned generation = 0;
  } monitor_;
  std::string endpoint_;
  std::uint64_t refused_live_ = 0;
  std::optional<std::chrono::steady_clock::time_point> trim_after_;
  std::uint32_t instance_id_ = 0;
  // The connections the monitor reported, how many are subscribers, and when their queues
  // were last looked at.
  struct Peers {
    std::vector<Peer> list;
    std::uint64_t subscribers = 0;
    std::chrono::steady_clock::time_point last_look{};
  } peers_;
  // Shared with the free function of each held copy, which may run on libzmq's threads.
  std::shared_ptr<std::atomic<std::uint64_t>> held_;
};

}  // namespace petdaq::daemon

// The publisher in-process against real ZeroMQ subscribers on loopback: a subscription flood
// never gives the endpoint up (or stops the publisher), every header names the publisher,
// and the bodies held for a stalled subscriber stay within output.zmq.held_bytes_max.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <zmq.hpp>

#include "core/counters.h"
#include "core/settings.h"
#include "core/histograms.h"
#include "daemon/preflight.h"
#include "daemon/publisher.h"
#include "daemon/raw_sink.h"
#include "proto/records.h"
#include "proto/topics.h"
#include "tests/support/wait.h"

namespace petdaq::daemon {
namespace {

using namespace std::chrono_literals;
using petdaq::test::wait_until;

std::uint16_t port_of(const std::string& endpoint) {
  return static_cast<std::uint16_t>(std::stoi(endpoint.substr(endpoint.rfind(':') + 1)));
}

// errno of a plain bind to 127.0.0.1:port (0 when it succeeded: the port was free).
int probe_bind(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const int rc = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  const int err = rc == 0 ? 0 : errno;
  ::close(fd);
  return err;
}

std::uint64_t own_rss_kib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6));
  return 0;
}

// A subscriber on its own thread that reads everything and keeps the headers.
struct Reader {
  explicit Reader(const std::string& endpoint) {
    thread = std::thread([this, endpoint] {
      zmq::socket_t s(context, zmq::socket_type::sub);
      s.set(zmq::sockopt::subscribe, "");
      s.set(zmq::sockopt::rcvtimeo, 50);
      s.set(zmq::sockopt::linger, 0);
      s.connect(endpoint);
      while (!stop) {
        zmq::message_t topic, head, body;
        if (!s.recv(topic)) continue;
        (void)s.recv(head);
        (void)s.recv(body);
        if (head.size() == kMessageHeaderBytes) {
          const MessageHeader h = decode_message_header(head.data<std::uint8_t>());
          last_publisher = h.publisher_id;
          last_version = h.version;
          if (h.publisher_id != first_publisher.load() && first_publisher.load() != 0)
            ++publisher_changes;
          if (first_publisher.load() == 0) first_publisher = h.publisher_id;
        }
        ++received;
      }
    });
  }
  ~Reader() {
    stop = true;
    thread.join();
  }
  zmq::context_t context{1};
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> received{0};
  std::atomic<std::uint32_t> first_publisher{0}, last_publisher{0}, last_version{0};
  std::atomic<std::uint64_t> publisher_changes{0};
  std::thread thread;
};

MessageHeader rates_header(std::uint64_t id) {
  MessageHeader h;
  h.message_id = id;
  return h;
}

// Floods of subscriptions that match nothing, one after the other: each closes every
// connection, the publisher goes on sending, and the port stays bound to it all along (a
// plain bind to it fails at every look).
TEST(Publisher, SubscriptionFloodsNeverGiveTheEndpointUp) {
  Counters counters(1);
  ZmqSettings z;
  z.endpoint = "tcp://127.0.0.1:*";
  z.message_buffer_bytes = 0;
  Publisher pub(z, counters);
  const std::string endpoint = pub.endpoint();
  const std::uint16_t port = port_of(endpoint);
  ASSERT_NE(pub.instance_id(), 0u);
  Reader reader(endpoint);
  const std::string doc = "{}";
  std::uint64_t id = 0;
  ASSERT_TRUE(wait_until([&] {
    pub.send(topic::rates, rates_header(id++), doc.data(), doc.size());
    return reader.received > 0;
  }, 10s));

  int port_free_seen = 0;
  for (int flood = 0; flood < 3; ++flood) {
    const std::uint64_t resets = counters.get(Counter::out_zmq_resets);
    zmq::context_t context(1);
    zmq::socket_t flooder(context, zmq::socket_type::sub);
    flooder.set(zmq::sockopt::sndhwm, 0);
    flooder.set(zmq::sockopt::linger, 0);
    flooder.connect(endpoint);
    char name[64];
    for (int i = 0; i < 3 * static_cast<int>(Publisher::kMaxRefusedSubscriptions); ++i) {
      const int n = std::snprintf(name, sizeof name, "no-such-topic-%d-%09d", flood, i);
      flooder.set(zmq::sockopt::subscribe, std::string_view(name, static_cast<std::size_t>(n)));
    }
    const bool reset = wait_until([&] {
      EXPECT_NO_THROW(pub.send(topic::rates, rates_header(id++), doc.data(), doc.size()));
      if (probe_bind(port) != EADDRINUSE) ++port_free_seen;
      return counters.get(Counter::out_zmq_resets) > resets;
    }, 20s, 1ms);
    ASSERT_TRUE(reset) << "flood " << flood << ": no reset";
    // Right after the reset too: the port is never free.
    for (int i = 0; i < 200; ++i) {
      EXPECT_NO_THROW(pub.send(topic::rates, rates_header(id++), doc.data(), doc.size()));
      if (probe_bind(port) != EADDRINUSE) ++port_free_seen;
    }
  }
  EXPECT_EQ(port_free_seen, 0) << "the publisher's port could be bound by another process";
  EXPECT_EQ(pub.endpoint(), endpoint);
  // The reader reconnects on its own and hears the same publisher again.
  const std::uint64_t before = reader.received;
  EXPECT_TRUE(wait_until([&] {
    pub.send(topic::rates, rates_header(id++), doc.data(), doc.size());
    return reader.received > before + 10;
  }, 10s));
  EXPECT_EQ(reader.last_publisher.load(), pub.instance_id());
  EXPECT_EQ(reader.last_version.load(), kMessageVersion);
  EXPECT_EQ(reader.publisher_changes.load(), 0u);
  EXPECT_GE(counters.get(Counter::out_zmq_subscriptions_refused),
            3 * Publisher::kMaxRefusedSubscriptions);
}

// Two publishers are told apart by their instance ids.
TEST(Publisher, EachPublisherHasItsOwnInstanceId) {
  Counters counters(1);
  ZmqSettings z;
  z.endpoint = "tcp://127.0.0.1:*";
  z.message_buffer_bytes = 0;
  Publisher a(z, counters), b(z, counters);
  EXPECT_NE(a.instance_id(), 0u);
  EXPECT_NE(b.instance_id(), 0u);
  EXPECT_NE(a.instance_id(), b.instance_id());
}

// Large bodies (histograms) to one healthy and one stalled subscriber: what the publisher
// holds for them stays within held_bytes_max, the messages past it are refused and counted,
// the stalled subscriber is disconnected (counted), and the healthy one gets every message
// that was sent.
TEST(Publisher, LargeBodiesHeldForAStalledSubscriberStayWithinTheBudget) {
  Counters counters(1);
  ZmqSettings z;
  z.endpoint = "tcp://127.0.0.1:*";
  z.message_buffer_bytes = 0;
  z.send_hwm = 1000;
  z.held_bytes_max = 32u << 20;
  Publisher pub(z, counters);
  const std::string endpoint = pub.endpoint();

  zmq::context_t stalled_context(1);
  zmq::socket_t stalled(stalled_context, zmq::socket_type::sub);
  stalled.set(zmq::sockopt::rcvhwm, 1);
  stalled.set(zmq::sockopt::rcvbuf, 64 * 1024);
  stalled.set(zmq::sockopt::linger, 0);
  stalled.set(zmq::sockopt::subscribe, "");
  stalled.connect(endpoint);  // and never read
  Reader healthy(endpoint);

  const std::vector<std::uint8_t> body(4u << 20, 0x5A);
  const std::string doc = "{}";
  std::uint64_t id = 0;
  ASSERT_TRUE(wait_until([&] {
    pub.send(topic::rates, rates_header(id++), doc.data(), doc.size());
    return healthy.received > 0 && counters.get(Counter::out_zmq_connects) >= 2;
  }, 10s));
  const std::uint64_t rss_before = own_rss_kib();
  std::uint64_t rss_peak = rss_before, held_peak = 0, sent = 0, last_sent = 0;
  const std::uint64_t healthy_before = healthy.received;
  // 120 histograms of 4 MiB (480 MiB if all were kept), one every 20 ms.
  for (int i = 0; i < 120; ++i) {
    MessageHeader h;
    h.kind = static_cast<std::uint16_t>(MessageKind::histograms);
    h.message_id = static_cast<std::uint64_t>(i);
    const bool ok = pub.send(topic::histograms, h, body.data(), body.size());
    sent += ok;
    if (i >= 90) last_sent += ok;
    held_peak = std::max(held_peak, pub.held_bytes());
    rss_peak = std::max(rss_peak, own_rss_kib());
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_TRUE(wait_until([&] { return healthy.received >= healthy_before + sent; }, 20s))
      << healthy.received - healthy_before << " of " << sent << " received";
  std::fprintf(stderr, "sent %llu of 120, refused %llu, stalled dropped %llu, held peak %llu MiB, "
               "resident %llu -> peak %llu MiB\n",
               static_cast<unsigned long long>(sent),
               static_cast<unsigned long long>(counters.get(Counter::out_zmq_over_budget)),
               static_cast<unsigned long long>(counters.get(Counter::out_zmq_stalled_dropped)),
               static_cast<unsigned long long>(held_peak >> 20),
               static_cast<unsigned long long>(rss_before >> 10),
               static_cast<unsigned long long>(rss_peak >> 10));
  EXPECT_LE(held_peak, z.held_bytes_max);
  // The budget, the messages in flight to the healthy reader and its copies: far below the
  // 480 MiB that keeping every message for the stalled subscriber would take.
  EXPECT_LT(rss_peak, rss_before + 160 * 1024);
  EXPECT_GE(counters.get(Counter::out_zmq_over_budget), 1u);
  EXPECT_GE(counters.get(Counter::out_zmq_stalled_dropped), 1u);
  // Once the stalled subscriber is gone (after a second of not draining), the rest go out:
  // the last 30, 0.6 s of them, all.
  EXPECT_EQ(last_sent, 30u);
  EXPECT_EQ(sent + counters.get(Counter::out_zmq_over_budget), 120u);
}

// The start-up memory check counts what every output may hold: the bodies libzmq keeps for
// subscribers (the budget), the histograms and the sinks' buffers; a budget that does not fit is refused, naming its key.
TEST(MemoryPlan, CountsWhatEveryOutputMayHold) {
  Settings s;
  s.output.histograms.enabled = true;
  s.output.raw.enabled = true;
  s.output.file.enabled = true;
  const MemoryPlan p = memory_plan(s);
  EXPECT_EQ(p.held_bytes, s.output.zmq.held_bytes_max);
  // A recorder's deep queue (send_hwm) costs the plan nothing more: every body outside the
  // arena is under the budget.
  s.output.zmq.send_hwm = 1000000;
  EXPECT_EQ(memory_plan(s).total(), p.total());
  // The histograms' encoded body is the outputs', the backend's set the engine's.
  EXPECT_GE(p.output_bytes, make_histogram_layout(s).bytes + RawSink::kBufferBytes);
  EXPECT_GE(p.engine_bytes, make_histogram_layout(s).bytes);
  EXPECT_EQ(p.total(),
            p.ring_bytes + p.engine_bytes + p.message_bytes + p.held_bytes + p.output_bytes);
  s.output.zmq.held_bytes_max = 1ull << 40;
  const auto problems = check_sizes(s);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].text.rfind("output.zmq.held_bytes_max:", 0), 0u) << problems[0].text;
}

}  // namespace
}  // namespace petdaq::daemon

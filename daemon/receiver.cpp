#include "daemon/receiver.h"

#include <arpa/inet.h>
#include <linux/filter.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <spdlog/spdlog.h>

#include "core/thread_placement.h"
#include "daemon/preflight.h"
#include "daemon/rate_limited_log.h"
#include "daemon/sequence_tracker.h"
#include "daemon/socket_losses.h"
#include "daemon/source_filter.h"
#include "proto/datagram.h"

namespace petdaq::daemon {

namespace asio = boost::asio;
using asio::ip::udp;
using Clock = std::chrono::steady_clock;

namespace {

udp::endpoint to_asio(const UdpEndpoint& e) { return {asio::ip::address_v4(e.address), e.port}; }

void set_int_option(int fd, int level, int name, int value, const char* what) {
  if (setsockopt(fd, level, name, &value, sizeof value) != 0)
    throw std::runtime_error(std::string("setsockopt ") + what + ": " + std::strerror(errno));
}

RateLimitedWarning g_recv_error_warning;
RateLimitedWarning g_ring_full_warning;
RateLimitedWarning g_kernel_drop_warning;
RateLimitedWarning g_foreign_warning;

// Chunks out of the free queue below which a partly filled chunk is sealed on time: the shed
// low mark's share of the ring (DESIGN section 6), and at least one per lane and one more.
std::size_t time_seal_room_of(const InputSettings& in, std::size_t chunks) {
  const auto low = static_cast<std::size_t>(in.shed_low_fraction * static_cast<double>(chunks));
  return std::max<std::size_t>(low, in.receiver_threads + 1);
}

}  // namespace

struct Receiver::Lane {
  struct Socket {
    udp::socket socket;
    std::uint32_t last_overflow = 0;  // SO_RXQ_OVFL is cumulative per socket
    bool behind = false;  // its last full batch left a backlog (note_backlog)
    SocketLosses losses;  // what it lost, and for which boards
    explicit Socket(asio::io_context& io) : socket(io) {}
  };

  Lane(const InputSettings& in, const SourceRule& rule_, std::uint64_t max_span_ticks_,
       HostRing& ring_, Counters& counters_)
      : rule(rule_),
        max_span_ticks(max_span_ticks_),
        ring(ring_),
        counters(counters_),
        filter(in.allowed_sources),
        framing(in.framing),
        flush_after(std::chrono::duration_cast<Clock::duration>(
            std::chrono::duration<double, std::milli>(in.flush_ms))),
        time_seal_room(time_seal_room_of(in, ring_.chunk_count())),
        timer(io),
        token(ring_.make_sealed_token()),
        scratch(std::make_unique<std::uint8_t[]>(kRecvBatch * kDatagramSlotBytes)),
        ring_full_frames(counters_.bdm_count(), 0) {}

  SourceRule rule;
  std::uint64_t max_span_ticks;  // a chunk that spans more is sealed after its batch
  HostRing& ring;
  Counters& counters;
  SourceFilter filter;
  Framing framing;
  Clock::duration flush_after;
  // Sealing by time (flush_after) is for latency. It happens while fewer chunks than this are
  // out of the free queue, or while the worker has nothing sealed to take; otherwise a chunk
  // fills before it goes, so that a stalled worker costs the ring bytes, not chunks.
  std::size_t time_seal_room;
  asio::io_context io;
  asio::steady_timer timer;
  std::vector<std::unique_ptr<Socket>> sockets;
  std::unique_ptr<HostRing::Token> token;
  Chunk* current = nullptr;
  std::unique_ptr<std::uint8_t[]> scratch;  // where datagrams go when no chunk is free
  SequenceTracker sequences;
  CounterDelta delta;
  // Per board, the frames of its datagrams dropped for a full ring, not yet counted.
  std::vector<std::uint64_t> ring_full_frames;
  // The latest frame time (of a frame with a source) of the last datagram this lane put in a
  // chunk that had one.
  std::uint64_t latest = 0;

  std::array<mmsghdr, kRecvBatch> msgs{};
  std::array<iovec, kRecvBatch> iovs{};
  std::array<sockaddr_in, kRecvBatch> sources{};
  // Room for one SO_RXQ_OVFL control message per datagram.
  std::array<std::array<std::uint8_t, CMSG_SPACE(sizeof(std::uint32_t))>, kRecvBatch> controls{};

  void arm(Socket& s) {
    s.socket.async_wait(udp::socket::wait_read, [this, &s](const boost::system::error_code& ec) {
      if (ec) return;
      // Bounded work per wake-up so the other sockets of this lane and the flush timer
      // get their turn.
      for (int round = 0; round < 64; ++round)
        if (drain_once(s) == 0) break;
      publish_counts();
      arm(s);
    });
  }

  void arm_timer() {
    timer.expires_after(std::max(flush_after / 2, Clock::duration(std::chrono::microseconds(200))));
    timer.async_wait([this](const boost::system::error_code& ec) {
      if (ec) return;
      if (current && current->frame_count > 0 && Clock::now() - current->first_rx >= flush_after &&
          may_seal_by_time())
        seal_current();
      arm_timer();
    });
  }

  bool may_seal_by_time() const {
    const std::size_t chunks = ring.chunk_count();
    const std::size_t in_use = chunks - std::min(chunks, ring.free_approx());
    return in_use < time_seal_room || ring.sealed_approx() == 0;
  }

  void seal_current() {
    if (!current) return;
    if (current->frame_count == 0) return;  // keep an empty chunk; nothing to hand on
    ring.seal(current, *token);
    current = nullptr;
  }

  void publish_counts() {
    if (delta[Counter::rx_ring_full])
      g_ring_full_warning.warn_count(delta[Counter::rx_ring_full],
                                     "host ring full, datagrams dropped (the worker is behind)");
    if (delta[Counter::rx_kernel_drops])
      g_kernel_drop_warning.warn_count(delta[Counter::rx_kernel_drops],
                                       "the kernel dropped datagrams (socket receive buffer full); "
                                       "bdm.socket_kernel_drops names the boards of the socket");
    // The losses of some boards, per board (the rates document's bdm object).
    for (std::uint32_t b = 0; b < ring_full_frames.size(); ++b)
      if (ring_full_frames[b]) counters.add_bdm_ring_full(b, std::exchange(ring_full_frames[b], 0));
    for (auto& so : sockets) so->losses.attribute(counters);
    if (delta[Counter::rx_foreign_source])
      g_foreign_warning.warn_count(delta[Counter::rx_foreign_source],
                                   "datagrams from sources outside input.allowed_sources dropped");
    counters.add(delta);
    delta = CounterDelta{};
  }

  // One recvmmsg call; returns the datagrams it got.
  std::size_t drain_once(Socket& s) {
    if (current && (current->capacity_bytes - current->used_bytes < kDatagramSlotBytes ||
                    current->summary.span_ticks() > max_span_ticks))
      seal_current_full();
    if (!current) current = ring.try_acquire();
    std::uint8_t* base;
    std::size_t batch;
    if (current) {
      base = current->h_bytes + current->used_bytes;
      batch = std::min(kRecvBatch,
                       (current->capacity_bytes - current->used_bytes) / kDatagramSlotBytes);
    } else {
      base = scratch.get();
      batch = kRecvBatch;
    }
    for (std::size_t i = 0; i < batch; ++i) {
      iovs[i] = {base + i * kDatagramSlotBytes, kDatagramSlotBytes};
      msghdr& h = msgs[i].msg_hdr;
      h.msg_name = &sources[i];
      h.msg_namelen = sizeof(sockaddr_in);
      h.msg_iov = &iovs[i];
      h.msg_iovlen = 1;
      h.msg_control = controls[i].data();
      h.msg_controllen = controls[i].size();
      h.msg_flags = 0;
      msgs[i].msg_len = 0;
    }
    const int got = recvmmsg(s.socket.native_handle(), msgs.data(), static_cast<unsigned>(batch),
                             // MSG_TRUNC: msg_len is a datagram's real length, also when it
                             // was longer than its slot (rx.bytes counts what was sent).
                             MSG_DONTWAIT | MSG_TRUNC, nullptr);
    if (got <= 0) {
      if (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        g_recv_error_warning.warn("recvmmsg failed: {}", std::strerror(errno));
      return 0;
    }
    const auto now = Clock::now();
    note_backlog(s, static_cast<std::size_t>(got) == batch);
    for (int i = 0; i < got; ++i) take(s, i, base + i * kDatagramSlotBytes, now);
    if (current && s.behind && !current->receiver_behind && current->frame_count > 0) {
      current->receiver_behind = true;
      ++delta[Counter::rx_backlog_chunks];
    }
    if (current && (current->capacity_bytes - current->used_bytes < kDatagramSlotBytes ||
                    current->summary.span_ticks() > max_span_ticks))
      seal_current_full();
    return static_cast<std::size_t>(got);
  }

  // Whether the socket is behind: a batch that did not fill drained it; after a full one,
  // it is behind while the kernel still holds a quarter of its receive buffer for it
  // (SO_MEMINFO). Such a receiver's boards are not lagging: the daemon is (DESIGN
  // section 6, "Overload").
  static void note_backlog(Socket& s, bool full) {
    if (!full) {
      s.behind = false;
      return;
    }
    std::array<std::uint32_t, SK_MEMINFO_VARS> m{};
    socklen_t len = sizeof m;
    if (getsockopt(s.socket.native_handle(), SOL_SOCKET, SO_MEMINFO, m.data(), &len) == 0 &&
        len > SK_MEMINFO_RCVBUF * sizeof(std::uint32_t))
      s.behind = m[SK_MEMINFO_RMEM_ALLOC] >= m[SK_MEMINFO_RCVBUF] / 4;
  }

  void seal_current_full() {
    if (current && current->frame_count == 0) {
      current->reset();
      return;
    }
    seal_current();
  }

  void take(Socket& s, int i, std::uint8_t* payload, Clock::time_point now) {
    const msghdr& h = msgs[i].msg_hdr;
    const std::size_t len = msgs[i].msg_len;
    ++delta[Counter::rx_datagrams];
    delta[Counter::rx_bytes] += len;
    for (cmsghdr* c = CMSG_FIRSTHDR(&h); c; c = CMSG_NXTHDR(const_cast<msghdr*>(&h), c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_RXQ_OVFL) {
        std::uint32_t dropped;
        std::memcpy(&dropped, CMSG_DATA(c), sizeof dropped);
        const std::uint32_t lost = dropped - s.last_overflow;
        delta[Counter::rx_kernel_drops] += lost;
        s.last_overflow = dropped;
        if (lost) {
          s.losses.kernel_drops(lost);
          s.losses.lost(latest);
        }
      }
    }
    const sockaddr_in& from = sources[i];
    if (from.sin_family != AF_INET || !filter.allows(ntohl(from.sin_addr.s_addr))) {
      ++delta[Counter::rx_foreign_source];
      return;
    }
    if (h.msg_flags & MSG_TRUNC) {
      ++delta[Counter::rx_oversize];
      return;
    }
    const DatagramView v = parse_datagram(payload, len, framing);
    switch (v.status) {
      case DatagramStatus::ok: break;
      case DatagramStatus::empty: ++delta[Counter::rx_empty]; break;
      case DatagramStatus::bad_header:
      case DatagramStatus::count_mismatch: ++delta[Counter::rx_bad_header]; return;
    }
    delta[Counter::rx_trailing_bytes] += v.trailing_bytes;
    if (framing == Framing::sequenced) {
      SequenceCounts sc;
      const bool fresh = sequences.observe(v.header.source_id, v.header.sequence, sc);
      delta[Counter::rx_seq_missing] += sc.missing;
      delta[Counter::rx_seq_duplicate] += sc.duplicate;
      delta[Counter::rx_seq_reordered] += sc.reordered;
      delta[Counter::rx_seq_restarts] += sc.restarts;
      delta[Counter::rx_seq_wild] += sc.wild;
      if (!fresh) return;
    }
    if (v.frame_count == 0) return;
    s.losses.saw_board(v.frames[frame_offset::bdm]);
    if (!current) {
      ++delta[Counter::rx_ring_full];
      s.losses.lost(latest);
      for (std::size_t f = 0; f < v.frame_count; ++f) {
        const std::uint8_t b = v.frames[f * kFrameBytes + frame_offset::bdm];
        if (b < ring_full_frames.size()) ++ring_full_frames[b];
      }
      return;
    }
    append(s, v, now);
  }

  // The datagram's frames already sit in the chunk, in its slot: they move down behind the
  // frames before them (the chunk stays one run of frames the backend copies at once), and
  // the chunk's summary takes them in. This is the receivers' per-frame work.
  void append(Socket& s, const DatagramView& v, Clock::time_point now) {
    Chunk& c = *current;
    const auto count = static_cast<std::uint32_t>(v.frame_count);
    // The datagrams lost before this one: from the latest frame before them to this one's
    // earliest (SocketLosses::take_loss).
    if (std::uint64_t from = 0, to = 0; s.losses.take_loss(v.frames, count, rule, from, to))
      c.add_loss(from, to);
    const std::size_t bytes = std::size_t{count} * kFrameBytes;
    std::uint8_t* const dest = c.h_bytes + c.used_bytes;
    if (dest != v.frames) std::memmove(dest, v.frames, bytes);
    if (c.frame_count == 0) c.first_rx = now;
    const std::uint64_t datagram_latest = c.summary.add(reinterpret_cast<const RawFrame*>(dest), count,
                                                        static_cast<std::uint32_t>(c.frame_count), rule);
    c.frame_count += count;
    c.used_bytes += bytes;
    // The last datagram's, not the largest seen: a wild time stamp then misleads the next
    // loss at most, not every loss after it.
    if (datagram_latest != 0) latest = datagram_latest;
    delta[Counter::rx_frames] += count;
  }
};

// The kernel runs this classic BPF program on each datagram's payload; every board's
// datagrams then reach one receiver thread, in order, and the threads share the boards evenly
// whatever the sending sockets' addresses hash to. A datagram too short to hold the byte goes
// to socket 0.
bool spread_by_board(int fd, Framing framing, std::uint32_t sockets) {
  const std::uint32_t at = static_cast<std::uint32_t>(
      (framing == Framing::sequenced ? kSequencedHeaderBytes : 0) + frame_offset::bdm);
  sock_filter code[] = {
      BPF_STMT(BPF_LD | BPF_B | BPF_ABS, at),
      BPF_STMT(BPF_ALU | BPF_MOD | BPF_K, sockets),
      BPF_STMT(BPF_RET | BPF_A, 0),
  };
  sock_fprog prog{static_cast<unsigned short>(std::size(code)), code};
  return setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog, sizeof prog) == 0;
}

Receiver::Receiver(const InputSettings& in, const SourceRule& rule,
                   std::uint64_t max_chunk_span_ticks, HostRing& ring, Counters& counters) {
  if (ring.chunk_bytes() < kDatagramSlotBytes)
    throw std::runtime_error("input.ring_chunk_bytes must hold at least one datagram slot (" +
                             std::to_string(kDatagramSlotBytes) + " bytes)");
  const std::size_t lane_count = in.receiver_threads;
  const std::size_t socket_count = std::max<std::size_t>(lane_count, in.endpoints.size());
  for (std::size_t i = 0; i < lane_count; ++i)
    lanes_.push_back(std::make_unique<Lane>(in, rule, max_chunk_span_ticks, ring, counters));

  std::vector<std::uint16_t> first_port(in.endpoints.size(), 0);
  for (std::size_t i = 0; i < socket_count; ++i) {
    const std::size_t e = i % in.endpoints.size();
    const bool shared = socket_count / in.endpoints.size() + (e < socket_count % in.endpoints.size()) > 1;
    Lane& lane = *lanes_[i % lane_count];
    udp::endpoint ep = to_asio(in.endpoints[e]);
    const std::string ep_text = in.endpoints[e].to_string();
    if (first_port[e] != 0) ep.port(first_port[e]);  // port 0: the siblings share the first's
    // SO_REUSEPORT would let a second daemon join this port and take half the traffic.
    if (first_port[e] == 0)
      if (const auto holder = udp_port_in_use(in.endpoints[e]))
        throw std::runtime_error("cannot bind UDP " + ep_text + ": " + *holder);
    auto s = std::make_unique<Lane::Socket>(lane.io);
    boost::system::error_code ec;
    s->socket.open(ep.protocol(), ec);
    if (ec) throw std::runtime_error("input endpoint " + ep_text + ": " + ec.message());
    const int fd = s->socket.native_handle();
    if (shared) set_int_option(fd, SOL_SOCKET, SO_REUSEPORT, 1, "SO_REUSEPORT");
    set_int_option(fd, SOL_SOCKET, SO_RXQ_OVFL, 1, "SO_RXQ_OVFL");
    const int want = static_cast<int>(std::min<std::uint64_t>(in.receive_buffer_bytes, 1u << 30));
    // SO_RCVBUFFORCE passes net.core.rmem_max when the process may (CAP_NET_ADMIN).
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &want, sizeof want) != 0)
      setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &want, sizeof want);
    int got = 0;
    socklen_t got_len = sizeof got;
    getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &got, &got_len);
    got /= 2;  // the kernel reports twice the payload room (bookkeeping overhead)
    s->socket.bind(ep, ec);
    if (ec)
      throw std::runtime_error("cannot bind UDP " + ep_text + ": " + ec.message());
    s->socket.non_blocking(true);
    const udp::endpoint local = s->socket.local_endpoint();
    if (first_port[e] == 0) {
      first_port[e] = local.port();
      const std::uint32_t group =
          static_cast<std::uint32_t>(socket_count / in.endpoints.size() +
                                     (e < socket_count % in.endpoints.size()));
      if (shared && !spread_by_board(fd, in.framing, group))
        spdlog::warn("UDP {}: cannot spread datagrams by board over the receiver threads ({}); "
                     "the kernel spreads them by sender address",
                     ep_text, std::strerror(errno));
    }
    bound_.push_back({local.address().to_string(), local.port(), static_cast<std::size_t>(got)});
    if (static_cast<std::uint64_t>(got) < in.receive_buffer_bytes)
      spdlog::warn("UDP {}:{}: receive buffer {} bytes, {} asked for: raise net.core.rmem_max "
                   "(see the petdaq sysctl drop-in)",
                   local.address().to_string(), local.port(), got, in.receive_buffer_bytes);
    spdlog::info("UDP {}:{} bound (receiver thread {}, receive buffer {} bytes{})",
                 local.address().to_string(), local.port(), i % lane_count, got,
                 shared ? ", SO_REUSEPORT" : "");
    lane.sockets.push_back(std::move(s));
  }
}

Receiver::~Receiver() { stop(); }

void Receiver::start(const std::vector<int>& cpus) {
  if (running_) return;
  running_ = true;
  for (auto& lane : lanes_) {
    for (auto& s : lane->sockets) lane->arm(*s);
    lane->arm_timer();
    Lane* l = lane.get();
    threads_.emplace_back([l, k = threads_.size(), cpus] {
      name_this_thread("petdaq-rx" + std::to_string(k));
      pin_this_thread(cpus, k);
      l->io.run();
    });
  }
}

void Receiver::stop() {
  if (!running_) return;
  running_ = false;
  for (auto& lane : lanes_) lane->io.stop();
  for (auto& t : threads_) t.join();
  threads_.clear();
  for (auto& lane : lanes_) {
    lane->seal_current();
    if (lane->current) {  // an empty chunk goes straight back
      lane->ring.give_back(lane->current);
      lane->current = nullptr;
    }
    SequenceCounts sc;
    lane->sequences.flush(sc);
    lane->delta[Counter::rx_seq_missing] += sc.missing;
    lane->delta[Counter::rx_seq_wild] += sc.wild;
    lane->publish_counts();
  }
}

}  // namespace petdaq::daemon

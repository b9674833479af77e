// The receiver (daemon/receiver.h) on a real loopback socket, its chunks read straight from
// the ring: framing, bad and foreign datagrams, a full ring, several threads on one port.
#include "daemon/receiver.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "core/chunk_summary.h"
#include "core/counters.h"
#include "core/net_address.h"
#include "core/settings.h"
#include "daemon/host_ring.h"
#include "proto/datagram.h"
#include "tests/support/wait.h"

namespace petdaq::daemon {
namespace {

using namespace std::chrono_literals;

// The receiver on a loopback socket, its chunks read straight from the ring.
class ReceiverTest : public ::testing::Test {
 protected:
  void start(Framing framing, const char* allowed = "127.0.0.1/32", std::uint32_t threads = 1,
             bool run = true) {
    in.endpoints = {{0x7F000001u, 0}};  // 127.0.0.1, any free port
    in.receiver_threads = threads;
    in.framing = framing;
    in.allowed_sources = {parse_ipv4_network(allowed).value()};
    in.receive_buffer_bytes = receive_buffer_bytes;
    in.flush_ms = 1;
    if (!own_ring) {
      in.ring_chunk_bytes = 1 << 16;
      in.ring_chunks = 4;
    }
    ring = std::make_unique<HostRing>(in.ring_chunk_bytes, in.ring_chunks, threads, alloc);
    rx = std::make_unique<Receiver>(in, rule, kNoBound, *ring, counters);
    if (run) rx->start();
    fd = socket(AF_INET, SOCK_DGRAM, 0);
    to.sin_family = AF_INET;
    to.sin_port = htons(rx->bound().at(0).port);
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  }
  void TearDown() override {
    if (rx) rx->stop();
    if (fd >= 0) close(fd);
  }
  void send(const std::vector<std::uint8_t>& d) {
    ASSERT_EQ(sendto(fd, d.data(), d.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to),
              static_cast<ssize_t>(d.size()));
  }
  // Frames of every chunk sealed so far, in order.
  std::vector<RawFrame> frames_until(std::size_t n) {
    std::vector<RawFrame> out;
    const auto until = std::chrono::steady_clock::now() + 5s;
    while (out.size() < n && std::chrono::steady_clock::now() < until) {
      Chunk* c = ring->wait_sealed(10ms);
      if (!c) continue;
      out.insert(out.end(), c->frames(), c->frames() + c->frame_count);
      // The receiver's summary is the one made directly from the chunk's frames.
      ChunkSummary direct;
      direct.add(c->frames(), c->frame_count, 0, rule);
      EXPECT_EQ(c->summary.frames, c->frame_count);
      EXPECT_EQ(c->summary.sourceless, direct.sourceless);
      EXPECT_EQ(c->summary.present_count, direct.present_count);
      for (std::uint32_t i = 0; i < direct.present_count; ++i) {
        const std::uint8_t src = direct.present[i];
        EXPECT_EQ(c->summary.present[i], src);
        EXPECT_EQ(c->summary.sources[src].frames, direct.sources[src].frames);
        EXPECT_EQ(c->summary.sources[src].min_time, direct.sources[src].min_time);
        EXPECT_EQ(c->summary.sources[src].max_time, direct.sources[src].max_time);
        EXPECT_EQ(c->summary.sources[src].first_index, direct.sources[src].first_index);
      }
      ring->release(c);
    }
    return out;
  }
  // A receive buffer small enough to overflow before the receiver starts, a ring with room
  // to spare; the receiver made, not started.
  void make_with_small_buffer(std::uint32_t threads) {
    receive_buffer_bytes = 32 << 10;
    in.ring_chunk_bytes = 1 << 16;
    in.ring_chunks = 64;
    own_ring = true;
    start(Framing::raw, "127.0.0.1/32", threads, false);
  }
  // Releases every chunk sealed so far, keeping the losses they carry (DESIGN section 6,
  // "Losses at a socket") in `losses`.
  void drain_losses() {
    while (Chunk* c = ring->wait_sealed(20ms)) {
      for (std::uint32_t i = 0; i < c->loss_count; ++i) losses.push_back(c->losses[i]);
      ring->release(c);
    }
  }
  std::vector<Chunk::Loss> losses;
  // Waits until the kernel's drops show and a chunk recorded a loss, then stops the receiver
  // and keeps every loss sealed (true: exactly one).
  bool stop_after_the_loss() {
    EXPECT_TRUE(test::wait_until([&] {
      drain_losses();
      return counters.get(Counter::rx_kernel_drops) > 0 && !losses.empty();
    }));
    rx->stop();
    drain_losses();
    return losses.size() == 1;
  }

  static std::vector<std::uint8_t> frames_bytes(std::uint8_t first, std::size_t n) {
    std::vector<std::uint8_t> d(n * kFrameBytes);
    for (std::size_t i = 0; i < d.size(); ++i) d[i] = static_cast<std::uint8_t>(first + i / kFrameBytes);
    return d;
  }

  InputSettings in;
  bool own_ring = false;  // the test set in.ring_chunk_bytes and ring_chunks
  std::size_t receive_buffer_bytes = 1 << 20;
  // No marker check: the test's frames are numbered bytes; those whose BDM byte is below 4
  // have a source.
  SourceRule rule{false, 0xA, 0x5, 4};
  LockedPageAllocator alloc;
  Counters counters{4};
  std::unique_ptr<HostRing> ring;
  std::unique_ptr<Receiver> rx;
  int fd = -1;
  sockaddr_in to{};
};

TEST_F(ReceiverTest, RawFramesArriveInOrderAndBadDatagramsAreCounted) {
  start(Framing::raw);
  send(frames_bytes(1, 3));                       // 3 frames
  send({});                                       // empty
  std::vector<std::uint8_t> ragged = frames_bytes(10, 2);
  ragged.resize(ragged.size() + 5, 0xEE);         // 2 frames + 5 trailing bytes
  send(ragged);
  send(frames_bytes(20, 100));                    // a span of its own (>= 1 KiB)
  const auto frames = frames_until(105);
  ASSERT_EQ(frames.size(), 105u);
  EXPECT_EQ(frames[0].bytes[0], 1);
  EXPECT_EQ(frames[2].bytes[15], 3);
  EXPECT_EQ(frames[3].bytes[0], 10);
  EXPECT_EQ(frames[4].bytes[0], 11);
  EXPECT_EQ(frames[5].bytes[0], 20);
  EXPECT_EQ(frames[104].bytes[0], 119);
  rx->stop();
  EXPECT_EQ(counters.get(Counter::rx_datagrams), 4u);
  EXPECT_EQ(counters.get(Counter::rx_frames), 105u);
  EXPECT_EQ(counters.get(Counter::rx_empty), 1u);
  EXPECT_EQ(counters.get(Counter::rx_trailing_bytes), 5u);
  EXPECT_EQ(counters.get(Counter::rx_bytes), 3u * 16 + 0 + 37 + 1600);
}

TEST_F(ReceiverTest, SequencedHeadersAreCheckedAndDuplicatesDropped) {
  start(Framing::sequenced);
  auto datagram = [](std::uint16_t source, std::uint32_t seq, std::uint8_t first, std::uint32_t n,
                     std::uint32_t claimed) {
    std::vector<std::uint8_t> d(kSequencedHeaderBytes + n * kFrameBytes);
    SequencedHeader h;
    h.source_id = source;
    h.sequence = seq;
    h.frame_count = claimed;
    encode_sequenced_header(h, d.data());
    for (std::size_t i = 0; i < n * kFrameBytes; ++i)
      d[kSequencedHeaderBytes + i] = static_cast<std::uint8_t>(first + i / kFrameBytes);
    return d;
  };
  send(datagram(1, 0, 1, 2, 2));
  send(datagram(1, 0, 1, 2, 2));    // duplicate: dropped
  send(datagram(1, 2, 5, 1, 1));    // sequence 1 missing
  send(datagram(1, 3, 7, 2, 5));    // claims more frames than it holds: refused
  std::vector<std::uint8_t> bad_magic = datagram(2, 0, 9, 1, 1);
  bad_magic[0] ^= 0xFF;
  send(bad_magic);
  send(std::vector<std::uint8_t>(15, 0));  // shorter than a header
  const auto frames = frames_until(3);
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(frames[0].bytes[0], 1);
  EXPECT_EQ(frames[1].bytes[0], 2);
  EXPECT_EQ(frames[2].bytes[0], 5);
  rx->stop();
  EXPECT_EQ(counters.get(Counter::rx_seq_duplicate), 1u);
  EXPECT_EQ(counters.get(Counter::rx_seq_missing), 1u);
  EXPECT_EQ(counters.get(Counter::rx_bad_header), 3u);
  EXPECT_EQ(counters.get(Counter::rx_frames), 3u);
}

TEST_F(ReceiverTest, ForeignSourcesAreDropped) {
  start(Framing::raw, "10.0.0.0/8");
  send(frames_bytes(1, 4));
  EXPECT_TRUE(test::wait_until([&] { return counters.get(Counter::rx_foreign_source) >= 1; }));
  rx->stop();
  EXPECT_EQ(counters.get(Counter::rx_foreign_source), 1u);
  EXPECT_EQ(counters.get(Counter::rx_frames), 0u);
  EXPECT_EQ(ring->try_sealed(), nullptr);
}

TEST_F(ReceiverTest, NoFreeChunkDropsAndCountsWithoutBlocking) {
  start(Framing::raw);
  // Keep every chunk: the worker is "stuck".
  std::vector<Chunk*> held;
  for (int i = 0; i < 40; ++i) send(frames_bytes(0, 500));  // 8000 bytes each, 8 per chunk
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (held.size() < 4 && std::chrono::steady_clock::now() < until)
    if (Chunk* c = ring->wait_sealed(10ms)) held.push_back(c);
  ASSERT_EQ(held.size(), 4u);  // the ring's four chunks, full or flushed
  EXPECT_TRUE(test::wait_until([&] { return counters.get(Counter::rx_datagrams) >= 40; }));
  rx->stop();
  const std::uint64_t in_chunks = counters.get(Counter::rx_frames) / 500;
  EXPECT_EQ(counters.get(Counter::rx_datagrams), 40u);
  EXPECT_EQ(in_chunks + counters.get(Counter::rx_ring_full), 40u);
  EXPECT_GT(counters.get(Counter::rx_ring_full), 0u);
  // Per board, exactly: each dropped datagram held two frames of each of the boards 0-3
  // (its 500 frames' BDM bytes count 0-255 and 0-243).
  for (std::uint32_t b = 0; b < 4; ++b)
    EXPECT_EQ(counters.bdm_ring_full(b), 2 * counters.get(Counter::rx_ring_full)) << "board " << b;
  for (Chunk* c : held) ring->release(c);
}

// The kernel's drops at a socket are counted for the boards whose datagrams that socket
// receives (bdm.socket_kernel_drops), and for no other: two threads share a port and take
// the even and the odd boards (by each datagram's first frame); the odd boards' socket, its
// buffer small, overflows before the receiver starts.
TEST_F(ReceiverTest, KernelDropsAreCountedForTheBoardsOfTheirSocket) {
  make_with_small_buffer(2);
  for (int i = 0; i < 4; ++i) send(frames_bytes(0, 2));  // boards 0, 1: the even socket
  for (int i = 0; i < 4; ++i) send(frames_bytes(2, 2));  // boards 2, 3: the even socket
  for (int i = 0; i < 400; ++i) send(frames_bytes(1, 64));  // the odd socket overflows
  rx->start();
  EXPECT_TRUE(test::wait_until([&] {
    drain_losses();
    return counters.get(Counter::rx_datagrams) > 8;
  }));
  drain_losses();
  EXPECT_TRUE(losses.empty()) << "the datagrams queued before the drops carry none";
  // The drops show on the first datagram queued after them, whose chunk records the loss: up
  // to that datagram's earliest frame with a source. A frame without one (BDM 201) has no
  // time to trust: here time 0, after board 3's frame.
  const std::vector<std::uint8_t> board3 = frames_bytes(3, 1);
  std::vector<std::uint8_t> mixed = board3;
  mixed.resize(2 * kFrameBytes, 0);
  mixed[kFrameBytes + frame_offset::bdm] = 201;
  send(mixed);
  for (int i = 0; i < 3; ++i) send(board3);
  ASSERT_TRUE(stop_after_the_loss()) << losses.size() << " losses";
  const RawFrame after = [] {
    RawFrame f;
    std::memset(f.bytes, 3, kFrameBytes);
    return f;
  }();
  EXPECT_EQ(losses[0].to, frame_time(after.bytes)) << "not the time of a frame without a source";
  EXPECT_GT(losses[0].from, 0u) << "the odd socket's lane had taken frames before";
  const std::uint64_t drops = counters.get(Counter::rx_kernel_drops);
  ASSERT_GT(drops, 0u);
  EXPECT_EQ(counters.bdm_socket_kernel_drops(1), drops);
  EXPECT_EQ(counters.bdm_socket_kernel_drops(3), drops);
  EXPECT_EQ(counters.bdm_socket_kernel_drops(0), 0u);
  EXPECT_EQ(counters.bdm_socket_kernel_drops(2), 0u);
  for (std::uint32_t b = 0; b < 4; ++b) EXPECT_EQ(counters.bdm_ring_full(b), 0u);
}

// The loss's beginning is the latest time of the last datagram taken before it, not the
// largest time the receiver ever took: a wild time stamp earlier on (here far in the future)
// does not hide where a later loss begins; and its end is the earliest time of the first
// datagram after it with a frame that has a source (DESIGN section 6, "Losses at a socket").
TEST_F(ReceiverTest, AWildTimeStampEarlierDoesNotSetWhereALaterLossBegins) {
  make_with_small_buffer(1);
  std::vector<std::uint8_t> wild = frames_bytes(1, 1);  // board 1
  std::memset(wild.data() + frame_offset::time, 0xEE, 8);
  send(wild);
  for (int i = 0; i < 400; ++i) send(frames_bytes(0, 3));  // boards 0-2: the socket overflows
  rx->start();
  EXPECT_TRUE(test::wait_until([&] {
    drain_losses();
    return counters.get(Counter::rx_datagrams) > 2;
  }));
  drain_losses();
  ASSERT_TRUE(losses.empty());
  // After the drops: a datagram of frames without a source (no time to trust) leaves the loss
  // to the next datagram that has one.
  std::vector<std::uint8_t> sourceless(kFrameBytes, 0);
  sourceless[frame_offset::bdm] = 201;
  send(sourceless);
  send(frames_bytes(3, 1));
  ASSERT_TRUE(stop_after_the_loss()) << losses.size() << " losses";
  const std::vector<std::uint8_t> kept = frames_bytes(0, 3), after = frames_bytes(3, 1);
  const std::uint64_t before = frame_time(kept.data() + 2 * kFrameBytes);  // board 2, the latest
  EXPECT_EQ(losses[0].from, before) << "not the wild time " << frame_time(wild.data());
  EXPECT_EQ(losses[0].to, frame_time(after.data()));
}

// A socket the receiver finds with a backlog (a quarter of its receive buffer still queued
// after a full batch) makes it behind: the chunks it fills are flagged and counted
// (rx.backlog_chunks), so that its boards are not taken for lagging ones (DESIGN section 6).
// Datagrams that come one at a time, read as they come, flag nothing.
TEST_F(ReceiverTest, ABacklogInTheSocketFlagsTheChunksAsBehind) {
  in.ring_chunk_bytes = 1 << 16;  // about 60 of these datagrams a chunk, batches of 7
  in.ring_chunks = 16;
  own_ring = true;
  start(Framing::raw, "127.0.0.1/32", 1, false);
  constexpr int kQueued = 600;  // 1 KiB each: far more than a quarter of the buffer
  for (int i = 0; i < kQueued; ++i) send(frames_bytes(0, 64));
  rx->start();
  std::size_t flagged = 0, chunks = 0, frames = 0;
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (frames < kQueued * 64u && std::chrono::steady_clock::now() < until) {
    Chunk* c = ring->wait_sealed(10ms);
    if (!c) continue;
    ++chunks;
    flagged += c->receiver_behind;
    frames += c->frame_count;
    ring->release(c);
  }
  ASSERT_EQ(frames, kQueued * 64u) << "the kernel kept them all (rx.kernel_drops "
                                   << counters.get(Counter::rx_kernel_drops) << ")";
  EXPECT_GE(flagged, 1u);
  EXPECT_LT(flagged, chunks) << "the last chunks come from a drained socket";
  EXPECT_TRUE(test::wait_until([&] { return counters.get(Counter::rx_backlog_chunks) == flagged; }))
      << counters.get(Counter::rx_backlog_chunks) << " counted, " << flagged << " flagged";
  // One at a time, each read before the next is sent: no backlog.
  for (int i = 0; i < 20; ++i) {
    send(frames_bytes(0, 64));
    Chunk* c = nullptr;
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (!c && std::chrono::steady_clock::now() < deadline) c = ring->wait_sealed(10ms);
    ASSERT_NE(c, nullptr);
    EXPECT_FALSE(c->receiver_behind);
    ring->release(c);
  }
  EXPECT_EQ(counters.get(Counter::rx_backlog_chunks), flagged);
}

TEST_F(ReceiverTest, SeveralThreadsShareAPortWithReusePort) {
  start(Framing::raw, "127.0.0.1/32", 2);
  ASSERT_EQ(rx->bound().size(), 2u);
  EXPECT_EQ(rx->bound()[0].port, rx->bound()[1].port);
  // Many senders (source ports), so the kernel spreads them over both sockets.
  std::vector<int> senders;
  for (int s = 0; s < 16; ++s) senders.push_back(socket(AF_INET, SOCK_DGRAM, 0));
  for (int round = 0; round < 10; ++round)
    for (int s : senders) {
      const auto d = frames_bytes(static_cast<std::uint8_t>(round), 3);
      ASSERT_EQ(sendto(s, d.data(), d.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to),
                static_cast<ssize_t>(d.size()));
    }
  const auto frames = frames_until(16 * 10 * 3);
  EXPECT_EQ(frames.size(), 480u);
  rx->stop();
  EXPECT_EQ(counters.get(Counter::rx_datagrams), 160u);
  EXPECT_EQ(counters.get(Counter::rx_frames), 480u);
  for (int s : senders) close(s);
}

TEST_F(ReceiverTest, ThreadsSharingAPortTakeTheBoardsBetweenThem) {
  start(Framing::raw, "127.0.0.1/32", 2);
  // One sending socket: hashing by address would give every datagram to one thread. By
  // board, datagrams whose first frame has an even BDM go to one, odd to the other.
  for (int round = 0; round < 40; ++round) send(frames_bytes(static_cast<std::uint8_t>(round % 4), 3));
  std::size_t frames = 0;
  std::array<std::size_t, 2> chunks_of_parity{};
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (frames < 120 && std::chrono::steady_clock::now() < until) {
    Chunk* c = ring->wait_sealed(10ms);
    if (!c) continue;
    ASSERT_EQ(c->frame_count % 3, 0u);
    const int parity = c->frames()[0].bytes[frame_offset::bdm] % 2;
    for (std::size_t d = 0; d < c->frame_count; d += 3)
      EXPECT_EQ(c->frames()[d].bytes[frame_offset::bdm] % 2, parity)
          << "a chunk holds datagrams of both threads' boards";
    ++chunks_of_parity[static_cast<std::size_t>(parity)];
    frames += c->frame_count;
    ring->release(c);
  }
  EXPECT_EQ(frames, 120u);
  EXPECT_GT(chunks_of_parity[0], 0u);
  EXPECT_GT(chunks_of_parity[1], 0u);
}

TEST_F(ReceiverTest, OversizeDatagramsAreRefusedWhole) {
  start(Framing::raw);
  send(frames_bytes(0, (kDatagramSlotBytes + 64) / kFrameBytes));
  send(frames_bytes(1, 2));
  const auto frames = frames_until(2);
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0].bytes[0], 1);
  rx->stop();
  EXPECT_EQ(counters.get(Counter::rx_oversize), 1u);
  // rx.bytes counts what was sent, the oversize datagram's real length included.
  const std::size_t oversize = (kDatagramSlotBytes + 64) / kFrameBytes * kFrameBytes;
  EXPECT_EQ(counters.get(Counter::rx_bytes), oversize + 2 * kFrameBytes);
}

}  // namespace
}  // namespace petdaq::daemon

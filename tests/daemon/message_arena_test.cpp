// The message arena (core/message_arena.h) and the publisher's bodies sent from it.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "core/counters.h"
#include "core/message_arena.h"
#include "core/settings.h"
#include "daemon/host_ring.h"
#include "daemon/publisher.h"
#include "proto/topics.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/wait.h"

using namespace petdaq;
using namespace petdaq::daemon;

namespace {

class PlainAllocator final : public HostAllocator {
 public:
  void* allocate(std::size_t bytes) override {
    ++allocations;
    return ::operator new(bytes);
  }
  void deallocate(void* p, std::size_t) noexcept override { ::operator delete(p); }
  const char* kind() const override { return "plain"; }
  int allocations = 0;
};

std::uint8_t* at(void* p) { return static_cast<std::uint8_t*>(p); }

}  // namespace

TEST(MessageArena, PiecesComeBackInOrderAndNeverCrossTheEnd) {
  PlainAllocator alloc;
  MessageArena arena(1024, alloc);
  ASSERT_EQ(arena.capacity(), 1024u);
  void* a = arena.lend(300);  // 320 bytes
  void* b = arena.lend(300);  // 320
  void* c = arena.lend(300);  // 320: 960 used
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(at(b) - at(a), 320);
  EXPECT_EQ(at(c) - at(b), 320);
  EXPECT_EQ(arena.lend(100), nullptr) << "only 64 bytes are left";
  EXPECT_EQ(arena.lend(64), at(c) + 320) << "64 bytes fit exactly";
  EXPECT_EQ(arena.pieces_in_use(), 4u);
  // A later piece let go of first frees nothing: the ring reclaims in order.
  arena.let_go(b);
  EXPECT_EQ(arena.lend(1), nullptr);
  EXPECT_EQ(arena.pieces_in_use(), 4u);
  // Two holders: the piece stays until both let go.
  arena.hold(a);
  arena.let_go(a);
  EXPECT_EQ(arena.lend(1), nullptr);
  arena.let_go(a);
  // a and b are back (640 bytes at the start), but the next piece may not wrap: 200 bytes
  // after c's end do not fit before the end, so the piece starts at the beginning.
  void* d = arena.lend(600);
  EXPECT_EQ(d, a) << "a piece that would cross the end starts at the next turn";
  EXPECT_EQ(arena.lend(64), nullptr);
  EXPECT_THROW(arena.let_go(b), std::logic_error) << "b was reclaimed: not a piece in use";
  EXPECT_FALSE(arena.owns(&alloc));
  EXPECT_TRUE(arena.owns(at(a) + 1023));
  EXPECT_FALSE(arena.owns(at(a) + 1024));
  EXPECT_EQ(arena.lend(2000), nullptr) << "larger than the arena";
  EXPECT_EQ(alloc.allocations, 1);
}

TEST(MessageArena, LetGoFromAnotherThreadIsSeen) {
  PlainAllocator alloc;
  MessageArena arena(64 * 100, alloc);
  std::vector<void*> pieces;
  for (int i = 0; i < 100; ++i) pieces.push_back(arena.lend(64));
  ASSERT_EQ(arena.lend(64), nullptr);
  std::vector<void*> hints;
  for (void* p : pieces) {
    hints.push_back(arena.hold(p));
    arena.let_go(p);
  }
  std::thread other([&] {
    for (std::size_t i = 0; i < pieces.size(); ++i) MessageArena::let_go_message(pieces[i], hints[i]);
  });
  other.join();
  EXPECT_EQ(arena.pieces_in_use(), 0u);
  EXPECT_NE(arena.lend(64 * 100), nullptr);
}

TEST(MessageArena, TooManyPiecesIsNoRoom) {
  PlainAllocator alloc;
  MessageArena arena(64 * (MessageArena::kMaxPieces + 8), alloc);
  for (std::size_t i = 0; i < MessageArena::kMaxPieces; ++i) ASSERT_NE(arena.lend(1), nullptr);
  EXPECT_EQ(arena.lend(1), nullptr);
}

namespace {

// A subscriber to one topic of a publisher on an ipc endpoint.
struct Rig {
  test::ScratchDir dir;
  Counters counters{4};
  PlainAllocator alloc;
  MessageArena arena;
  ZmqSettings zmq;
  std::unique_ptr<Publisher> pub;
  zmq::context_t ctx{1};
  zmq::socket_t sub{ctx, zmq::socket_type::sub};

  explicit Rig(std::size_t arena_bytes) : arena(arena_bytes, alloc) {
    zmq.endpoint = dir.ipc("pub.sock");
    pub = std::make_unique<Publisher>(zmq, counters, &arena);
    sub.set(zmq::sockopt::rcvtimeo, 100);
    sub.connect(zmq.endpoint);
    sub.set(zmq::sockopt::subscribe, std::string(topic::prompts));
  }
  ~Rig() {
    sub.close();
    pub.reset();
  }

  // Sends `body` until the subscription is in (the publisher applies subscriptions when it
  // sends) and returns the first body received.
  std::vector<std::uint8_t> round_trip(const void* body, std::size_t bytes) {
    std::vector<std::uint8_t> got;
    MessageHeader h{};
    const bool ok = test::wait_until([&] {
      pub->send(topic::prompts, h, body, bytes);
      zmq::message_t m;
      while (sub.recv(m, zmq::recv_flags::none)) {
        if (m.more()) continue;  // topic, header
        got.assign(m.data<std::uint8_t>(), m.data<std::uint8_t>() + m.size());
        return true;
      }
      return false;
    });
    EXPECT_TRUE(ok) << "nothing received";
    return got;
  }
};

std::vector<std::uint8_t> pattern(std::size_t n, std::uint8_t seed) {
  std::vector<std::uint8_t> v(n);
  std::iota(v.begin(), v.end(), seed);
  return v;
}

}  // namespace

TEST(MessageArena, BodiesGoOutIntactFromTheArenaByCopyIntoItAndByLibzmqsCopy) {
  Rig rig(1 << 20);
  // A body that lies in a lent piece (what a backend wrote there) goes out as it is; the
  // piece is back once the slice and libzmq let go of it.
  const auto lent_bytes = pattern(100000, 7);
  void* lent = rig.arena.lend(lent_bytes.size());
  ASSERT_NE(lent, nullptr);
  std::memcpy(lent, lent_bytes.data(), lent_bytes.size());
  EXPECT_EQ(rig.round_trip(lent, lent_bytes.size()), lent_bytes);
  rig.arena.let_go(lent);
  // Any other body is copied into a piece.
  const auto other = pattern(5000, 99);
  EXPECT_EQ(rig.round_trip(other.data(), other.size()), other);
  EXPECT_EQ(rig.counters.get(Counter::out_message_copies), 0u);
  // Larger than the arena: libzmq copies it, and that is counted.
  const auto large = pattern(2 << 20, 3);
  EXPECT_EQ(rig.round_trip(large.data(), large.size()), large);
  EXPECT_GE(rig.counters.get(Counter::out_message_copies), 1u);
  // Everything written or dropped: every piece comes back.
  EXPECT_TRUE(test::wait_until([&] { return rig.arena.pieces_in_use() == 0; }))
      << rig.arena.pieces_in_use() << " pieces still held";
}

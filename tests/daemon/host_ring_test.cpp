// The host ring (daemon/host_ring.h): chunks circulate between receiver and worker, run out,
// and report the interval's high-water mark.
#include "daemon/host_ring.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <vector>

namespace petdaq::daemon {
namespace {

TEST(HostRing, ChunksCirculateAndRunOut) {
  LockedPageAllocator alloc;
  HostRing ring(1 << 16, 3, 1, alloc);
  auto token = ring.make_sealed_token();
  EXPECT_EQ(ring.take_used_high(), 0u);
  Chunk* a = ring.try_acquire();
  Chunk* b = ring.try_acquire();
  EXPECT_EQ(ring.take_used_high(), 2u);
  Chunk* c = ring.try_acquire();
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(ring.try_acquire(), nullptr);  // all taken: the receiver would drop
  a->frame_count = 1;
  ring.seal(a, *token);
  EXPECT_EQ(ring.try_sealed(), a);
  EXPECT_EQ(ring.try_sealed(), nullptr);
  ring.release(a);
  EXPECT_EQ(a->frame_count, 0u);
  // The high-water mark of the interval: the full ring, though one chunk is free again.
  EXPECT_EQ(ring.take_used_high(), 3u);
  EXPECT_EQ(ring.take_used_high(), 2u);  // a new interval starts at what is in use now
  EXPECT_EQ(ring.try_acquire(), a);
  EXPECT_EQ(a->summary.frames, 0u);
}

// Four receivers seal in turn while the worker is behind: the worker takes the chunks in the
// order they were sealed, whichever receiver sealed them, so that no receiver's boards wait
// behind the others' (a queue that picked among its first producers left the fourth
// receiver's chunks for last, its boards a backlog behind the others in data time).
TEST(HostRing, TheWorkerTakesChunksInTheOrderTheyWereSealed) {
  LockedPageAllocator alloc;
  constexpr int kReceivers = 4, kEach = 8;
  HostRing ring(1 << 16, kReceivers * kEach, kReceivers, alloc);
  std::vector<std::unique_ptr<HostRing::Token>> tokens;
  for (int r = 0; r < kReceivers; ++r) tokens.push_back(ring.make_sealed_token());
  std::vector<Chunk*> sealed;
  for (int i = 0; i < kEach; ++i)
    for (int r = 0; r < kReceivers; ++r) {
      Chunk* c = ring.try_acquire();
      ASSERT_NE(c, nullptr);
      c->frame_count = static_cast<std::uint64_t>(r + 1);
      ring.seal(c, *tokens[static_cast<std::size_t>(r)]);
      sealed.push_back(c);
    }
  EXPECT_EQ(ring.sealed_approx(), sealed.size());
  for (std::size_t k = 0; k < sealed.size(); ++k) {
    Chunk* c = k % 2 ? ring.try_sealed() : ring.wait_sealed(std::chrono::milliseconds(100));
    ASSERT_EQ(c, sealed[k]) << "take " << k << " came from receiver " << (c ? c->frame_count : 0);
  }
  EXPECT_EQ(ring.try_sealed(), nullptr);
  EXPECT_EQ(ring.wait_sealed(std::chrono::milliseconds(1)), nullptr);
  EXPECT_EQ(ring.sealed_approx(), 0u);
  // One lane per receiver and one spare: a sixth sealing thread is a caller's bug.
  (void)ring.make_sealed_token();
  EXPECT_THROW((void)ring.make_sealed_token(), std::logic_error);
}

}  // namespace
}  // namespace petdaq::daemon

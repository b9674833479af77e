// The host ring (daemon/host_ring.h): chunks circulate between receiver and worker, run out,
// and report the interval's high-water mark.
#include "daemon/host_ring.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace petdaq::daemon

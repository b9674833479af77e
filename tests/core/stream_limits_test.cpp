// The stream's limits written once (core/stream_limits.h): saturating arithmetic, the
// time-jump window, the new frames of a slice, the staged-frame limit, the carry overflow.
#include "core/stream_limits.h"

#include <gtest/gtest.h>

#include <limits>

namespace petdaq {
namespace {

constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();

TEST(StreamLimits, SaturatingArithmetic) {
  EXPECT_EQ(sat_add(2, 3), 5u);
  EXPECT_EQ(sat_add(kMax - 1, 1), kMax);
  EXPECT_EQ(sat_add(kMax - 1, 5), kMax);
  EXPECT_EQ(sat_sub(5, 3), 2u);
  EXPECT_EQ(sat_sub(3, 5), 0u);
}

TEST(StreamLimits, TimeJumpWindowAroundTheHorizon) {
  EXPECT_FALSE(is_time_jump(1100, 1000, 100));
  EXPECT_TRUE(is_time_jump(1101, 1000, 100));
  EXPECT_FALSE(is_far_back(900, 1000, 100));
  EXPECT_TRUE(is_far_back(899, 1000, 100));
  EXPECT_FALSE(is_far_back(0, 50, 100)) << "nothing is far back of a horizon within max_future of 0";
  // A horizon near the top of the range: the limit saturates instead of wrapping round to a
  // small number that would make every frame a time jump.
  EXPECT_EQ(time_jump_limit(kMax - 10, 100), kMax);
  EXPECT_FALSE(is_time_jump(kMax, kMax - 10, 100));
  EXPECT_EQ(far_back_limit(50, 100), 0u);
}

TEST(StreamLimits, SliceAndStageSizes) {
  EXPECT_EQ(slice_new_frames(4u << 20), 2u << 20);
  EXPECT_EQ(slice_new_frames(7), 3u);
  EXPECT_EQ(staged_frames_limit(16, 4), 16u);
  EXPECT_EQ(staged_frames_limit(4, 16), 16u) << "never less than one slice";
}

TEST(StreamLimits, RecordCapacity) {
  EXPECT_EQ(slice_record_capacity(1000, 2), 2000u);
  EXPECT_EQ(slice_record_capacity(1000, 0), 1000u) << "at least one record per single";
}

TEST(StreamLimits, CarryOverflow) {
  EXPECT_FALSE(carry_overflows(100, 90, 10));
  EXPECT_TRUE(carry_overflows(100, 89, 10));
  EXPECT_FALSE(carry_overflows(100, kMax, 0)) << "nothing carried";
  EXPECT_FALSE(carry_overflows(100, 200, 0)) << "a carry start past the end carries nothing";
  EXPECT_TRUE(carry_overflows(100, 0, 99));
}

}  // namespace
}  // namespace petdaq

#include "proto/signed_tof.h"

#include <gtest/gtest.h>

namespace petdaq {
namespace {

CoincRecord record(std::uint64_t time_a, std::int32_t dt, std::uint32_t crystal_a,
                   std::uint32_t crystal_b) {
  return CoincRecord{time_a, dt, crystal_a, crystal_b, 511.0f, 511.0f, 0};
}

TEST(SignedTof, LowerCrystalFirstGivesNegativeDelta) {
  // Crystal 3 fired at 100, crystal 9 at 140: t(3) - t(9) = -40.
  const CoincRecord r = record(100, 40, 3, 9);
  EXPECT_EQ(signed_dt_ticks(r), -40);
  EXPECT_EQ(tof_lower_crystal(r), 3u);
  EXPECT_EQ(tof_higher_crystal(r), 9u);
}

TEST(SignedTof, HigherCrystalFirstGivesPositiveDelta) {
  // Crystal 9 fired at 100, crystal 3 at 140: t(3) - t(9) = +40.
  const CoincRecord r = record(100, 40, 9, 3);
  EXPECT_EQ(signed_dt_ticks(r), 40);
  EXPECT_EQ(tof_lower_crystal(r), 3u);
  EXPECT_EQ(tof_higher_crystal(r), 9u);
}

TEST(SignedTof, SwappingTheEndsFlipsTheSign) {
  for (std::int32_t dt : {0, 1, 17, 2'000'000'000}) {
    const CoincRecord ab = record(5, dt, 1000, 20000);
    const CoincRecord ba = record(5, dt, 20000, 1000);
    EXPECT_EQ(signed_dt_ticks(ab), -signed_dt_ticks(ba)) << dt;
  }
}

TEST(SignedTof, EqualCrystalsKeepTheRecordOrder) {
  EXPECT_EQ(signed_dt_ticks(record(0, 25, 7, 7)), -25);
}

}  // namespace
}  // namespace petdaq

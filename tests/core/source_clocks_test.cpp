// SourceClocks (core/source_clocks.h): the horizon the sources allow, idle and pause, lagging
// sources, and the clock-reset evidence.
#include "core/source_clocks.h"

#include <gtest/gtest.h>

#include <array>
#include <chrono>

namespace petdaq {
namespace {

using Clock = SourceClocks::Clock;
using std::chrono::milliseconds;

const Clock::time_point t0{};

TEST(SourceClocks, HorizonIsTheSlowestLiveSourceLessTheDisorder) {
  SourceClocks c(4);
  EXPECT_EQ(c.horizon(100), 0u) << "no source has sent";
  c.took(0, 5000, t0);
  c.took(2, 1000, t0);
  EXPECT_EQ(c.horizon(100), 900u);
  EXPECT_EQ(c.horizon(2000), 0u) << "saturates at 0";
  EXPECT_EQ(c.latest_time(), 5000u);
  c[2].lagging = true;
  EXPECT_EQ(c.horizon(100), 4900u) << "a lagging source does not hold the horizon";
  c[0].idle = true;
  EXPECT_EQ(c.horizon(100), 5001u) << "nothing holds it: everything received is complete";
}

TEST(SourceClocks, SkippingDeadTimeMovesOnlySendingOnTimeSources) {
  SourceClocks c(5);
  c.took(0, 1000, t0);
  c.took(1, 1000, t0);
  c.took(2, 1000, t0);
  c.took(3, 1000, t0);
  c[2].lagging = true;
  c[3].reset = true;
  // Source 4 has not sent; source 1 dropped nothing; source 0's drop ends before its clock.
  const std::array<std::uint64_t, 5> reached = {900, 0, 3000, 3000, 3000};
  c.skip_dead(reached);
  EXPECT_EQ(c[0].latest, 1000u) << "a clock never goes back";
  EXPECT_EQ(c[1].latest, 1000u);
  EXPECT_EQ(c[2].latest, 1000u) << "a lagging source keeps its clock";
  EXPECT_EQ(c[3].latest, 1000u) << "a reset source keeps its clock";
  EXPECT_EQ(c[4].latest, 0u) << "a source that has not sent keeps no clock";
  const std::array<std::uint64_t, 2> more = {2501, 2001};
  c.skip_dead(more);
  EXPECT_EQ(c[0].latest, 2500u) << "one past the latest dropped";
  EXPECT_EQ(c[1].latest, 2000u);
}

TEST(SourceClocks, TookKeepsTheLatestTimeAndWakesTheSource) {
  SourceClocks c(2);
  c.took(1, 700, t0);
  c[1].idle = true;
  c[1].ahead_streak = 3;
  c.took(1, 500, t0 + milliseconds(1));
  EXPECT_EQ(c[1].latest, 700u);
  EXPECT_FALSE(c[1].idle);
  EXPECT_EQ(c[1].ahead_streak, 0u);
  EXPECT_EQ(c[1].last_seen, t0 + milliseconds(1));
  EXPECT_FALSE(c[0].sent);
}

TEST(SourceClocks, IdleSourcesAndTheEndOfAPause) {
  SourceClocks c(3);
  c.seen_all(t0);
  c.took(0, 100, t0);
  c.took(1, 200, t0 + milliseconds(5));
  EXPECT_EQ(c.mark_idle(t0 + milliseconds(8), milliseconds(5)), 1u) << "only source 0 is silent";
  EXPECT_TRUE(c[0].idle);
  EXPECT_EQ(c.mark_idle(t0 + milliseconds(8), milliseconds(5)), 0u) << "one episode, counted once";
  EXPECT_EQ(c.mark_idle(t0 + milliseconds(20), milliseconds(5)), 1u);
  // Every source that sent is idle: the first one back wakes the other.
  EXPECT_TRUE(c.saw(1, t0 + milliseconds(30), milliseconds(5))) << "back from idle";
  EXPECT_FALSE(c[1].idle);
  EXPECT_FALSE(c[0].idle);
  EXPECT_TRUE(c[0].woken);
  EXPECT_EQ(c[0].last_seen, t0 + milliseconds(30));
  EXPECT_FALSE(c[2].woken) << "a source that never sent is not woken";
  EXPECT_EQ(c.horizon(0), 100u) << "the woken source holds the horizon at its latest time";
  EXPECT_TRUE(c.saw(0, t0 + milliseconds(31), milliseconds(5))) << "woken counts as back from idle";
  EXPECT_FALSE(c[0].woken);
  EXPECT_FALSE(c.saw(0, t0 + milliseconds(32), milliseconds(5)));
  EXPECT_TRUE(c.saw(0, t0 + milliseconds(40), milliseconds(5))) << "silent by the clock now";
}

TEST(SourceClocks, NoPauseWhileASourceStillSends) {
  SourceClocks c(2);
  c.seen_all(t0);
  c.took(0, 100, t0);
  c.took(1, 100, t0 + milliseconds(10));
  EXPECT_EQ(c.mark_idle(t0 + milliseconds(12), milliseconds(5)), 1u);
  c.saw(1, t0 + milliseconds(13), milliseconds(5));
  EXPECT_TRUE(c[0].idle) << "no pause: the idle source is not woken";
  EXPECT_FALSE(c[0].woken);
}

// Sources 0-2 near 10 000, source 3 at 1 000.
SourceClocks three_leaders_and_one_behind() {
  SourceClocks c(4);
  c.took(0, 10'000, t0);
  c.took(1, 10'000, t0);
  c.took(2, 10'200, t0);
  c.took(3, 1'000, t0);
  return c;
}

TEST(SourceClocks, LaggingByTimeAndRejoining) {
  SourceClocks c = three_leaders_and_one_behind();
  EXPECT_EQ(c.leaders_time(), 10'000u) << "upper median of 1000, 10000, 10000, 10200";
  EXPECT_EQ(c.update_lag(0, 0, 0), 0u) << "max_lag 0: off";
  EXPECT_EQ(c.update_lag(5'000, 0, 0), 1u);
  EXPECT_TRUE(c[3].lagging);
  EXPECT_TRUE(c.any_lagging());
  EXPECT_EQ(c[3].lag_rejoin, 2'500u);
  EXPECT_EQ(c.update_lag(5'000, 0, 0), 0u) << "declared once";
  c[3].latest = 8'000;  // within half of max_lag, but 1000 behind the horizon
  EXPECT_EQ(c.update_lag(5'000, 9'000, 999), 0u);
  EXPECT_TRUE(c[3].lagging) << "further behind the horizon than the slack";
  c.update_lag(5'000, 9'000, 1'000);
  EXPECT_FALSE(c[3].lagging) << "behind the horizon by no more than the slack";
  c[3].lagging = true;
  c.update_lag(5'000, 7'000, 0);
  EXPECT_FALSE(c[3].lagging) << "at or after the horizon";
  EXPECT_FALSE(c.any_lagging());
}

TEST(SourceClocks, HoldingBackAndTheRoomRule) {
  SourceClocks c(3);
  c.took(0, 1'000, t0);
  c.took(1, 1'400, t0);
  c.took(2, 5'000, t0);
  EXPECT_EQ(c.holding_back(3'999), 0);
  EXPECT_EQ(c.holding_back(4'000), -1) << "ahead by no more than the margin";
  c.declare_lagging(0);
  EXPECT_TRUE(c[0].lagging);
  EXPECT_EQ(c[0].lag_rejoin, 200u) << "half its distance to the leaders (1400)";
  EXPECT_EQ(c.holding_back(100), 1) << "the next one holds it now";
}

// A source whose receiver is behind (the daemon's lateness, not the board's) is never
// declared lagging, by time or by room, and is named as holding the horizon; on time again,
// the rules apply to it as before.
TEST(SourceClocks, AReceiverBehindIsNotABoardLagging) {
  SourceClocks c = three_leaders_and_one_behind();
  c[3].receiver_behind = true;
  EXPECT_TRUE(c.held_by_receiver_behind());
  EXPECT_EQ(c.update_lag(5'000, 0, 0), 0u);
  EXPECT_FALSE(c[3].lagging) << "9000 behind the leaders, but its receiver is";
  EXPECT_EQ(c.holding_back(100), -1) << "the room rule does not name it either";
  EXPECT_EQ(c.horizon(100), 900u) << "it holds the horizon";
  c[3].receiver_behind = false;
  EXPECT_FALSE(c.held_by_receiver_behind());
  EXPECT_EQ(c.holding_back(100), 3);
  EXPECT_EQ(c.update_lag(5'000, 0, 0), 1u);
  EXPECT_TRUE(c[3].lagging);
  c.took(1, 10'100, t0);
  c[1].receiver_behind = true;
  EXPECT_FALSE(c.held_by_receiver_behind()) << "source 0 (10000) holds the horizon, not 1";
}

TEST(SourceClocks, ResetNeedsEveryLiveSourceEnoughFramesAndTime) {
  SourceClocks c(2);
  const auto confirm = milliseconds(20);
  const auto silent = milliseconds(1000);
  c.seen_all(t0);
  c.took(0, 100, t0);
  c.took(1, 100, t0);
  EXPECT_FALSE(c.any_reset());
  c.mark_reset(0, t0 + milliseconds(1));
  c[0].held = SourceClocks::kResetConfirmFrames;
  EXPECT_TRUE(c.any_reset());
  const auto later = t0 + milliseconds(50);
  EXPECT_FALSE(c.reset_due(false, 4, later, confirm, silent)) << "source 1 goes on";
  c.mark_reset(1, t0 + milliseconds(40));
  c[1].held = SourceClocks::kResetConfirmFrames;
  EXPECT_FALSE(c.reset_due(false, 8, later, confirm, silent)) << "source 1 reset 10 ms ago";
  EXPECT_TRUE(c.reset_due(false, 8, t0 + milliseconds(60), confirm, silent));
  EXPECT_FALSE(c.reset_due(false, 0, t0 + milliseconds(60), confirm, silent)) << "nothing held";
  c[1].held = SourceClocks::kResetConfirmFrames - 1;
  EXPECT_FALSE(c.reset_due(false, 7, t0 + milliseconds(60), confirm, silent));
  EXPECT_TRUE(c.reset_due(true, 7, later, confirm, silent)) << "at finish, frames and time need not confirm";
  c.forget_held();
  EXPECT_EQ(c[0].held, 0u);
  c.start_run();
  EXPECT_FALSE(c.any_reset());
  EXPECT_FALSE(c[0].sent);
  EXPECT_EQ(c[0].last_seen, t0) << "a new run keeps each source's liveness";
}

TEST(SourceClocks, AnIdleSourceIsEvidenceUntilItIsSilentLong) {
  SourceClocks c(2);
  const auto confirm = milliseconds(20);
  const auto silent = milliseconds(100);
  c.seen_all(t0);
  c.took(0, 100, t0);
  c.took(1, 100, t0);
  c.mark_idle(t0 + milliseconds(10), milliseconds(5));  // both idle
  c.mark_reset(0, t0 + milliseconds(10));
  c[0].held = SourceClocks::kResetConfirmFrames;
  EXPECT_FALSE(c.reset_due(false, 4, t0 + milliseconds(40), confirm, silent))
      << "source 1 is idle for less than `silent`: it must reset too";
  EXPECT_TRUE(c.reset_due(false, 4, t0 + milliseconds(150), confirm, silent));
}

TEST(SourceClocks, AcceptMovesTheLatestTimeOnly) {
  SourceClocks::Source s;
  s.accept(50);
  EXPECT_TRUE(s.sent);
  EXPECT_EQ(s.latest, 50u);
  s.accept(40);
  EXPECT_EQ(s.latest, 50u);
  SourceClocks::Source first;
  first.accept(0);
  EXPECT_TRUE(first.sent);
}

}  // namespace
}  // namespace petdaq

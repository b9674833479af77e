// The sequence tracker (daemon/sequence_tracker.h): gaps, duplicates, forged or wild headers
// and restarts of each source's datagram numbers, every number processed once or counted.
#include "daemon/sequence_tracker.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <vector>

namespace petdaq::daemon {
namespace {

TEST(SequenceTracker, InOrderCountsNothing) {
  SequenceTracker t;
  SequenceCounts c;
  for (std::uint32_t s = 5; s < 1000; ++s) EXPECT_TRUE(t.observe(3, s, c));
  t.flush(c);
  EXPECT_EQ(c.missing, 0u);
  EXPECT_EQ(c.duplicate, 0u);
  EXPECT_EQ(c.reordered, 0u);
}

TEST(SequenceTracker, GapsCountEveryMissingDatagram) {
  SequenceTracker t;
  SequenceCounts c;
  t.observe(0, 0, c);
  t.observe(0, 1, c);
  t.observe(0, 5, c);    // 2, 3, 4 missing (not yet final)
  EXPECT_EQ(c.missing, 0u);
  // 6 .. 399: 394 missing; 2, 3, 4 fall out of the window. A jump past the window is
  // believed once a run of kRestartRun datagrams follows it.
  constexpr std::uint32_t kRun = SequenceTracker::kRestartRun;
  for (std::uint32_t s = 400; s < 400 + kRun; ++s) EXPECT_FALSE(t.observe(0, s, c));
  EXPECT_EQ(c.missing, 0u);  // held back: nothing is final yet
  EXPECT_TRUE(t.observe(0, 400 + kRun, c));
  t.flush(c);
  // 400 .. 400 + kRun - 1 were held back until the run confirmed the jump: missing too.
  EXPECT_EQ(c.missing, 3u + 394u + kRun);
  EXPECT_EQ(c.reordered, 0u);
  EXPECT_EQ(c.wild, 0u);
  EXPECT_EQ(c.restarts, 0u);
}

// Two forged headers far ahead, one after the other (a short run): they are wild, no loss is
// invented, and the genuine datagrams that follow are all processed.
TEST(SequenceTracker, TwoForgedHeadersAheadAreWildNotALoss) {
  SequenceTracker t;
  SequenceCounts c;
  for (std::uint32_t s = 0; s < 100; ++s) ASSERT_TRUE(t.observe(4, s, c));
  EXPECT_FALSE(t.observe(4, 1100, c));
  EXPECT_FALSE(t.observe(4, 1101, c));
  std::size_t processed = 0;
  for (std::uint32_t s = 100; s < 200; ++s) processed += t.observe(4, s, c);
  t.flush(c);
  EXPECT_EQ(processed, 100u);
  EXPECT_EQ(c.wild, 2u);
  EXPECT_EQ(c.missing, 0u);
  EXPECT_EQ(c.restarts, 0u);
  EXPECT_EQ(c.duplicate, 0u);
}

// One corrupt or forged header far ahead must not move the window: the duplicates that
// follow are still recognised, and nothing is counted missing.
TEST(SequenceTracker, OneWildHeaderAheadKeepsDuplicateDetection) {
  SequenceTracker t;
  SequenceCounts c;
  for (std::uint32_t s = 0; s < 100; ++s) ASSERT_TRUE(t.observe(4, s, c));
  EXPECT_FALSE(t.observe(4, 1100, c));  // wild
  std::size_t processed = 0;
  for (std::uint32_t s = 100; s < 150; ++s) processed += t.observe(4, s, c);
  for (std::uint32_t s = 100; s < 150; ++s) processed += t.observe(4, s, c);  // duplicated
  t.flush(c);
  EXPECT_EQ(processed, 50u);
  EXPECT_EQ(c.duplicate, 50u);
  EXPECT_EQ(c.wild, 1u);
  EXPECT_EQ(c.missing, 0u);
  EXPECT_EQ(c.reordered, 0u);
  EXPECT_EQ(c.restarts, 0u);
}

TEST(SequenceTracker, OneWildHeaderBehindIsDroppedAndCounted) {
  SequenceTracker t;
  SequenceCounts c;
  for (std::uint32_t s = 1000; s < 1300; ++s) ASSERT_TRUE(t.observe(4, s, c));
  EXPECT_FALSE(t.observe(4, 3, c));
  for (std::uint32_t s = 1300; s < 1310; ++s) EXPECT_TRUE(t.observe(4, s, c));
  EXPECT_FALSE(t.observe(4, 1305, c));
  t.flush(c);
  EXPECT_EQ(c.wild, 1u);
  EXPECT_EQ(c.duplicate, 1u);
  EXPECT_EQ(c.missing, 0u);
  EXPECT_EQ(c.restarts, 0u);
}

TEST(SequenceTracker, ARestartIsToldFromLossAndDuplicatesAfterItAreCaught) {
  SequenceTracker t;
  SequenceCounts c;
  for (std::uint32_t s = 5000; s < 5200; ++s) ASSERT_TRUE(t.observe(9, s, c));
  // The source restarts at 0: a short jump back, believed after a run of datagrams.
  EXPECT_FALSE(t.observe(9, 0, c));
  for (std::uint32_t s = 1; s < SequenceTracker::kRestartRun; ++s) EXPECT_FALSE(t.observe(9, s, c));
  for (std::uint32_t s = SequenceTracker::kRestartRun; s < 300; ++s) EXPECT_TRUE(t.observe(9, s, c));
  for (std::uint32_t s = 250; s < 300; ++s) EXPECT_FALSE(t.observe(9, s, c));
  t.flush(c);
  EXPECT_EQ(c.restarts, 1u);
  EXPECT_EQ(c.duplicate, 50u);
  EXPECT_EQ(c.missing, std::uint64_t{SequenceTracker::kRestartRun});  // held back until believed
  EXPECT_EQ(c.wild, 0u);
  EXPECT_EQ(c.reordered, 0u);
}

// Property: random streams of in-order runs, real gaps, small reorders and duplicates (of
// recent or long-gone numbers). Every number of the span is processed exactly once or
// counted missing; nothing is processed twice.
TEST(SequenceTracker, EveryNumberIsProcessedOnceOrCountedMissing) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    SequenceTracker t;
    SequenceCounts c;
    std::vector<std::uint32_t> stream;
    std::uint32_t next = static_cast<std::uint32_t>(rng());
    for (int i = 0; i < 2000; ++i) {
      const auto kind = rng() % 100;
      if (kind < 3) next += 1 + rng() % 1000;  // a gap: real loss
      if (kind >= 95 && stream.size() > 200) {  // a duplicate, recent or old
        stream.push_back(stream[stream.size() / 2 + rng() % (stream.size() / 2)]);
        continue;
      }
      stream.push_back(next++);
    }
    for (std::size_t i = 1; i + 1 < stream.size(); ++i)
      if (rng() % 20 == 0) std::swap(stream[i], stream[i + 1]);  // small reorders
    // The source goes on after the last gap (a gap no run follows stays unconfirmed).
    for (std::uint32_t k = 0; k < SequenceTracker::kRestartRun; ++k) stream.push_back(next++);
    std::multiset<std::uint32_t> processed;
    for (std::uint32_t s : stream)
      if (t.observe(0, s, c)) processed.insert(s);
    t.flush(c);
    for (std::uint32_t s : processed) ASSERT_EQ(processed.count(s), 1u) << "trial " << trial;
    const std::uint32_t first = stream.front();
    const std::uint32_t last = *std::max_element(stream.begin(), stream.end(),
        [&](std::uint32_t a, std::uint32_t b) { return a - first < b - first; });
    EXPECT_EQ(processed.size() + c.missing, std::uint64_t{last - first} + 1) << "trial " << trial;
    EXPECT_EQ(c.restarts, 0u) << "trial " << trial;
  }
}

}  // namespace
}  // namespace petdaq::daemon

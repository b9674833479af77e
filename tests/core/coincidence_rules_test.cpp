// Hand-written cases for each rule of DESIGN section 5 and the carry-over of section 6, with
// the expected records written out. Geometry used throughout: 6 sectors of 3 crystals per
// ring, so crystal c lies in sector (c % 18) / 3 (crystals 0, 3, 6, 9, 12, 15 are in sectors
// 0 … 5).
#include <gtest/gtest.h>

#include <cstdint>
#include <ostream>
#include <vector>

#include "core/coincidence.h"
#include "core/settings.h"

namespace petdaq {

void PrintTo(const CoincRecord& r, std::ostream* os) {
  *os << "{" << r.time_a << ", " << r.dt << ", " << r.crystal_a << ", " << r.crystal_b << ", "
      << r.energy_a << ", " << r.energy_b << ", 0x" << std::hex << r.flags << std::dec << "}";
}

namespace {

using Records = std::vector<CoincRecord>;

constexpr std::uint32_t k2 = 0x200;  // multiplicity 2
constexpr std::uint32_t k3 = 0x302;  // multiplicity 3, taken from a multiple
constexpr std::uint32_t delayed_k2 = 0x201;
constexpr std::uint32_t delayed_k3 = 0x303;

CoincidenceParams params(Policy policy = Policy::kill_multiples) {
  CoincidenceParams p;
  p.window_ticks = 10;
  p.closed = true;
  p.mode = WindowMode::first_open;
  p.policy = policy;
  p.delayed = false;
  p.delayed_offset_ticks = 50;
  p.sectors = 6;
  p.crystals_per_sector = 3;
  p.crystals_per_ring = 18;
  return p;
}

struct Output {
  Records prompts;
  Records delayed;
  CoincidenceCounts counts;
  std::size_t carry = 0;
};

Output run(const CoincidenceParams& p, const std::vector<Single>& singles,
           std::uint64_t horizon = 0, bool final = true) {
  std::vector<CoincRecord> prompt_storage(1000);
  std::vector<CoincRecord> delayed_storage(1000);
  RecordBuffer prompts{prompt_storage.data(), prompt_storage.size()};
  RecordBuffer delayed{delayed_storage.data(), delayed_storage.size()};
  Output out;
  out.carry = find_coincidences(singles.data(), singles.size(), p, horizon, final, prompts,
                                delayed, out.counts);
  out.prompts.assign(prompt_storage.begin(), prompt_storage.begin() + prompts.size);
  out.delayed.assign(delayed_storage.begin(), delayed_storage.begin() + delayed.size);
  EXPECT_EQ(out.counts.prompts, out.prompts.size());
  EXPECT_EQ(out.counts.delayed, out.delayed.size());
  return out;
}

// ---- a window of three under each policy (first_open: all three pairs are candidates) ----

// Pairs AB and AC are good; BC is in one crystal, and has the largest energy sum.
const std::vector<Single> kWinnerBad = {{100, 0, 500.0f}, {104, 9, 520.0f}, {108, 9, 530.0f}};
const CoincRecord kWinnerBadAB{100, 4, 0, 9, 500.0f, 520.0f, k3};
const CoincRecord kWinnerBadAC{100, 8, 0, 9, 500.0f, 530.0f, k3};

TEST(CoincidenceRules, WindowOfThreeWhoseWinnerIsBad) {
  EXPECT_EQ(run(params(Policy::kill_multiples), kWinnerBad).prompts, Records{});
  EXPECT_EQ(run(params(Policy::take_all_goods), kWinnerBad).prompts,
            (Records{kWinnerBadAB, kWinnerBadAC}));
  EXPECT_EQ(run(params(Policy::take_winner_of_goods), kWinnerBad).prompts, Records{kWinnerBadAC});
  EXPECT_EQ(run(params(Policy::take_winner_if_good), kWinnerBad).prompts, Records{});
  EXPECT_EQ(run(params(Policy::take_winner_if_all_good), kWinnerBad).prompts, Records{});
  EXPECT_EQ(run(params(Policy::kill_all_if_multiple_goods), kWinnerBad).prompts, Records{});
  EXPECT_EQ(run(params(), kWinnerBad).counts.multiples, 1u);
}

// Sectors 0, 1, 2 and every pair good (min_sector_difference 0); BC has the largest sum.
const std::vector<Single> kAllGood = {{100, 0, 500.0f}, {104, 3, 520.0f}, {108, 6, 510.0f}};
const CoincRecord kAllGoodAB{100, 4, 0, 3, 500.0f, 520.0f, k3};
const CoincRecord kAllGoodAC{100, 8, 0, 6, 500.0f, 510.0f, k3};
const CoincRecord kAllGoodBC{104, 4, 3, 6, 520.0f, 510.0f, k3};

TEST(CoincidenceRules, WindowOfThreeAllGood) {
  EXPECT_EQ(run(params(Policy::kill_multiples), kAllGood).prompts, Records{});
  EXPECT_EQ(run(params(Policy::take_all_goods), kAllGood).prompts,
            (Records{kAllGoodAB, kAllGoodAC, kAllGoodBC}));
  EXPECT_EQ(run(params(Policy::take_winner_of_goods), kAllGood).prompts, Records{kAllGoodBC});
  EXPECT_EQ(run(params(Policy::take_winner_if_good), kAllGood).prompts, Records{kAllGoodBC});
  EXPECT_EQ(run(params(Policy::take_winner_if_all_good), kAllGood).prompts, Records{kAllGoodBC});
  EXPECT_EQ(run(params(Policy::kill_all_if_multiple_goods), kAllGood).prompts, Records{});
}

// The same singles with min_sector_difference 2: only AC (sectors 0 and 2) is good.
TEST(CoincidenceRules, WindowOfThreeWithOneGoodPair) {
  auto p = [](Policy policy) {
    CoincidenceParams q = params(policy);
    q.min_sector_difference = 2;
    return q;
  };
  EXPECT_EQ(run(p(Policy::kill_multiples), kAllGood).prompts, Records{});
  EXPECT_EQ(run(p(Policy::take_all_goods), kAllGood).prompts, Records{kAllGoodAC});
  EXPECT_EQ(run(p(Policy::take_winner_of_goods), kAllGood).prompts, Records{kAllGoodAC});
  EXPECT_EQ(run(p(Policy::take_winner_if_good), kAllGood).prompts, Records{});
  EXPECT_EQ(run(p(Policy::take_winner_if_all_good), kAllGood).prompts, Records{});
  EXPECT_EQ(run(p(Policy::kill_all_if_multiple_goods), kAllGood).prompts, Records{kAllGoodAC});
}

TEST(CoincidenceRules, EqualEnergySumsGoToThePairFirstInOrder) {
  // AB and AC tie at 1000 keV: AB wins (same earlier single, earlier later single).
  const std::vector<Single> s = {{100, 0, 600.0f}, {104, 3, 400.0f}, {108, 6, 400.0f}};
  EXPECT_EQ(run(params(Policy::take_winner_if_good), s).prompts,
            (Records{{100, 4, 0, 3, 600.0f, 400.0f, k3}}));
  // All three tie: AB wins over BC too (earlier single first).
  const std::vector<Single> t = {{100, 0, 500.0f}, {104, 3, 500.0f}, {108, 6, 500.0f}};
  EXPECT_EQ(run(params(Policy::take_winner_of_goods), t).prompts,
            (Records{{100, 4, 0, 3, 500.0f, 500.0f, k3}}));
}

// ---- good pairs ----

TEST(CoincidenceRules, PairInOneCrystalIsNeverGood) {
  const std::vector<Single> s = {{100, 5, 511.0f}, {103, 5, 511.0f}};
  for (const Policy policy : {Policy::kill_multiples, Policy::take_all_goods,
                              Policy::take_winner_of_goods, Policy::take_winner_if_good,
                              Policy::take_winner_if_all_good,
                              Policy::kill_all_if_multiple_goods}) {
    const Output out = run(params(policy), s);
    EXPECT_EQ(out.prompts, Records{}) << to_string(policy);
    EXPECT_EQ(out.counts.multiples, 0u);
  }
  // Crystals 5 and 6 are neighbours in different sectors: good with no sector rule.
  const std::vector<Single> t = {{100, 5, 511.0f}, {103, 6, 511.0f}};
  EXPECT_EQ(run(params(), t).prompts, (Records{{100, 3, 5, 6, 511.0f, 511.0f, k2}}));
}

TEST(CoincidenceRules, MinSectorDifference) {
  // Sectors 0 and 1, and sectors 0 and 5 (one apart around the ring); crystal 18 is in the
  // next ring, sector 0.
  const std::vector<Single> next_sector = {{100, 0, 511.0f}, {102, 3, 480.0f}};
  const std::vector<Single> around_the_ring = {{100, 15, 511.0f}, {102, 18, 480.0f}};
  const std::vector<Single> opposite = {{100, 2, 511.0f}, {102, 27, 480.0f}};
  CoincidenceParams p = params();
  p.min_sector_difference = 1;
  EXPECT_EQ(run(p, next_sector).prompts, (Records{{100, 2, 0, 3, 511.0f, 480.0f, k2}}));
  EXPECT_EQ(run(p, around_the_ring).prompts, (Records{{100, 2, 15, 18, 511.0f, 480.0f, k2}}));
  p.min_sector_difference = 2;
  EXPECT_EQ(run(p, next_sector).prompts, Records{});
  EXPECT_EQ(run(p, around_the_ring).prompts, Records{});
  p.min_sector_difference = 3;
  EXPECT_EQ(run(p, opposite).prompts, (Records{{100, 2, 2, 27, 511.0f, 480.0f, k2}}));
  p.min_sector_difference = 4;
  EXPECT_EQ(run(p, opposite).prompts, Records{});
}

// ---- window edges and modes ----

TEST(CoincidenceRules, SingleExactlyAtWindowEnd) {
  const std::vector<Single> s = {{100, 0, 511.0f}, {110, 9, 505.0f}};
  CoincidenceParams p = params();
  EXPECT_EQ(run(p, s).prompts, (Records{{100, 10, 0, 9, 511.0f, 505.0f, k2}}));
  p.closed = false;
  const Output half_open = run(p, s);
  EXPECT_EQ(half_open.prompts, Records{});
  // One tick earlier it is inside under both edges.
  const std::vector<Single> t = {{100, 0, 511.0f}, {109, 9, 505.0f}};
  EXPECT_EQ(run(p, t).prompts, (Records{{100, 9, 0, 9, 511.0f, 505.0f, k2}}));
}

TEST(CoincidenceRules, FirstOpenNextWindowOpensAfterTheLastMember) {
  // 100 opens [100, 110] holding 110; 120 opens the next window, although it is within W of
  // 110. Two separate pairs follow at 200/205.
  const std::vector<Single> s = {
      {100, 0, 511.0f}, {110, 3, 511.0f}, {120, 6, 511.0f}, {200, 9, 500.0f}, {205, 12, 501.0f}};
  EXPECT_EQ(run(params(), s).prompts, (Records{{100, 10, 0, 3, 511.0f, 511.0f, k2},
                                                {200, 5, 9, 12, 500.0f, 501.0f, k2}}));
}

TEST(CoincidenceRules, EverySingleModeOnThreeSingles) {
  const std::vector<Single> spread = {{100, 0, 500.0f}, {105, 3, 510.0f}, {112, 6, 520.0f}};
  CoincidenceParams p = params(Policy::take_all_goods);
  // first_open: 100 opens {100, 105}; 112 opens a window of its own.
  EXPECT_EQ(run(p, spread).prompts, (Records{{100, 5, 0, 3, 500.0f, 510.0f, k2}}));
  p.mode = WindowMode::every_single;
  // every_single: {100, 105}, {105, 112}, {112}.
  EXPECT_EQ(run(p, spread).prompts, (Records{{100, 5, 0, 3, 500.0f, 510.0f, k2},
                                             {105, 7, 3, 6, 510.0f, 520.0f, k2}}));
  // All within W of the first: its window has k = 3 but only opener pairs are candidates.
  const std::vector<Single> close = {{100, 0, 500.0f}, {104, 3, 510.0f}, {108, 6, 520.0f}};
  const Output out = run(p, close);
  EXPECT_EQ(out.prompts, (Records{{100, 4, 0, 3, 500.0f, 510.0f, k3},
                                  {100, 8, 0, 6, 500.0f, 520.0f, k3},
                                  {104, 4, 3, 6, 510.0f, 520.0f, k2}}));
  EXPECT_EQ(out.counts.multiples, 1u);
  // Under kill_multiples only the last window (k = 2) survives.
  p.policy = Policy::kill_multiples;
  EXPECT_EQ(run(p, close).prompts, (Records{{104, 4, 3, 6, 510.0f, 520.0f, k2}}));
}

// ---- delayed windows (D = 50: opener at 100 looks at [150, 160]) ----

TEST(CoincidenceRules, DelayedWindowWithNoMember) {
  CoincidenceParams p = params(Policy::take_all_goods);
  p.delayed = true;
  const Output out = run(p, {{100, 0, 500.0f}, {149, 9, 480.0f}, {161, 9, 480.0f}});
  EXPECT_EQ(out.delayed, Records{});
  EXPECT_EQ(out.counts.delayed_multiples, 0u);
}

TEST(CoincidenceRules, DelayedWindowWithOneMember) {
  CoincidenceParams p = params();
  p.delayed = true;
  const Output out = run(p, {{100, 0, 500.0f}, {155, 9, 480.0f}});
  EXPECT_EQ(out.prompts, Records{});
  EXPECT_EQ(out.delayed, (Records{{100, 55, 0, 9, 500.0f, 480.0f, delayed_k2}}));
}

TEST(CoincidenceRules, DelayedWindowWithTwoMembers) {
  // 150 and 160 are both in [150, 160]; 150 also opens a prompt window holding 160, so 160
  // opens no delayed window of its own.
  const std::vector<Single> s = {{100, 0, 500.0f}, {150, 3, 480.0f}, {160, 9, 490.0f}};
  CoincidenceParams p = params(Policy::take_all_goods);
  p.delayed = true;
  Output out = run(p, s);
  EXPECT_EQ(out.prompts, (Records{{150, 10, 3, 9, 480.0f, 490.0f, k2}}));
  EXPECT_EQ(out.delayed, (Records{{100, 50, 0, 3, 500.0f, 480.0f, delayed_k3},
                                  {100, 60, 0, 9, 500.0f, 490.0f, delayed_k3}}));
  EXPECT_EQ(out.counts.delayed_multiples, 1u);
  EXPECT_EQ(out.counts.multiples, 0u);

  // kill_multiples drops the delayed multiple but still counts it.
  p.policy = Policy::kill_multiples;
  out = run(p, s);
  EXPECT_EQ(out.delayed, Records{});
  EXPECT_EQ(out.counts.delayed_multiples, 1u);

  // half_open: 160 is outside [150, 160), leaving one member.
  p.closed = false;
  out = run(p, s);
  EXPECT_EQ(out.prompts, Records{});
  EXPECT_EQ(out.delayed, (Records{{100, 50, 0, 3, 500.0f, 480.0f, delayed_k2}}));
  EXPECT_EQ(out.counts.delayed_multiples, 0u);
}

TEST(CoincidenceRules, DelayedRecordsFollowTheirOpeners) {
  // every_single: 100 looks at [150, 160], 105 at [155, 165]. 158 is in both, 163 only in
  // the second; records go by opener, then member.
  const std::vector<Single> s = {
      {100, 0, 500.0f}, {105, 3, 501.0f}, {158, 9, 502.0f}, {163, 12, 503.0f}};
  CoincidenceParams p = params(Policy::take_all_goods);
  p.mode = WindowMode::every_single;
  p.delayed = true;
  const Output out = run(p, s);
  EXPECT_EQ(out.delayed, (Records{{100, 58, 0, 9, 500.0f, 502.0f, delayed_k2},
                                  {105, 53, 3, 9, 501.0f, 502.0f, delayed_k3},
                                  {105, 58, 3, 12, 501.0f, 503.0f, delayed_k3}}));
  EXPECT_EQ(out.counts.delayed_multiples, 1u);
}

// ---- multiplicity counters and flags ----

TEST(CoincidenceRules, MultiplesCountersAndFlags) {
  // Windows of 4 (100-109), 1 (200), 2 (300-302) and 3 (400-410).
  const std::vector<Single> s = {{100, 0, 500.0f}, {103, 3, 510.0f}, {106, 6, 520.0f},
                                 {109, 9, 530.0f}, {200, 0, 500.0f}, {300, 0, 500.0f},
                                 {302, 6, 505.0f}, {400, 0, 500.0f}, {405, 9, 400.0f},
                                 {410, 3, 450.0f}};
  const Output out = run(params(Policy::take_winner_if_good), s);
  EXPECT_EQ(out.prompts, (Records{{106, 3, 6, 9, 520.0f, 530.0f, 0x402},
                                  {300, 2, 0, 6, 500.0f, 505.0f, k2},
                                  {400, 10, 0, 3, 500.0f, 450.0f, k3}}));
  EXPECT_EQ(out.counts.multiples, 2u);
  EXPECT_EQ(out.counts.delayed_multiples, 0u);
}

TEST(CoincidenceRules, MultiplicityFlagSaturatesAt255) {
  std::vector<Single> s;
  for (std::uint32_t i = 0; i < 300; ++i) s.push_back({1000, i, 400.0f + static_cast<float>(i)});
  const Output out = run(params(Policy::take_winner_if_good), s);
  // The winner: the two highest energies, crystals 298 and 299.
  EXPECT_EQ(out.prompts, (Records{{1000, 0, 298, 299, 698.0f, 699.0f, 0xFF02}}));
  EXPECT_EQ(out.counts.multiples, 1u);
}

// ---- streaming: resolvable windows and the carry-over ----

TEST(CoincidenceRules, CarryOverStartsAtTheFirstUnresolvedOpener) {
  const std::vector<Single> s = {{100, 0, 511.0f}, {105, 9, 511.0f}, {200, 3, 511.0f}};
  const CoincidenceParams p = params();
  const CoincRecord pair{100, 5, 0, 9, 511.0f, 511.0f, k2};
  // 100 + W = 110 must lie before the horizon for the window to be final.
  Output out = run(p, s, 110, false);
  EXPECT_EQ(out.carry, 0u);
  EXPECT_EQ(out.prompts, Records{});
  out = run(p, s, 111, false);
  EXPECT_EQ(out.carry, 2u);
  EXPECT_EQ(out.prompts, Records{pair});
  // With delayed windows the reach is D + W = 60.
  CoincidenceParams d = p;
  d.delayed = true;
  EXPECT_EQ(run(d, s, 160, false).carry, 0u);
  EXPECT_EQ(run(d, s, 161, false).carry, 2u);
  // final resolves everything whatever the horizon.
  out = run(d, s, 0, true);
  EXPECT_EQ(out.carry, 3u);
  EXPECT_EQ(out.prompts, Records{pair});
}

TEST(CoincidenceRules, EverySingleCarryIsASuffixOfOpeners) {
  // Each single opens its own window; those of 100 and 104 are final at horizon 115, that of
  // 106 (reaching 116) is not, so the carry-over starts at 106 although 106 is a member of
  // the resolved window of 100.
  const std::vector<Single> s = {{100, 0, 500.0f}, {104, 3, 501.0f}, {106, 6, 502.0f}};
  CoincidenceParams p = params(Policy::take_all_goods);
  p.mode = WindowMode::every_single;
  const Output first = run(p, s, 115, false);
  EXPECT_EQ(first.carry, 2u);
  EXPECT_EQ(first.prompts, (Records{{100, 4, 0, 3, 500.0f, 501.0f, k3},
                                    {100, 6, 0, 6, 500.0f, 502.0f, k3},
                                    {104, 2, 3, 6, 501.0f, 502.0f, k2}}));
  const Output rest = run(p, {s[2]}, 115, true);
  EXPECT_EQ(rest.prompts, Records{});
}

TEST(CoincidenceRules, EmptyInput) {
  const Output out = run(params(), {}, 1000, false);
  EXPECT_EQ(out.carry, 0u);
  EXPECT_EQ(out.prompts, Records{});
}

TEST(CoincidenceRules, ParamsFromDefaultSettings) {
  Settings s;
  const CoincidenceParams p = CoincidenceParams::from(s);
  EXPECT_EQ(p.window_ticks, 256u);            // 4 000 ps / 15.625 ps
  EXPECT_EQ(p.delayed_offset_ticks, 6400u);   // 100 000 ps / 15.625 ps
  EXPECT_TRUE(p.closed);
  EXPECT_TRUE(p.delayed);
  EXPECT_EQ(p.mode, WindowMode::first_open);
  EXPECT_EQ(p.policy, Policy::kill_multiples);
  EXPECT_EQ(p.sectors, 12u);
  EXPECT_EQ(p.crystals_per_sector, 26u);      // 2 DUs x 13 crystals across
  EXPECT_EQ(p.crystals_per_ring, 312u);       // 12 BDMs x 26

  s.scanner.tick_ps = 10.0;
  s.coincidence.window_ps = 3'004.0;  // 300.4 ticks rounds to 300
  s.coincidence.window_edge = WindowEdge::half_open;
  s.coincidence.window_mode = WindowMode::every_single;
  s.coincidence.policy = Policy::take_all_goods;
  s.coincidence.min_sector_difference = 3;
  s.coincidence.delayed.enabled = false;
  s.scanner.bdm_transaxial = 8;
  s.scanner.du_transaxial = 3;
  s.scanner.crystal_transaxial = 7;
  const CoincidenceParams q = CoincidenceParams::from(s);
  EXPECT_EQ(q.window_ticks, 300u);
  EXPECT_FALSE(q.closed);
  EXPECT_FALSE(q.delayed);
  EXPECT_EQ(q.mode, WindowMode::every_single);
  EXPECT_EQ(q.policy, Policy::take_all_goods);
  EXPECT_EQ(q.min_sector_difference, 3u);
  EXPECT_EQ(q.sectors, 8u);
  EXPECT_EQ(q.crystals_per_sector, 21u);
  EXPECT_EQ(q.crystals_per_ring, 168u);
}

}  // namespace
}  // namespace petdaq

// sort_singles against std::sort with single_less, on the inputs the engine sees (a sorted
// carry-over, then per-BDM nearly-ordered runs interleaved in packets) and on hostile ones.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/order.h"

namespace petdaq {
namespace {

bool less(const Single& a, const Single& b) { return single_less(a, b); }

// Sorts a copy with sort_singles and compares it byte for byte with std::sort; singles equal
// under single_less are equal in every field, so the result is unique. Also checks that the
// scratch buffer is used only up to n.
void expect_sorted_like_std(const std::vector<Single>& input) {
  std::vector<Single> want = input;
  std::sort(want.begin(), want.end(), less);

  std::vector<Single> got = input;
  constexpr std::size_t kGuard = 4;
  const Single guard{0xDEADBEEFDEADBEEFull, 0xFEEDu, -1.5f};
  std::vector<Single> scratch(input.size() + kGuard, guard);
  sort_singles(got.data(), got.size(), scratch.data());

  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(std::memcmp(&got[i], &want[i], sizeof(Single)), 0)
        << "at " << i << " of " << got.size() << ": got {" << got[i].time << ", "
        << got[i].crystal << ", " << got[i].energy << "}, want {" << want[i].time << ", "
        << want[i].crystal << ", " << want[i].energy << "}";
  }
  for (std::size_t i = input.size(); i < scratch.size(); ++i)
    ASSERT_EQ(std::memcmp(&scratch[i], &guard, sizeof(Single)), 0) << "scratch overrun";
}

std::vector<Single> random_singles(std::mt19937_64& rng, std::size_t n, std::uint64_t time_lo,
                                   std::uint64_t time_hi, std::uint32_t crystals,
                                   bool few_energies) {
  std::uniform_int_distribution<std::uint64_t> time(time_lo, time_hi);
  std::uniform_int_distribution<std::uint32_t> crystal(0, crystals - 1);
  std::uniform_real_distribution<float> energy(-10.0f, 900.0f);
  std::uniform_int_distribution<int> level(0, 3);
  std::vector<Single> s(n);
  for (auto& x : s)
    x = {time(rng), crystal(rng), few_energies ? 400.0f + 50.0f * level(rng) : energy(rng)};
  return s;
}

// What a slice looks like: a sorted carry-over, then `sources` per-BDM streams, each in time
// order but for a little local disorder, sent in packets of `packet` singles and interleaved
// in the order the packets were sent.
std::vector<Single> interleaved_runs(std::mt19937_64& rng, std::size_t n, unsigned sources,
                                     std::size_t packet) {
  const std::uint64_t start = 5'000'000'000ull;
  std::vector<Single> carry = random_singles(rng, n / 100, start - 6400, start - 1, 16224, false);
  std::sort(carry.begin(), carry.end(), less);

  std::vector<std::vector<Single>> streams(sources);
  std::exponential_distribution<double> gap(1.0 / 3200.0);
  std::uniform_real_distribution<float> energy(350.0f, 650.0f);
  std::uniform_int_distribution<int> jitter(-40, 40);
  std::uint64_t t = start;
  for (std::size_t i = carry.size(); i < n; ++i) {
    t += static_cast<std::uint64_t>(gap(rng));
    const unsigned source = static_cast<unsigned>(rng() % sources);
    const std::uint64_t jittered = t + 100 + static_cast<std::uint64_t>(jitter(rng));
    streams[source].push_back(
        {jittered, source * 676u + static_cast<std::uint32_t>(rng() % 676), energy(rng)});
  }
  std::vector<Single> out = carry;
  std::vector<std::size_t> sent(sources, 0);
  bool any = true;
  while (any) {
    any = false;
    for (unsigned b = 0; b < sources; ++b) {
      const std::size_t end = std::min(streams[b].size(), sent[b] + packet);
      out.insert(out.end(), streams[b].begin() + static_cast<std::ptrdiff_t>(sent[b]),
                 streams[b].begin() + static_cast<std::ptrdiff_t>(end));
      any |= end > sent[b];
      sent[b] = end;
    }
  }
  return out;
}

TEST(Order, TinySizes) {
  expect_sorted_like_std({});
  expect_sorted_like_std({{5, 1, 500.0f}});
  expect_sorted_like_std({{5, 1, 500.0f}, {4, 1, 500.0f}});
  expect_sorted_like_std({{5, 2, 500.0f}, {5, 1, 500.0f}});
  expect_sorted_like_std({{5, 1, 501.0f}, {5, 1, 500.0f}});
  expect_sorted_like_std({{5, 1, 500.0f}, {5, 1, 500.0f}});
  expect_sorted_like_std({{4, 1, 500.0f}, {5, 1, 500.0f}});
}

TEST(Order, RandomInputsOfManySizes) {
  std::mt19937_64 rng(1);
  for (const std::size_t n : {3u, 17u, 31u, 32u, 33u, 64u, 100u, 1000u, 4097u, 100'000u}) {
    SCOPED_TRACE(n);
    expect_sorted_like_std(random_singles(rng, n, 0, 1'000'000'000, 16224, false));
    // Narrow time range and few crystals and energies: many ties in every key.
    expect_sorted_like_std(random_singles(rng, n, 1000, 1000 + n / 4, 3, true));
  }
}

TEST(Order, LargeRandomInput) {
  std::mt19937_64 rng(2);
  expect_sorted_like_std(random_singles(rng, 1u << 20, 0, 1'000'000'000'000ull, 16224, false));
}

TEST(Order, TimesAcrossTheWhole64BitRange) {
  std::mt19937_64 rng(3);
  expect_sorted_like_std(
      random_singles(rng, 50'000, 0, std::numeric_limits<std::uint64_t>::max(), 100, true));
  std::vector<Single> extremes = random_singles(rng, 1000, 0, 10, 5, true);
  extremes.push_back({std::numeric_limits<std::uint64_t>::max(), 0, 500.0f});
  extremes.push_back({std::numeric_limits<std::uint64_t>::max(), 0, 400.0f});
  std::shuffle(extremes.begin(), extremes.end(), rng);
  expect_sorted_like_std(extremes);
}

TEST(Order, NearlySortedInterleavedRuns) {
  std::mt19937_64 rng(4);
  for (const unsigned sources : {1u, 2u, 24u, 48u})
    for (const std::size_t packet : {1u, 7u, 64u, 560u}) {
      SCOPED_TRACE(::testing::Message() << sources << " sources, packets of " << packet);
      expect_sorted_like_std(interleaved_runs(rng, 60'000, sources, packet));
    }
}

// A call of the size the offline CPU backend makes (2-4 M singles): enough buckets to reach
// the largest bucket count.
TEST(Order, FullSizeInterleavedRuns) {
  std::mt19937_64 rng(9);
  expect_sorted_like_std(interleaved_runs(rng, 2'500'000, 24, 560));
}

// Most singles crowd into a small part of the time range (one outlier far away), so the
// coarse buckets are uneven and the large ones take the radix path.
TEST(Order, ClusteredTimes) {
  std::mt19937_64 rng(8);
  for (const std::uint64_t spread : {0ull, 3ull, 1000ull, 1'000'000ull}) {
    SCOPED_TRACE(spread);
    std::vector<Single> s = random_singles(rng, 50'000, 5000, 5000 + spread, 200, true);
    s.push_back({1'000'000'000'000ull, 7, 500.0f});
    s.push_back({0, 7, 500.0f});
    std::shuffle(s.begin(), s.end(), rng);
    expect_sorted_like_std(s);
  }
}

TEST(Order, AllEqualTimes) {
  std::mt19937_64 rng(5);
  for (const std::size_t n : {2u, 20u, 33u, 1000u, 200'000u}) {
    SCOPED_TRACE(n);
    expect_sorted_like_std(random_singles(rng, n, 777, 777, 16224, false));
    expect_sorted_like_std(random_singles(rng, n, 777, 777, 4, true));
  }
}

TEST(Order, AlreadySortedAndReversed) {
  std::mt19937_64 rng(6);
  std::vector<Single> s = random_singles(rng, 100'000, 0, 50'000'000, 16224, false);
  std::sort(s.begin(), s.end(), less);
  expect_sorted_like_std(s);
  std::reverse(s.begin(), s.end());
  expect_sorted_like_std(s);
}

// Sorting is idempotent and leaves the scratch content irrelevant: a second call on the
// result with a dirty scratch changes nothing.
TEST(Order, SortedOutputIsAFixedPoint) {
  std::mt19937_64 rng(7);
  std::vector<Single> s = interleaved_runs(rng, 10'000, 24, 64);
  std::vector<Single> scratch(s.size(), Single{1, 2, 3.0f});
  sort_singles(s.data(), s.size(), scratch.data());
  ASSERT_TRUE(std::is_sorted(s.begin(), s.end(), less));
  const std::vector<Single> once = s;
  sort_singles(s.data(), s.size(), scratch.data());
  EXPECT_EQ(std::memcmp(once.data(), s.data(), s.size() * sizeof(Single)), 0);
}

}  // namespace
}  // namespace petdaq

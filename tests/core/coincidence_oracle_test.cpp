// The coincidence engine against the brute-force oracle (tests/core/oracle.h) on random
// inputs, for every policy, window mode, edge, delayed on/off and several
// min_sector_difference values; and the streaming property the slicer relies on: the same
// singles fed in pieces with increasing horizons give exactly the batch records.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/coincidence.h"
#include "core/settings.h"
#include "tests/core/oracle.h"

namespace petdaq {
namespace {

std::string describe(const CoincRecord& r) {
  std::ostringstream o;
  o << "{time_a " << r.time_a << ", dt " << r.dt << ", crystals " << r.crystal_a << "/"
    << r.crystal_b << ", energies " << r.energy_a << "/" << r.energy_b << ", flags 0x" << std::hex
    << r.flags << "}";
  return o.str();
}

::testing::AssertionResult same_records(const std::vector<CoincRecord>& expected,
                                        const CoincRecord* got, std::size_t got_count) {
  const std::size_t common = std::min(expected.size(), got_count);
  for (std::size_t i = 0; i < common; ++i)
    if (!(expected[i] == got[i]))
      return ::testing::AssertionFailure() << "record " << i << ": expected "
                                           << describe(expected[i]) << ", got "
                                           << describe(got[i]);
  if (expected.size() != got_count)
    return ::testing::AssertionFailure() << "expected " << expected.size() << " records, got "
                                         << got_count;
  return ::testing::AssertionSuccess();
}

std::string describe(const CoincidenceParams& p) {
  std::ostringstream o;
  o << "W " << p.window_ticks << (p.closed ? " closed" : " half_open") << " mode "
    << to_string(p.mode) << " policy " << to_string(p.policy) << " min_sector_difference "
    << p.min_sector_difference << " delayed " << p.delayed << " D " << p.delayed_offset_ticks
    << " sectors " << p.sectors << "x" << p.crystals_per_sector << " per ring "
    << p.crystals_per_ring;
  return o.str();
}

// Random sorted singles: dense (many exact ties and gaps of exactly W), sparse, or bursts;
// few or many crystals; energies from a small set (equal sums) or continuous.
std::vector<Single> random_singles(std::mt19937_64& rng, const CoincidenceParams& p) {
  auto uniform = [&](std::uint64_t lo, std::uint64_t hi) {
    return std::uniform_int_distribution<std::uint64_t>(lo, hi)(rng);
  };
  const std::size_t sizes[] = {0, 1, 2, 3, 5, 10, 40, 150, 400};
  const std::size_t n = uniform(0, sizes[uniform(0, std::size(sizes) - 1)]);
  const std::uint64_t w = p.window_ticks;
  const unsigned rate = static_cast<unsigned>(uniform(0, 2));  // 0 dense, 1 sparse, 2 bursts
  const std::uint32_t crystal_count = p.crystals_per_ring * 3;
  const std::uint32_t crystal_pool[] = {1, 2, 3, 8, crystal_count};
  const std::uint32_t crystals = crystal_pool[uniform(0, std::size(crystal_pool) - 1)];
  const std::uint32_t crystal_base = static_cast<std::uint32_t>(uniform(0, crystal_count - crystals));
  const bool discrete_energy = uniform(0, 1) == 0;
  const float energy_set[] = {400.0f, 450.0f, 500.0f, 511.0f, 550.0f, 600.0f};

  std::vector<Single> s(n);
  std::uint64_t t = uniform(0, 1'000'000);
  for (auto& single : s) {
    switch (rate) {
      case 0:
        t += uniform(0, 3) == 0 ? 0 : uniform(0, w);
        break;
      case 1:
        t += uniform(0, 4) == 0 ? w : uniform(0, 4 * w + 2);
        break;
      default:
        t += uniform(0, 9) == 0 ? uniform(w, p.delayed_offset_ticks + 3 * w) : uniform(0, w / 2);
        break;
    }
    single.time = t;
    single.crystal = crystal_base + static_cast<std::uint32_t>(uniform(0, crystals - 1));
    single.energy = discrete_energy
                        ? energy_set[uniform(0, std::size(energy_set) - 1)]
                        : std::uniform_real_distribution<float>(300.0f, 700.0f)(rng);
  }
  std::sort(s.begin(), s.end(), [](const Single& a, const Single& b) { return single_less(a, b); });
  return s;
}

struct EngineOutput {
  std::vector<CoincRecord> prompt_storage;
  std::vector<CoincRecord> delayed_storage;
  RecordBuffer prompts;
  RecordBuffer delayed;
  CoincidenceCounts counts;

  explicit EngineOutput(std::size_t capacity)
      : prompt_storage(capacity), delayed_storage(capacity) {
    prompts = {prompt_storage.data(), capacity};
    delayed = {delayed_storage.data(), capacity};
  }
};

// One more record than the oracle expects: an engine that emits too many shows overflow.
std::size_t record_capacity(const oracle::Result& want) {
  return std::max(want.prompts.size(), want.delayed.size()) + 1;
}

void expect_matches_oracle(const std::vector<Single>& s, const CoincidenceParams& p,
                           const oracle::Result& want, const EngineOutput& got) {
  EXPECT_TRUE(same_records(want.prompts, got.prompts.data, got.prompts.size)) << "prompts";
  EXPECT_TRUE(same_records(want.delayed, got.delayed.data, got.delayed.size)) << "delayed";
  EXPECT_EQ(got.prompts.overflow, 0u);
  EXPECT_EQ(got.delayed.overflow, 0u);
  EXPECT_EQ(got.counts.prompts, want.prompts.size());
  EXPECT_EQ(got.counts.delayed, want.delayed.size());
  EXPECT_EQ(got.counts.multiples, want.multiples);
  EXPECT_EQ(got.counts.delayed_multiples, want.delayed_multiples);
  (void)s;
}

// Feeds the singles in pieces cut at random increasing horizons, each call seeing the
// carry-over of the one before plus the singles below its horizon.
void run_streaming(const std::vector<Single>& s, const CoincidenceParams& p,
                   std::mt19937_64& rng, EngineOutput& out) {
  std::vector<Single> buffer;
  std::size_t next = 0;
  std::uint64_t horizon = s.empty() ? 0 : s.front().time;
  const std::uint64_t step_max = 3 * p.reach_ticks() + 2;
  while (next < s.size()) {
    horizon += std::uniform_int_distribution<std::uint64_t>(0, step_max)(rng);
    while (next < s.size() && s[next].time < horizon) buffer.push_back(s[next++]);
    if (next == s.size()) break;
    const std::size_t carry = find_coincidences(buffer.data(), buffer.size(), p, horizon, false,
                                                out.prompts, out.delayed, out.counts);
    ASSERT_LE(carry, buffer.size());
    // The carry-over starts at the first unresolved opener; in every_single mode every
    // single before it opened a resolved window.
    if (carry > 0 && p.mode == WindowMode::every_single)
      EXPECT_TRUE(p.resolvable(buffer[carry - 1].time, horizon));
    if (carry < buffer.size()) EXPECT_FALSE(p.resolvable(buffer[carry].time, horizon));
    buffer.erase(buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(carry));
  }
  const std::size_t carry = find_coincidences(buffer.data(), buffer.size(), p, horizon, true,
                                              out.prompts, out.delayed, out.counts);
  EXPECT_EQ(carry, buffer.size());
}

TEST(CoincidenceOracle, EngineMatchesOracleOnRandomInputs) {
  const Policy policies[] = {Policy::kill_multiples,          Policy::take_all_goods,
                             Policy::take_winner_of_goods,    Policy::take_winner_if_good,
                             Policy::take_winner_if_all_good, Policy::kill_all_if_multiple_goods};
  const std::uint32_t min_sector_differences[] = {0, 1, 2, 3};
  constexpr int kInputsPerCombination = 56;  // 192 combinations: 10 752 inputs

  std::mt19937_64 rng(20240611);
  std::size_t inputs = 0;
  std::uint64_t prompt_records = 0;
  std::uint64_t delayed_records = 0;
  std::uint64_t multiples = 0;
  for (const Policy policy : policies)
    for (const WindowMode mode : {WindowMode::first_open, WindowMode::every_single})
      for (const bool closed : {true, false})
        for (const bool delayed : {false, true})
          for (const std::uint32_t msd : min_sector_differences)
            for (int rep = 0; rep < kInputsPerCombination; ++rep) {
              CoincidenceParams p;
              p.window_ticks = std::uniform_int_distribution<std::uint64_t>(0, 40)(rng);
              p.closed = closed;
              p.mode = mode;
              p.policy = policy;
              p.min_sector_difference = msd;
              p.delayed = delayed;
              p.delayed_offset_ticks =
                  p.window_ticks + std::uniform_int_distribution<std::uint64_t>(1, 80)(rng);
              p.sectors = rep % 2 == 0 ? 6 : 5;
              p.crystals_per_sector = rep % 3 == 0 ? 1 : 3;
              p.crystals_per_ring = p.sectors * p.crystals_per_sector;

              const std::vector<Single> s = random_singles(rng, p);
              ++inputs;
              SCOPED_TRACE(describe(p) + ", " + std::to_string(s.size()) + " singles");
              const oracle::Result want = oracle::coincidences(s, p);
              prompt_records += want.prompts.size();
              delayed_records += want.delayed.size();
              multiples += want.multiples;

              EngineOutput batch(record_capacity(want));
              const std::size_t carry = find_coincidences(s.data(), s.size(), p, 0, true,
                                                          batch.prompts, batch.delayed,
                                                          batch.counts);
              EXPECT_EQ(carry, s.size());
              expect_matches_oracle(s, p, want, batch);

              EngineOutput streamed(record_capacity(want));
              run_streaming(s, p, rng, streamed);
              SCOPED_TRACE("streamed");
              expect_matches_oracle(s, p, want, streamed);
              if (::testing::Test::HasFailure()) return;
            }
  EXPECT_GE(inputs, 10'000u);
  // The inputs exercise what they claim to: many records and many multiple windows.
  EXPECT_GT(prompt_records, 50'000u);
  EXPECT_GT(delayed_records, 20'000u);
  EXPECT_GT(multiples, 20'000u);
}

// Realistic parameters (4 000 ps window, 100 000 ps delay at 15.625 ps ticks) on longer,
// Poisson-like inputs, streamed in slices like the daemon does.
TEST(CoincidenceOracle, DefaultConfigurationOnLongInputs) {
  std::mt19937_64 rng(7);
  for (const Policy policy : {Policy::kill_multiples, Policy::take_winner_of_goods}) {
    for (const WindowMode mode : {WindowMode::first_open, WindowMode::every_single}) {
      CoincidenceParams p;
      p.window_ticks = 256;
      p.delayed = true;
      p.delayed_offset_ticks = 6400;
      p.policy = policy;
      p.mode = mode;
      p.min_sector_difference = 2;
      p.sectors = 12;
      p.crystals_per_sector = 26;
      p.crystals_per_ring = 312;
      std::vector<Single> s(20'000);
      std::uint64_t t = 1'000'000'000;
      std::exponential_distribution<double> gap(1.0 / 1000.0);
      std::uniform_int_distribution<std::uint32_t> crystal(0, 312 * 52 - 1);
      std::normal_distribution<float> energy(511.0f, 40.0f);
      for (std::size_t i = 0; i < s.size(); ++i) {
        // Every other single is the partner of the one before (a true coincidence).
        t += i % 2 == 1 ? static_cast<std::uint64_t>(gap(rng) / 20.0)
                        : static_cast<std::uint64_t>(gap(rng));
        s[i] = {t, crystal(rng), energy(rng)};
      }
      std::sort(s.begin(), s.end(), [](const Single& a, const Single& b) { return single_less(a, b); });
      SCOPED_TRACE(describe(p));
      const oracle::Result want = oracle::coincidences(s, p);
      EngineOutput streamed(s.size() * 4);
      run_streaming(s, p, rng, streamed);
      expect_matches_oracle(s, p, want, streamed);
      EXPECT_GT(want.prompts.size(), 1000u);
      EXPECT_GT(want.delayed.size(), 100u);
    }
  }
}

// A full record buffer keeps the first records in order and counts the rest.
TEST(CoincidenceOracle, FullBufferKeepsTheFirstRecordsAndCountsTheRest) {
  std::mt19937_64 rng(99);
  CoincidenceParams p;
  p.window_ticks = 10;
  p.policy = Policy::take_all_goods;
  p.delayed = true;
  p.delayed_offset_ticks = 30;
  p.crystals_per_ring = 18;
  p.crystals_per_sector = 3;
  p.sectors = 6;
  std::vector<Single> s = random_singles(rng, p);
  while (s.size() < 100) s = random_singles(rng, p);
  const oracle::Result want = oracle::coincidences(s, p);
  ASSERT_GT(want.prompts.size(), 8u);
  ASSERT_GT(want.delayed.size(), 8u);

  EngineOutput small(5);
  find_coincidences(s.data(), s.size(), p, 0, true, small.prompts, small.delayed, small.counts);
  const std::vector<CoincRecord> first_prompts(want.prompts.begin(), want.prompts.begin() + 5);
  const std::vector<CoincRecord> first_delayed(want.delayed.begin(), want.delayed.begin() + 5);
  EXPECT_TRUE(same_records(first_prompts, small.prompts.data, small.prompts.size));
  EXPECT_TRUE(same_records(first_delayed, small.delayed.data, small.delayed.size));
  EXPECT_EQ(small.prompts.overflow, want.prompts.size() - 5);
  EXPECT_EQ(small.delayed.overflow, want.delayed.size() - 5);
  EXPECT_EQ(small.counts.prompts, want.prompts.size());
  EXPECT_EQ(small.counts.delayed, want.delayed.size());
}

}  // namespace
}  // namespace petdaq

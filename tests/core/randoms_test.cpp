// Randoms estimators (core/randoms.h, docs/randoms.md): the singles-rate sums against closed
// forms, and the window model against the coincidence engine itself on Poisson streams of
// unpaired singles and simultaneous pairs whose truth is known.
#include "core/randoms.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "core/coincidence.h"
#include "core/geometry.h"
#include "core/order.h"

namespace petdaq {
namespace {

Settings default_settings() { return Settings{}; }

RandomsSettings small_ring(std::uint32_t min_sector_difference) {
  RandomsSettings rs;
  rs.window_s = 4e-9;
  rs.bdm_transaxial = 6;
  rs.bdm_axial = 2;
  rs.crystals_per_bdm = 10;
  rs.min_sector_difference = min_sector_difference;
  return rs;
}

TEST(Randoms, WindowSpanFollowsTheEdgeRule) {
  Settings s = default_settings();
  s.scanner.tick_ps = 15.625;
  s.coincidence.window_ps = 4000;  // 256 ticks
  s.coincidence.window_edge = WindowEdge::closed;
  RandomsSettings rs = RandomsSettings::from(s);
  EXPECT_DOUBLE_EQ(rs.window_s, 256.5 * 15.625e-12);
  EXPECT_DOUBLE_EQ(rs.delayed_window_s, 257 * 15.625e-12);
  s.coincidence.window_edge = WindowEdge::half_open;
  rs = RandomsSettings::from(s);
  EXPECT_DOUBLE_EQ(rs.window_s, 255.5 * 15.625e-12);
  EXPECT_DOUBLE_EQ(rs.delayed_window_s, 256 * 15.625e-12);
  const Geometry g = Geometry::from(s.scanner);
  EXPECT_EQ(rs.crystals_per_bdm * g.bdm_count(), g.crystal_count());
}

// 2τ Σ_{i<j} s_i s_j over crystals, each BDM's rate spread over its crystals, written out
// crystal by crystal.
double singles_rate_by_crystal(const RandomsSettings& rs, const std::vector<double>& bdm) {
  std::vector<double> s;
  std::vector<std::uint32_t> sector;
  for (std::uint32_t b = 0; b < bdm.size(); ++b)
    for (std::uint32_t c = 0; c < rs.crystals_per_bdm; ++c) {
      s.push_back(bdm[b] / rs.crystals_per_bdm);
      sector.push_back(b % rs.bdm_transaxial);
    }
  double sum = 0;
  for (std::size_t i = 0; i < s.size(); ++i)
    for (std::size_t j = i + 1; j < s.size(); ++j)
      if (sector_distance(sector[i], sector[j], rs.bdm_transaxial) >= rs.min_sector_difference)
        sum += 2 * rs.window_s * s[i] * s[j];
  return sum;
}

TEST(Randoms, SinglesRateIsTwoTauSiSjOverGoodCrystalPairs) {
  const std::vector<double> bdm = {1e5, 2e5, 3e5, 4e5, 5e5, 6e5, 7e5, 8e5, 9e5, 1e6, 1.1e6, 0};
  for (std::uint32_t msd : {0u, 1u, 2u, 3u}) {
    const RandomsSettings rs = small_ring(msd);
    const double expected = singles_rate_by_crystal(rs, bdm);
    EXPECT_NEAR(singles_rate_randoms(rs, bdm), expected, 1e-9 * expected) << msd;
    double total = 0;
    for (double b : bdm) total += b;
    EXPECT_NEAR(random_pair_good_fraction(rs, bdm), expected / (rs.window_s * total * total),
                1e-12);

    std::vector<double> by_pair(bdm.size() * bdm.size(), -1.0);
    singles_rate_randoms_by_bdm_pair(rs, bdm, by_pair);
    double sum = 0;
    for (std::size_t a = 0; a < bdm.size(); ++a)
      for (std::size_t b = 0; b < bdm.size(); ++b) {
        if (b < a) EXPECT_EQ(by_pair[a * bdm.size() + b], 0.0);
        sum += by_pair[a * bdm.size() + b];
      }
    EXPECT_NEAR(sum, expected, 1e-9 * expected);
    // BDMs 0 and 1: sectors 0 and 1, both sums of 10 x 10 crystal pairs.
    EXPECT_DOUBLE_EQ(by_pair[0 * bdm.size() + 1], msd <= 1 ? 2 * rs.window_s * 1e5 * 2e5 : 0.0);
  }
  // Uniform singles, any two different crystals: S²τ (1 - 1/crystals).
  const RandomsSettings rs = small_ring(0);
  const std::vector<double> flat(12, 1e6);
  EXPECT_NEAR(singles_rate_randoms(rs, flat), 144e12 * 4e-9 * (1.0 - 1.0 / 120), 1e-3);
  EXPECT_EQ(random_pair_good_fraction(rs, std::vector<double>(12, 0.0)), 1.0);
}

// A small scanner (6 x 2 BDMs of 2 x 2 DUs of 3 x 2 crystals: 288 crystals) with uneven
// per-crystal singles rates, one hot and one dead crystal.
struct SmallScanner {
  Settings settings;
  Geometry geometry;
  std::vector<double> rates;
};
SmallScanner small_scanner(std::uint32_t min_sector_difference) {
  SmallScanner sc;
  ScannerSettings& s = sc.settings.scanner;
  s.bdm_transaxial = 6;
  s.bdm_axial = 2;
  s.du_transaxial = 2;
  s.du_axial = 2;
  s.crystal_transaxial = 3;
  s.crystal_axial = 2;
  sc.settings.coincidence.min_sector_difference = min_sector_difference;
  sc.geometry = Geometry::from(s);
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> rate(1e3, 3e4);
  for (std::uint32_t c = 0; c < sc.geometry.crystal_count(); ++c) sc.rates.push_back(rate(rng));
  sc.rates[17] = 4e5;
  sc.rates[100] = 0;
  return sc;
}

TEST(Randoms, PerCrystalSinglesSumOverGoodCrystalPairs) {
  for (std::uint32_t msd : {0u, 1u, 2u, 3u}) {
    const SmallScanner sc = small_scanner(msd);
    const RandomsSettings rs = RandomsSettings::from(sc.settings);
    const CoincidenceParams p = CoincidenceParams::from(sc.settings);
    const Geometry& g = sc.geometry;
    const std::size_t n = g.bdm_count();
    // Crystal by crystal with the engine's own good-pair rule.
    std::vector<double> expected(n * n, 0.0);
    double expected_total = 0;
    for (std::uint32_t i = 0; i < g.crystal_count(); ++i)
      for (std::uint32_t j = i + 1; j < g.crystal_count(); ++j) {
        if (!p.good_pair(i, j)) continue;
        const double v = 2 * rs.window_s * sc.rates[i] * sc.rates[j];
        const std::uint32_t a = g.address_of(i).bdm, b = g.address_of(j).bdm;
        expected[std::min(a, b) * n + std::max(a, b)] += v;
        expected_total += v;
      }
    std::vector<double> by_pair(n * n, -1.0);
    const double total = singles_rate_randoms_by_bdm_pair(rs, g, sc.rates, by_pair);
    EXPECT_NEAR(total, expected_total, 1e-9 * expected_total) << msd;
    for (std::size_t k = 0; k < n * n; ++k)
      ASSERT_NEAR(by_pair[k], expected[k], 1e-9 * expected_total) << msd << " pair " << k;
    if (msd == 0) {
      // Closed form: every pair of different crystals, τ (S² − Σ s_i²).
      double s = 0, q = 0;
      for (const double r : sc.rates) s += r, q += r * r;
      EXPECT_NEAR(total, rs.window_s * (s * s - q), 1e-9 * total);
    }
    // The per-BDM estimate spreads each BDM evenly: it differs only on the same-BDM pairs,
    // by τ (Σ_{i in b} s_i² − S_b² / n_b) each, which are good only with
    // min_sector_difference 0 (one BDM is one sector).
    std::vector<double> bdm(n, 0.0), squares(n, 0.0);
    for (std::uint32_t c = 0; c < g.crystal_count(); ++c) {
      bdm[g.address_of(c).bdm] += sc.rates[c];
      squares[g.address_of(c).bdm] += sc.rates[c] * sc.rates[c];
    }
    double spread_excess = 0;
    for (std::size_t b = 0; b < n && msd == 0; ++b)
      spread_excess += rs.window_s * (squares[b] - bdm[b] * bdm[b] / rs.crystals_per_bdm);
    EXPECT_EQ(spread_excess > 0, msd == 0);
    EXPECT_NEAR(singles_rate_randoms(rs, bdm), total + spread_excess, 1e-9 * total) << msd;
  }
  // A span shorter than the matrix is left alone; the total is still returned.
  const SmallScanner sc = small_scanner(0);
  std::vector<double> short_out(3, -1.0);
  EXPECT_GT(singles_rate_randoms_by_bdm_pair(RandomsSettings::from(sc.settings), sc.geometry,
                                             sc.rates, short_out), 0.0);
  EXPECT_EQ(short_out, std::vector<double>(3, -1.0));
}

TEST(Randoms, ModelLimitsAndInversion) {
  RandomsSettings rs = small_ring(0);
  for (WindowMode mode : {WindowMode::first_open, WindowMode::every_single})
    for (Policy policy : {Policy::kill_multiples, Policy::take_all_goods}) {
      rs.mode = mode;
      rs.policy = policy;
      // Low rates: every model tends to the singles-rate λ²τ when no decay gives a pair.
      const WindowModelRates low = window_model_rates(rs, 1e3, 0, 1);
      EXPECT_NEAR(low.randoms_per_s, 1e6 * rs.window_s, 1e-5 * 1e6 * rs.window_s);
      // The singles-prompts solution reproduces λ and μ from S and P.
      const double lambda = 1.5e7, mu = 4e6;
      const WindowModelRates m = window_model_rates(rs, lambda, mu, 0.99);
      const SinglesPromptsEstimate e =
          singles_prompts_randoms(rs, lambda + 2 * mu, m.prompts_per_s, 0.99);
      ASSERT_TRUE(e.modelled);
      EXPECT_NEAR(e.pairs_per_s, mu, 1e-6 * mu);
      EXPECT_NEAR(e.unpaired_per_s, lambda, 1e-6 * lambda);
      EXPECT_NEAR(e.randoms_per_s, m.randoms_per_s, 1e-6 * m.randoms_per_s);
      // every_single + take_all_goods: the model is the singles-rate estimate exactly.
      if (mode == WindowMode::every_single && policy == Policy::take_all_goods)
        EXPECT_DOUBLE_EQ(m.randoms_per_s,
                         0.99 * (lambda + 2 * mu) * (lambda + 2 * mu) * rs.window_s);
    }
  // Prompts outside the model's range clamp μ instead of failing.
  rs.policy = Policy::take_all_goods;
  rs.mode = WindowMode::every_single;
  EXPECT_EQ(singles_prompts_randoms(rs, 1e6, 0.0, 1).pairs_per_s, 0.0);
  EXPECT_EQ(singles_prompts_randoms(rs, 1e6, 1e9, 1).pairs_per_s, 5e5);
  EXPECT_EQ(singles_prompts_randoms(rs, 0, 10, 1).randoms_per_s, 0.0);
}

TEST(Randoms, BestMethodAndNames) {
  RandomsSettings rs;
  rs.delayed = true;
  for (Policy p : {Policy::kill_multiples, Policy::take_all_goods}) {
    rs.policy = p;
    EXPECT_EQ(best_randoms_method(rs), RandomsMethod::singles_prompts);
  }
  // The other four are modelled when any two crystals make a good pair.
  for (Policy p : {Policy::take_winner_of_goods, Policy::take_winner_if_good,
                   Policy::take_winner_if_all_good, Policy::kill_all_if_multiple_goods}) {
    rs.policy = p;
    rs.min_sector_difference = 0;
    EXPECT_EQ(best_randoms_method(rs), RandomsMethod::singles_prompts);
    EXPECT_EQ(window_model_is_energy_blind(rs), p != Policy::kill_all_if_multiple_goods);
    rs.min_sector_difference = 1;
    rs.delayed = true;
    EXPECT_EQ(best_randoms_method(rs), RandomsMethod::delayed);
    EXPECT_FALSE(singles_prompts_randoms(rs, 1e6, 1e4, 1).modelled);
    rs.delayed = false;
    EXPECT_EQ(best_randoms_method(rs), RandomsMethod::singles_rate);
    const std::vector<double> bdm(24, 1e5);
    const RandomsEstimates e = estimate_randoms(rs, bdm, 1e4, 123.0);
    EXPECT_EQ(e.best_per_s, e.singles_rate_per_s);
  }
  EXPECT_EQ(randoms_method_name(RandomsMethod::delayed), "delayed");
  EXPECT_EQ(randoms_method_name(RandomsMethod::singles_rate), "singles_rate");
  EXPECT_EQ(randoms_method_name(RandomsMethod::singles_prompts), "singles_prompts");
}

// A stream with known truth: Poisson clusters, each an unpaired single or the two singles of
// one decay in two different crystals, the second later by |N(0, σ)| with σ from the
// coincidence time resolution (FWHM), as two independent Gaussian time errors give. Every
// single has its own energy, a distinct integer in random order (so the winner policies'
// largest energy sum picks any candidate pair with equal chance), and `cluster_of[energy]`
// is its cluster: a prompt is random exactly when its two singles' clusters differ.
struct Stream {
  std::vector<Single> singles;
  std::vector<double> bdm_singles;        // counts
  std::vector<std::uint32_t> cluster_of;  // by energy
  double duration_s = 0;
};

Stream make_stream(const Settings& s, double lambda, double mu, double duration_s,
                   std::uint64_t seed) {
  const Geometry g = Geometry::from(s.scanner);
  const std::uint32_t crystals = g.crystal_count();
  const double tick_s = s.scanner.tick_ps * 1e-12;
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(lambda + mu);
  std::uniform_real_distribution<double> unit(0, 1);
  std::uniform_int_distribution<std::uint32_t> crystal(0, crystals - 1);
  std::normal_distribution<double> gauss(0, 1);
  const double sigma_s = s.coincidence.time_resolution_ps * 1e-12 / 2.354820045;
  Stream st;
  st.duration_s = duration_s;
  st.bdm_singles.assign(g.bdm_count(), 0);
  auto add = [&](double t, std::uint32_t c, std::uint32_t id) {
    const auto tick = static_cast<std::uint64_t>(t / tick_s) + 1000;
    st.singles.push_back({tick, c, 0.0f});
    st.cluster_of.push_back(id);
    st.bdm_singles[g.address_of(c).bdm] += 1;
  };
  std::uint32_t id = 0;
  for (double t = gap(rng); t < duration_s; t += gap(rng)) {
    const std::uint32_t a = crystal(rng);
    add(t, a, id);
    if (unit(rng) * (lambda + mu) < mu) {
      std::uint32_t b = crystal(rng);
      while (b == a) b = crystal(rng);
      add(t + sigma_s * std::abs(gauss(rng)), b, id);
    }
    id += 1;
  }
  // Energies: a random permutation of 0 .. n-1 (exact in a float below 2^24).
  std::vector<std::uint32_t> energy(st.singles.size());
  for (std::uint32_t i = 0; i < energy.size(); ++i) energy[i] = i;
  std::shuffle(energy.begin(), energy.end(), rng);
  std::vector<std::uint32_t> cluster_of(st.singles.size());
  for (std::size_t i = 0; i < energy.size(); ++i) {
    st.singles[i].energy = static_cast<float>(energy[i]);
    cluster_of[energy[i]] = st.cluster_of[i];
  }
  st.cluster_of = std::move(cluster_of);
  std::vector<Single> scratch(st.singles.size());
  sort_singles(st.singles.data(), st.singles.size(), scratch.data());
  return st;
}

struct EngineCounts {
  double prompts = 0, randoms = 0, delayed = 0, multiples = 0;
};

EngineCounts run_engine(const Settings& s, const Stream& st) {
  const CoincidenceParams p = CoincidenceParams::from(s);
  const std::size_t cap = 4 * st.singles.size() + 16;
  std::vector<CoincRecord> ps(cap), ds(cap);
  RecordBuffer prompts{ps.data(), cap}, delayed{ds.data(), cap};
  CoincidenceCounts counts;
  find_coincidences(st.singles.data(), st.singles.size(), p,
                    std::numeric_limits<std::uint64_t>::max(), true, prompts, delayed, counts);
  EXPECT_EQ(prompts.overflow + delayed.overflow, 0u);
  EngineCounts e;
  e.prompts = double(prompts.size);
  e.delayed = double(delayed.size);
  e.multiples = double(counts.multiples);
  for (std::size_t i = 0; i < prompts.size; ++i) {
    const CoincRecord& r = prompts.data[i];
    e.randoms += st.cluster_of[static_cast<std::uint32_t>(r.energy_a)] !=
                 st.cluster_of[static_cast<std::uint32_t>(r.energy_b)];
  }
  return e;
}

// The window model against the engine at ντ ≈ 0.1 (the mouse scanner's load at 80 MBq),
// where the dead-time and multiple terms are large: randoms, prompts, delayed and multiples
// agree within their Poisson errors (4σ, plus 0.3 % for the terms the model leaves out) for
// both modes and every modelled policy, and the singles-prompts estimate made from the
// stream's singles and prompts finds its randoms. Once with the two singles of a decay at
// one time (the model is then exact; the winner policies too, since the energies are
// exchangeable), once with a 500 ps time resolution (first order in δ/τ).
TEST(Randoms, WindowModelMatchesTheEngineOnAKnownStream) {
  for (const double resolution_ps : {0.0, 500.0}) {
    Settings s = default_settings();
    s.coincidence.delayed.enabled = true;
    s.coincidence.time_resolution_ps = resolution_ps;
    const double lambda = 1.75e7, mu = 7.5e6, duration_s = 0.03;
    const Stream st = make_stream(s, lambda, mu, duration_s, 42);
    ASSERT_GT(st.singles.size(), 900'000u);
    std::vector<double> bdm_rate(st.bdm_singles.size());
    for (std::size_t b = 0; b < bdm_rate.size(); ++b) bdm_rate[b] = st.bdm_singles[b] / duration_s;

    for (WindowMode mode : {WindowMode::first_open, WindowMode::every_single})
      for (Policy policy : {Policy::kill_multiples, Policy::take_all_goods,
                            Policy::kill_all_if_multiple_goods, Policy::take_winner_of_goods}) {
        s.coincidence.window_mode = mode;
        s.coincidence.policy = policy;
        const RandomsSettings rs = RandomsSettings::from(s);
        const double g = random_pair_good_fraction(rs, bdm_rate);
        const EngineCounts e = run_engine(s, st);
        const WindowModelRates m = window_model_rates(rs, lambda, mu, g);
        const std::string what =
            std::string(mode == WindowMode::first_open ? "first_open " : "every_single ") +
            to_string(policy) + " at " + std::to_string(resolution_ps) + " ps";
        ASSERT_GT(e.randoms, 20000) << what;
        // The stream itself is Poisson: its counts scatter by √n around the model's.
        auto near = [&](double measured, double model_rate, const char* name) {
          const double expect = model_rate * duration_s;
          EXPECT_NEAR(measured / expect, 1.0, 4.0 / std::sqrt(expect) + 0.003)
              << what << " " << name;
        };
        near(e.randoms, m.randoms_per_s, "randoms");
        near(e.prompts, m.prompts_per_s, "prompts");
        near(e.delayed, m.delayed_per_s, "delayed");
        near(e.multiples, m.multiples_per_s, "multiples");

        double singles = 0;
        for (double r : bdm_rate) singles += r;
        const SinglesPromptsEstimate sp =
            singles_prompts_randoms(rs, singles, e.prompts / duration_s, g);
        const double ratio = sp.randoms_per_s * duration_s / e.randoms;
        EXPECT_NEAR(ratio, 1.0, 4.0 / std::sqrt(e.randoms) + 0.003) << what << " singles-prompts";
      }
  }
}

}  // namespace
}  // namespace petdaq

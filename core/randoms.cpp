#include "core/randoms.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/geometry.h"

namespace petdaq {

RandomsSettings RandomsSettings::from(const Settings& s) {
  const Geometry g = Geometry::from(s.scanner);
  const double tick_s = s.scanner.tick_ps * 1e-12;
  const auto window_ticks =
      static_cast<double>(ps_to_ticks(s.coincidence.window_ps, s.scanner.tick_ps));
  const bool closed = s.coincidence.window_edge == WindowEdge::closed;
  RandomsSettings rs;
  rs.window_s = (window_ticks + (closed ? 0.5 : -0.5)) * tick_s;
  rs.delayed_window_s = (window_ticks + (closed ? 1.0 : 0.0)) * tick_s;
  // Mean |difference| of two times with a Gaussian difference of this FWHM.
  rs.pair_spread_s = s.coincidence.time_resolution_ps * 1e-12 / 2.354820045 * std::sqrt(2.0 / M_PI);
  rs.mode = s.coincidence.window_mode;
  rs.policy = s.coincidence.policy;
  rs.delayed = s.coincidence.delayed.enabled;
  rs.min_sector_difference = s.coincidence.min_sector_difference;
  rs.bdm_transaxial = g.bdm_transaxial;
  rs.bdm_axial = g.bdm_axial;
  rs.crystals_per_bdm = g.du_per_bdm() * g.crystals_per_du();
  return rs;
}

namespace {

bool bdms_can_pair(const RandomsSettings& rs, std::uint32_t a, std::uint32_t b) {
  if (rs.min_sector_difference == 0) return true;
  const std::uint32_t n = std::max(rs.bdm_transaxial, 1u);
  return sector_distance(a % n, b % n, n) >= rs.min_sector_difference;
}

// Σ over ordered pairs of different crystals that make a good pair of s_i·s_j, from the
// per-BDM sums S_b and the per-BDM sums of squares Q_b = Σ_{i in b} s_i² (the pairs of a
// crystal with itself, which are never good); calls pair(a, b, value) for a <= b. Whether
// two crystals can pair depends only on their BDMs' sectors, so this is the crystal sum.
template <class SelfFn, class PairFn>
double good_pair_sum(const RandomsSettings& rs, std::span<const double> bdm, SelfFn self,
                     PairFn pair) {
  double sum = 0;
  for (std::size_t a = 0; a < bdm.size(); ++a) {
    for (std::size_t b = a; b < bdm.size(); ++b) {
      if (!bdms_can_pair(rs, static_cast<std::uint32_t>(a), static_cast<std::uint32_t>(b))) {
        pair(a, b, 0.0);
        continue;
      }
      // Two crystals of one BDM: every ordered pair but a crystal with itself.
      const double v = a == b ? bdm[a] * bdm[a] - self(a) : 2.0 * bdm[a] * bdm[b];
      pair(a, b, v);
      sum += v;
    }
  }
  return sum;
}

// The same with each BDM's rate spread evenly over its crystals: Q_b = S_b² / n_b.
template <class PairFn>
double good_pair_sum(const RandomsSettings& rs, std::span<const double> bdm, PairFn pair) {
  const double crystals = std::max(rs.crystals_per_bdm, 1u);
  return good_pair_sum(
      rs, bdm, [&](std::size_t a) { return bdm[a] * bdm[a] / crystals; }, pair);
}

double total(std::span<const double> v) {
  double s = 0;
  for (const double x : v) s += x;
  return s;
}

}  // namespace

double random_pair_good_fraction(const RandomsSettings& rs,
                                 std::span<const double> bdm_singles_per_s) {
  const double s = total(bdm_singles_per_s);
  if (!(s > 0)) return 1.0;
  return good_pair_sum(rs, bdm_singles_per_s, [](std::size_t, std::size_t, double) {}) / (s * s);
}

double singles_rate_randoms(const RandomsSettings& rs, std::span<const double> bdm_singles_per_s) {
  // 2τ Σ_{i<j} s_i s_j = τ Σ_{i≠j} s_i s_j over good pairs.
  return rs.window_s *
         good_pair_sum(rs, bdm_singles_per_s, [](std::size_t, std::size_t, double) {});
}

void singles_rate_randoms_by_bdm_pair(const RandomsSettings& rs,
                                      std::span<const double> bdm_singles_per_s,
                                      std::span<double> out) {
  const std::size_t n = bdm_singles_per_s.size();
  std::fill(out.begin(), out.end(), 0.0);
  if (out.size() < n * n) return;
  good_pair_sum(rs, bdm_singles_per_s,
                [&](std::size_t a, std::size_t b, double v) { out[a * n + b] = rs.window_s * v; });
}

double singles_rate_randoms_by_bdm_pair(const RandomsSettings& rs, const Geometry& geometry,
                                        std::span<const double> crystal_singles_per_s,
                                        std::span<double> out) {
  const std::size_t n = geometry.bdm_count();
  const bool fill = out.size() >= n * n;
  if (fill) std::fill(out.begin(), out.end(), 0.0);
  std::vector<double> bdm(n, 0.0), squares(n, 0.0);
  const std::size_t crystals = std::min<std::size_t>(crystal_singles_per_s.size(),
                                                     geometry.crystal_count());
  for (std::size_t i = 0; i < crystals; ++i) {
    const double s = crystal_singles_per_s[i];
    const std::uint32_t b = geometry.address_of(static_cast<std::uint32_t>(i)).bdm;
    bdm[b] += s;
    squares[b] += s * s;
  }
  return rs.window_s * good_pair_sum(
                           rs, bdm, [&](std::size_t a) { return squares[a]; },
                           [&](std::size_t a, std::size_t b, double v) {
                             if (fill) out[a * n + b] = rs.window_s * v;
                           });
}

namespace {

// Which windows the model follows. With min_sector_difference 0 every pair of different
// crystals is good, so kill_all_if_multiple_goods is kill_multiples and the three winner
// policies keep one pair of every multiple window (up to same-crystal pairs).
enum class ModelKind { none, kill, all_goods, winner };

ModelKind model_kind(const RandomsSettings& rs) {
  const bool any_pair = rs.min_sector_difference == 0;
  switch (rs.policy) {
    case Policy::kill_multiples:
      return ModelKind::kill;
    case Policy::take_all_goods:
      return ModelKind::all_goods;
    case Policy::kill_all_if_multiple_goods:
      return any_pair ? ModelKind::kill : ModelKind::none;
    case Policy::take_winner_of_goods:
    case Policy::take_winner_if_good:
    case Policy::take_winner_if_all_good:
      return any_pair ? ModelKind::winner : ModelKind::none;
  }
  return ModelKind::none;
}

// The winner policies keep one pair of a multiple window, chosen by energy sum; the model
// takes it to be any candidate pair with equal chance (energy-blind). Returns, per window,
// the probability that the window has k >= 3 members and keeps a random pair. After the
// opener come Poisson(x) clusters, each a pair with probability p. `first_open`: the opener
// is itself such a cluster and every pair of members is a candidate; otherwise the opener
// is the earlier single of a pair (its partner in the window) and the candidates are the
// opener with each other member.
double winner_random_multiple(double x, double p, bool first_open) {
  double sum = 0;
  double poisson = std::exp(-x);  // P(n clusters after the opener)
  for (int n = 0; n < 64 && (n <= x || poisson > 1e-15); ++n) {
    const int m = first_open ? n + 1 : n;  // clusters of random size
    double choose = 1;                     // C(m, j)
    for (int j = 0; j <= m; ++j) {
      const double binom = choose * std::pow(p, j) * std::pow(1.0 - p, m - j);
      const double k = first_open ? m + j : 2 + m + j;  // members
      if (k >= 3) {
        // True candidates: one per pair cluster among C(k,2) (first_open), or the opener's
        // partner among its k - 1 pairs.
        const double random_share =
            first_open ? 1.0 - j / (0.5 * k * (k - 1)) : 1.0 - 1.0 / (k - 1);
        sum += poisson * binom * random_share;
      }
      choose = choose * (m - j) / (j + 1.0);
    }
    poisson *= x / (n + 1.0);
  }
  return sum;
}

}  // namespace

bool window_model_covers(const RandomsSettings& rs) { return model_kind(rs) != ModelKind::none; }

bool window_model_is_energy_blind(const RandomsSettings& rs) {
  return model_kind(rs) == ModelKind::winner;
}

WindowModelRates window_model_rates(const RandomsSettings& rs, double lambda, double mu, double g) {
  WindowModelRates m;
  const double tau = rs.window_s, tau_d = rs.delayed_window_s;
  const double nu = lambda + mu;       // clusters: an unpaired single or a decay's two singles
  const double s = lambda + 2.0 * mu;  // singles
  if (!(nu > 0)) return m;
  const double e = std::exp(-nu * tau), e_d = std::exp(-nu * tau_d);
  // Pairs whose two singles lie on either side of a given instant, per unit time: μδ. Such a
  // pair at a window's edge acts as two unrelated singles (first order in δ/τ).
  const double straddle = mu * rs.pair_spread_s;
  const ModelKind kind = model_kind(rs);
  // The winner policies: kill_multiples's k = 2 windows plus one pair of each multiple.
  const bool winner = kind == ModelKind::winner;
  const bool kill = kind == ModelKind::kill || winner;
  // Probability that a window holds at least two more singles than its opener cluster
  // brings: for an unpaired opener, ≥ 2 singles after it; for a pair, ≥ 1. An unpaired
  // opener whose window holds only a pair straddling its end has k = 2, not 3.
  const double unpaired_multiple = 1.0 - e * (1.0 + lambda * tau + straddle);
  const double pair_multiple = 1.0 - e;
  if (rs.mode == WindowMode::first_open) {
    // Openers: the first single after each window, a non-paralysable dead time τ per cluster.
    const double openers = nu / (1.0 + nu * tau);
    m.multiples_per_s = openers * (lambda * unpaired_multiple + mu * pair_multiple) / nu;
    if (kill) {
      // k = 2 from two clusters: an unpaired opener and exactly one unpaired single after it,
      // or exactly one pair whose later single falls past the window's end.
      m.randoms_per_s = g * openers * (lambda / nu) * (lambda * tau + straddle) * e;
      m.prompts_per_s = m.randoms_per_s + openers * (mu / nu) * e;
      // A delayed window holds one single when it holds one unpaired single, or one pair
      // straddling either of its edges.
      m.delayed_per_s = g * openers * (lambda * tau_d + 2.0 * straddle) * e_d;
      if (winner) {
        // One pair of every multiple, and one opener pair of every delayed window with
        // at least one single (all of them random).
        const double random_multiples = openers * winner_random_multiple(nu * tau, mu / nu, true);
        m.randoms_per_s += g * random_multiples;
        m.prompts_per_s += g * m.multiples_per_s;
        m.delayed_per_s = g * openers * (1.0 - e_d);
      }
    } else if (kind == ModelKind::all_goods) {
      // Every pair of members from different clusters: E[C(m,2)]·E[c]², m = 1 + Poisson(ντ).
      // A pair straddling the window's end loses its later single (about s/ν random pairs
      // with the other members, and its true pair); that single opens the next window, whose
      // pairs the renewal rate already counts.
      m.randoms_per_s =
          g * openers *
          ((s / nu) * (s / nu) * nu * tau * (1.0 + 0.5 * nu * tau) - straddle * (s / nu));
      m.prompts_per_s = m.randoms_per_s + mu - openers * straddle;
      m.delayed_per_s = g * openers * s * tau_d;
    }
  } else {
    // Every single opens a window. Unpaired singles and the later single of a pair see only
    // other clusters after them; the earlier single of a pair also sees its partner.
    m.multiples_per_s = nu * unpaired_multiple + mu * pair_multiple;
    if (kill) {
      // Straddling pairs: one past the window's end, or one whose earlier single precedes
      // the opener and whose later single joins its window.
      m.randoms_per_s = g * nu * (lambda * tau + 2.0 * straddle) * e;
      m.prompts_per_s = m.randoms_per_s + mu * e;
      m.delayed_per_s = g * s * (lambda * tau_d + 2.0 * straddle) * e_d;
      if (winner) {
        // Openers that see no partner keep a random pair of any multiple; the earlier single
        // of a pair keeps its partner with chance 1 / (k - 1).
        const double random_multiples =
            nu * unpaired_multiple + mu * winner_random_multiple(nu * tau, mu / nu, false);
        m.randoms_per_s += g * random_multiples;
        m.prompts_per_s += g * m.multiples_per_s;
        m.delayed_per_s = g * s * (1.0 - e_d);
      }
    } else if (kind == ModelKind::all_goods) {
      // Each single pairs with the later singles of other decays within τ: S²τ whatever
      // the spread of a decay's two times.
      m.randoms_per_s = g * s * s * tau;
      m.prompts_per_s = m.randoms_per_s + mu;
      m.delayed_per_s = g * s * s * tau_d;
    }
  }
  return m;
}

SinglesPromptsEstimate singles_prompts_randoms(const RandomsSettings& rs, double singles_per_s,
                                               double prompts_per_s, double good_fraction) {
  SinglesPromptsEstimate e;
  if (!window_model_covers(rs)) return e;
  e.modelled = true;
  if (!(singles_per_s > 0)) return e;
  const double s = singles_per_s;
  auto prompts_at = [&](double mu) {
    return window_model_rates(rs, s - 2.0 * mu, mu, good_fraction).prompts_per_s;
  };
  // The model's prompts grow with μ while 4λτ < 1 (far beyond any useful rate), so the
  // measured prompts fix μ by bisection; outside the model's range μ is clamped.
  double lo = 0, hi = 0.5 * s;
  if (!(prompts_per_s > prompts_at(lo))) {
    hi = lo;
  } else if (!(prompts_per_s < prompts_at(hi))) {
    lo = hi;
  } else {
    for (int i = 0; i < 100 && hi - lo > 1e-12 * s; ++i) {
      const double mid = 0.5 * (lo + hi);
      (prompts_at(mid) < prompts_per_s ? lo : hi) = mid;
    }
  }
  e.pairs_per_s = 0.5 * (lo + hi);
  e.unpaired_per_s = s - 2.0 * e.pairs_per_s;
  e.randoms_per_s =
      window_model_rates(rs, e.unpaired_per_s, e.pairs_per_s, good_fraction).randoms_per_s;
  return e;
}

std::string_view randoms_method_name(RandomsMethod m) {
  switch (m) {
    case RandomsMethod::delayed:
      return "delayed";
    case RandomsMethod::singles_rate:
      return "singles_rate";
    case RandomsMethod::singles_prompts:
      return "singles_prompts";
  }
  return "delayed";
}

RandomsMethod best_randoms_method(const RandomsSettings& rs) {
  if (window_model_covers(rs)) return RandomsMethod::singles_prompts;
  return rs.delayed ? RandomsMethod::delayed : RandomsMethod::singles_rate;
}

RandomsEstimates estimate_randoms(const RandomsSettings& rs,
                                  std::span<const double> bdm_singles_per_s, double prompts_per_s,
                                  double delayed_per_s) {
  RandomsEstimates out;
  const double g = random_pair_good_fraction(rs, bdm_singles_per_s);
  out.singles_rate_per_s = singles_rate_randoms(rs, bdm_singles_per_s);
  out.singles_prompts = singles_prompts_randoms(rs, total(bdm_singles_per_s), prompts_per_s, g);
  out.best = best_randoms_method(rs);
  switch (out.best) {
    case RandomsMethod::singles_prompts:
      out.best_per_s = out.singles_prompts.randoms_per_s;
      break;
    case RandomsMethod::singles_rate:
      out.best_per_s = out.singles_rate_per_s;
      break;
    case RandomsMethod::delayed:
      out.best_per_s = delayed_per_s;
      break;
  }
  return out;
}

}  // namespace petdaq

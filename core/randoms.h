// Randoms estimates from rates (docs/randoms.md): the singles-rate estimate 2τ·S_i·S_j and a
// policy-aware singles-prompts estimate that models what each window mode and multiplicity
// policy (DESIGN section 5) does to accidental pairs. Pure functions of rates and the
// coincidence settings: no state, no allocation, usable in the daemon's rates interval and
// in the physics check alike.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "core/settings.h"

namespace petdaq {

struct Geometry;

// What the estimators need from the settings.
struct RandomsSettings {
  // τ: the expected time span, after an opener, in which a later single joins its prompt
  // window (W plus half a tick for a closed edge, minus half a tick for a half-open one:
  // singles in the opener's own tick join only when later in the order, half of them).
  double window_s = 0;
  double delayed_window_s = 0;  // the same for the delayed interval (every tick of it counts)
  // δ: the mean time between the two singles of one decay, E|t_b - t_a|, from the scanner's
  // coincidence time resolution (FWHM F of a Gaussian: δ = F / 2.3548 · sqrt(2/π)). A decay
  // whose two singles straddle a window's edge acts as two unrelated singles (first order
  // in δ/τ, docs/randoms.md).
  double pair_spread_s = 0;
  WindowMode mode = WindowMode::first_open;
  Policy policy = Policy::kill_multiples;
  bool delayed = false;
  std::uint32_t min_sector_difference = 0;
  std::uint32_t bdm_transaxial = 1;
  std::uint32_t bdm_axial = 1;
  std::uint32_t crystals_per_bdm = 1;

  static RandomsSettings from(const Settings& s);
};

// Fraction of the pairs of two unrelated singles that are good pairs (DESIGN section 5),
// from the per-BDM singles rates (index b = b_axial * bdm_transaxial + b_trans), with each
// BDM's singles spread evenly over its crystals. 1 when there are no singles.
double random_pair_good_fraction(const RandomsSettings& rs,
                                 std::span<const double> bdm_singles_per_s);

// Singles-rate randoms: 2τ·S_i·S_j summed over the good pairs of crystals (i < j), per second.
double singles_rate_randoms(const RandomsSettings& rs, std::span<const double> bdm_singles_per_s);

// The same per pair of BDMs: out[a * n + b] for a <= b (the pairs of crystals with one in
// BDM a and one in BDM b; a == b: both in BDM a), other entries 0. out has n * n entries.
void singles_rate_randoms_by_bdm_pair(const RandomsSettings& rs,
                                      std::span<const double> bdm_singles_per_s,
                                      std::span<double> out);

// The same from per-crystal singles rates (index = crystal id of `geometry`; crystals past
// the span count 0): exact, including the pairs of two crystals of one BDM, which lose
// Σ s_i² over its crystals rather than S_b² / n_b. Fills out (n * n entries, n = BDMs; a
// smaller span is left alone) as above and returns the total, 2τ Σ_{i<j good} s_i s_j.
// Called with counts N_i instead of rates it returns τ Σ N_i N_j (the histograms' use).
double singles_rate_randoms_by_bdm_pair(const RandomsSettings& rs, const Geometry& geometry,
                                        std::span<const double> crystal_singles_per_s,
                                        std::span<double> out);

// The window model of docs/randoms.md: singles are unpaired (rate λ: background, or a decay
// whose other photon gave no single) or come as the two singles of one decay (μ decays/s),
// all Poisson. Given λ and μ it predicts the sorter's rates for the policy and mode.
struct WindowModelRates {
  double prompts_per_s = 0;
  double randoms_per_s = 0;  // prompts whose two singles come from different decays
  double delayed_per_s = 0;
  double multiples_per_s = 0;  // prompt windows with k >= 3
};
// Is the policy modelled? kill_multiples and take_all_goods in both window modes; with
// min_sector_difference 0 (every pair of different crystals good) also
// kill_all_if_multiple_goods, which then emits what kill_multiples emits, and the winner
// policies, which keep one pair of every multiple window.
bool window_model_covers(const RandomsSettings& rs);
// The three winner policies (min_sector_difference 0) are modelled approximately: a
// multiple window keeps one pair, taken to be random with the share of random pairs among
// its candidate pairs, whereas the engine picks the largest energy sum.
bool window_model_is_energy_blind(const RandomsSettings& rs);
WindowModelRates window_model_rates(const RandomsSettings& rs, double unpaired_per_s,
                                    double pairs_per_s, double good_fraction);

// The singles-prompts estimate: solves the model for the pair rate μ that reproduces the
// measured prompt rate with S = λ + 2μ singles, and returns the model's random prompts.
struct SinglesPromptsEstimate {
  bool modelled = false;  // false: the policy is not modelled, the rest is 0
  double randoms_per_s = 0;
  double unpaired_per_s = 0;  // λ
  double pairs_per_s = 0;     // μ
};
SinglesPromptsEstimate singles_prompts_randoms(const RandomsSettings& rs, double singles_per_s,
                                               double prompts_per_s, double good_fraction);

enum class RandomsMethod : std::uint8_t { delayed, singles_rate, singles_prompts };
std::string_view randoms_method_name(RandomsMethod m);

// The least biased estimate for the running settings: singles-prompts where the policy is
// modelled, otherwise the delayed window (singles-rate when delayed windows are off).
RandomsMethod best_randoms_method(const RandomsSettings& rs);

// Every estimate from one interval's rates, and the best one for the settings.
struct RandomsEstimates {
  double singles_rate_per_s = 0;
  SinglesPromptsEstimate singles_prompts;
  RandomsMethod best = RandomsMethod::delayed;
  double best_per_s = 0;
};
RandomsEstimates estimate_randoms(const RandomsSettings& rs,
                                  std::span<const double> bdm_singles_per_s, double prompts_per_s,
                                  double delayed_per_s);

}  // namespace petdaq

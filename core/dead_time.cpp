#include "core/dead_time.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>

#include "core/calibration.h"

namespace petdaq {

const char* dead_time_kind_name(DeadTimeKind k) {
  switch (k) {
    case DeadTimeKind::non_paralysable: return "non_paralysable";
    case DeadTimeKind::paralysable: return "paralysable";
    case DeadTimeKind::none: break;
  }
  return "none";
}

double lossless_rate(DeadTimeKind kind, double m, double tau, bool* saturated) {
  if (saturated) *saturated = false;
  if (!(m > 0) || !(tau > 0) || kind == DeadTimeKind::none) return std::max(m, 0.0);
  if (kind == DeadTimeKind::non_paralysable) {
    // m = n / (1 + n τ): n = m / (1 − m τ); at m τ ≥ 1 no rate gives it. Capped at m τ = 0.99.
    const double x = m * tau;
    if (x >= 0.99) {
      if (saturated) *saturated = true;
      return 0.99 / tau / (1 - 0.99);
    }
    return m / (1 - x);
  }
  // m = n e^(−n τ), increasing on [0, 1/τ] up to 1/(e τ): bisection on the lower branch.
  const double max_m = 1 / (std::exp(1.0) * tau);
  if (m >= max_m) {
    if (saturated) *saturated = true;
    return 1 / tau;
  }
  double lo = m, hi = 1 / tau;  // n ≥ m always
  for (int i = 0; i < 100 && hi - lo > 1e-12 * hi; ++i) {
    const double mid = 0.5 * (lo + hi);
    (mid * std::exp(-mid * tau) < m ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

LiveTime live_time(const DeadTimeModel& model, std::span<const double> singles_per_s) {
  LiveTime out;
  out.bdm.assign(singles_per_s.size(), 1.0);
  if (model.kind == DeadTimeKind::none || model.tau_s.size() != singles_per_s.size()) return out;
  double sum_m = 0, sum_n = 0, sum_n2tau = 0;
  for (std::size_t b = 0; b < singles_per_s.size(); ++b) {
    const double m = std::max(singles_per_s[b], 0.0);
    bool saturated = false;
    const double n = lossless_rate(model.kind, m, model.tau_s[b], &saturated);
    out.saturated_bdms += saturated;
    out.bdm[b] = n > 0 ? m / n : 1.0;
    sum_m += m;
    sum_n += n;
    sum_n2tau += n * n * model.tau_s[b];
  }
  out.singles = sum_n > 0 ? sum_m / sum_n : 1.0;
  out.load = sum_n > 0 ? sum_n2tau / sum_n : 0.0;
  // A coincidence needs both boards live; with pair rates in proportion to the product of
  // the boards' lossless singles rates, Σ n_i n_j L_i L_j / Σ n_i n_j = (Σ m / Σ n)² if the
  // boards were dead independently. They are not: an earlier decay whose two photons reached
  // both boards made both dead at once, which leaves more pairs live than the product
  // (docs/dead_time.md); the calibrated κ scales that excess with the load x.
  out.coincidences = std::clamp(
      out.singles * out.singles * (1 + model.coincidence_correlation * out.load), 0.0, 1.0);
  return out;
}

DeadTimeModel load_dead_time_model(const std::filesystem::path& file, std::uint32_t bdm_count) {
  auto fail = [&](const std::string& why) -> DeadTimeModel {
    throw CalibrationError(file.string() + ": " + why);
  };
  YAML::Node root;
  try {
    root = YAML::LoadFile(file.string());
  } catch (const YAML::Exception& e) {
    return fail(std::string("not a dead-time table: ") + e.what());
  }
  if (!root.IsMap()) return fail("not a dead-time table (a YAML map is expected)");
  DeadTimeModel model;
  try {
    if (!root["format"] || root["format"].as<std::string>() != "petdaq dead-time 1")
      return fail("format is not 'petdaq dead-time 1'");
    const std::string kind = root["model"] ? root["model"].as<std::string>() : "";
    if (kind == "non_paralysable")
      model.kind = DeadTimeKind::non_paralysable;
    else if (kind == "paralysable")
      model.kind = DeadTimeKind::paralysable;
    else
      return fail("model '" + kind + "' is not non_paralysable or paralysable");
    const YAML::Node tau = root["tau_s"];
    if (!tau || !tau.IsSequence()) return fail("tau_s is not a list");
    if (tau.size() != bdm_count)
      return fail("tau_s has " + std::to_string(tau.size()) + " entries, the scanner " +
                  std::to_string(bdm_count) + " BDMs");
    for (const YAML::Node& v : tau) {
      const double t = v.as<double>();
      if (!(t >= 0 && t < 1e-3)) return fail("tau_s entry " + std::to_string(t) + " is not in [0, 1 ms)");
      model.tau_s.push_back(t);
    }
    if (const YAML::Node k = root["coincidence_correlation"]) {  // optional: 0 without
      const double v = k.as<double>();
      if (!(v >= -1 && v <= 10))
        return fail("coincidence_correlation " + std::to_string(v) + " is not in [-1, 10]");
      model.coincidence_correlation = v;
    }
  } catch (const YAML::Exception& e) {
    return fail(std::string("malformed field: ") + e.what());
  }
  return model;
}

}  // namespace petdaq

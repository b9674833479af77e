// The front end's dead-time model (docs/dead_time.md): per BDM, an effective dead time τ on
// the scale of the board's in-window singles rate, non-paralysable (m = n / (1 + n τ)) or
// paralysable (m = n e^(−n τ)). `petdaq-calibrate dead-time` fits it from acquisitions at
// several activities; the daemon turns the measured singles rates into live-time fractions
// with it (the `live_time_model` object of the `rates` document).
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace petdaq {

enum class DeadTimeKind : std::uint8_t { none, non_paralysable, paralysable };

const char* dead_time_kind_name(DeadTimeKind k);

struct DeadTimeModel {
  DeadTimeKind kind = DeadTimeKind::none;
  std::vector<double> tau_s;  // per BDM (b = b_axial * transaxial + b_trans)
  // κ: the boards of a true pair are dead together more often than apart (the two photons
  // of one earlier decay start both dead times), so the coincidences' live fraction is
  // singles² · (1 + κ x), x = Σ n_b (n_b τ_b) / Σ n_b. Fitted on coincident frames.
  double coincidence_correlation = 0;

  bool operator==(const DeadTimeModel&) const = default;
};

// The lossless rate n that gives the measured rate m under dead time tau (the lower branch
// for a paralysable unit). Where m reaches the model's maximum (1/τ, or 1/(eτ)) there is no
// such n: returns the n at the maximum and sets *saturated.
double lossless_rate(DeadTimeKind kind, double measured_per_s, double tau_s, bool* saturated);

struct LiveTime {
  std::vector<double> bdm;          // m / n per BDM (1 where the board counted nothing)
  double singles = 1;               // Σ m / Σ n
  double coincidences = 1;          // singles² · (1 + κ x), at most 1
  double load = 0;                  // x = Σ n_b (n_b τ_b) / Σ n_b
  std::uint32_t saturated_bdms = 0;  // boards at or past the model's maximum rate
};

// Live-time fractions from the measured per-BDM singles rates (per second of acquisition).
// With no model every fraction is 1.
LiveTime live_time(const DeadTimeModel& model, std::span<const double> singles_per_s);

// Reads the YAML table `petdaq-calibrate dead-time` writes; throws CalibrationError naming
// the file and the field when it is malformed or holds another number of boards.
DeadTimeModel load_dead_time_model(const std::filesystem::path& file, std::uint32_t bdm_count);

}  // namespace petdaq

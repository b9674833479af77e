// The physics check: an acquisition of petdaq-sim through the core pipeline (convert, sort,
// coincidence), every prompt classified with the truth (docs/simulator.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <vector>

#include "core/counters.h"
#include "core/settings.h"

namespace petdaq::sim {

struct CheckResult {
  double duration_s = 0;
  std::uint64_t frames = 0;
  std::uint64_t bad_frames = 0;       // every frame.* refusal of the convert stage
  std::uint64_t no_crystal = 0;       // of which: flood-map pixel with no crystal
  std::uint64_t singles = 0;          // inside the energy window
  std::uint64_t energy_rejected = 0;
  std::uint64_t prompts = 0;
  std::uint64_t delayed = 0;
  std::uint64_t multiples = 0;
  std::uint64_t delayed_multiples = 0;
  std::uint64_t trues = 0;     // both singles from one decay, neither scattered in the phantom
  std::uint64_t scatters = 0;  // one decay, at least one photon scattered
  std::uint64_t randoms = 0;   // different decays, or a background single
  std::uint64_t randoms_with_background = 0;
  std::uint64_t trues_mispositioned = 0;  // true prompts with a single in the wrong crystal
  // Decays whose two photons both became singles in different crystals, and of those the
  // ones isolated (no other single within W on either side), which kill_multiples must
  // find as prompts; `isolated_found` counts those found.
  std::uint64_t truth_pairs = 0;
  std::uint64_t truth_pairs_isolated = 0;
  std::uint64_t truth_pairs_isolated_found = 0;
  std::uint64_t truth_pairs_found = 0;
  // Singles per BDM over the acquisition, and the randoms estimates of core/randoms.h made
  // from them and the prompt count (counts over the acquisition, not rates).
  std::vector<std::uint64_t> bdm_singles;
  double randoms_singles_rate = 0;
  double randoms_singles_prompts = 0;  // NaN when the policy is not modelled
  double model_delayed = 0;            // the window model's delayed and multiples there
  double model_multiples = 0;

  double rate(std::uint64_t n) const { return duration_s > 0 ? n / duration_s : 0; }
  double necr_per_s() const {
    const double t = rate(trues), total = rate(trues + scatters + randoms);
    return total > 0 ? t * t / total : 0;
  }
  double scatter_fraction() const {
    return trues + scatters ? double(scatters) / double(trues + scatters) : 0;
  }
};

// Runs the check on a directory written by petdaq-sim (petdaq.yaml, frames.bin, truth.bin,
// truth.json). `override_settings`, when given, replaces the coincidence settings of
// petdaq.yaml (to compare policies on one acquisition).
CheckResult check_acquisition(const std::filesystem::path& dir,
                              const CoincidenceSettings* override_coincidence = nullptr);

}  // namespace petdaq::sim

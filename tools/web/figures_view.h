// petdaq-web's figures panel: the CTR and the energy resolution of the run so far, fitted on
// each `histograms` message (core/figures.h; definitions in docs/figures.md).
#pragma once

#include <chrono>
#include <cstdint>

#include <nlohmann/json.hpp>

namespace petdaq {
struct HistogramFile;
}

namespace petdaq::web {

// {"signed_tof", "ctr" (null when not fitted), "energy_resolution" (global
// fit or null, the per-crystal distribution in bins of 0.25 % and the per-crystal map as an
// image of hundredths of a per cent, 0 where not fitted)}. The CTR per DU pair is
// petdaq-qa's (thousands of fits on a large scanner, too slow for every message).
//
// The per-crystal fits take about 0.07 ms a crystal (most of a second on a large scanner), so
// with a cache they are redone at most every FiguresCache::refit (and at each new run) and
// reused in between; the global fits are redone on every message.
struct FiguresCache {
  std::chrono::steady_clock::duration refit = std::chrono::seconds(10);
  bool valid = false;
  std::uint64_t run_id = 0;
  std::chrono::steady_clock::time_point fitted_at;
  nlohmann::json per_crystal;  // the "energy_resolution" members of the per-crystal fits
};
nlohmann::json figures_view(const HistogramFile& f, std::uint64_t crystals_per_ring,
                            std::uint64_t rings, FiguresCache* cache = nullptr);

}  // namespace petdaq::web

#include "tools/web/figures_view.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/figures.h"
#include "core/histograms.h"

namespace petdaq::web {

using nlohmann::json;

namespace {

json finite_or_null(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

}  // namespace

json figures_view(const HistogramFile& f, std::uint64_t crystals_per_ring, std::uint64_t rings,
                  FiguresCache* cache) {
  const auto now = std::chrono::steady_clock::now();
  const bool per_crystal = !cache || !cache->valid || cache->run_id != f.header.run_id ||
                           now - cache->fitted_at >= cache->refit;
  const ScannerFigures s = scanner_figures(f, per_crystal);
  json out = json::object();
  out["signed_tof"] = s.has_signed_tof;
  if (s.ctr.ok)
    out["ctr"] = {{"fwhm_ps", s.ctr.fwhm},        {"fwhm_err_ps", finite_or_null(s.ctr.fwhm_err)},
                  {"centre_ps", s.ctr.centre},    {"trues", s.ctr.area},
                  {"floor_per_bin", s.ctr.floor}};
  else
    out["ctr"] = nullptr;
  json e = json::object();
  if (s.energy.ok && s.energy.centre > 0)
    e["global"] = {{"percent", 100 * s.energy.fwhm / s.energy.centre},
                   {"err_percent", finite_or_null(100 * s.energy.fwhm_err / s.energy.centre)},
                   {"position_keV", s.energy.centre},
                   {"fwhm_keV", s.energy.fwhm}};
  else
    e["global"] = nullptr;
  if (!per_crystal) {
    e.update(cache->per_crystal);
    out["energy_resolution"] = std::move(e);
    return out;
  }
  e["crystals"] = s.resolution_percent.size();
  e["crystals_fitted"] = s.crystals_fitted;
  e["median_percent"] = finite_or_null(s.median_resolution_percent);
  // The distribution: bins of 0.25 % from 0; the last also holds everything above 40 %.
  constexpr double kBin = 0.25;
  constexpr std::size_t kBins = 160;
  std::vector<std::uint64_t> dist(kBins, 0);
  // The map: one pixel per crystal (rows: rings), in hundredths of a per cent.
  const bool map_fits = crystals_per_ring * rings == s.resolution_percent.size();
  std::vector<std::uint64_t> map(map_fits ? s.resolution_percent.size() : 0, 0);
  std::uint64_t lowest = 0, highest = 0;
  for (std::size_t c = 0; c < s.resolution_percent.size(); ++c) {
    const double r = s.resolution_percent[c];
    if (!std::isfinite(r) || r < 0) continue;
    ++dist[std::min(kBins - 1, static_cast<std::size_t>(r / kBin))];
    const auto v = static_cast<std::uint64_t>(std::llround(r * 100));
    if (map_fits) map[c] = v;
    lowest = lowest == 0 ? v : std::min(lowest, v);
    highest = std::max(highest, v);
  }
  e["distribution"] = {{"unit", "%"}, {"lo", 0.0}, {"width", kBin}, {"counts", std::move(dist)}};
  if (map_fits)
    e["map"] = {{"width", crystals_per_ring}, {"height", rings}, {"min", lowest},
                {"max", highest}, {"values", std::move(map)}};
  else
    e["map"] = nullptr;
  if (cache) {
    cache->per_crystal = e;
    cache->per_crystal.erase("global");
    cache->valid = true;
    cache->run_id = f.header.run_id;
    cache->fitted_at = now;
  }
  out["energy_resolution"] = std::move(e);
  return out;
}

}  // namespace petdaq::web

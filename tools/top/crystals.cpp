#include "tools/top/crystals.h"

#include <algorithm>
#include <stdexcept>

#include "core/geometry.h"
#include <nlohmann/json.hpp>

namespace petdaq::top {

namespace {

std::uint32_t dimension(const nlohmann::json& scanner, const char* key) {
  const auto v = scanner.find(key);
  if (v == scanner.end() || !v->is_number() || v->get<double>() < 1 || v->get<double>() > 256)
    throw HistogramFileError(std::string("histograms message: scanner.") + key + " missing");
  return static_cast<std::uint32_t>(v->get<double>());
}

}  // namespace

CrystalView analyse_crystals(const HistogramFile& f) {
  nlohmann::json meta;
  try {
    meta = nlohmann::json::parse(f.metadata);
  } catch (const nlohmann::json::exception& e) {
    throw HistogramFileError(std::string("histograms message: metadata: ") + e.what());
  }
  const auto found = meta.is_object() ? meta.find("scanner") : meta.end();
  if (found == meta.end() || !found->is_object())
    throw HistogramFileError("histograms message: no scanner in the metadata");
  const nlohmann::json* scanner = &*found;
  Geometry g;
  g.bdm_transaxial = dimension(*scanner, "bdm_transaxial");
  g.bdm_axial = dimension(*scanner, "bdm_axial");
  g.du_transaxial = dimension(*scanner, "du_transaxial");
  g.du_axial = dimension(*scanner, "du_axial");
  g.crystal_transaxial = dimension(*scanner, "crystal_transaxial");
  g.crystal_axial = dimension(*scanner, "crystal_axial");
  g.position_size = dimension(*scanner, "position_size");
  const HistDescriptor* singles = f.find("crystal_singles");
  if (!singles || singles->elements() != g.crystal_count())
    throw HistogramFileError("histograms message: crystal_singles does not match the scanner");

  CrystalView view;
  view.run_id = f.header.run_id;
  view.created_unix_ns = f.header.created_unix_ns;
  const std::uint32_t du_count = g.bdm_count() * g.du_per_bdm();
  const std::uint32_t per_du = g.crystals_per_du();
  std::vector<std::uint64_t> counts(std::size_t{du_count} * per_du);
  view.dus.resize(du_count);
  for (std::uint32_t c = 0; c < g.crystal_count(); ++c) {
    const CrystalAddress a = g.address_of(c);
    const std::uint32_t u = a.bdm * g.du_per_bdm() + a.du;
    const std::uint64_t n = f.value(*singles, c);
    counts[std::size_t{u} * per_du + a.crystal] = n;
    view.dus[u].singles += n;
  }
  std::vector<std::uint64_t> sorted(per_du);
  for (std::uint32_t u = 0; u < du_count; ++u) {
    DuSingles& d = view.dus[u];
    d.bdm = u / g.du_per_bdm();
    d.du = u % g.du_per_bdm();
    const auto first = counts.begin() + std::ptrdiff_t{u} * per_du;
    std::copy(first, first + per_du, sorted.begin());
    std::sort(sorted.begin(), sorted.end());
    d.median_crystal = per_du % 2 ? static_cast<double>(sorted[per_du / 2])
                                  : 0.5 * static_cast<double>(sorted[per_du / 2 - 1] + sorted[per_du / 2]);
    d.judged = d.median_crystal >= kMinMedianCounts;
    if (!d.judged) continue;
    for (std::uint32_t local = 0; local < per_du; ++local) {
      const double n = static_cast<double>(first[local]);
      const bool hot = n > kHotDeadFactor * d.median_crystal;
      const bool dead = n < d.median_crystal / kHotDeadFactor;
      if (!hot && !dead) continue;
      (hot ? d.hot : d.dead) += 1;
      view.flagged.push_back({g.crystal_id(d.bdm, d.du, local), d.bdm, d.du, local,
                              first[local], d.median_crystal, hot});
    }
  }
  return view;
}

}  // namespace petdaq::top

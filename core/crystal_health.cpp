#include "core/crystal_health.h"

#include <algorithm>

namespace petdaq {

CrystalHealth judge_crystals(const Geometry& g,
                             const std::function<std::uint64_t(std::uint32_t)>& singles,
                             double factor, double min_median) {
  CrystalHealth health;
  const std::uint32_t du_count = g.bdm_count() * g.du_per_bdm();
  const std::uint32_t per_du = g.crystals_per_du();
  std::vector<std::uint64_t> counts(std::size_t{du_count} * per_du);
  health.dus.resize(du_count);
  for (std::uint32_t c = 0; c < g.crystal_count(); ++c) {
    const CrystalAddress a = g.address_of(c);
    const std::uint32_t u = a.bdm * g.du_per_bdm() + a.du;
    const std::uint64_t n = singles(c);
    counts[std::size_t{u} * per_du + a.crystal] = n;
    health.dus[u].singles += n;
  }
  std::vector<std::uint64_t> sorted(per_du);
  for (std::uint32_t u = 0; u < du_count; ++u) {
    DuSingles& d = health.dus[u];
    d.bdm = u / g.du_per_bdm();
    d.du = u % g.du_per_bdm();
    const auto first = counts.begin() + std::ptrdiff_t{u} * per_du;
    std::copy(first, first + per_du, sorted.begin());
    std::sort(sorted.begin(), sorted.end());
    d.median_crystal =
        per_du % 2 ? static_cast<double>(sorted[per_du / 2])
                   : 0.5 * static_cast<double>(sorted[per_du / 2 - 1] + sorted[per_du / 2]);
    d.judged = d.median_crystal >= min_median;
    if (!d.judged) continue;
    for (std::uint32_t local = 0; local < per_du; ++local) {
      const double n = static_cast<double>(first[local]);
      const bool hot = n > factor * d.median_crystal;
      const bool dead = n < d.median_crystal / factor;
      if (!hot && !dead) continue;
      (hot ? d.hot : d.dead) += 1;
      (hot ? health.hot : health.dead) += 1;
      health.flagged.push_back({g.crystal_id(d.bdm, d.du, local), d.bdm, d.du, local,
                                first[local], d.median_crystal, hot});
    }
  }
  return health;
}

}  // namespace petdaq

#include "tools/top/crystals.h"

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
  CrystalHealth health =
      judge_crystals(g, [&](std::uint32_t c) { return f.value(*singles, c); });
  view.dus = std::move(health.dus);
  view.flagged = std::move(health.flagged);
  return view;
}

}  // namespace petdaq::top

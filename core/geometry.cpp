#include "core/geometry.h"

#include "core/settings.h"

namespace petdaq {

Geometry Geometry::from(const ScannerSettings& s) {
  Geometry g;
  g.bdm_transaxial = s.bdm_transaxial;
  g.bdm_axial = s.bdm_axial;
  g.du_transaxial = s.du_transaxial;
  g.du_axial = s.du_axial;
  g.crystal_transaxial = s.crystal_transaxial;
  g.crystal_axial = s.crystal_axial;
  g.position_size = s.position_size;
  return g;
}

}  // namespace petdaq

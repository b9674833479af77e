// Where each crystal is, in mm (DESIGN section 3, "Crystal positions"): the exports' scanner
// geometry and the live image's crystal table (core/image.h). The Python package (python/petdaq/geometry.py) computes the same, and the HDF5
// round-trip test checks the two against each other.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <numbers>

#include "core/geometry.h"
#include "core/settings.h"

namespace petdaq {

// Centre of the crystal (x, y across the ring, z along the axis), and the unit vector
// pointing from the axis out through its panel.
struct CrystalPlace {
  std::array<double, 3> centre_mm;
  std::array<double, 3> outward;
};

inline CrystalPlace crystal_place(const ScannerSettings& s, std::uint32_t crystal) {
  const Geometry g = Geometry::from(s);
  const std::uint32_t in_ring = crystal % g.crystals_per_ring();
  const std::uint32_t ring = crystal / g.crystals_per_ring();
  const std::uint32_t per_panel = g.du_transaxial * g.crystal_transaxial;
  const std::uint32_t b_trans = in_ring / per_panel, in_panel = in_ring % per_panel;
  const std::uint32_t d_trans = in_panel / g.crystal_transaxial;
  const std::uint32_t c_trans = in_panel % g.crystal_transaxial;
  const std::uint32_t per_bdm_axial = g.du_axial * g.crystal_axial;
  const std::uint32_t b_axial = ring / per_bdm_axial, in_bdm = ring % per_bdm_axial;
  const std::uint32_t d_axial = in_bdm / g.crystal_axial, c_axial = in_bdm % g.crystal_axial;

  const double pt = s.crystal_pitch_transaxial_mm, pa = s.crystal_pitch_axial_mm;
  const double du_width_t = g.crystal_transaxial * pt;
  const double panel_width = g.du_transaxial * du_width_t + (g.du_transaxial - 1.0) * s.du_gap_mm;
  const double across = d_trans * (du_width_t + s.du_gap_mm) + (c_trans + 0.5) * pt - 0.5 * panel_width;
  const double du_len_a = g.crystal_axial * pa;
  const double bdm_len_a = g.du_axial * du_len_a + (g.du_axial - 1.0) * s.du_gap_mm;
  const double axial_length = g.bdm_axial * bdm_len_a + (g.bdm_axial - 1.0) * s.bdm_gap_mm;
  const double z = b_axial * (bdm_len_a + s.bdm_gap_mm) + d_axial * (du_len_a + s.du_gap_mm) +
                   (c_axial + 0.5) * pa - 0.5 * axial_length;
  const double angle = 2.0 * std::numbers::pi * b_trans / g.bdm_transaxial;
  const double r = s.ring_radius_mm + 0.5 * s.crystal_depth_mm;
  const double c = std::cos(angle), sn = std::sin(angle);
  return {{r * c - across * sn, r * sn + across * c, z}, {c, sn, 0.0}};
}

}  // namespace petdaq

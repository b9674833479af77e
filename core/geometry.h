// Scanner addressing and the global crystal id of DESIGN section 3. Plain arithmetic on a
// small value type so the GPU compiles the very same functions.
#pragma once

#include <cstdint>

#include "proto/host_device.h"

namespace petdaq {

struct ScannerSettings;

struct CrystalAddress {
  std::uint32_t bdm;      // b = b_axial * bdm_transaxial + b_trans
  std::uint32_t du;       // d = d_trans * du_axial + d_axial
  std::uint32_t crystal;  // local: c = c_trans * crystal_axial + c_axial
};

struct Geometry {
  std::uint32_t bdm_transaxial = 0;
  std::uint32_t bdm_axial = 0;
  std::uint32_t du_transaxial = 0;
  std::uint32_t du_axial = 0;
  std::uint32_t crystal_transaxial = 0;
  std::uint32_t crystal_axial = 0;
  std::uint32_t position_size = 0;

  static Geometry from(const ScannerSettings& s);

  PETDAQ_HD std::uint32_t bdm_count() const { return bdm_transaxial * bdm_axial; }
  PETDAQ_HD std::uint32_t du_per_bdm() const { return du_transaxial * du_axial; }
  PETDAQ_HD std::uint32_t crystals_per_du() const { return crystal_transaxial * crystal_axial; }
  PETDAQ_HD std::uint32_t crystals_per_bdm_transaxial() const {
    return du_transaxial * crystal_transaxial;
  }
  PETDAQ_HD std::uint32_t crystals_per_ring() const {
    return bdm_transaxial * du_transaxial * crystal_transaxial;
  }
  PETDAQ_HD std::uint32_t ring_count() const { return bdm_axial * du_axial * crystal_axial; }
  PETDAQ_HD std::uint32_t crystal_count() const { return crystals_per_ring() * ring_count(); }

  // Local crystal index of a flood-map label: labels count crystals row by row from the top
  // of the flood image, whose row 0 is the DU's last transaxial crystal.
  PETDAQ_HD std::uint32_t local_crystal_of_label(std::uint32_t label) const {
    const std::uint32_t row = label / crystal_axial;
    const std::uint32_t col = label % crystal_axial;
    const std::uint32_t c_trans = crystal_transaxial - 1 - row;
    return c_trans * crystal_axial + col;
  }
  PETDAQ_HD std::uint32_t label_of_local_crystal(std::uint32_t c) const {
    const std::uint32_t c_trans = c / crystal_axial;
    const std::uint32_t c_axial = c % crystal_axial;
    return (crystal_transaxial - 1 - c_trans) * crystal_axial + c_axial;
  }

  PETDAQ_HD std::uint32_t crystal_id(std::uint32_t bdm, std::uint32_t du,
                                     std::uint32_t local) const {
    const std::uint32_t b_axial = bdm / bdm_transaxial;
    const std::uint32_t b_trans = bdm % bdm_transaxial;
    const std::uint32_t d_trans = du / du_axial;
    const std::uint32_t d_axial = du % du_axial;
    const std::uint32_t c_trans = local / crystal_axial;
    const std::uint32_t c_axial = local % crystal_axial;
    const std::uint32_t in_ring = b_trans * (du_transaxial * crystal_transaxial) +
                                  d_trans * crystal_transaxial + c_trans;
    const std::uint32_t ring =
        b_axial * (du_axial * crystal_axial) + d_axial * crystal_axial + c_axial;
    return ring * crystals_per_ring() + in_ring;
  }

  PETDAQ_HD CrystalAddress address_of(std::uint32_t crystal) const {
    const std::uint32_t in_ring = crystal % crystals_per_ring();
    const std::uint32_t ring = crystal / crystals_per_ring();
    const std::uint32_t b_trans = in_ring / (du_transaxial * crystal_transaxial);
    const std::uint32_t d_trans = (in_ring / crystal_transaxial) % du_transaxial;
    const std::uint32_t c_trans = in_ring % crystal_transaxial;
    const std::uint32_t b_axial = ring / (du_axial * crystal_axial);
    const std::uint32_t d_axial = (ring / crystal_axial) % du_axial;
    const std::uint32_t c_axial = ring % crystal_axial;
    return {b_axial * bdm_transaxial + b_trans, d_trans * du_axial + d_axial,
            c_trans * crystal_axial + c_axial};
  }

  // Transaxial BDM index (sector) of a global crystal id.
  PETDAQ_HD std::uint32_t sector_of(std::uint32_t crystal) const {
    return (crystal % crystals_per_ring()) / crystals_per_bdm_transaxial();
  }
};

// The circular distance between two sectors on a ring of n sectors.
PETDAQ_HD std::uint32_t sector_distance(std::uint32_t a, std::uint32_t b, std::uint32_t n) {
  const std::uint32_t d = a > b ? a - b : b - a;
  return d < n - d ? d : n - d;
}

}  // namespace petdaq

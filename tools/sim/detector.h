// The simulated detector: where the crystals are (flat BDM panels around the ring), and the
// per-crystal response the calibration tables undo (gain, non-linearity, delay, flood map).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <numbers>
#include <vector>

#include "core/geometry.h"
#include "core/settings.h"
#include "tools/sim/sim.h"

namespace petdaq::sim {

// Where a photon line meets the detector.
struct DetectorHit {
  std::uint32_t bdm;
  std::uint32_t du;
  std::uint32_t local;    // local crystal index c = c_trans * crystal_axial + c_axial
  std::uint32_t crystal;  // global id
  double distance_mm;     // from the ray's origin to the panel face
  double cos_incidence;   // between the ray and the panel normal
};

class DetectorModel {
 public:
  DetectorModel(const Settings& settings, const SimOptions& options);

  const Geometry& geometry() const { return geometry_; }
  double ring_radius_mm() const { return ring_radius_mm_; }
  double axial_extent_mm() const { return total_a_mm_; }
  double crystal_volume_cc() const;

  // The first panel a unit ray from inside the ring crosses, and the crystal it enters;
  // false when it leaves through a gap or past the axial ends. The ray leaves the polygon
  // within half a panel's angle of where it leaves the circle the panel faces touch (the
  // exit point P and that point Q satisfy P.Q >= R^2), so only the panel facing Q and its
  // two neighbours can be the exit face: `centre`, from nearest_panel(Q), and no loop over
  // the ring.
  bool locate_near_panel(double px, double py, double pz, double ux, double uy, double uz,
                         std::uint32_t centre, DetectorHit& hit) const;

  // The panel whose face normal is nearest in angle to the point (qx, qy), as
  // panel + panels + 0.5 before truncation (in [panels / 2, 3 panels / 2 + 1)): arithmetic
  // only, so a loop over many points vectorises; panel_of() finishes it.
  double nearest_panel_raw(double qx, double qy) const {
    return fast_atan2(qy, qx) * panels_per_rad_ + (panels_ + 0.5);
  }
  std::uint32_t panel_of(double raw) const {
    const auto p = static_cast<std::uint32_t>(raw);
    return p >= panels_ ? p - panels_ : p;
  }

  // Per global crystal: ADC units per keV before saturation, and the delay in ticks (one
  // struct, so a frame touches one cache line for both).
  struct CrystalResponse {
    float adc_per_keV;
    std::int32_t delay_ticks;
  };
  const CrystalResponse& response(std::uint32_t crystal) const { return response_[crystal]; }
  float adc_per_keV(std::uint32_t crystal) const { return response_[crystal].adc_per_keV; }
  std::int32_t delay_ticks(std::uint32_t crystal) const { return response_[crystal].delay_ticks; }
  double saturation_keV() const { return saturation_keV_; }
  // Per global crystal: the relative detection efficiency e_c (mean about 1; all 1 with no
  // spread), and the probability that an interaction there is kept, e_c / (1 + 3 sigma).
  const std::vector<float>& crystal_efficiency() const { return efficiency_; }
  bool has_efficiency_spread() const { return keep_scale_ < 1.0; }
  double keep_probability(std::uint32_t crystal) const { return efficiency_[crystal] * keep_scale_; }
  std::int32_t max_abs_delay_ticks() const { return max_abs_delay_ticks_; }

  // Flood-map peak of a label in DU (bdm, du), and the distance to its nearest neighbour.
  struct Peak {
    float x, y, spacing;
  };
  const Peak& peak(std::uint32_t bdm_du, std::uint32_t label) const {
    return peaks_[bdm_du * geometry_.crystals_per_du() + label];
  }
  const std::uint8_t* label_address(std::uint32_t bdm_du, std::uint32_t x,
                                    std::uint32_t y) const {
    const std::size_t n = geometry_.position_size;
    return &position_lut_[(std::size_t{bdm_du} * n + y) * n + x];
  }

  // The calibration tables of DESIGN section 3.
  const std::uint8_t* position_lut() const { return position_lut_.get(); }
  std::size_t position_lut_bytes() const { return position_lut_bytes_; }
  std::vector<float> energy_correction(std::uint32_t bins, std::uint32_t bin_width) const;
  std::vector<std::int32_t> time_offsets() const;

 private:
  void build_flood_maps(std::uint64_t seed);

  // atan2 within 2e-5 rad (odd minimax polynomial on [0, 1] and octant folding, with
  // selects rather than branches): it only picks which three panels to test, and any error
  // below half a panel's angle is harmless.
  static double fast_atan2(double y, double x) {
    const double ax = std::abs(x), ay = std::abs(y);
    const double hi = std::max(ax, ay), lo = std::min(ax, ay);
    const double q = lo / (hi > 0 ? hi : 1.0);
    const double q2 = q * q;
    const double poly =
        q * (0.99997726 +
             q2 * (-0.33262347 +
                   q2 * (0.19354346 + q2 * (-0.11643287 + q2 * (0.05265332 + q2 * -0.01172120)))));
    const double octant = ay > ax ? 0.5 * std::numbers::pi - poly : poly;
    const double half = x < 0 ? std::numbers::pi - octant : octant;
    return y < 0 ? -half : half;
  }

  Geometry geometry_;
  std::uint32_t panels_ = 0;
  double ring_radius_mm_ = 0;
  double pitch_t_mm_ = 0, pitch_a_mm_ = 0, depth_mm_ = 0;
  double du_width_t_mm_ = 0, du_step_t_mm_ = 0, total_t_mm_ = 0;
  double du_len_a_mm_ = 0, du_step_a_mm_ = 0, bdm_len_a_mm_ = 0, bdm_step_a_mm_ = 0;
  double total_a_mm_ = 0;
  std::vector<double> panel_cos_, panel_sin_;
  double panels_per_rad_ = 0;
  double inv_pitch_t_ = 0, inv_pitch_a_ = 0, inv_du_step_t_ = 0, inv_du_step_a_ = 0,
         inv_bdm_step_a_ = 0;
  std::vector<CrystalResponse> response_;
  std::int32_t max_abs_delay_ticks_ = 0;
  std::vector<float> efficiency_;
  double keep_scale_ = 1.0;
  double saturation_keV_ = 0;
  std::vector<Peak> peaks_;
  // Read at random for every frame: in huge pages where the kernel offers them.
  struct FreeDeleter {
    void operator()(std::uint8_t* p) const;
  };
  std::unique_ptr<std::uint8_t[], FreeDeleter> position_lut_;
  std::size_t position_lut_bytes_ = 0;
};

}  // namespace petdaq::sim

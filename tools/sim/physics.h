// The simulator's photon physics: physical constants, attenuation in water and LYSO, Compton
// scattering (Klein-Nishina) and the turning of a direction. docs/simulator.md describes the
// model.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numbers>

#include "tools/sim/rng.h"

namespace petdaq::sim {

inline constexpr double kElectronKeV = 510.99895;
inline constexpr double kAnnihilationKeV = kElectronKeV;
inline constexpr double kInvLightMmPerPs = 1 / 0.299792458;  // ps per mm
// Water: 3.343e23 electrons per cm^3; with the Klein-Nishina cross-section this gives
// mu(511 keV) = 0.0096 / mm, photoelectric absorption being negligible above 100 keV.
inline constexpr double kWaterElectronsPerMm3 = 3.3428e20;
// High-density polyethylene (CH2)n at 0.96 g/cm^3: 8 electrons per 14.027 g/mol, i.e.
// 3.297e23 electrons per cm^3, 0.986 of water's.
inline constexpr double kPolyethyleneElectronsPerMm3 = 0.96 * 8.0 / 14.027 * 6.02214076e20;
inline constexpr double kElectronRadiusMm = 2.8179403262e-12;
// LYSO: mu(511 keV) = 0.86 / cm; between 200 and 511 keV mu grows roughly as E^-1.4.
inline constexpr double kLysoMu511PerMm = 0.086;
inline constexpr double kLysoMuExponent = 1.4;
inline constexpr double kFwhmPerSigma = 2.3548200450309493;
// 176Lu: beta endpoint 596 keV, then a cascade of 307, 202 and 88 keV gamma rays that the
// crystal itself absorbs with these probabilities (the rest escape).
inline constexpr double kLuBetaEndpointKeV = 596.0;
inline constexpr double kLuGammaKeV[3] = {307.0, 202.0, 88.0};
inline constexpr double kLuGammaAbsorbed[3] = {0.35, 0.45, 0.8};

inline double klein_nishina_total_mm2(double energy_keV) {
  const double k = energy_keV / kElectronKeV;
  const double l = std::log1p(2 * k);
  const double a = (1 + k) / (k * k) * (2 * (1 + k) / (1 + 2 * k) - l / k);
  const double b = l / (2 * k) - (1 + 3 * k) / ((1 + 2 * k) * (1 + 2 * k));
  return 2 * std::numbers::pi * kElectronRadiusMm * kElectronRadiusMm * (a + b);
}

inline double water_mu_per_mm(double energy_keV) {
  return kWaterElectronsPerMm3 * klein_nishina_total_mm2(energy_keV);
}

// A smooth function of the photon energy on [0, 511] keV, tabulated every keV and
// interpolated linearly: for the water mean free path and the LYSO attenuation (otherwise a
// logarithm and several divisions, or a power, per use) the relative error is below 1e-3
// at 20 keV and 1e-5 above 150 keV.
class EnergyTable {
 public:
  template <class F>
  explicit EnergyTable(F f) {
    for (std::size_t i = 0; i < kPoints; ++i)
      value_[i] = f(std::max(static_cast<double>(i), 1.0) * kAnnihilationKeV / (kPoints - 1));
  }
  double operator()(double energy_keV) const {
    const double x = std::clamp(energy_keV * kPerKeV, 0.0, kPoints - 1.0);
    const auto i = std::min(static_cast<std::size_t>(x), kPoints - 2);
    const double f = x - static_cast<double>(i);
    return value_[i] + f * (value_[i + 1] - value_[i]);
  }

 private:
  static constexpr std::size_t kPoints = 512;
  static constexpr double kPerKeV = (kPoints - 1) / kAnnihilationKeV;
  double value_[kPoints];
};

// cos(theta) of a Compton scatter, Klein-Nishina distributed. dsigma/dOmega is
// p^2 (p + 1/p - sin^2) with p = E'/E = 1 / (1 + k (1 - cos)); under the envelope p^2 the ratio
// p is uniform on [1 / (1 + 2k), 1], and p + 1/p - sin^2 <= p_min + 1/p_min bounds the rest:
// an exact rejection accepting 52 % of draws at 511 keV (a uniform cos accepts 29 %).
inline double sample_compton_cos(double energy_keV, BlockRng& rng) {
  const double k = energy_keV / kElectronKeV;
  const double p_min = 1 / (1 + 2 * k);
  const double bound = p_min + 1 / p_min;
  const double inv_k = 1 / k;
  for (;;) {
    const double p = p_min + (1 - p_min) * rng.uniform32();
    const double inv_p = 1 / p;
    const double c = std::clamp(1 - (inv_p - 1) * inv_k, -1.0, 1.0);
    if (rng.uniform32() * bound < p + inv_p - (1 - c * c)) return c;
  }
}

inline double compton_energy(double energy_keV, double cos_theta) {
  return energy_keV / (1 + energy_keV / kElectronKeV * (1 - cos_theta));
}

// A uniformly distributed azimuth as (cos, sin), without trigonometry.
inline void random_azimuth(BlockRng& rng, double& c, double& s) {
  double a, b, r2;
  do {
    a = 2 * rng.uniform32() - 1;
    b = 2 * rng.uniform32() - 1;
    r2 = a * a + b * b;
  } while (r2 >= 1 || r2 == 0);
  c = (a * a - b * b) / r2;
  s = 2 * a * b / r2;
}

// Turns the unit vector u by theta (given by its cosine) about a random azimuth.
inline void deflect(double& ux, double& uy, double& uz, double cos_t, BlockRng& rng) {
  double cp, sp;
  random_azimuth(rng, cp, sp);
  const double sin_t = std::sqrt(std::max(0.0, 1 - cos_t * cos_t));
  if (std::abs(uz) < 0.99999) {
    const double t = std::sqrt(1 - uz * uz);
    const double nx = sin_t * (ux * uz * cp - uy * sp) / t + ux * cos_t;
    const double ny = sin_t * (uy * uz * cp + ux * sp) / t + uy * cos_t;
    const double nz = -sin_t * cp * t + uz * cos_t;
    ux = nx;
    uy = ny;
    uz = nz;
  } else {
    const double sign = uz > 0 ? 1.0 : -1.0;
    ux = sin_t * cp;
    uy = sin_t * sp;
    uz = sign * cos_t;
  }
}

}  // namespace petdaq::sim

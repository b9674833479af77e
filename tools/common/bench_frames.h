// The raw-frame stream the backend benchmarks feed (petdaq-bench-gpu, petdaq-bench-engine
// --threads): annihilations at a Poisson rate in the settings' scanner, both photons detected
// with probability 0.5 each, in roughly opposite BDMs, ~200 ps jitter, raw energies around
// the 511 keV photopeak with a flat gain table, so that the energy window keeps most singles.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>

#include "core/calibration.h"
#include "core/geometry.h"
#include "core/settings.h"
#include "proto/bytes.h"
#include "proto/frame.h"

namespace petdaq::bench_frames {

// Position table: each crystal covers a square of the flood map; labels as in DESIGN
// section 3. Gains are 1 (raw energy = keV).
inline Calibration flat_calibration(const Settings& s) {
  const Geometry g = Geometry::from(s.scanner);
  Calibration cal;
  const std::uint32_t p = g.position_size;
  const std::uint32_t cell_x = p / g.crystal_axial, cell_y = p / g.crystal_transaxial;
  cal.position_lut.resize(std::size_t{g.bdm_count()} * g.du_per_bdm() * p * p);
  for (std::uint32_t bd = 0; bd < g.bdm_count() * g.du_per_bdm(); ++bd)
    for (std::uint32_t y = 0; y < p; ++y)
      for (std::uint32_t x = 0; x < p; ++x) {
        const std::uint32_t row = y / cell_y, col = x / cell_x;
        cal.position_lut[(std::size_t{bd} * p + y) * p + x] =
            (row < g.crystal_transaxial && col < g.crystal_axial)
                ? static_cast<std::uint8_t>(row * g.crystal_axial + col)
                : 255;
      }
  cal.energy_bins = 1000;
  cal.energy_bin_width = 10;
  cal.energy_correction.assign(std::size_t{g.bdm_count()} * g.du_per_bdm() *
                                   g.crystals_per_du() * cal.energy_bins,
                               1.0f);
  return cal;
}

// Chunk `chunk` of the stream, events from t0 (ticks) on: fills `out` with n frames (or,
// with out null, only measures the chunk's duration) and returns that duration in ticks.
// Each chunk has its own random sequence, so chunks can be made in parallel.
inline double fill_chunk(const Settings& s, double rate_per_s, std::uint64_t seed,
                         std::uint64_t chunk, double t0, RawFrame* out, std::uint64_t n) {
  const Geometry g = Geometry::from(s.scanner);
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + chunk);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  std::normal_distribution<double> normal(0.0, 1.0);
  const double tick_ps = s.scanner.tick_ps;
  const double event_rate_per_tick = rate_per_s * tick_ps * 1e-12;  // both photons: p = 0.5
  std::exponential_distribution<double> gap(event_rate_per_tick);
  const double jitter_ticks = 200.0 / tick_ps;
  const std::uint32_t cell = g.position_size / std::max(g.crystal_axial, g.crystal_transaxial);
  double t = t0;
  std::uint64_t i = 0;
  while (i < n) {
    t += gap(rng);
    const std::uint32_t n_trans = g.bdm_transaxial;
    const std::uint32_t b1 = static_cast<std::uint32_t>(rng() % n_trans);
    const std::uint32_t b2 = (b1 + n_trans / 2 + n_trans + static_cast<std::uint32_t>(rng() % 5) - 2) % n_trans;
    for (const std::uint32_t b_trans : {b1, b2}) {
      if (uniform(rng) >= 0.5 || i >= n) continue;
      const std::uint32_t b_axial = static_cast<std::uint32_t>(rng() % g.bdm_axial);
      const std::uint32_t bdm = b_axial * g.bdm_transaxial + b_trans;
      const std::uint32_t du = static_cast<std::uint32_t>(rng() % g.du_per_bdm());
      const std::uint32_t row = static_cast<std::uint32_t>(rng() % g.crystal_transaxial);
      const std::uint32_t col = static_cast<std::uint32_t>(rng() % g.crystal_axial);
      const double e = uniform(rng) < 0.3 ? 350.0 + 161.0 * uniform(rng)
                                          : std::clamp(511.0 + 25.0 * normal(rng), 300.0, 700.0);
      const double time = std::max(0.0, t + jitter_ticks * normal(rng));
      if (out) {
        std::uint8_t* f = out[i].bytes;
        f[frame_offset::head_du] = static_cast<std::uint8_t>(0xA0 | du);
        f[frame_offset::bdm] = static_cast<std::uint8_t>(bdm);
        bytes::store_be64(f + frame_offset::time, static_cast<std::uint64_t>(time));
        f[frame_offset::x] = static_cast<std::uint8_t>(col * cell + cell / 2);
        f[frame_offset::y] = static_cast<std::uint8_t>(row * cell + cell / 2);
        bytes::store_be16(f + frame_offset::energy, static_cast<std::uint16_t>(e));
        f[frame_offset::temp_int] = 30;
        f[frame_offset::temp_frac_tail] = 0x05;
      }
      ++i;
    }
  }
  return t - t0;
}

}  // namespace petdaq::bench_frames

// The annihilation photons of a block, a chunk of decays at a time: emission, the phantom,
// the ring, the crystal, then the frames (BlockGenerator::frame_begin/frame_end).
#include <algorithm>
#include <cmath>
#include <numbers>

#include "tools/sim/block_generator.h"

namespace petdaq::sim {

// The two helpers come first, inline, so that the chunk loops inline them: the loop over
// phantom_exit_mm vectorises only then.

// Distance from a point inside the phantom cylinder to its surface along u, without a
// branch (a line parallel to the axis or to the end faces is infinitely far from them).
namespace {
// The photons of the chunk's n decays whose flag is set, both photons of a decay in turn
// (photon h of decay i sits at h * kChunkDecays + i), into s.list without a branch; returns
// how many.
std::uint32_t list_flagged(ChunkScratch& s, std::size_t n) {
  constexpr std::uint32_t K = kChunkDecays;
  std::uint32_t m = 0;
  for (std::uint32_t i = 0; i < n; ++i) {
    s.list[m] = i;
    m += s.flag[i] != 0;
    s.list[m] = K + i;
    m += s.flag[K + i] != 0;
  }
  return m;
}
}  // namespace

inline double BlockGenerator::phantom_exit_mm(double px, double py, double pz, double ux,
                                              double uy, double uz) const {
  const double a = ux * ux + uy * uy;
  const double b = px * ux + py * uy;
  const double c = px * px + py * py - phantom_r2_;
  // The positive root written so that a = 0 gives +inf; uz = 0 gives +inf (or NaN at the
  // very end face, which min then ignores) for the end faces.
  const double t_side = -c / (b + std::sqrt(std::max(0.0, b * b - a * c)));
  const double t_end = (std::copysign(phantom_half_mm_, uz) - pz) / uz;
  return std::max(std::min(t_side, t_end), 0.0);
}

// Follows photon j from its first interaction in the phantom (free_mm along its line)
// until it leaves the phantom or is absorbed. Only where a photon turns does its position
// change: an escaping photon keeps its line, and the ring is found from the last point.
inline void BlockGenerator::scatter_in_phantom(ChunkScratch& s, std::uint32_t j,
                                               BlockRng& rng) const {
  double free_mm = s.free_mm[j];
  double px = s.px[j], py = s.py[j], pz = s.pz[j];
  double ux = s.ux[j], uy = s.uy[j], uz = s.uz[j];
  double energy = kAnnihilationKeV, path_mm = 0;
  unsigned scatters = 0;
  for (;;) {
    px += free_mm * ux;
    py += free_mm * uy;
    pz += free_mm * uz;
    path_mm += free_mm;
    const double c = sample_compton_cos(energy, rng);
    energy = compton_energy(energy, c);
    deflect(ux, uy, uz, c, rng);
    ++scatters;
    // Below 20 keV water absorbs it; a photon still inside after many scatters is lost.
    if (energy < 20.0 || scatters >= 64) {
      // Absorbed: a line along the axis never reaches the ring.
      ux = uy = 0;
      uz = 1;
      break;
    }
    free_mm = rng.standard_exponential() * water_mean_free_path_mm_(energy);
    if (free_mm >= phantom_max_chord_mm_) break;
    if (free_mm >= phantom_exit_mm(px, py, pz, ux, uy, uz)) break;
  }
  s.px[j] = px;
  s.py[j] = py;
  s.pz[j] = pz;
  s.ux[j] = ux;
  s.uy[j] = uy;
  s.uz[j] = uz;
  s.energy_keV[j] = energy;
  s.path_mm[j] = path_mm;
  s.scatters[j] = static_cast<std::uint8_t>(scatters);
}

// A point in the unit disk per entry, by rejection, kept by advancing the output index (no
// branch).
namespace {
void fill_disk(BlockRng& rng, double* a_out, double* b_out, std::size_t count) {
  for (std::size_t have = 0; have < count;) {
    const double a = 2 * rng.uniform32() - 1;
    const double b = 2 * rng.uniform32() - 1;
    a_out[have] = a;
    b_out[have] = b;
    have += a * a + b * b < 1;
  }
}
}  // namespace

// Where each decay of the chunk happens: uniform in the cylinder, or on the point or line
// source (moving with it).
void BlockGenerator::source_points(Context& ctx, std::size_t first, std::size_t n) const {
  ChunkScratch& s = *ctx.out.scratch;
  BlockRng& rng = ctx.rng;
  constexpr std::uint32_t K = kChunkDecays;
  if (options_.source == SourceShape::cylinder) {
    fill_disk(rng, s.disk_a, s.disk_b, n);
    for (std::uint32_t i = 0; i < n; ++i) {
      const double px = s.disk_a[i] * options_.phantom_radius_mm;
      const double py = s.disk_b[i] * options_.phantom_radius_mm;
      const double pz = (rng.uniform32() - 0.5) * options_.phantom_length_mm;
      s.px[i] = s.px[K + i] = px;
      s.py[i] = s.py[K + i] = py;
      s.pz[i] = s.pz[K + i] = pz;
    }
  } else {  // a point, or a line parallel to the axis; still or moving
    const double* at = options_.source_position_mm;
    const double amplitude = options_.motion_amplitude_mm;
    const double omega_per_ps = 2 * std::numbers::pi / (options_.motion_period_s * 1e12);
    const double block_ps = double(ctx.base_ticks - plan_.origin_ticks) * plan_.tick_ps;
    const bool line = options_.source == SourceShape::line;
    if (line) fill_disk(rng, s.disk_a, s.disk_b, n);  // the line's cross-section
    for (std::uint32_t i = 0; i < n; ++i) {
      double p[3] = {at[0], at[1], at[2]};
      if (line) {
        p[0] += options_.line_offset_mm + s.disk_a[i] * options_.line_radius_mm;
        p[1] += s.disk_b[i] * options_.line_radius_mm;
        p[2] += (rng.uniform32() - 0.5) * options_.line_length_mm;
      }
      if (amplitude > 0)
        p[options_.motion_axis] +=
            amplitude * std::sin(omega_per_ps * (block_ps + ctx.out.decay_ps[first + i]));
      s.px[i] = s.px[K + i] = p[0];
      s.py[i] = s.py[K + i] = p[1];
      s.pz[i] = s.pz[K + i] = p[2];
    }
  }
}

// The two photons' directions: a point in the unit disk for the first (Marsaglia 1972:
// isotropic without trigonometry), the two acollinearity projections for the second; and
// each photon's state before the phantom.
void BlockGenerator::photon_directions(Context& ctx, std::size_t n) const {
  ChunkScratch& s = *ctx.out.scratch;
  BlockRng& rng = ctx.rng;
  constexpr std::uint32_t K = kChunkDecays;
  fill_disk(rng, s.disk_a, s.disk_b, n);
  for (std::uint32_t i = 0; i < n; ++i) {
    s.tilt_x[i] = rng.gauss() * acollinearity_sigma_rad_;
    s.tilt_y[i] = rng.gauss() * acollinearity_sigma_rad_;
  }
  // Directions. The partner is off back-to-back by the residual momentum of the pair, a
  // fraction of a degree: tilting along two axes normal to u and renormalising is exact
  // to second order and needs no trigonometry. Along the axis any normal pair will do.
  for (std::uint32_t i = 0; i < n; ++i) {
    const double a = s.disk_a[i], b = s.disk_b[i], q = a * a + b * b;
    const double f = 2 * std::sqrt(1 - q);
    const double ux = a * f, uy = b * f, uz = 1 - 2 * q;
    const double rxy = std::sqrt(ux * ux + uy * uy);
    const bool axial = rxy <= 1e-9;
    const double inv = 1 / (axial ? 1.0 : rxy);
    const double e1x = axial ? 1.0 : uy * inv, e1y = axial ? 0.0 : -ux * inv;
    const double e2x = axial ? 0.0 : uz * ux * inv, e2y = axial ? 1.0 : uz * uy * inv;
    const double e2z = axial ? 0.0 : -rxy;
    const double gx = s.tilt_x[i], gy = s.tilt_y[i];
    const double vx = -ux + gx * e1x + gy * e2x;
    const double vy = -uy + gx * e1y + gy * e2y;
    const double vz = -uz + gy * e2z;
    const double norm = 1 / std::sqrt(vx * vx + vy * vy + vz * vz);
    s.ux[i] = ux;
    s.uy[i] = uy;
    s.uz[i] = uz;
    s.ux[K + i] = vx * norm;
    s.uy[K + i] = vy * norm;
    s.uz[K + i] = vz * norm;
  }
  for (std::uint32_t h = 0; h < 2; ++h) {
    for (std::size_t i = h * K, end = h * K + n; i < end; ++i) {
      s.energy_keV[i] = kAnnihilationKeV;
      s.path_mm[i] = 0;
      s.scatters[i] = 0;
      s.made[i] = 0;
      s.in_window[i] = 0;
    }
  }
}

// Phantom: a free path against the distance to the surface; the few photons that
// interact (about one in six) are followed scatter by scatter.
void BlockGenerator::through_phantom(Context& ctx, std::size_t n) const {
  ChunkScratch& s = *ctx.out.scratch;
  BlockRng& rng = ctx.rng;
  constexpr std::uint32_t K = kChunkDecays;
  for (std::uint32_t h = 0; h < 2; ++h)
    for (std::size_t i = h * K, end = h * K + n; i < end; ++i)
      s.free_mm[i] = rng.standard_exponential() * water_mean_free_path511_mm_;
  for (std::uint32_t h = 0; h < 2; ++h)
    for (std::size_t i = h * K, end = h * K + n; i < end; ++i)
      s.flag[i] = s.free_mm[i] < phantom_exit_mm(s.px[i], s.py[i], s.pz[i], s.ux[i], s.uy[i], s.uz[i])
                      ? 1.0
                      : 0.0;
  const std::uint32_t m = list_flagged(s, n);
  for (std::uint32_t k = 0; k < m; ++k) scatter_in_phantom(s, s.list[k], rng);
}

// Ring: where the line meets the circle the panel faces touch, before any panel; past an
// axial end there and moving away from it, the photon is lost. The panel facing that point
// (whose neighbours are the only other candidates) is found here too. Returns the photons
// that reach a crystal's face (s.hit_photon, s.hit).
std::uint32_t BlockGenerator::reach_detector(Context& ctx, std::size_t n) const {
  ChunkScratch& s = *ctx.out.scratch;
  constexpr std::uint32_t K = kChunkDecays;
  for (std::uint32_t h = 0; h < 2; ++h) {
    for (std::size_t i = h * K, end = h * K + n; i < end; ++i) {
      const double ux = s.ux[i], uy = s.uy[i], uz = s.uz[i];
      const double a = ux * ux + uy * uy;
      const double b = s.px[i] * ux + s.py[i] * uy;
      const double c = s.px[i] * s.px[i] + s.py[i] * s.py[i] - ring_r2_mm2_;
      // -c / (b + sqrt(b^2 - a c)) is the positive root (the point is inside, c < 0) and
      // infinite, not undefined, for a line along the axis.
      const double t = -c / (b + std::sqrt(std::max(0.0, b * b - a * c)));
      const double z = s.pz[i] + t * uz;
      const bool away = (std::abs(z) >= half_axial_mm_) & (z * uz > 0);
      s.panel_raw[i] = model_.nearest_panel_raw(s.px[i] + t * ux, s.py[i] + t * uy);
      s.flag[i] = away | (a < 1e-12) ? 0.0 : 1.0;
    }
  }
  const std::uint32_t m = list_flagged(s, n);
  std::uint32_t hits = 0;
  for (std::uint32_t k = 0; k < m; ++k) {
    const std::uint32_t j = s.list[k];
    s.hit_photon[hits] = j;
    hits += model_.locate_near_panel(s.px[j], s.py[j], s.pz[j], s.ux[j], s.uy[j], s.uz[j],
                                     model_.panel_of(s.panel_raw[j]), s.hit[hits]);
  }
  return hits;
}

// Crystal: interaction within the depth, an exponential depth (in units of 1/mu) against
// the path through the crystal: the law 1 - exp(-mu depth / cos) without the exponential
// function. Returns how many of the hits interact (kept first in s.hit_photon, s.hit).
std::uint32_t BlockGenerator::interact(Context& ctx, std::uint32_t hits) const {
  ChunkScratch& s = *ctx.out.scratch;
  BlockRng& rng = ctx.rng;
  std::uint32_t kept = 0;
  for (std::uint32_t k = 0; k < hits; ++k) {
    const std::uint32_t j = s.hit_photon[k];
    const double mu_lyso =
        s.scatters[j] == 0 ? kLysoMu511PerMm : lyso_mu_per_mm_(s.energy_keV[j]);
    bool interacts = rng.standard_exponential() * s.hit[k].cos_incidence < mu_lyso * depth_mm_;
    if (options_.detector_efficiency < 1)
      interacts = interacts && rng.uniform() < options_.detector_efficiency;
    // Per-crystal efficiency (normalisation's truth): a draw only when there is a spread,
    // so that acquisitions without one are unchanged.
    if (model_.has_efficiency_spread())
      interacts = interacts && rng.uniform() < model_.keep_probability(s.hit[k].crystal);
    // The frame stage reads the crystal's response and flood-map peak: fetch them now.
    __builtin_prefetch(&model_.response(s.hit[k].crystal));
    __builtin_prefetch(&model_.peak(s.hit[k].bdm * du_per_bdm_ + s.hit[k].du,
                                    label_of_local_[s.hit[k].local]));
    s.hit_photon[kept] = j;
    s.hit[kept] = s.hit[k];
    kept += interacts;
  }
  return kept;
}

// Frames: full absorption (photopeak) or a Compton interaction whose scattered photon
// escapes, then the BDM's view of it; the flood-map reads come last, all loads issued.
void BlockGenerator::make_frames(Context& ctx, std::size_t first, std::uint32_t kept) const {
  ChunkScratch& s = *ctx.out.scratch;
  BlockRng& rng = ctx.rng;
  constexpr std::uint32_t K = kChunkDecays;
  std::uint32_t pending = 0;
  for (std::uint32_t k = 0; k < kept; ++k) {
    const std::uint32_t j = s.hit_photon[k];
    const DetectorHit& hit = s.hit[k];
    const double energy = s.energy_keV[j];
    const unsigned scatters = s.scatters[j];
    const double ratio = kAnnihilationKeV / energy;
    const double photofraction =
        scatters == 0 ? options_.photofraction_511
                      : std::min(1.0, options_.photofraction_511 * ratio * std::sqrt(ratio));
    double deposit = energy;
    if (rng.uniform32() >= photofraction)
      deposit = energy - compton_energy(energy, sample_compton_cos(energy, rng));
    const std::uint32_t i = j & (K - 1);
    const double t_ps = ctx.out.decay_ps[first + i];
    const std::uint64_t id = (ctx.out.index << 32) | (first + i);
    const PhotonKind kind = scatters ? PhotonKind::scattered : PhotonKind::annihilation;
    PendingFrame& p = s.pending[pending];
    p.photon = j;
    pending += frame_begin(ctx, hit.bdm, hit.du, hit.local, hit.crystal, deposit,
                           t_ps + (s.path_mm[j] + hit.distance_mm) * kInvLightMmPerPs,
                           ticks_of(ctx, t_ps), id, kind, static_cast<std::uint8_t>(j >= K),
                           scatters, p);
  }
  for (std::uint32_t k = 0; k < pending; ++k) {
    const PendingFrame& p = s.pending[k];
    const PhotonOutcome o = frame_end(ctx, p);
    s.made[p.photon] = 1;
    s.in_window[p.photon] = o.in_window;
    s.measured_crystal[p.photon] = o.measured_crystal;
  }
}

// Decays first .. first + n of the block: emission, phantom, ring, crystal, frame, each
// stage over the whole chunk before the next (the random draws in that order).
void BlockGenerator::decay_chunk(Context& ctx, std::size_t first, std::size_t n) const {
  ctx.out.stats.decays += n;
  source_points(ctx, first, n);
  photon_directions(ctx, n);
  if (phantom_) through_phantom(ctx, n);
  const std::uint32_t hits = reach_detector(ctx, n);
  const std::uint32_t kept = interact(ctx, hits);
  make_frames(ctx, first, kept);

  // The truth summary's pairs: both photons made a frame, scattered or not, in the window.
  const ChunkScratch& s = *ctx.out.scratch;
  constexpr std::uint32_t K = kChunkDecays;
  BlockStats& st = ctx.out.stats;
  for (std::uint32_t i = 0; i < n; ++i) {
    const bool pair = s.made[i] & s.made[K + i];
    const bool scattered = (s.scatters[i] | s.scatters[K + i]) != 0;
    const bool in_window = pair & s.in_window[i] & s.in_window[K + i] &
                           (s.measured_crystal[i] != s.measured_crystal[K + i]);
    st.pairs += pair;
    st.pairs_scattered += pair & scattered;
    st.pairs_in_window += in_window;
    st.pairs_in_window_scattered += in_window & scattered;
  }
}

}  // namespace petdaq::sim

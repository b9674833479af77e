#include "tools/sim/sim.h"

#include <nlohmann/json.hpp>

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <limits>
#include <memory>
#include <mutex>
#include <numbers>
#include <queue>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "core/calibration.h"
#include "proto/frame.h"
#include "tools/sim/detector.h"
#include "tools/sim/rng.h"
#include "tools/sim/truth.h"

namespace petdaq::sim {

namespace {

constexpr double kElectronKeV = 510.99895;
constexpr double kAnnihilationKeV = kElectronKeV;
constexpr double kInvLightMmPerPs = 1 / 0.299792458;  // ps per mm
// Water: 3.343e23 electrons per cm^3; with the Klein-Nishina cross-section this gives
// mu(511 keV) = 0.0096 / mm, photoelectric absorption being negligible above 100 keV.
constexpr double kWaterElectronsPerMm3 = 3.3428e20;
constexpr double kElectronRadiusMm = 2.8179403262e-12;
// LYSO: mu(511 keV) = 0.86 / cm; between 200 and 511 keV mu grows roughly as E^-1.4.
constexpr double kLysoMu511PerMm = 0.086;
constexpr double kLysoMuExponent = 1.4;
constexpr double kFwhmPerSigma = 2.3548200450309493;
// 176Lu: beta endpoint 596 keV, then a cascade of 307, 202 and 88 keV gamma rays that the
// crystal itself absorbs with these probabilities (the rest escape).
constexpr double kLuBetaEndpointKeV = 596.0;
constexpr double kLuGammaKeV[3] = {307.0, 202.0, 88.0};
constexpr double kLuGammaAbsorbed[3] = {0.35, 0.45, 0.8};

constexpr std::uint64_t kAcquisitionStream = 0x6163'7175;
constexpr std::uint64_t kLinkStream = 0x6C69'6E6B;
// Events per block: long enough that the ordering overhead is small, short enough that
// every thread gets work in a 10 ms acquisition at a few MBq.
constexpr double kEventsPerBlock = 32768.0;

double klein_nishina_total_mm2(double energy_keV) {
  const double k = energy_keV / kElectronKeV;
  const double l = std::log1p(2 * k);
  const double a = (1 + k) / (k * k) * (2 * (1 + k) / (1 + 2 * k) - l / k);
  const double b = l / (2 * k) - (1 + 3 * k) / ((1 + 2 * k) * (1 + 2 * k));
  return 2 * std::numbers::pi * kElectronRadiusMm * kElectronRadiusMm * (a + b);
}

double water_mu_per_mm(double energy_keV) {
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
double sample_compton_cos(double energy_keV, BlockRng& rng) {
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

double compton_energy(double energy_keV, double cos_theta) {
  return energy_keV / (1 + energy_keV / kElectronKeV * (1 - cos_theta));
}

// A uniformly distributed azimuth as (cos, sin), without trigonometry.
void random_azimuth(BlockRng& rng, double& c, double& s) {
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
void deflect(double& ux, double& uy, double& uz, double cos_t, BlockRng& rng) {
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

struct Plan {
  double tick_ps = 1;
  std::uint64_t origin_ticks = 0;
  std::uint64_t block_ticks = 1;
  std::uint64_t total_ticks = 0;  // 0: open-ended (stop by frame count)
  double decay_mean_ps = 0;       // mean time between decays (inf: none)
  double background_mean_ps = 0;
  std::uint64_t disorder_ticks = 0;
  std::uint64_t guard_ticks = 0;  // how far a frame's key can fall before its event's block
};

struct SimFrame {
  std::uint64_t key;  // the BDM's sending order: time stamp + bounded disorder
  RawFrame raw;
  TruthRecord truth;
};

struct BlockStats {
  std::uint64_t decays = 0, background_events = 0, frames = 0;
  std::uint64_t frames_annihilation = 0, frames_scattered = 0, frames_background = 0;
  std::uint64_t frames_mispositioned = 0, frames_no_crystal = 0, frames_in_window = 0;
  std::uint64_t pairs = 0, pairs_scattered = 0, pairs_in_window = 0, pairs_in_window_scattered = 0;

  void add_to(SimSummary& s) const {
    s.decays += decays;
    s.background_events += background_events;
    s.frames += frames;
    s.frames_annihilation += frames_annihilation;
    s.frames_scattered += frames_scattered;
    s.frames_background += frames_background;
    s.frames_mispositioned += frames_mispositioned;
    s.frames_no_crystal += frames_no_crystal;
    s.frames_in_window += frames_in_window;
    s.pairs += pairs;
    s.pairs_scattered += pairs_scattered;
    s.pairs_in_window += pairs_in_window;
    s.pairs_in_window_scattered += pairs_in_window_scattered;
  }
};

// Decays are simulated a chunk at a time, stage by stage (emission, phantom, ring, crystal,
// frame) over arrays, so each stage is a tight loop and the arrays stay in the L1/L2 cache.
constexpr std::uint32_t kChunkDecays = 1024;
constexpr std::uint32_t kChunkPhotons = 2 * kChunkDecays;

// A frame whose flood-map label is still being fetched: the table is megabytes, read at
// random, so every frame of a chunk issues its load before any is used.
struct PendingFrame {
  const std::uint8_t* seen;  // the flood-map pixel
  std::uint32_t index;       // in Block::generated
  std::uint32_t label;       // the true crystal's label
  std::uint32_t bdm_du;
  std::uint32_t photon;      // in the chunk
  double measured_keV;
};

// Photon 0 of decay i is i, photon 1 is kChunkDecays + i: each stage runs the same loop
// over both halves, and the arithmetic-only loops vectorise.
struct ChunkScratch {
  double px[kChunkPhotons], py[kChunkPhotons], pz[kChunkPhotons];
  double ux[kChunkPhotons], uy[kChunkPhotons], uz[kChunkPhotons];
  double energy_keV[kChunkPhotons], path_mm[kChunkPhotons];
  double free_mm[kChunkPhotons], panel_raw[kChunkPhotons];
  // Emission draws per decay: a point in the unit disk (direction) and the acollinearity.
  double disk_a[kChunkDecays], disk_b[kChunkDecays], tilt_x[kChunkDecays], tilt_y[kChunkDecays];
  std::uint8_t scatters[kChunkPhotons];
  // Per stage, 1 or 0: interacts in the phantom / reaches the ring (a double, so that the
  // loop computing it is all doubles and vectorises).
  double flag[kChunkPhotons];
  std::uint8_t made[kChunkPhotons], in_window[kChunkPhotons];
  std::uint32_t measured_crystal[kChunkPhotons];
  std::uint32_t list[kChunkPhotons];  // compacted photon indices
  std::uint32_t hit_photon[kChunkPhotons];
  DetectorHit hit[kChunkPhotons];
  PendingFrame pending[kChunkPhotons];
};

struct Block {
  Block() : scratch(std::make_unique<ChunkScratch>()) {}
  std::unique_ptr<ChunkScratch> scratch;
  std::vector<double> decay_ps;  // emission times in the block
  std::uint64_t index = 0;
  std::uint64_t end_ticks = 0;  // relative to the origin
  std::vector<SimFrame> generated;  // in generation order
  std::vector<SimFrame> frames;     // grouped by BDM, each BDM in key order
  std::vector<std::uint32_t> bdm_begin;
  BlockStats stats;
};

// What a frame looked like to the flood map and energy window, for the truth summary.
struct PhotonOutcome {
  bool in_window = false;  // measured energy in the window and a crystal in the flood map
  std::uint32_t measured_crystal = 0;
};

class BlockGenerator {
 public:
  BlockGenerator(const Settings& settings, const SimOptions& options, const DetectorModel& model,
                 const Plan& plan)
      : options_(options),
        model_(model),
        g_(model.geometry()),
        plan_(plan),
        water_mean_free_path_mm_([](double e) { return 1.0 / water_mu_per_mm(e); }),
        lyso_mu_per_mm_([](double e) {
          return kLysoMu511PerMm * std::pow(kAnnihilationKeV / e, kLysoMuExponent);
        }) {
    phantom_ = options.phantom == PhantomKind::water_cylinder ||
               (options.phantom == PhantomKind::automatic &&
                options.source == SourceShape::cylinder);
    phantom_r2_ = options.phantom_radius_mm * options.phantom_radius_mm;
    phantom_half_mm_ = 0.5 * options.phantom_length_mm;
    water_mean_free_path511_mm_ = 1.0 / water_mu_per_mm(kAnnihilationKeV);
    phantom_max_chord_mm_ = std::hypot(2 * options.phantom_radius_mm, options.phantom_length_mm);
    acollinearity_sigma_rad_ =
        options.acollinearity_fwhm_deg * std::numbers::pi / 180.0 / kFwhmPerSigma;
    energy_sigma_ = options.energy_resolution_fwhm / kFwhmPerSigma * std::sqrt(kAnnihilationKeV);
    time_sigma_ps_ = options.time_resolution_fwhm_ps / kFwhmPerSigma;
    inv_tick_ps_ = 1.0 / plan.tick_ps;
    depth_mm_ = settings.scanner.crystal_depth_mm;
    low_keV_ = settings.energy_window.low_keV;
    high_keV_ = settings.energy_window.high_keV;
    half_axial_mm_ = 0.5 * model.axial_extent_mm();
    ring_r2_mm2_ = model.ring_radius_mm() * model.ring_radius_mm();
    inv_saturation_keV_ = 1.0 / model.saturation_keV();
    // A global crystal id is a sum of a part from (BDM, DU) and a part from the local
    // crystal: tabulated, so that frames need no integer division.
    du_crystal_base_.resize(std::size_t{g_.bdm_count()} * g_.du_per_bdm());
    for (std::uint32_t b = 0; b < g_.bdm_count(); ++b)
      for (std::uint32_t d = 0; d < g_.du_per_bdm(); ++d)
        du_crystal_base_[b * g_.du_per_bdm() + d] = g_.crystal_id(b, d, 0);
    label_of_local_.resize(g_.crystals_per_du());
    crystal_offset_of_label_.resize(g_.crystals_per_du());
    for (std::uint32_t c = 0; c < g_.crystals_per_du(); ++c) {
      label_of_local_[c] = g_.label_of_local_crystal(c);
      crystal_offset_of_label_[c] =
          g_.crystal_id(0, 0, g_.local_crystal_of_label(c)) - g_.crystal_id(0, 0, 0);
    }
    du_per_bdm_ = g_.du_per_bdm();
    crystals_per_du_ = g_.crystals_per_du();
    head_marker_ = settings.frame.head_marker;
    tail_marker_ = settings.frame.tail_marker;
  }

  void generate(std::uint64_t index, Block& out) const {
    out.index = index;
    out.generated.clear();
    out.stats = {};
    BlockRng rng(mix_seed(options_.seed, kAcquisitionStream, index));
    const std::uint64_t start = index * plan_.block_ticks;
    std::uint64_t end = start + plan_.block_ticks;
    if (plan_.total_ticks) end = std::min(end, plan_.total_ticks);
    out.end_ticks = end;
    const double length_ps = double(end - start) * plan_.tick_ps;
    Context ctx{out, rng, plan_.origin_ticks + start};
    set_temperatures(ctx, (double(start) + 0.5 * double(end - start)) * plan_.tick_ps * 1e-12);

    out.decay_ps.clear();
    if (std::isfinite(plan_.decay_mean_ps)) {
      for (double t = rng.exponential(plan_.decay_mean_ps); t < length_ps;
           t += rng.exponential(plan_.decay_mean_ps))
        out.decay_ps.push_back(t);
    }
    for (std::size_t first = 0; first < out.decay_ps.size(); first += kChunkDecays)
      decay_chunk(ctx, first, std::min<std::size_t>(kChunkDecays, out.decay_ps.size() - first));
    ctx.next_event = static_cast<std::uint32_t>(out.decay_ps.size());
    if (std::isfinite(plan_.background_mean_ps)) {
      for (double t = rng.exponential(plan_.background_mean_ps); t < length_ps;
           t += rng.exponential(plan_.background_mean_ps))
        background(ctx, t);
    }
    order(out);
  }

 private:
  struct Context {
    Block& out;
    BlockRng& rng;
    std::uint64_t base_ticks;  // origin + block start
    std::uint32_t next_event = 0;
    std::vector<std::pair<std::int8_t, std::uint8_t>> temperature{};  // per BDM: int, 16ths
  };

  std::uint64_t ticks_of(Context& ctx, double t_ps) const {
    return ctx.base_ticks + static_cast<std::uint64_t>(t_ps * inv_tick_ps_ + 0.5);
  }

  // Decays first .. first + n of the block: emission, phantom, ring, crystal, frame, each
  // stage over the whole chunk before the next.
  void decay_chunk(Context& ctx, std::size_t first, std::size_t n) const {
    ChunkScratch& s = *ctx.out.scratch;
    BlockRng& rng = ctx.rng;
    constexpr std::uint32_t K = kChunkDecays;
    ctx.out.stats.decays += n;

    // Emission draws: a point in the source, a point in the unit disk for the direction
    // (Marsaglia 1972: isotropic without trigonometry), the two acollinearity projections.
    // Points in the disk by rejection, kept by advancing the output index (no branch).
    const auto fill_disk = [&rng](double* a_out, double* b_out, std::size_t count) {
      for (std::size_t have = 0; have < count;) {
        const double a = 2 * rng.uniform32() - 1;
        const double b = 2 * rng.uniform32() - 1;
        a_out[have] = a;
        b_out[have] = b;
        have += a * a + b * b < 1;
      }
    };
    if (options_.source == SourceShape::cylinder) {
      fill_disk(s.disk_a, s.disk_b, n);
      for (std::uint32_t i = 0; i < n; ++i) {
        const double px = s.disk_a[i] * options_.phantom_radius_mm;
        const double py = s.disk_b[i] * options_.phantom_radius_mm;
        const double pz = (rng.uniform32() - 0.5) * options_.phantom_length_mm;
        s.px[i] = s.px[K + i] = px;
        s.py[i] = s.py[K + i] = py;
        s.pz[i] = s.pz[K + i] = pz;
      }
    } else {
      for (std::uint32_t i = 0; i < n; ++i) {
        s.px[i] = s.px[K + i] = 0;
        s.py[i] = s.py[K + i] = 0;
        s.pz[i] = s.pz[K + i] = 0;
      }
    }
    fill_disk(s.disk_a, s.disk_b, n);
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

    // Phantom: a free path against the distance to the surface; the few photons that
    // interact (about one in six) are followed scatter by scatter.
    if (phantom_) {
      for (std::uint32_t h = 0; h < 2; ++h)
        for (std::size_t i = h * K, end = h * K + n; i < end; ++i)
          s.free_mm[i] = rng.standard_exponential() * water_mean_free_path511_mm_;
      for (std::uint32_t h = 0; h < 2; ++h)
        for (std::size_t i = h * K, end = h * K + n; i < end; ++i)
          s.flag[i] = s.free_mm[i] < phantom_exit_mm(s.px[i], s.py[i], s.pz[i], s.ux[i], s.uy[i], s.uz[i])
                          ? 1.0
                          : 0.0;
      std::uint32_t m = 0;
      for (std::uint32_t i = 0; i < n; ++i) {
        s.list[m] = i;
        m += s.flag[i] != 0;
        s.list[m] = K + i;
        m += s.flag[K + i] != 0;
      }
      for (std::uint32_t k = 0; k < m; ++k) scatter_in_phantom(s, s.list[k], rng);
    }

    // Ring: where the line meets the circle the panel faces touch, before any panel; past
    // an axial end there and moving away from it, the photon is lost. The panel facing
    // that point (whose neighbours are the only other candidates) is found here too.
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
    std::uint32_t m = 0;
    for (std::uint32_t i = 0; i < n; ++i) {
      s.list[m] = i;
      m += s.flag[i] != 0;
      s.list[m] = K + i;
      m += s.flag[K + i] != 0;
    }
    std::uint32_t hits = 0;
    for (std::uint32_t k = 0; k < m; ++k) {
      const std::uint32_t j = s.list[k];
      s.hit_photon[hits] = j;
      hits += model_.locate_near_panel(s.px[j], s.py[j], s.pz[j], s.ux[j], s.uy[j], s.uz[j],
                                       model_.panel_of(s.panel_raw[j]), s.hit[hits]);
    }

    // Crystal: interaction within the depth, an exponential depth (in units of 1/mu)
    // against the path through the crystal: the law 1 - exp(-mu depth / cos) without the
    // exponential function.
    std::uint32_t kept = 0;
    for (std::uint32_t k = 0; k < hits; ++k) {
      const std::uint32_t j = s.hit_photon[k];
      const double mu_lyso =
          s.scatters[j] == 0 ? kLysoMu511PerMm : lyso_mu_per_mm_(s.energy_keV[j]);
      bool interacts = rng.standard_exponential() * s.hit[k].cos_incidence < mu_lyso * depth_mm_;
      if (options_.detector_efficiency < 1)
        interacts = interacts && rng.uniform() < options_.detector_efficiency;
      // The frame stage reads the crystal's response and flood-map peak: fetch them now.
      __builtin_prefetch(&model_.response(s.hit[k].crystal));
      __builtin_prefetch(&model_.peak(s.hit[k].bdm * du_per_bdm_ + s.hit[k].du,
                                      label_of_local_[s.hit[k].local]));
      s.hit_photon[kept] = j;
      s.hit[kept] = s.hit[k];
      kept += interacts;
    }

    // Frames: full absorption (photopeak) or a Compton interaction whose scattered photon
    // escapes, then the BDM's view of it; the flood-map reads come last, all loads issued.
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

  // Follows photon j from its first interaction in the phantom (free_mm along its line)
  // until it leaves the phantom or is absorbed. Only where a photon turns does its position
  // change: an escaping photon keeps its line, and the ring is found from the last point.
  void scatter_in_phantom(ChunkScratch& s, std::uint32_t j, BlockRng& rng) const {
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

  // Distance from a point inside the phantom cylinder to its surface along u, without a
  // branch (a line parallel to the axis or to the end faces is infinitely far from them).
  double phantom_exit_mm(double px, double py, double pz, double ux, double uy,
                         double uz) const {
    const double a = ux * ux + uy * uy;
    const double b = px * ux + py * uy;
    const double c = px * px + py * py - phantom_r2_;
    // The positive root written so that a = 0 gives +inf; uz = 0 gives +inf (or NaN at the
    // very end face, which min then ignores) for the end faces.
    const double t_side = -c / (b + std::sqrt(std::max(0.0, b * b - a * c)));
    const double t_end = (std::copysign(phantom_half_mm_, uz) - pz) / uz;
    return std::max(std::min(t_side, t_end), 0.0);
  }

  // Board temperatures drift slowly: a warm-up and a few-minute oscillation per board.
  void set_temperatures(Context& ctx, double t_s) const {
    ctx.temperature.resize(g_.bdm_count());
    for (std::uint32_t b = 0; b < g_.bdm_count(); ++b) {
      const double phase = 2 * std::numbers::pi * b / g_.bdm_count();
      const double temp = 31.0 + 0.5 * std::sin(phase) + 0.8 * (1 - std::exp(-t_s / 120.0)) +
                          0.4 * std::sin(2 * std::numbers::pi * t_s / 240.0 + phase);
      const double whole = std::floor(temp);
      ctx.temperature[b] = {static_cast<std::int8_t>(whole),
                            static_cast<std::uint8_t>(std::min(15.0, (temp - whole) * 16.0))};
    }
  }

  std::uint64_t event_id(Context& ctx) const {
    return (ctx.out.index << 32) | ctx.next_event++;
  }

  void background(Context& ctx, double t_ps) const {
    BlockRng& rng = ctx.rng;
    const std::uint64_t id = event_id(ctx);
    ++ctx.out.stats.background_events;
    const std::uint32_t crystal = rng.below(g_.crystal_count());
    const CrystalAddress addr = g_.address_of(crystal);
    // Beta energy ~ Beta(2, 4) of the endpoint (mean a third): the second smallest of five
    // uniforms.
    double u[5];
    for (double& v : u) v = rng.uniform();
    std::sort(u, u + 5);
    double deposit = kLuBetaEndpointKeV * u[1];
    for (int i = 0; i < 3; ++i)
      if (rng.uniform() < kLuGammaAbsorbed[i]) deposit += kLuGammaKeV[i];
    const std::uint64_t event_ticks = ticks_of(ctx, t_ps);
    PendingFrame pending;
    if (frame_begin(ctx, addr.bdm, addr.du, addr.crystal, crystal, deposit, t_ps, event_ticks, id,
                    PhotonKind::background, 0, 0, pending))
      frame_end(ctx, pending);
  }

  // The BDM's view of one interaction: resolution, flood map, gain, delay, encoding. Fills
  // the frame and its truth but for the flood-map label, whose load it starts: frame_end
  // finishes it. False (and nothing written) below the trigger threshold.
  bool frame_begin(Context& ctx, std::uint32_t bdm, std::uint32_t du, std::uint32_t local,
                   std::uint32_t crystal, double deposit_keV, double arrival_ps,
                   std::uint64_t event_ticks, std::uint64_t id, PhotonKind kind,
                   std::uint8_t which, unsigned scatters, PendingFrame& pending) const {
    BlockRng& rng = ctx.rng;
    const double measured =
        deposit_keV + energy_sigma_ * std::sqrt(std::max(deposit_keV, 0.0)) * rng.gauss();
    if (measured < options_.trigger_threshold_keV) return false;

    // Light centroid: fewer photons at low energy spread it more.
    const std::uint32_t bdm_du = bdm * du_per_bdm_ + du;
    const std::uint32_t label = label_of_local_[local];
    const DetectorModel::Peak& peak = model_.peak(bdm_du, label);
    const double sigma_px = options_.position_blur * peak.spacing *
                            std::min(std::sqrt(kAnnihilationKeV / measured), 2.5);
    const double max_px = g_.position_size - 1;
    const auto x = static_cast<std::uint32_t>(
        std::clamp(peak.x + sigma_px * rng.gauss(), 0.0, max_px) + 0.5);
    const auto y = static_cast<std::uint32_t>(
        std::clamp(peak.y + sigma_px * rng.gauss(), 0.0, max_px) + 0.5);
    const std::uint8_t* seen = model_.label_address(bdm_du, x, y);
    __builtin_prefetch(seen);

    const DetectorModel::CrystalResponse& response = model_.response(crystal);
    const double raw_real =
        response.adc_per_keV * measured / (1 + measured * inv_saturation_keV_);
    const auto raw = static_cast<std::uint16_t>(std::min(raw_real, 65535.0) + 0.5);

    const double jitter_ps = std::clamp(time_sigma_ps_ * rng.gauss(), -5 * time_sigma_ps_,
                                        5 * time_sigma_ps_);
    // Positive by construction (the origin exceeds every delay and jitter): truncating
    // x + 0.5 rounds to nearest.
    const std::int64_t stamp =
        static_cast<std::int64_t>(ctx.base_ticks) +
        static_cast<std::int64_t>((arrival_ps + jitter_ps) * inv_tick_ps_ + 0.5) +
        response.delay_ticks;
    const std::uint64_t disorder =
        plan_.disorder_ticks ? ((rng.next() >> 32) * (plan_.disorder_ticks + 1)) >> 32 : 0;

    pending.index = static_cast<std::uint32_t>(ctx.out.generated.size());
    SimFrame& f = ctx.out.generated.emplace_back();
    f.key = static_cast<std::uint64_t>(stamp) + disorder;
    FrameFields fields{};
    fields.head_marker = head_marker_;
    fields.du = static_cast<std::uint8_t>(du);
    fields.bdm = static_cast<std::uint8_t>(bdm);
    fields.time_ticks = static_cast<std::uint64_t>(stamp);
    fields.x = static_cast<std::uint8_t>(x);
    fields.y = static_cast<std::uint8_t>(y);
    fields.energy_raw = raw;
    fields.temp_int_degC = ctx.temperature[bdm].first;
    fields.temp_frac_16ths = ctx.temperature[bdm].second;
    fields.tail_marker = tail_marker_;
    encode_frame(fields, f.raw.bytes);

    TruthRecord& t = f.truth;
    t = TruthRecord{};
    t.event_id = id;
    t.event_ticks = event_ticks;
    t.crystal = crystal;
    t.energy_keV = static_cast<float>(measured);
    t.kind = kind;
    t.photon = which;
    t.phantom_scatters = static_cast<std::uint8_t>(std::min(scatters, 255u));

    pending.seen = seen;
    pending.label = label;
    pending.bdm_du = bdm_du;
    pending.measured_keV = measured;
    return true;
  }

  // The flood-map label of a frame begun by frame_begin: truth flags and counts.
  PhotonOutcome frame_end(Context& ctx, const PendingFrame& pending) const {
    SimFrame& f = ctx.out.generated[pending.index];
    TruthRecord& t = f.truth;
    const std::uint32_t seen_label = *pending.seen;
    const bool in_crystal = seen_label < crystals_per_du_;
    if (!in_crystal)
      t.flags |= truth_flag::no_crystal;
    else if (seen_label != pending.label)
      t.flags |= truth_flag::mispositioned;

    BlockStats& st = ctx.out.stats;
    ++st.frames;
    st.frames_annihilation += t.kind == PhotonKind::annihilation;
    st.frames_scattered += t.kind == PhotonKind::scattered;
    st.frames_background += t.kind == PhotonKind::background;
    st.frames_mispositioned += (t.flags & truth_flag::mispositioned) != 0;
    st.frames_no_crystal += !in_crystal;
    PhotonOutcome outcome;
    outcome.in_window =
        in_crystal && pending.measured_keV >= low_keV_ && pending.measured_keV <= high_keV_;
    st.frames_in_window += outcome.in_window;
    if (in_crystal)
      outcome.measured_crystal =
          du_crystal_base_[pending.bdm_du] + crystal_offset_of_label_[seen_label];
    return outcome;
  }

  // Groups the block's frames by BDM, each BDM in key order (ties in generation order).
  void order(Block& out) const {
    const std::uint32_t n_bdm = g_.bdm_count();
    out.bdm_begin.assign(n_bdm + 1, 0);
    for (const SimFrame& f : out.generated) ++out.bdm_begin[f.raw.bytes[frame_offset::bdm] + 1];
    for (std::uint32_t b = 0; b < n_bdm; ++b) out.bdm_begin[b + 1] += out.bdm_begin[b];
    out.frames.resize(out.generated.size());
    std::vector<std::uint32_t> fill(out.bdm_begin.begin(), out.bdm_begin.end() - 1);
    for (const SimFrame& f : out.generated) out.frames[fill[f.raw.bytes[frame_offset::bdm]]++] = f;
    // Frames are generated in event order; their keys are only slightly out of order
    // (time of flight, resolution, delays, disorder): insertion sort is linear here.
    for (std::uint32_t b = 0; b < n_bdm; ++b) {
      SimFrame* first = out.frames.data() + out.bdm_begin[b];
      SimFrame* last = out.frames.data() + out.bdm_begin[b + 1];
      for (SimFrame* i = first + 1; i < last; ++i) {
        if (!(i->key < (i - 1)->key)) continue;
        SimFrame tmp = *i;
        SimFrame* j = i;
        do {
          *j = *(j - 1);
          --j;
        } while (j > first && tmp.key < (j - 1)->key);
        *j = tmp;
      }
    }
  }

  const SimOptions& options_;
  const DetectorModel& model_;
  const Geometry& g_;
  const Plan& plan_;
  bool phantom_ = false;
  double phantom_r2_ = 0, phantom_half_mm_ = 0;
  double water_mean_free_path511_mm_ = 0;
  double phantom_max_chord_mm_ = 0;
  double acollinearity_sigma_rad_ = 0;
  double energy_sigma_ = 0;  // sigma = energy_sigma_ * sqrt(E / keV)
  double time_sigma_ps_ = 0;
  double inv_tick_ps_ = 1;
  double depth_mm_ = 0;
  double low_keV_ = 0, high_keV_ = 0;
  double half_axial_mm_ = 0;
  double ring_r2_mm2_ = 0;
  EnergyTable water_mean_free_path_mm_;
  EnergyTable lyso_mu_per_mm_;
  double inv_saturation_keV_ = 0;
  std::vector<std::uint32_t> du_crystal_base_;          // per BDM * DU: crystal id of local 0
  std::vector<std::uint32_t> label_of_local_;           // per local crystal
  std::vector<std::uint32_t> crystal_offset_of_label_;  // per label: id - the DU's base
  std::uint32_t du_per_bdm_ = 1, crystals_per_du_ = 1;
  std::uint8_t head_marker_ = 0, tail_marker_ = 0;
};

// Where ordered frames go, packet by packet.
class FrameSink {
 public:
  virtual ~FrameSink() = default;
  virtual void write(const RawFrame* frames, const TruthRecord* truth, std::size_t n) = 0;
};

// Cuts each BDM's stream into datagrams (full, or flushed after a while) and interleaves the
// BDMs by the time their datagrams reach the network.
class Packetizer {
 public:
  Packetizer(std::uint32_t bdm_count, const SimOptions& options, double tick_ps, FrameSink& sink)
      : frames_per_packet_(std::max<std::uint32_t>(1, options.packet_frames)),
        flush_ticks_(static_cast<std::uint64_t>(std::llround(options.packet_flush_us * 1e6 / tick_ps))),
        jitter_ticks_(options.link_jitter_us * 1e6 / tick_ps),
        seed_(options.seed),
        sink_(sink),
        open_(bdm_count),
        last_send_(bdm_count, 0),
        sequence_(bdm_count, 0) {}

  void add(std::uint32_t bdm, const SimFrame& f) {
    if (open_[bdm] == nullptr) {
      open_[bdm] = take_packet(bdm);
      open_[bdm]->first_key = f.key;
    } else if (f.key > open_[bdm]->first_key + flush_ticks_) {
      close(bdm, open_[bdm]->first_key + flush_ticks_);
      open_[bdm] = take_packet(bdm);
      open_[bdm]->first_key = f.key;
    }
    Packet& p = *open_[bdm];
    p.raw.push_back(f.raw);
    p.truth.push_back(f.truth);
    if (p.raw.size() >= frames_per_packet_) close(bdm, f.key);
  }

  // Every frame with key < cut has been added: flush what timed out, send what left before.
  void advance(std::uint64_t cut) {
    for (std::uint32_t b = 0; b < open_.size(); ++b)
      if (open_[b] && open_[b]->first_key + flush_ticks_ < cut) close(b, open_[b]->first_key + flush_ticks_);
    while (!closed_.empty() && closed_.top()->send_ticks < cut) {
      Packet* p = closed_.top();
      closed_.pop();
      sink_.write(p->raw.data(), p->truth.data(), p->raw.size());
      ++packets_sent_;
      free_.push_back(p);
    }
  }

  void finish() {
    for (std::uint32_t b = 0; b < open_.size(); ++b)
      if (open_[b]) close(b, open_[b]->first_key + flush_ticks_);
    while (!closed_.empty()) {
      Packet* p = closed_.top();
      closed_.pop();
      sink_.write(p->raw.data(), p->truth.data(), p->raw.size());
      ++packets_sent_;
      free_.push_back(p);
    }
  }

  std::uint64_t packets_sent() const { return packets_sent_; }

 private:
  struct Packet {
    std::uint32_t bdm = 0;
    std::uint64_t sequence = 0;
    std::uint64_t first_key = 0;
    std::uint64_t send_ticks = 0;
    std::vector<RawFrame> raw;
    std::vector<TruthRecord> truth;
  };
  struct Later {
    bool operator()(const Packet* a, const Packet* b) const {
      if (a->send_ticks != b->send_ticks) return a->send_ticks > b->send_ticks;
      if (a->bdm != b->bdm) return a->bdm > b->bdm;
      return a->sequence > b->sequence;
    }
  };

  Packet* take_packet(std::uint32_t bdm) {
    Packet* p;
    if (free_.empty()) {
      pool_.push_back(std::make_unique<Packet>());
      p = pool_.back().get();
      p->raw.reserve(frames_per_packet_);
      p->truth.reserve(frames_per_packet_);
    } else {
      p = free_.back();
      free_.pop_back();
    }
    p->raw.clear();
    p->truth.clear();
    p->bdm = bdm;
    p->sequence = sequence_[bdm]++;
    return p;
  }

  void close(std::uint32_t bdm, std::uint64_t close_ticks) {
    Packet* p = open_[bdm];
    open_[bdm] = nullptr;
    // A link does not reorder one board's datagrams: the jitter only delays them.
    const double u = static_cast<double>(mix_seed(seed_, kLinkStream, (std::uint64_t{bdm} << 40) ^ p->sequence) >> 11) * 0x1.0p-53;
    p->send_ticks = std::max(close_ticks + static_cast<std::uint64_t>(u * jitter_ticks_), last_send_[bdm]);
    last_send_[bdm] = p->send_ticks;
    closed_.push(p);
  }

  std::uint32_t frames_per_packet_;
  std::uint64_t flush_ticks_;
  double jitter_ticks_;
  std::uint64_t seed_;
  FrameSink& sink_;
  std::vector<Packet*> open_;
  std::vector<std::uint64_t> last_send_;
  std::vector<std::uint64_t> sequence_;
  std::vector<std::unique_ptr<Packet>> pool_;
  std::vector<Packet*> free_;
  std::priority_queue<Packet*, std::vector<Packet*>, Later> closed_;
  std::uint64_t packets_sent_ = 0;
};

class FileSink : public FrameSink {
 public:
  FileSink(const std::filesystem::path& frames, const std::filesystem::path& truth)
      : frames_(open(frames)), truth_(open(truth)), buffer_(4096 * kTruthBytes) {}
  ~FileSink() override {
    if (frames_) std::fclose(frames_);
    if (truth_) std::fclose(truth_);
  }
  FileSink(const FileSink&) = delete;
  FileSink& operator=(const FileSink&) = delete;

  void write(const RawFrame* frames, const TruthRecord* truth, std::size_t n) override {
    put(frames_, frames, n * sizeof(RawFrame));
    for (std::size_t i = 0; i < n;) {
      const std::size_t m = std::min(n - i, buffer_.size() / kTruthBytes);
      for (std::size_t j = 0; j < m; ++j) encode_truth(truth[i + j], &buffer_[j * kTruthBytes]);
      put(truth_, buffer_.data(), m * kTruthBytes);
      i += m;
    }
  }

  void close() {
    for (std::FILE** f : {&frames_, &truth_}) {
      if (*f && std::fclose(*f) != 0) throw std::runtime_error("petdaq-sim: cannot finish writing output");
      *f = nullptr;
    }
  }

 private:
  static std::FILE* open(const std::filesystem::path& p) {
    std::FILE* f = std::fopen(p.c_str(), "wb");
    if (!f) throw std::runtime_error("petdaq-sim: cannot create " + p.string());
    std::setvbuf(f, nullptr, _IOFBF, 1 << 22);
    return f;
  }
  static void put(std::FILE* f, const void* data, std::size_t bytes) {
    if (bytes && std::fwrite(data, 1, bytes, f) != bytes)
      throw std::runtime_error("petdaq-sim: write failed (disk full?)");
  }
  std::FILE* frames_;
  std::FILE* truth_;
  std::vector<std::uint8_t> buffer_;
};

class CountingSink : public FrameSink {
 public:
  void write(const RawFrame*, const TruthRecord*, std::size_t n) override { frames += n; }
  std::uint64_t frames = 0;
};

// Workers generate blocks in any order; the caller takes them back in block order.
class BlockPipeline {
 public:
  BlockPipeline(const BlockGenerator& generator, unsigned threads, std::uint64_t block_limit)
      : generator_(generator), limit_(block_limit), slots_(2 * threads + 2) {
    for (auto& s : slots_) s.block = std::make_unique<Block>();
    for (unsigned i = 0; i < threads; ++i) workers_.emplace_back([this] { work(); });
  }
  ~BlockPipeline() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& w : workers_) w.join();
  }

  // Block `index` (each taken once, in increasing order); valid until release().
  Block& acquire(std::uint64_t index) {
    std::unique_lock lock(mutex_);
    Slot& s = slots_[index % slots_.size()];
    cv_.wait(lock, [&] { return (s.ready && s.index == index) || error_; });
    if (error_) std::rethrow_exception(error_);
    return *s.block;
  }
  void release(std::uint64_t index) {
    {
      std::lock_guard lock(mutex_);
      slots_[index % slots_.size()].ready = false;
      consumed_ = index + 1;
    }
    cv_.notify_all();
  }

 private:
  struct Slot {
    std::unique_ptr<Block> block;
    std::uint64_t index = 0;
    bool ready = false;
  };

  void work() {
    for (;;) {
      std::uint64_t index;
      {
        std::unique_lock lock(mutex_);
        cv_.wait(lock, [&] {
          return stop_ || (next_ < limit_ && next_ < consumed_ + slots_.size());
        });
        if (stop_) return;
        index = next_++;
      }
      Block& b = *slots_[index % slots_.size()].block;
      try {
        generator_.generate(index, b);
      } catch (...) {
        std::lock_guard lock(mutex_);
        error_ = std::current_exception();
      }
      {
        std::lock_guard lock(mutex_);
        slots_[index % slots_.size()].index = index;
        slots_[index % slots_.size()].ready = true;
      }
      cv_.notify_all();
    }
  }

  const BlockGenerator& generator_;
  std::uint64_t limit_;
  std::vector<Slot> slots_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::uint64_t next_ = 0;
  std::uint64_t consumed_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
};

void write_truth_json(const std::filesystem::path& file, const SimSummary& s,
                      const SimOptions& o, const Settings& settings) {
  const bool phantom = o.phantom == PhantomKind::water_cylinder ||
                       (o.phantom == PhantomKind::automatic && o.source == SourceShape::cylinder);
  const double window_s = settings.coincidence.window_ps * 1e-12;
  const double singles_per_s = s.duration_s > 0 ? s.frames_in_window / s.duration_s : 0;
  const nlohmann::ordered_json truth = {
      {"format", "petdaq-sim truth 1"},
      {"seed", o.seed},
      {"detector_seed", o.detector_seed},
      {"activity_MBq", o.activity_MBq},
      {"source", o.source == SourceShape::point ? "point" : "cylinder"},
      {"phantom", phantom ? "water_cylinder" : "none"},
      {"phantom_radius_mm", o.phantom_radius_mm},
      {"phantom_length_mm", o.phantom_length_mm},
      {"background", o.background},
      {"duration_s", s.duration_s},
      {"tick_ps", settings.scanner.tick_ps},
      {"time_origin_ticks", s.time_origin_ticks},
      {"disorder_ticks", s.disorder_ticks},
      {"packets", s.packets},
      {"decays", s.decays},
      {"background_events", s.background_events},
      {"frames", s.frames},
      {"frames_by_kind",
       {{"annihilation", s.frames_annihilation},
        {"scattered", s.frames_scattered},
        {"background", s.frames_background}}},
      {"frames_mispositioned", s.frames_mispositioned},
      {"frames_no_crystal", s.frames_no_crystal},
      {"frames_in_energy_window", s.frames_in_window},
      {"energy_window_keV", {settings.energy_window.low_keV, settings.energy_window.high_keV}},
      {"coincidence_window_ps", settings.coincidence.window_ps},
      {"decays_with_two_frames", s.pairs},
      {"decays_with_two_frames_scattered", s.pairs_scattered},
      {"perfect_sorter",
       {{"trues", s.pairs_in_window - s.pairs_in_window_scattered},
        {"scattered", s.pairs_in_window_scattered},
        {"randoms_estimate", singles_per_s * singles_per_s * window_s * s.duration_s}}}};
  std::ofstream out(file);
  out << truth.dump(2) << "\n";
  if (!out) throw std::runtime_error("petdaq-sim: cannot write " + file.string());
}

}  // namespace

Settings settings_for_output(const std::filesystem::path& config,
                             const std::filesystem::path& output_dir, std::string* yaml_text) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(config.string());
  } catch (const YAML::Exception& e) {
    throw SettingsError(config.string() + ": " + e.what());
  }
  if (!root.IsDefined() || root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  YAML::Node cal = root["calibration"];
  cal["position_lut"] = "position_lut.npy";
  cal["energy_correction"] = "energy_correction.npy";
  cal["time_offsets"] = "time_offsets.npy";
  YAML::Emitter emitter;
  emitter << YAML::Comment("Written by petdaq-sim: the scanner of " + config.filename().string() +
                           ", with the calibration tables of this acquisition")
          << root;
  std::string text = std::string(emitter.c_str()) + "\n";
  Settings settings = parse_settings(text, output_dir);
  if (yaml_text) *yaml_text = std::move(text);
  return settings;
}

SimSummary simulate(const std::filesystem::path& config, const std::filesystem::path& output_dir,
                    const SimOptions& options) {
  std::string yaml_text;
  const Settings settings = settings_for_output(config, output_dir, &yaml_text);
  const DetectorModel model(settings, options);
  const Geometry& g = model.geometry();

  if (options.activity_MBq < 0 || !std::isfinite(options.activity_MBq))
    throw std::invalid_argument("--activity-MBq must be a finite number >= 0");
  if (options.frames == 0 && !(options.duration_s > 0))
    throw std::invalid_argument("--duration-s must be > 0");
  const bool phantom = options.phantom == PhantomKind::water_cylinder ||
                       (options.phantom == PhantomKind::automatic &&
                        options.source == SourceShape::cylinder);
  if ((phantom || options.source == SourceShape::cylinder) &&
      options.phantom_radius_mm >= model.ring_radius_mm())
    throw std::invalid_argument("the phantom does not fit inside the ring");

  Plan plan;
  plan.tick_ps = settings.scanner.tick_ps;
  plan.origin_ticks = static_cast<std::uint64_t>(std::llround(options.time_origin_s * 1e12 / plan.tick_ps));
  const double decay_Bq = options.activity_MBq * 1e6;
  const double background_Bq =
      options.background ? options.background_Bq_per_cc * model.crystal_volume_cc() * g.crystal_count()
                         : 0.0;
  plan.decay_mean_ps = decay_Bq > 0 ? 1e12 / decay_Bq : std::numeric_limits<double>::infinity();
  plan.background_mean_ps =
      background_Bq > 0 ? 1e12 / background_Bq : std::numeric_limits<double>::infinity();
  const double event_Bq = decay_Bq + background_Bq;
  if (event_Bq <= 0 && options.frames > 0)
    throw std::invalid_argument("--frames needs a source: activity and background are both off");
  const double block_s = event_Bq > 0 ? kEventsPerBlock / event_Bq : 1.0;
  plan.block_ticks = std::max<std::uint64_t>(1, std::llround(block_s * 1e12 / plan.tick_ps));
  if (options.frames == 0)
    plan.total_ticks = std::max<std::uint64_t>(1, std::llround(options.duration_s * 1e12 / plan.tick_ps));
  const double disorder_ps =
      options.disorder_ps >= 0 ? options.disorder_ps : settings.stream.max_disorder_ps / 10;
  if (disorder_ps > settings.stream.max_disorder_ps / 2)
    throw std::invalid_argument("--disorder-ps must stay well inside stream.max_disorder_ps (at most half of it)");
  // Drawn by a 32-bit multiply-shift: keep the bound below 2^32 ticks (67 ms).
  plan.disorder_ticks = std::min<std::uint64_t>(
      static_cast<std::uint64_t>(std::floor(disorder_ps / plan.tick_ps)), 0xFFFF'FFFEull);
  const double time_sigma_ps = options.time_resolution_fwhm_ps / kFwhmPerSigma;
  plan.guard_ticks = static_cast<std::uint64_t>(model.max_abs_delay_ticks()) +
                     static_cast<std::uint64_t>(std::ceil(5 * time_sigma_ps / plan.tick_ps)) + 2;
  if (plan.origin_ticks <= plan.guard_ticks)
    throw std::invalid_argument("--time-origin-s is too small for the detector's delays");

  if (options.write_files) {
    std::filesystem::create_directories(output_dir);
    write_npy(output_dir / "position_lut.npy", NpyDtype<std::uint8_t>::name,
              {g.bdm_count(), g.du_per_bdm(), g.position_size, g.position_size},
              model.position_lut(), model.position_lut_bytes());
    write_npy(output_dir / "energy_correction.npy",
              {g.bdm_count(), g.du_per_bdm(), g.crystals_per_du(), options.energy_bins},
              model.energy_correction(options.energy_bins, settings.calibration.energy_bin_width));
    write_npy(output_dir / "time_offsets.npy", {g.crystal_count()}, model.time_offsets());
    std::ofstream yaml(output_dir / "petdaq.yaml");
    yaml << yaml_text;
    if (!yaml) throw std::runtime_error("petdaq-sim: cannot write " + (output_dir / "petdaq.yaml").string());
  }

  const unsigned threads =
      options.threads ? options.threads : std::max(1u, std::thread::hardware_concurrency());
  const BlockGenerator generator(settings, options, model, plan);
  std::unique_ptr<FileSink> file_sink;
  CountingSink counting_sink;
  FrameSink* sink = &counting_sink;
  if (options.write_files) {
    file_sink = std::make_unique<FileSink>(output_dir / "frames.bin", output_dir / "truth.bin");
    sink = file_sink.get();
  }
  Packetizer packetizer(g.bdm_count(), options, plan.tick_ps, *sink);

  SimSummary summary;
  summary.time_origin_ticks = plan.origin_ticks;
  summary.disorder_ticks = plan.disorder_ticks;
  const auto started = std::chrono::steady_clock::now();
  const std::uint64_t block_limit =
      plan.total_ticks ? (plan.total_ticks + plan.block_ticks - 1) / plan.block_ticks
                       : std::numeric_limits<std::uint64_t>::max();
  std::vector<std::vector<SimFrame>> carry(g.bdm_count()), next_carry(g.bdm_count());
  {
    BlockPipeline pipeline(generator, threads, block_limit);
    for (std::uint64_t k = 0; k < block_limit; ++k) {
      Block& block = pipeline.acquire(k);
      block.stats.add_to(summary);
      summary.blocks = k + 1;
      const bool last = k + 1 == block_limit || (options.frames && summary.frames >= options.frames);
      // No frame of a later block can have a key below this.
      const std::uint64_t cut = last ? std::numeric_limits<std::uint64_t>::max()
                                     : plan.origin_ticks + block.end_ticks - plan.guard_ticks;
      for (std::uint32_t b = 0; b < g.bdm_count(); ++b) {
        const SimFrame* run = block.frames.data() + block.bdm_begin[b];
        const SimFrame* run_end = block.frames.data() + block.bdm_begin[b + 1];
        const SimFrame* old = carry[b].data();
        const SimFrame* old_end = old + carry[b].size();
        next_carry[b].clear();
        // Merge the carry-over and the new run (ties: the earlier block first).
        while (old != old_end || run != run_end) {
          const SimFrame& f = (run == run_end || (old != old_end && !(run->key < old->key))) ? *old++ : *run++;
          if (f.key < cut)
            packetizer.add(b, f);
          else
            next_carry[b].push_back(f);
        }
        std::swap(carry[b], next_carry[b]);
      }
      packetizer.advance(cut);
      summary.duration_s = double(block.end_ticks) * plan.tick_ps * 1e-12;
      pipeline.release(k);
      if (options.progress)
        options.progress(plan.total_ticks ? double(k + 1) / double(block_limit) : -1.0, summary);
      if (last) break;
    }
  }
  packetizer.finish();
  summary.packets = packetizer.packets_sent();
  summary.generate_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (file_sink) file_sink->close();
  if (options.write_files) write_truth_json(output_dir / "truth.json", summary, options, settings);
  return summary;
}

}  // namespace petdaq::sim

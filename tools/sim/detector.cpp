#include "tools/sim/detector.h"

#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <limits>
#include <numbers>
#include <sstream>

#include "tools/sim/rng.h"

namespace petdaq::sim {

namespace {
// Stream ids of the detector's own random draws (kept apart from the acquisition's).
constexpr std::uint64_t kGainStream = 0x6761'696E;
constexpr std::uint64_t kDelayStream = 0x6465'6C61;
constexpr std::uint64_t kFloodStream = 0x666C'6F6F;
constexpr std::uint64_t kEfficiencyStream = 0x6566'6669;

double clipped_gauss(Rng& rng, double limit) {
  return std::clamp(rng.gauss(), -limit, limit);
}
}  // namespace

DetectorModel::DetectorModel(const Settings& settings, const SimOptions& options)
    : geometry_(Geometry::from(settings.scanner)) {
  const ScannerSettings& sc = settings.scanner;
  panels_ = sc.bdm_transaxial;
  ring_radius_mm_ = sc.ring_radius_mm;
  pitch_t_mm_ = sc.crystal_pitch_transaxial_mm;
  pitch_a_mm_ = sc.crystal_pitch_axial_mm;
  depth_mm_ = sc.crystal_depth_mm;

  du_width_t_mm_ = sc.crystal_transaxial * pitch_t_mm_;
  du_step_t_mm_ = du_width_t_mm_ + sc.du_gap_mm;
  total_t_mm_ = sc.du_transaxial * du_width_t_mm_ + (sc.du_transaxial - 1) * sc.du_gap_mm;
  du_len_a_mm_ = sc.crystal_axial * pitch_a_mm_;
  du_step_a_mm_ = du_len_a_mm_ + sc.du_gap_mm;
  bdm_len_a_mm_ = sc.du_axial * du_len_a_mm_ + (sc.du_axial - 1) * sc.du_gap_mm;
  bdm_step_a_mm_ = bdm_len_a_mm_ + sc.bdm_gap_mm;
  total_a_mm_ = sc.bdm_axial * bdm_len_a_mm_ + (sc.bdm_axial - 1) * sc.bdm_gap_mm;

  // The BDMs are flat panels whose faces touch a circle of the ring radius; they must not
  // overlap at the corners.
  const double side_mm = 2.0 * ring_radius_mm_ * std::tan(std::numbers::pi / panels_);
  if (panels_ < 3 || total_t_mm_ > side_mm) {
    std::ostringstream msg;
    msg << "scanner: " << panels_ << " BDM panels " << total_t_mm_
        << " mm wide do not fit around a ring of radius " << ring_radius_mm_
        << " mm (a side of the " << panels_ << "-gon is " << side_mm << " mm)";
    throw SettingsError(msg.str());
  }
  if (geometry_.du_per_bdm() > 16)
    throw SettingsError("scanner: more than 16 DUs per BDM cannot be addressed by a frame");

  panels_per_rad_ = panels_ / (2.0 * std::numbers::pi);
  inv_pitch_t_ = 1.0 / pitch_t_mm_;
  inv_pitch_a_ = 1.0 / pitch_a_mm_;
  inv_du_step_t_ = 1.0 / du_step_t_mm_;
  inv_du_step_a_ = 1.0 / du_step_a_mm_;
  inv_bdm_step_a_ = 1.0 / bdm_step_a_mm_;
  panel_cos_.resize(panels_);
  panel_sin_.resize(panels_);
  for (std::uint32_t b = 0; b < panels_; ++b) {
    const double angle = 2.0 * std::numbers::pi * b / panels_;
    panel_cos_[b] = std::cos(angle);
    panel_sin_[b] = std::sin(angle);
  }

  const std::uint32_t n_crystals = geometry_.crystal_count();
  saturation_keV_ = options.saturation_keV;
  response_.resize(n_crystals);
  for (std::uint32_t c = 0; c < n_crystals; ++c) {
    Rng gain_rng(mix_seed(options.detector_seed, kGainStream, c));
    response_[c].adc_per_keV = static_cast<float>(options.adc_per_keV *
                                         std::exp(options.gain_spread * clipped_gauss(gain_rng, 3)));
    Rng delay_rng(mix_seed(options.detector_seed, kDelayStream, c));
    const double delay_ps = options.delay_spread_ps * clipped_gauss(delay_rng, 4);
    response_[c].delay_ticks = static_cast<std::int32_t>(std::llround(delay_ps / sc.tick_ps));
    max_abs_delay_ticks_ = std::max(max_abs_delay_ticks_, std::abs(response_[c].delay_ticks));
  }
  efficiency_.assign(n_crystals, 1.0f);
  if (options.crystal_efficiency_spread > 0) {
    keep_scale_ = 1.0 / (1.0 + 3.0 * options.crystal_efficiency_spread);
    for (std::uint32_t c = 0; c < n_crystals; ++c) {
      Rng efficiency_rng(mix_seed(options.detector_seed, kEfficiencyStream, c));
      efficiency_[c] = static_cast<float>(
          1.0 + options.crystal_efficiency_spread * clipped_gauss(efficiency_rng, 3));
    }
  }
  build_flood_maps(options.detector_seed);
}

void DetectorModel::FreeDeleter::operator()(std::uint8_t* p) const { std::free(p); }

double DetectorModel::crystal_volume_cc() const {
  return pitch_t_mm_ * pitch_a_mm_ * depth_mm_ / 1000.0;
}

bool DetectorModel::locate_near_panel(double px, double py, double pz, double ux, double uy,
                                      double uz, std::uint32_t centre, DetectorHit& hit) const {
  // The ray leaves the polygon within half a panel's angle of where it leaves the inscribed
  // circle (the exit point P satisfies P.Q >= R^2), so the exit face is the panel facing Q or
  // a neighbour: the one reached first among those the ray moves towards (compared
  // cross-multiplied, no division).
  double best_num = 1, best_den = 0;
  std::uint32_t best = centre;
  bool found = false;
  for (std::uint32_t k = 0; k < 3; ++k) {
    std::uint32_t p = centre + k + panels_ - 1;  // in [panels - 1, 2 panels]
    p = p >= panels_ ? p - panels_ : p;
    p = p >= panels_ ? p - panels_ : p;
    const double den = ux * panel_cos_[p] + uy * panel_sin_[p];
    const double num = ring_radius_mm_ - (px * panel_cos_[p] + py * panel_sin_[p]);
    const bool better = (den > 1e-12) & (num * best_den < best_num * den);
    best_num = better ? num : best_num;
    best_den = better ? den : best_den;
    best = better ? p : best;
    found |= better;
  }
  const double best_t = best_num / (found ? best_den : 1.0);
  const double hx = px + best_t * ux;
  const double hy = py + best_t * uy;
  const double hz = pz + best_t * uz;

  // Position on the panel; gaps, the panel's ends and the axial ends lose the photon, one
  // test for all (coordinates clamped to [-1, end] first, so that truncating x + 1 floors).
  const double s_mm = -hx * panel_sin_[best] + hy * panel_cos_[best] + 0.5 * total_t_mm_;
  const double z_mm = hz + 0.5 * total_a_mm_;
  const double s_clamped = std::clamp(s_mm, -1.0, total_t_mm_);
  const double z_clamped = std::clamp(z_mm, -1.0, total_a_mm_);
  const auto d_trans = static_cast<std::int32_t>(s_clamped * inv_du_step_t_ + 1.0) - 1;
  const double in_du_t = s_clamped - d_trans * du_step_t_mm_;
  const auto b_axial = static_cast<std::int32_t>(z_clamped * inv_bdm_step_a_ + 1.0) - 1;
  const double in_bdm = z_clamped - b_axial * bdm_step_a_mm_;
  const auto d_axial = static_cast<std::int32_t>(in_bdm * inv_du_step_a_ + 1.0) - 1;
  const double in_du_a = in_bdm - d_axial * du_step_a_mm_;
  const bool inside = found & (best_num >= 0) & (s_mm >= 0) & (s_mm < total_t_mm_) &
                      (z_mm >= 0) & (z_mm < total_a_mm_) & (d_trans >= 0) &
                      (d_trans < std::int32_t(geometry_.du_transaxial)) & (in_du_t >= 0) &
                      (in_du_t < du_width_t_mm_) & (b_axial >= 0) &
                      (b_axial < std::int32_t(geometry_.bdm_axial)) & (in_bdm >= 0) &
                      (in_bdm < bdm_len_a_mm_) & (d_axial >= 0) &
                      (d_axial < std::int32_t(geometry_.du_axial)) & (in_du_a >= 0) &
                      (in_du_a < du_len_a_mm_);
  if (!inside) return false;
  const auto c_trans = std::min(static_cast<std::uint32_t>(in_du_t * inv_pitch_t_),
                                geometry_.crystal_transaxial - 1);
  const auto c_axial = std::min(static_cast<std::uint32_t>(in_du_a * inv_pitch_a_),
                                geometry_.crystal_axial - 1);

  hit.bdm = b_axial * geometry_.bdm_transaxial + best;
  hit.du = d_trans * geometry_.du_axial + d_axial;
  hit.local = c_trans * geometry_.crystal_axial + c_axial;
  const Geometry& g = geometry_;
  hit.crystal = (b_axial * (g.du_axial * g.crystal_axial) + d_axial * g.crystal_axial + c_axial) *
                    g.crystals_per_ring() +
                best * (g.du_transaxial * g.crystal_transaxial) + d_trans * g.crystal_transaxial +
                c_trans;
  hit.distance_mm = best_t;
  hit.cos_incidence = best_den;
  return true;
}

void DetectorModel::build_flood_maps(std::uint64_t seed) {
  const Geometry& g = geometry_;
  const std::uint32_t n_du = g.bdm_count() * g.du_per_bdm();
  const std::uint32_t per_du = g.crystals_per_du();
  const std::uint32_t size = g.position_size;
  const double centre = 0.5 * (size - 1);
  const double half_span = 0.46 * size;
  // Anger logic compresses the image towards the DU's edges: u -> u (1 + k) - k u^3.
  constexpr double kCompression = 0.15;
  auto distort = [](double u) { return u * (1 + kCompression) - kCompression * u * u * u; };

  peaks_.resize(std::size_t{n_du} * per_du);
  constexpr std::size_t kHugePage = 2u << 20;
  position_lut_bytes_ = std::size_t{n_du} * size * size;
  const std::size_t rounded = (position_lut_bytes_ + kHugePage - 1) / kHugePage * kHugePage;
  position_lut_.reset(static_cast<std::uint8_t*>(std::aligned_alloc(kHugePage, rounded)));
  if (!position_lut_) throw std::bad_alloc();
  madvise(position_lut_.get(), rounded, MADV_HUGEPAGE);  // a hint: fine if refused
  std::memset(position_lut_.get(), 255, position_lut_bytes_);
  std::vector<float> best_d2(std::size_t{size} * size);

  for (std::uint32_t du = 0; du < n_du; ++du) {
    Rng rng(mix_seed(seed, kFloodStream, du));
    const double nominal_spacing = 2.0 * half_span / std::max(g.crystal_axial, g.crystal_transaxial);
    // Rows are labels' rows (image y), columns the axial crystals (image x).
    for (std::uint32_t row = 0; row < g.crystal_transaxial; ++row) {
      for (std::uint32_t col = 0; col < g.crystal_axial; ++col) {
        const double ux = -1.0 + (2.0 * col + 1.0) / g.crystal_axial;
        const double uy = -1.0 + (2.0 * row + 1.0) / g.crystal_transaxial;
        const std::uint32_t label = row * g.crystal_axial + col;
        const std::size_t i = std::size_t{du} * per_du + label;
        peaks_[i].x = static_cast<float>(centre + half_span * distort(ux) +
                                        0.03 * nominal_spacing * clipped_gauss(rng, 3));
        peaks_[i].y = static_cast<float>(centre + half_span * distort(uy) +
                                        0.03 * nominal_spacing * clipped_gauss(rng, 3));
      }
    }
    for (std::uint32_t a = 0; a < per_du; ++a) {
      const std::size_t ia = std::size_t{du} * per_du + a;
      double nearest2 = std::numeric_limits<double>::infinity();
      for (std::uint32_t b = 0; b < per_du; ++b) {
        if (a == b) continue;
        const std::size_t ib = std::size_t{du} * per_du + b;
        const double dx = peaks_[ia].x - peaks_[ib].x;
        const double dy = peaks_[ia].y - peaks_[ib].y;
        nearest2 = std::min(nearest2, dx * dx + dy * dy);
      }
      // A DU of one crystal has no neighbour: give it the whole image.
      peaks_[ia].spacing = static_cast<float>(per_du > 1 ? std::sqrt(nearest2) : size);
    }

    // Segmentation: each pixel takes its nearest peak, within 0.75 of that peak's spacing
    // (beyond, in the valleys outside the outer crystals, it is no crystal).
    std::fill(best_d2.begin(), best_d2.end(), std::numeric_limits<float>::infinity());
    std::uint8_t* lut = position_lut_.get() + std::size_t{du} * size * size;
    for (std::uint32_t label = 0; label < per_du; ++label) {
      const std::size_t i = std::size_t{du} * per_du + label;
      const double r = 0.75 * peaks_[i].spacing;
      const double px = peaks_[i].x, py = peaks_[i].y;
      const int x0 = std::max(0, static_cast<int>(std::floor(px - r)));
      const int x1 = std::min(static_cast<int>(size) - 1, static_cast<int>(std::ceil(px + r)));
      const int y0 = std::max(0, static_cast<int>(std::floor(py - r)));
      const int y1 = std::min(static_cast<int>(size) - 1, static_cast<int>(std::ceil(py + r)));
      for (int y = y0; y <= y1; ++y) {
        for (int x = x0; x <= x1; ++x) {
          const double d2 = (x - px) * (x - px) + (y - py) * (y - py);
          float& best = best_d2[std::size_t(y) * size + x];
          if (d2 <= r * r && d2 < best) {
            best = static_cast<float>(d2);
            lut[std::size_t(y) * size + x] = static_cast<std::uint8_t>(label);
          }
        }
      }
    }
  }
}

std::vector<float> DetectorModel::energy_correction(std::uint32_t bins,
                                                    std::uint32_t bin_width) const {
  const Geometry& g = geometry_;
  const std::uint32_t per_du = g.crystals_per_du();
  std::vector<float> table(std::size_t{g.bdm_count()} * g.du_per_bdm() * per_du * bins);
  for (std::uint32_t b = 0; b < g.bdm_count(); ++b) {
    for (std::uint32_t d = 0; d < g.du_per_bdm(); ++d) {
      for (std::uint32_t c = 0; c < per_du; ++c) {
        const double k = response_[g.crystal_id(b, d, c)].adc_per_keV;
        float* row = &table[((std::size_t{b} * g.du_per_bdm() + d) * per_du + c) * bins];
        for (std::uint32_t bin = 0; bin < bins; ++bin) {
          // Inverse of raw = k E / (1 + E / Es): E = raw / (k - raw / Es), at the mean raw
          // value of the bin. Past the saturation asymptote no real frame can land; keep
          // the table finite there.
          const double raw = bin * double(bin_width) + 0.5 * (bin_width - 1);
          const double denom = std::max(k - raw / saturation_keV_, 0.1 * k);
          row[bin] = static_cast<float>(1.0 / denom);
        }
      }
    }
  }
  return table;
}

std::vector<std::int32_t> DetectorModel::time_offsets() const {
  std::vector<std::int32_t> offsets(response_.size());
  for (std::size_t c = 0; c < offsets.size(); ++c) offsets[c] = -response_[c].delay_ticks;
  return offsets;
}

}  // namespace petdaq::sim

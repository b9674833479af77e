#include "tools/sim/block_generator.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "proto/frame.h"

namespace petdaq::sim {

namespace {
constexpr std::uint64_t kAcquisitionStream = 0x6163'7175;
// The phantom's electron density relative to water's (Compton scattering only).
double phantom_electron_ratio(const SimOptions& o) {
  return o.phantom == PhantomKind::polyethylene_cylinder
             ? kPolyethyleneElectronsPerMm3 / kWaterElectronsPerMm3
             : 1.0;
}
}  // namespace

BlockGenerator::BlockGenerator(const Settings& settings, const SimOptions& options,
                               const DetectorModel& model, const Plan& plan)
    : options_(options),
      model_(model),
      g_(model.geometry()),
      plan_(plan),
      water_mean_free_path_mm_([density = phantom_electron_ratio(options)](double e) {
        return 1.0 / (density * water_mu_per_mm(e));
      }),
      lyso_mu_per_mm_([](double e) {
        return kLysoMu511PerMm * std::pow(kAnnihilationKeV / e, kLysoMuExponent);
      }) {
  phantom_ = has_phantom(options);
  phantom_r2_ = options.phantom_radius_mm * options.phantom_radius_mm;
  phantom_half_mm_ = 0.5 * options.phantom_length_mm;
  water_mean_free_path511_mm_ =
      1.0 / (phantom_electron_ratio(options) * water_mu_per_mm(kAnnihilationKeV));
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

void BlockGenerator::generate(std::uint64_t index, Block& out) const {
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
    if (options_.half_life_s > 0) {
      // A decaying source: the Poisson process of the starting activity, each decay kept
      // with probability 2^(−t / T½) (thinning gives the Poisson process of the decaying
      // activity).
      const double decay_per_ps = std::numbers::ln2 / (options_.half_life_s * 1e12);
      const double start_ps = double(start) * plan_.tick_ps;
      for (double t = rng.exponential(plan_.decay_mean_ps); t < length_ps;
           t += rng.exponential(plan_.decay_mean_ps))
        if (rng.uniform() < std::exp(-decay_per_ps * (start_ps + t))) out.decay_ps.push_back(t);
    } else {
      for (double t = rng.exponential(plan_.decay_mean_ps); t < length_ps;
           t += rng.exponential(plan_.decay_mean_ps))
        out.decay_ps.push_back(t);
    }
  }
  for (std::size_t first = 0; first < out.decay_ps.size(); first += kChunkDecays)
    decay_chunk(ctx, first, std::min<std::size_t>(kChunkDecays, out.decay_ps.size() - first));
  ctx.next_event = static_cast<std::uint32_t>(out.decay_ps.size());
  if (std::isfinite(plan_.background_mean_ps)) {
    for (double t = rng.exponential(plan_.background_mean_ps); t < length_ps;
         t += rng.exponential(plan_.background_mean_ps))
      background(ctx, t);
  }
  group_by_bdm(out, g_.bdm_count());
}

// Board temperatures drift slowly: a warm-up and a few-minute oscillation per board.
void BlockGenerator::set_temperatures(Context& ctx, double t_s) const {
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

void BlockGenerator::background(Context& ctx, double t_ps) const {
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
bool BlockGenerator::frame_begin(Context& ctx, std::uint32_t bdm, std::uint32_t du,
                                 std::uint32_t local, std::uint32_t crystal, double deposit_keV,
                                 double arrival_ps, std::uint64_t event_ticks, std::uint64_t id,
                                 PhotonKind kind, std::uint8_t which, unsigned scatters,
                                 PendingFrame& pending) const {
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

}  // namespace petdaq::sim

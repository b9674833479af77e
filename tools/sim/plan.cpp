#include "tools/sim/plan.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "tools/sim/physics.h"

namespace petdaq::sim {

namespace {
// Events per block: long enough that the ordering overhead is small, short enough that
// every thread gets work in a 10 ms acquisition at a few MBq.
constexpr double kEventsPerBlock = 32768.0;
}  // namespace

std::uint64_t Plan::block_limit() const {
  return total_ticks ? (total_ticks + block_ticks - 1) / block_ticks
                     : std::numeric_limits<std::uint64_t>::max();
}

bool has_phantom(const SimOptions& options) {
  return options.phantom == PhantomKind::water_cylinder ||
         options.phantom == PhantomKind::polyethylene_cylinder ||
         (options.phantom == PhantomKind::automatic && options.source == SourceShape::cylinder);
}

Plan make_plan(const Settings& settings, const SimOptions& options, const DetectorModel& model) {
  const Geometry& g = model.geometry();
  if (options.activity_MBq < 0 || !std::isfinite(options.activity_MBq))
    throw std::invalid_argument("--activity-MBq must be a finite number >= 0");
  if (options.frames == 0 && !(options.duration_s > 0))
    throw std::invalid_argument("--duration-s must be > 0");
  if ((has_phantom(options) || options.source == SourceShape::cylinder) &&
      options.phantom_radius_mm >= model.ring_radius_mm())
    throw std::invalid_argument("the phantom does not fit inside the ring");
  if (options.source != SourceShape::cylinder &&
      std::hypot(options.source_position_mm[0] +
                     (options.source == SourceShape::line ? options.line_offset_mm : 0.0),
                 options.source_position_mm[1]) +
              (options.source == SourceShape::line ? options.line_radius_mm : 0.0) +
              options.motion_amplitude_mm >=
          model.ring_radius_mm())
    throw std::invalid_argument("the source (--source-position, the line's offset and radius, "
                                "the motion) does not stay inside the ring");
  if (options.source == SourceShape::line && has_phantom(options) &&
      (options.line_offset_mm + options.line_radius_mm > options.phantom_radius_mm ||
       options.line_length_mm > options.phantom_length_mm))
    throw std::invalid_argument("the line source must lie inside the phantom");

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
  return plan;
}

}  // namespace petdaq::sim

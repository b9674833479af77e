#include "tools/sim/options.h"

#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "tools/common/cli.h"

namespace petdaq::sim {

void add_sim_options(CLI::App& app, SimOptions& o, SimOptionText& text) {
  const char* group = "Simulation";
  auto number = [&](const char* flag, double& v, const char* what, const char* unit) {
    app.add_option(flag, v, what)->type_name(unit)->group(group);
  };
  cli::add_seed(app, o.seed, "acquisition seed; same seed, same files")->group(group);
  app.add_option("--detector-seed", o.detector_seed,
                 "seed of the detector's gains, delays and flood map")
      ->type_name("N")
      ->group(group);
  cli::add_duration_s(app, o.duration_s, "acquisition length in seconds")->group(group);
  app.add_option("--frames", o.frames,
                 "stop at the first block boundary with at least N frames instead (0: off)")
      ->type_name("N")
      ->group(group);
  number("--activity-MBq", o.activity_MBq, "source activity", "MBq");
  app.add_option("--source", text.source,
                 "a point source, a line source along the axis (--source-length-mm) or a "
                 "uniform cylinder at the centre")
      ->check(CLI::IsMember({"point", "line", "cylinder"}))
      ->type_name("SHAPE")
      ->group(group);
  app.add_option("--source-position", text.source_position,
                 "where the point source (or the line source's centre) sits")
      ->type_name("X,Y,Z (mm)")
      ->group(group);
  number("--source-length-mm", o.source_length_mm, "length of a line source", "MM");
  number("--motion-amplitude-mm", o.motion_amplitude_mm,
         "a point or line source moves: amplitude of a sinusoidal motion (0: still)", "MM");
  number("--motion-period-s", o.motion_period_s, "period of the motion", "S");
  app.add_option("--motion-axis", text.motion_axis, "axis of the motion")
      ->check(CLI::IsMember({"x", "y", "z"}))
      ->type_name("AXIS")
      ->group(group);
  app.add_option("--phantom", text.phantom, "water cylinder around the source (auto: for a cylinder)")
      ->check(CLI::IsMember({"auto", "none", "water"}))
      ->type_name("KIND")
      ->group(group);
  number("--phantom-radius-mm", o.phantom_radius_mm, "phantom radius (mouse: 15)", "MM");
  number("--phantom-length-mm", o.phantom_length_mm, "phantom length", "MM");
  app.add_flag("--no-background", text.no_background, "no intrinsic LYSO (176Lu) background")
      ->group(group);
  number("--background-Bq-per-cc", o.background_Bq_per_cc, "intrinsic background activity", "B");
  number("--acollinearity-deg", o.acollinearity_fwhm_deg, "acollinearity FWHM", "DEG");
  number("--energy-resolution", o.energy_resolution_fwhm, "FWHM fraction at 511 keV", "F");
  number("--time-resolution-ps", o.time_resolution_fwhm_ps, "FWHM per single", "PS");
  number("--position-blur", o.position_blur,
         "light-centroid sigma / peak spacing at 511 keV", "F");
  number("--disorder-ps", o.disorder_ps,
         "per-BDM disorder bound (< 0: stream.max_disorder_ps / 10)", "PS");
  app.add_option("--packet-frames", o.packet_frames, "frames per datagram")
      ->type_name("N")
      ->check(CLI::PositiveNumber)
      ->group(group);
  cli::add_flush_us(app, o.packet_flush_us)->group(group);
  number("--link-jitter-us", o.link_jitter_us, "random extra delay of a datagram", "US");
  app.add_option("--energy-bins", o.energy_bins, "bins of energy_correction.npy")
      ->type_name("N")
      ->check(CLI::PositiveNumber)
      ->group(group);
  app.add_option("--threads", o.threads,
                 "worker threads (0: all); the output does not depend on it")
      ->type_name("N")
      ->group(group);
}

void finish_sim_options(const SimOptionText& text, SimOptions& o) {
  o.source = text.source == "point"  ? SourceShape::point
             : text.source == "line" ? SourceShape::line
                                     : SourceShape::cylinder;
  {
    double v[3];
    char extra = 0;
    if (std::sscanf(text.source_position.c_str(), "%lf,%lf,%lf%c", &v[0], &v[1], &v[2], &extra) != 3 ||
        !std::isfinite(v[0]) || !std::isfinite(v[1]) || !std::isfinite(v[2]))
      throw std::invalid_argument("--source-position: expected X,Y,Z in mm, got '" +
                                  text.source_position + "'");
    for (int k = 0; k < 3; ++k) o.source_position_mm[k] = v[k];
  }
  o.motion_axis = text.motion_axis == "x" ? 0u : text.motion_axis == "y" ? 1u : 2u;
  if (!(o.source_length_mm > 0) || !(o.motion_period_s > 0) || !(o.motion_amplitude_mm >= 0) ||
      !std::isfinite(o.motion_amplitude_mm))
    throw std::invalid_argument(
        "--source-length-mm and --motion-period-s must be > 0, --motion-amplitude-mm >= 0");
  if (o.source == SourceShape::cylinder &&
      (o.motion_amplitude_mm > 0 || o.source_position_mm[0] != 0 || o.source_position_mm[1] != 0 ||
       o.source_position_mm[2] != 0))
    throw std::invalid_argument(
        "--source-position and --motion-amplitude-mm apply to a point or line source");
  o.phantom = text.phantom == "none"    ? PhantomKind::none
              : text.phantom == "water" ? PhantomKind::water_cylinder
                                        : PhantomKind::automatic;
  if (text.no_background) o.background = false;
  if (o.phantom_radius_mm <= 0 || o.phantom_length_mm <= 0)
    throw std::invalid_argument("--phantom-radius-mm and --phantom-length-mm must be > 0");
  if (o.energy_resolution_fwhm < 0 || o.time_resolution_fwhm_ps < 0 || o.position_blur < 0 ||
      o.acollinearity_fwhm_deg < 0 || o.background_Bq_per_cc < 0 || o.link_jitter_us < 0)
    throw std::invalid_argument(
        "--energy-resolution, --time-resolution-ps, --position-blur, --acollinearity-deg, "
        "--background-Bq-per-cc and --link-jitter-us must be >= 0");
}

}  // namespace petdaq::sim

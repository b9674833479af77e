#include "tools/sim/options.h"

#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "common/cli.h"

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
  number("--activity-MBq", o.activity_MBq, "source activity (at the start, with --half-life-s)", "MBq");
  number("--half-life-s", o.half_life_s, "the source decays with this half-life (0: constant activity)", "S");
  app.add_option("--source", text.source,
                 "a point source, a line source parallel to the axis (--source-length-mm, "
                 "--line-radius-mm) or a uniform cylinder at the centre")
      ->check(CLI::IsMember({"point", "line", "cylinder"}))
      ->type_name("SHAPE")
      ->group(group);
  app.add_option("--source-position", text.source_position,
                 "where the point source (or the line source's centre) sits")
      ->type_name("X,Y,Z (mm)")
      ->group(group);
  number("--source-length-mm", o.source_length_mm,
         "length of a line source (a NEMA phantom sets its own; --line-length-mm overrides both)",
         "MM");
  number("--motion-amplitude-mm", o.motion_amplitude_mm,
         "a point or line source moves: amplitude of a sinusoidal motion (0: still)", "MM");
  number("--motion-period-s", o.motion_period_s, "period of the motion", "S");
  app.add_option("--motion-axis", text.motion_axis, "axis of the motion")
      ->check(CLI::IsMember({"x", "y", "z"}))
      ->type_name("AXIS")
      ->group(group);
  app.add_option("--phantom", text.phantom,
                 "water cylinder around the source (auto: for a cylinder), or a NEMA NU 4-2008 "
                 "count-rate phantom (polyethylene; sets the phantom's size and the line source)")
      ->check(CLI::IsMember({"auto", "none", "water", "nema-mouse", "nema-rat"}))
      ->type_name("KIND")
      ->group(group);
  number("--phantom-radius-mm", o.phantom_radius_mm, "phantom radius (mouse: 15)", "MM");
  number("--phantom-length-mm", o.phantom_length_mm, "phantom length", "MM");
  app.add_option("--line-offset-mm", text.line_offset_mm,
                 "line source: distance from the axis (default 10; NEMA rat 17.5)")
      ->type_name("MM")->group(group);
  app.add_option("--line-length-mm", text.line_length_mm,
                 "line source: active length (default 60; NEMA rat 140)")
      ->type_name("MM")->group(group);
  app.add_option("--line-radius-mm", text.line_radius_mm, "line source: radius (default 1.6)")
      ->type_name("MM")->group(group);
  app.add_flag("--no-background", text.no_background, "no intrinsic LYSO (176Lu) background")
      ->group(group);
  number("--background-Bq-per-cc", o.background_Bq_per_cc, "intrinsic background activity", "B");
  number("--acollinearity-deg", o.acollinearity_fwhm_deg, "acollinearity FWHM", "DEG");
  number("--energy-resolution", o.energy_resolution_fwhm, "FWHM fraction at 511 keV", "F");
  number("--time-resolution-ps", o.time_resolution_fwhm_ps, "FWHM per single", "PS");
  number("--position-blur", o.position_blur,
         "light-centroid sigma / peak spacing at 511 keV", "F");
  number("--crystal-efficiency-spread", o.crystal_efficiency_spread,
         "sigma of the per-crystal relative detection efficiency (0: none; truth in "
         "crystal_efficiency.npy)", "F");
  number("--dead-time-ns", o.dead_time_ns,
         "front-end dead time after each pulse (0: none)", "NS");
  app.add_option("--dead-time-model", text.dead_time_model,
                 "non-paralysable, or paralysable (every photon while dead restarts it)")
      ->check(CLI::IsMember({"non-paralysable", "paralysable"}))
      ->type_name("MODEL")
      ->group(group);
  app.add_option("--dead-time-unit", text.dead_time_unit, "what a pulse makes dead: its DU or its whole BDM")
      ->check(CLI::IsMember({"du", "bdm"}))
      ->type_name("UNIT")
      ->group(group);
  number("--pile-up-ns", o.pile_up_ns,
         "shaping time: photons in one DU this close to a pulse's first add to it (0: none)", "NS");
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
  // NEMA NU 4-2008, section 4 (docs/nema.md): high-density polyethylene cylinders with a
  // 3.2 mm hole parallel to the axis holding the line source.
  // A line source outside the NEMA phantoms: on the axis (or at --source-position), as long
  // as --source-length-mm.
  o.line_offset_mm = 0.0;
  o.line_length_mm = o.source_length_mm;
  if (text.phantom == "nema-mouse" || text.phantom == "nema-rat") {
    const bool mouse = text.phantom == "nema-mouse";
    o.phantom = PhantomKind::polyethylene_cylinder;
    o.source = SourceShape::line;
    o.phantom_radius_mm = mouse ? 12.5 : 25.0;
    o.phantom_length_mm = mouse ? 70.0 : 150.0;
    o.line_offset_mm = mouse ? 10.0 : 17.5;
    o.line_length_mm = mouse ? 60.0 : 140.0;
    o.line_radius_mm = 1.6;
  }
  if (!std::isnan(text.line_offset_mm)) o.line_offset_mm = text.line_offset_mm;
  if (!std::isnan(text.line_length_mm)) o.line_length_mm = text.line_length_mm;
  if (!std::isnan(text.line_radius_mm)) o.line_radius_mm = text.line_radius_mm;
  o.source_length_mm = o.line_length_mm;  // one length, whichever option gave it
  if (text.no_background) o.background = false;
  o.dead_time_paralysable = text.dead_time_model == "paralysable";
  o.dead_time_per_board = text.dead_time_unit == "bdm";
  if (!(o.dead_time_ns >= 0 && o.dead_time_ns <= 1e6) || !(o.pile_up_ns >= 0 && o.pile_up_ns <= 1e6))
    throw std::invalid_argument("--dead-time-ns and --pile-up-ns must lie in [0, 1e6]");
  if (!(o.half_life_s >= 0) || !std::isfinite(o.half_life_s))
    throw std::invalid_argument("--half-life-s must be a finite number >= 0");
  if (o.phantom_radius_mm <= 0 || o.phantom_length_mm <= 0)
    throw std::invalid_argument("--phantom-radius-mm and --phantom-length-mm must be > 0");
  if (o.source == SourceShape::line &&
      !(o.line_radius_mm > 0 && o.line_length_mm > 0 && o.line_offset_mm >= 0))
    throw std::invalid_argument("--line-radius-mm and --line-length-mm must be > 0, --line-offset-mm >= 0");
  if (o.energy_resolution_fwhm < 0 || o.time_resolution_fwhm_ps < 0 || o.position_blur < 0 ||
      o.acollinearity_fwhm_deg < 0 || o.crystal_efficiency_spread < 0 ||
      o.crystal_efficiency_spread >= 1.0 / 3.0 || o.background_Bq_per_cc < 0 || o.link_jitter_us < 0)
    throw std::invalid_argument(
        "--energy-resolution, --time-resolution-ps, --position-blur, --acollinearity-deg, "
        "--background-Bq-per-cc and --link-jitter-us must be >= 0, and "
        "--crystal-efficiency-spread in [0, 1/3)");
}

}  // namespace petdaq::sim

#include "tools/sim/options.h"

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
  app.add_option("--source", text.source, "point source at the centre, or a uniform cylinder")
      ->check(CLI::IsMember({"point", "cylinder"}))
      ->type_name("SHAPE")
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
  number("--crystal-efficiency-spread", o.crystal_efficiency_spread,
         "sigma of the per-crystal relative detection efficiency (0: none; truth in "
         "crystal_efficiency.npy)", "F");
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
  o.source = text.source == "point" ? SourceShape::point : SourceShape::cylinder;
  o.phantom = text.phantom == "none"    ? PhantomKind::none
              : text.phantom == "water" ? PhantomKind::water_cylinder
                                        : PhantomKind::automatic;
  if (text.no_background) o.background = false;
  if (o.phantom_radius_mm <= 0 || o.phantom_length_mm <= 0)
    throw std::invalid_argument("--phantom-radius-mm and --phantom-length-mm must be > 0");
  if (o.energy_resolution_fwhm < 0 || o.time_resolution_fwhm_ps < 0 || o.position_blur < 0 ||
      o.acollinearity_fwhm_deg < 0 || o.crystal_efficiency_spread < 0 ||
      o.crystal_efficiency_spread >= 1.0 / 3.0 || o.background_Bq_per_cc < 0 || o.link_jitter_us < 0)
    throw std::invalid_argument(
        "--energy-resolution, --time-resolution-ps, --position-blur, --acollinearity-deg, "
        "--background-Bq-per-cc and --link-jitter-us must be >= 0, and "
        "--crystal-efficiency-spread in [0, 1/3)");
}

}  // namespace petdaq::sim

#include "tools/sim/options.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace petdaq::sim {

Args::Args(int argc, char** argv, const std::vector<std::string>& flags) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--", 0) != 0) throw std::invalid_argument("unexpected argument '" + a + "'");
    const std::string key = a.substr(2);
    if (std::find(flags.begin(), flags.end(), key) != flags.end()) {
      values_[key] = "";
    } else {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      values_[key] = argv[++i];
    }
  }
}

std::string Args::text(const std::string& key, const std::string& fallback) const {
  const auto it = values_.find(key);
  return it == values_.end() ? fallback : it->second;
}

double Args::number(const std::string& key, double fallback) const {
  const auto it = values_.find(key);
  if (it == values_.end()) return fallback;
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(it->second, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != it->second.size() || !std::isfinite(v))
    throw std::invalid_argument("--" + key + ": '" + it->second + "' is not a number");
  return v;
}

std::uint64_t Args::count(const std::string& key, std::uint64_t fallback) const {
  const auto it = values_.find(key);
  if (it == values_.end()) return fallback;
  std::size_t used = 0;
  std::uint64_t v = 0;
  try {
    v = std::stoull(it->second, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != it->second.size() || it->second.empty() || it->second[0] == '-')
    throw std::invalid_argument("--" + key + ": '" + it->second + "' is not a whole number");
  return v;
}

void Args::only(const std::vector<std::string>& known) const {
  for (const auto& [key, value] : values_)
    if (std::find(known.begin(), known.end(), key) == known.end())
      throw std::invalid_argument("unknown option --" + key + " (see --help)");
}

std::vector<std::string> sim_option_names() {
  return {"seed", "detector-seed", "duration-s", "frames", "activity-MBq", "source", "phantom",
          "phantom-radius-mm", "phantom-length-mm", "no-background", "background-Bq-per-cc",
          "acollinearity-deg", "energy-resolution", "time-resolution-ps", "position-blur",
          "disorder-ps", "packet-frames", "packet-flush-us", "link-jitter-us", "energy-bins",
          "threads"};
}

const char* sim_options_help() {
  return "  --seed N                  acquisition seed (default 1); same seed, same files\n"
         "  --detector-seed N         seed of the detector's gains, delays, flood map (default 1)\n"
         "  --duration-s S            acquisition length (default 0.01)\n"
         "  --frames N                stop at the first block boundary with >= N frames instead\n"
         "  --activity-MBq A          source activity (default 1)\n"
         "  --source point|cylinder   point source at the centre, or a uniform cylinder (default)\n"
         "  --phantom auto|none|water water cylinder around the source (auto: for a cylinder)\n"
         "  --phantom-radius-mm R     default 15 (mouse)\n"
         "  --phantom-length-mm L     default 70\n"
         "  --no-background           no intrinsic LYSO (176Lu) background\n"
         "  --background-Bq-per-cc B  default 280\n"
         "  --acollinearity-deg F     FWHM, default 0.5\n"
         "  --energy-resolution F     FWHM fraction at 511 keV, default 0.12\n"
         "  --time-resolution-ps F    FWHM per single, default 350\n"
         "  --position-blur F         light-centroid sigma / peak spacing at 511 keV, default 0.2\n"
         "  --disorder-ps D           per-BDM disorder bound (default stream.max_disorder_ps / 10)\n"
         "  --packet-frames N         frames per datagram, default 560\n"
         "  --packet-flush-us T       a partly filled datagram leaves after T, default 100\n"
         "  --link-jitter-us J        random extra delay of a datagram, default 20\n"
         "  --energy-bins N           bins of energy_correction.npy, default 1000\n"
         "  --threads T               worker threads (default: all); the output does not change\n";
}

void apply_sim_options(const Args& a, SimOptions& o) {
  o.seed = a.count("seed", o.seed);
  o.detector_seed = a.count("detector-seed", o.detector_seed);
  o.frames = a.count("frames", o.frames);
  o.duration_s = a.number("duration-s", o.duration_s);
  o.activity_MBq = a.number("activity-MBq", o.activity_MBq);
  const std::string source = a.text("source", "cylinder");
  if (source == "point")
    o.source = SourceShape::point;
  else if (source == "cylinder")
    o.source = SourceShape::cylinder;
  else
    throw std::invalid_argument("--source: 'point' or 'cylinder', not '" + source + "'");
  const std::string phantom = a.text("phantom", "auto");
  if (phantom == "auto")
    o.phantom = PhantomKind::automatic;
  else if (phantom == "none")
    o.phantom = PhantomKind::none;
  else if (phantom == "water")
    o.phantom = PhantomKind::water_cylinder;
  else
    throw std::invalid_argument("--phantom: 'auto', 'none' or 'water', not '" + phantom + "'");
  o.phantom_radius_mm = a.number("phantom-radius-mm", o.phantom_radius_mm);
  o.phantom_length_mm = a.number("phantom-length-mm", o.phantom_length_mm);
  if (a.has("no-background")) o.background = false;
  o.background_Bq_per_cc = a.number("background-Bq-per-cc", o.background_Bq_per_cc);
  o.acollinearity_fwhm_deg = a.number("acollinearity-deg", o.acollinearity_fwhm_deg);
  o.energy_resolution_fwhm = a.number("energy-resolution", o.energy_resolution_fwhm);
  o.time_resolution_fwhm_ps = a.number("time-resolution-ps", o.time_resolution_fwhm_ps);
  o.position_blur = a.number("position-blur", o.position_blur);
  o.disorder_ps = a.number("disorder-ps", o.disorder_ps);
  o.packet_frames = static_cast<std::uint32_t>(a.count("packet-frames", o.packet_frames));
  o.packet_flush_us = a.number("packet-flush-us", o.packet_flush_us);
  o.link_jitter_us = a.number("link-jitter-us", o.link_jitter_us);
  o.energy_bins = static_cast<std::uint32_t>(a.count("energy-bins", o.energy_bins));
  o.threads = static_cast<unsigned>(a.count("threads", o.threads));
  if (o.phantom_radius_mm <= 0 || o.phantom_length_mm <= 0)
    throw std::invalid_argument("the phantom's radius and length must be > 0");
  if (o.energy_resolution_fwhm < 0 || o.time_resolution_fwhm_ps < 0 || o.position_blur < 0 ||
      o.acollinearity_fwhm_deg < 0 || o.background_Bq_per_cc < 0 || o.packet_flush_us < 0 ||
      o.link_jitter_us < 0)
    throw std::invalid_argument("resolutions, blur, background, flush and jitter must be >= 0");
  if (o.packet_frames == 0 || o.energy_bins == 0)
    throw std::invalid_argument("--packet-frames and --energy-bins must be > 0");
}

}  // namespace petdaq::sim

// petdaq-sim-check: the count-rate table of docs/simulator.md. For each activity it runs
// petdaq-sim, pushes the acquisition through convert, sort and coincidence, classifies every
// prompt with the truth and prints one row.
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "tools/common/cli.h"
#include "tools/sim/check.h"
#include "tools/sim/options.h"
#include "tools/sim/sim.h"

namespace {

std::vector<double> parse_list(const std::string& text) {
  std::vector<double> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    std::size_t used = 0;
    double v = 0;
    try {
      v = std::stod(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || !(v >= 0))
      throw std::invalid_argument("--activities: '" + item + "' is not an activity in MBq");
    out.push_back(v);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace petdaq;
  using namespace petdaq::sim;
  cli::App app("petdaq-sim-check",
               "The count-rate table of docs/simulator.md: simulates each activity (MBq) into "
               "DIR/<A>MBq, runs the core pipeline on it and prints one row of rates per second.");
  std::filesystem::path config, work;
  std::string activities_text = "1,5,10,20,40,80", policy, mode;
  bool keep = false;
  SimOptions options;
  options.duration_s = 0.05;
  SimOptionText text;
  cli::add_config(app, config, "the scanner's configuration")->required();
  app.add_option("--work-dir", work, "where the acquisitions are simulated")
      ->type_name("DIR")
      ->required();
  app.add_option("--activities", activities_text, "comma-separated activities in MBq")
      ->type_name("A1,A2,...");
  app.add_flag("--keep", keep, "leave the acquisitions in DIR");
  app.add_option("--policy", policy, "coincidence.policy to check (default: the config's)")
      ->type_name("P");
  app.add_option("--window-mode", mode, "coincidence.window_mode (default: the config's)")
      ->type_name("M");
  add_sim_options(app, options, text);
  if (const auto rc = app.parse_or_exit(argc, argv)) return *rc;
  std::vector<double> activities;
  try {
    finish_sim_options(text, options);
    activities = parse_list(activities_text);
  } catch (const std::exception& e) {
    return app.usage_error(e.what());
  }
  try {
    std::printf("| activity MBq | singles/s | prompts/s | trues/s | scatters/s | randoms/s | "
                "delayed/s | delayed / randoms | scatter fraction | NECR/s | multiples/s | "
                "trues/s per MBq | randoms/s per MBq^2 | bad frames |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (const double a : activities) {
      SimOptions o = options;
      o.activity_MBq = a;
      std::ostringstream name;
      name << a << "MBq";
      const std::filesystem::path dir = work / name.str();
      simulate(config, dir, o);
      CoincidenceSettings coincidence = load_settings(dir / "petdaq.yaml").coincidence;
      if (!policy.empty() || !mode.empty()) {
        const std::string text = "coincidence:\n" +
                                 (policy.empty() ? "" : "  policy: " + policy + "\n") +
                                 (mode.empty() ? "" : "  window_mode: " + mode + "\n") +
                                 "calibration: {position_lut: x, energy_correction: y}\n";
        const Settings over = parse_settings(text, dir);
        coincidence.policy = over.coincidence.policy;
        coincidence.window_mode = over.coincidence.window_mode;
      }
      const CheckResult r = check_acquisition(dir, &coincidence);
      std::printf(
          "| %g | %.4g | %.4g | %.4g | %.4g | %.4g | %.4g | %.3f | %.3f | %.4g | %.4g | %.4g | "
          "%.4g | %.2e |\n",
          a, r.rate(r.singles), r.rate(r.prompts), r.rate(r.trues), r.rate(r.scatters),
          r.rate(r.randoms), r.rate(r.delayed),
          r.randoms ? double(r.delayed) / double(r.randoms) : NAN, r.scatter_fraction(),
          r.necr_per_s(), r.rate(r.multiples), a > 0 ? r.rate(r.trues) / a : NAN,
          a > 0 ? r.rate(r.randoms) / (a * a) : NAN, r.frames ? double(r.bad_frames) / r.frames : 0.0);
      std::fflush(stdout);
      if (!keep) std::filesystem::remove_all(dir);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "petdaq-sim-check: %s\n", e.what());
    return 1;
  }
}

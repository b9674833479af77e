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

#include "tools/sim/check.h"
#include "tools/sim/options.h"
#include "tools/sim/sim.h"

namespace {

void usage() {
  std::printf(
      "usage: petdaq-sim-check --config FILE --work-dir DIR [--activities A1,A2,...] [--keep]\n"
      "                        [--policy P] [--window-mode M] [simulation options]\n"
      "Simulates each activity (MBq) into DIR/<A>MBq, runs the core pipeline on it and prints\n"
      "the count-rate table (rates per second). --keep leaves the acquisitions in DIR.\n%s",
      petdaq::sim::sim_options_help());
}

std::vector<double> parse_list(const std::string& text) {
  std::vector<double> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(std::stod(item));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace petdaq;
  using namespace petdaq::sim;
  try {
    const Args args(argc, argv, {"no-background", "keep", "help"});
    if (args.has("help")) {
      usage();
      return 0;
    }
    std::vector<std::string> known = sim_option_names();
    known.insert(known.end(), {"config", "work-dir", "activities", "keep", "policy",
                               "window-mode", "help"});
    args.only(known);
    if (!args.has("config") || !args.has("work-dir")) {
      usage();
      return 2;
    }
    SimOptions options;
    options.duration_s = 0.05;
    apply_sim_options(args, options);
    const std::vector<double> activities = parse_list(args.text("activities", "1,5,10,20,40,80"));
    const std::filesystem::path work = args.text("work-dir");

    // Settings overrides go through the config text, so they are checked like any config.
    std::filesystem::path config = args.text("config");
    const std::string policy = args.text("policy"), mode = args.text("window-mode");

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
      if (!args.has("keep")) std::filesystem::remove_all(dir);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "petdaq-sim-check: %s\n", e.what());
    return 1;
  }
}

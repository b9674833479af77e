// petdaq-sim-check: the count-rate table of docs/simulator.md. For each activity it runs
// petdaq-sim, pushes the acquisition through convert, sort and coincidence, classifies every
// prompt with the truth and prints one row.
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "common/cli.h"
#include "core/dead_time.h"
#include "core/geometry.h"
#include "tools/sim/check.h"
#include "tools/sim/options.h"
#include "tools/sim/sim.h"

namespace {

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, sep)) out.push_back(item);
  return out;
}

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

// The policy and window mode named in `policy` and `mode` ("" keeps the acquisition's),
// checked like any config.
petdaq::CoincidenceSettings with_policy(petdaq::CoincidenceSettings c, const std::string& policy,
                                        const std::string& mode,
                                        const std::filesystem::path& dir) {
  if (policy.empty() && mode.empty()) return c;
  const std::string text = "coincidence:\n" +
                           (policy.empty() ? "" : "  policy: " + policy + "\n") +
                           (mode.empty() ? "" : "  window_mode: " + mode + "\n") +
                           "calibration: {position_lut: x, energy_correction: y}\n";
  petdaq::Settings over;
  try {
    over = petdaq::parse_settings(text, dir);
  } catch (const std::exception& e) {
    throw std::invalid_argument(e.what());  // a bad --policy or --window-mode: usage error
  }
  c.policy = over.coincidence.policy;
  c.window_mode = over.coincidence.window_mode;
  return c;
}

// The coincidence time resolution of the simulated detector: two singles, each with the
// simulator's Gaussian time resolution (the time of flight inside a mouse phantom adds less
// than 3 %).
double coincidence_resolution_ps(const petdaq::sim::SimOptions& o) {
  return std::sqrt(2.0) * o.time_resolution_fwhm_ps;
}

// One row of the randoms table: each estimate over the true random prompts. The true count
// R is Poisson, so a ratio carries a relative error of 1/sqrt(R); the estimates themselves,
// made from millions of singles, fluctuate far less (docs/randoms.md).
void print_randoms_row(double activity, bool background, const std::string& label,
                       const petdaq::sim::CheckResult& r) {
  const double R = static_cast<double>(r.randoms);
  auto ratio = [&](double v) { return R > 0 ? v / R : NAN; };
  std::printf("| %g | %s | %s | %g | %.4g | %.0f | %.3f | %.3f | %.4f | %.4f | %.3f | %.3f |\n",
              activity, background ? "yes" : "no", label.c_str(), r.duration_s,
              r.rate(r.randoms), R, ratio(double(r.delayed)), ratio(r.randoms_singles_rate),
              ratio(r.randoms_singles_prompts), R > 0 ? 1.0 / std::sqrt(R) : NAN,
              r.multiples ? r.model_multiples / double(r.multiples) : NAN,
              r.delayed ? r.model_delayed / double(r.delayed) : NAN);
  std::fflush(stdout);
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
  bool randoms = false;
  std::string durations_text,
      policies_text = "kill_multiples/first_open,take_all_goods/first_open,take_all_goods/every_single";
  app.add_flag("--randoms", randoms,
               "print the randoms estimates (docs/randoms.md) against the true random prompts, "
               "one row per activity and --policies entry");
  app.add_option("--durations", durations_text, "an acquisition length (s) per activity")
      ->type_name("S1,S2,...");
  app.add_option("--policies", policies_text, "policy[/window_mode] list for --randoms")
      ->type_name("P/M,...");
  app.add_option("--policy", policy, "coincidence.policy to check (default: the config's)")
      ->type_name("P");
  app.add_option("--window-mode", mode, "coincidence.window_mode (default: the config's)")
      ->type_name("M");
  std::filesystem::path dead_time_table;
  app.add_option("--dead-time-table", dead_time_table,
                 "a dead-time table (petdaq-calibrate dead-time): print the trues corrected by "
                 "the live time it gives from the per-BDM singles rates (docs/dead_time.md)")
      ->type_name("FILE");
  bool same_decays = false;
  app.add_flag("--same-decays", same_decays,
               "with --dead-time-table: simulate each activity again without the front end (same "
               "seed, same decays) and print the trues' true live fraction beside the model's");
  add_sim_options(app, options, text);
  if (const auto rc = app.parse_or_exit(argc, argv)) return *rc;
  std::vector<double> activities;
  try {
    finish_sim_options(text, options);
    activities = parse_list(activities_text);
    // Settings overrides go through the config text: bad names are refused up front.
    with_policy(CoincidenceSettings{}, policy, mode, work);
    for (const std::string& pm : split(policies_text, ',')) {
      const std::vector<std::string> parts = split(pm, '/');
      if (parts.empty() || parts.size() > 2)
        throw std::invalid_argument("--policies: '" + pm + "' is not policy[/window_mode]");
      with_policy(CoincidenceSettings{}, parts[0], parts.size() > 1 ? parts[1] : "", work);
    }
  } catch (const std::exception& e) {
    return app.usage_error(e.what());
  }
  try {
    const std::vector<double> durations = parse_list(durations_text);
    if (!durations.empty() && durations.size() != activities.size())
      throw std::invalid_argument("--durations needs one length per activity");
    if (randoms) {
      const std::vector<std::string> policies = split(
          policies_text,
          ',');
      std::vector<std::pair<std::string, std::string>> policy_modes;
      for (const std::string& pm : policies) {
        const std::vector<std::string> parts = split(pm, '/');
        if (parts.empty() || parts.size() > 2)
          throw std::invalid_argument("--policies: '" + pm + "' is not policy[/window_mode]");
        policy_modes.emplace_back(parts[0], parts.size() > 1 ? parts[1] : "");
        with_policy(CoincidenceSettings{}, policy_modes.back().first, policy_modes.back().second,
                    work);  // refuse a bad name before simulating anything
      }
      std::printf("| activity MBq | LYSO | policy, mode | duration s | randoms/s | randoms | "
                  "delayed / R | singles-rate / R | singles-prompts / R | σ (1/√R) | "
                  "model / measured multiples | model / measured delayed |\n");
      std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
      for (std::size_t i = 0; i < activities.size(); ++i) {
        SimOptions o = options;
        o.activity_MBq = activities[i];
        if (!durations.empty()) o.duration_s = durations[i];
        std::ostringstream name;
        name << activities[i] << "MBq";
        const std::filesystem::path dir = work / name.str();
        simulate(config, dir, o);
        CoincidenceSettings base = load_settings(dir / "petdaq.yaml").coincidence;
        base.time_resolution_ps = coincidence_resolution_ps(o);
        for (std::size_t k = 0; k < policies.size(); ++k) {
          const CoincidenceSettings c =
              with_policy(base, policy_modes[k].first, policy_modes[k].second, dir);
          const CheckResult r = check_acquisition(dir, &c);
          print_randoms_row(activities[i], o.background, policies[k], r);
        }
        if (!keep) std::filesystem::remove_all(dir);
      }
      return 0;
    }

    if (!dead_time_table.empty()) {
      const Settings base = load_settings(config);
      const DeadTimeModel model =
          load_dead_time_model(dead_time_table, Geometry::from(base.scanner).bdm_count());
      std::printf("| activity MBq | duration s | singles/s | trues/s | NECR/s | coincidence live "
                  "fraction (model) | trues/s per MBq | corrected trues/s per MBq | corrected / "
                  "first row | σ |%s\n",
                  same_decays ? " trues' live fraction (same decays, no front end) | model / that |"
                              : "");
      std::printf("|---|---|---|---|---|---|---|---|---|---|%s\n", same_decays ? "---|---|" : "");
      double first = 0;
      for (std::size_t i = 0; i < activities.size(); ++i) {
        SimOptions o = options;
        o.activity_MBq = activities[i];
        if (!durations.empty()) o.duration_s = durations[i];
        std::ostringstream name;
        name << activities[i] << "MBq";
        const std::filesystem::path dir = work / name.str();
        simulate(config, dir, o);
        const CoincidenceSettings coincidence =
            with_policy(load_settings(dir / "petdaq.yaml").coincidence, policy, mode, dir);
        const CheckResult r = check_acquisition(dir, &coincidence);
        std::vector<double> bdm_rate(r.bdm_singles.size());
        for (std::size_t b = 0; b < bdm_rate.size(); ++b) bdm_rate[b] = r.rate(r.bdm_singles[b]);
        const LiveTime live = live_time(model, bdm_rate);
        const double a = activities[i];
        const double corrected = a > 0 ? r.rate(r.trues) / live.coincidences / a : NAN;
        if (i == 0) first = corrected;
        std::printf("| %g | %g | %.4g | %.4g | %.4g | %.4f | %.5g | %.5g | %.4f | %.4f |", a,
                    r.duration_s, r.rate(r.singles), r.rate(r.trues), r.necr_per_s(),
                    live.coincidences, a > 0 ? r.rate(r.trues) / a : NAN, corrected,
                    corrected / first, r.trues ? 1.0 / std::sqrt(double(r.trues)) : NAN);
        if (same_decays) {
          // The front end acts after the decays are drawn: the same seed without it gives the
          // same decays, so the ratio of the trues is their live fraction (binomial error).
          SimOptions lossless = o;
          lossless.dead_time_ns = 0;
          lossless.pile_up_ns = 0;
          const std::filesystem::path dir0 = work / (name.str() + "-no-front-end");
          simulate(config, dir0, lossless);
          const CheckResult r0 = check_acquisition(dir0, &coincidence);
          const double actual = r0.trues ? double(r.trues) / double(r0.trues) : NAN;
          std::printf(" %.4f | %.4f |", actual, live.coincidences / actual);
          if (!keep) std::filesystem::remove_all(dir0);
        }
        std::printf("\n");
        std::fflush(stdout);
        if (!keep) std::filesystem::remove_all(dir);
      }
      return 0;
    }

    std::printf("| activity MBq | singles/s | prompts/s | trues/s | scatters/s | randoms/s | "
                "delayed/s | delayed / randoms | scatter fraction | NECR/s | multiples/s | "
                "trues/s per MBq | randoms/s per MBq^2 | bad frames |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (std::size_t i = 0; i < activities.size(); ++i) {
      const double a = activities[i];
      SimOptions o = options;
      o.activity_MBq = a;
      if (!durations.empty()) o.duration_s = durations[i];
      std::ostringstream name;
      name << a << "MBq";
      const std::filesystem::path dir = work / name.str();
      simulate(config, dir, o);
      const CoincidenceSettings coincidence =
          with_policy(load_settings(dir / "petdaq.yaml").coincidence, policy, mode, dir);
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
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "petdaq-sim-check: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "petdaq-sim-check: %s\n", e.what());
    return 1;
  }
}

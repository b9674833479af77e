// petdaq-sim: writes a simulated acquisition (frames, calibration, config, truth) into a
// directory. docs/simulator.md describes the model and the files.
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>

#include "common/cli.h"
#include "tools/common/progress.h"
#include "tools/sim/options.h"
#include "tools/sim/sim.h"

int main(int argc, char** argv) {
  using namespace petdaq;
  using namespace petdaq::sim;
  cli::App app("petdaq-sim",
               "Simulates a PET acquisition with truth. Writes DIR/frames.bin, truth.bin, "
               "truth.json, position_lut.npy, energy_correction.npy, time_offsets.npy and "
               "petdaq.yaml (the config with those tables).");
  std::filesystem::path config, output_dir;
  bool bench = false, quiet = false;
  SimOptions options;
  SimOptionText text;
  cli::add_config(app, config, "the scanner's configuration (the daemon's YAML)")->required();
  CLI::Option* out = app.add_option("--output-dir", output_dir, "directory to write")
                         ->type_name("DIR");
  app.add_flag("--bench", bench, "generate and order only; print frames/s, write nothing")
      ->excludes(out);
  cli::add_quiet(app, quiet);
  add_sim_options(app, options, text);
  if (const auto rc = app.parse_or_exit(argc, argv)) return *rc;
  if (!bench && output_dir.empty()) return app.usage_error("--output-dir DIR is required (or --bench)");
  try {
    finish_sim_options(text, options);
  } catch (const std::exception& e) {
    return app.usage_error(e.what());
  }
  try {
    options.write_files = !bench;
    cli::Progress progress("petdaq-sim", !quiet);
    options.progress = [&](double fraction, const SimSummary& s) {
      char line[128];
      std::snprintf(line, sizeof line, "%.3f s of acquisition, %llu frames", s.duration_s,
                    static_cast<unsigned long long>(s.frames));
      progress.update(fraction, line);
    };
    const SimSummary s = simulate(config, output_dir.empty() ? "." : output_dir, options);
    progress.done();
    std::printf(
        "petdaq-sim: %.6g s at %.6g MBq: %llu decays, %llu background events, %llu frames "
        "(%llu true photons, %llu scattered, %llu background; %llu in the energy window), "
        "%llu datagrams\n",
        s.duration_s, options.activity_MBq, static_cast<unsigned long long>(s.decays),
        static_cast<unsigned long long>(s.background_events),
        static_cast<unsigned long long>(s.frames),
        static_cast<unsigned long long>(s.frames_annihilation),
        static_cast<unsigned long long>(s.frames_scattered),
        static_cast<unsigned long long>(s.frames_background),
        static_cast<unsigned long long>(s.frames_in_window),
        static_cast<unsigned long long>(s.packets));
    if (s.photons_detected != s.frames)
      std::printf(
          "petdaq-sim: front end: %llu photons detected (the counts in brackets), %llu lost to "
          "dead time, %llu summed by pile-up into %llu frames (%llu of them out of the window)\n",
          static_cast<unsigned long long>(s.photons_detected),
          static_cast<unsigned long long>(s.lost_dead_time),
          static_cast<unsigned long long>(s.merged_pile_up),
          static_cast<unsigned long long>(s.frames_piled_up),
          static_cast<unsigned long long>(s.piled_out_of_window));
    std::printf("petdaq-sim: generated in %.3f s: %.2f M frames/s (%s)\n", s.generate_seconds,
                s.frames / s.generate_seconds / 1e6,
                options.write_files ? "including writing the files" : "no files written");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "petdaq-sim: %s\n", e.what());
    return 1;
  }
}

// petdaq-sim: writes a simulated acquisition (frames, calibration, config, truth) into a
// directory. docs/simulator.md describes the model and the files.
#include <cstdio>
#include <exception>
#include <string>

#include "tools/sim/options.h"
#include "tools/sim/sim.h"

namespace {

void usage() {
  std::printf(
      "usage: petdaq-sim --config FILE --output-dir DIR [options]\n"
      "       petdaq-sim --config FILE --bench [options]   (generate and order only; print frames/s)\n"
      "Writes DIR/frames.bin, truth.bin, truth.json, position_lut.npy, energy_correction.npy,\n"
      "time_offsets.npy and petdaq.yaml (the config with those tables).\n%s",
      petdaq::sim::sim_options_help());
}

}  // namespace

int main(int argc, char** argv) {
  using namespace petdaq::sim;
  try {
    const Args args(argc, argv, {"no-background", "bench", "help"});
    if (args.has("help")) {
      usage();
      return 0;
    }
    std::vector<std::string> known = sim_option_names();
    known.insert(known.end(), {"config", "output-dir", "bench", "help"});
    args.only(known);
    if (!args.has("config") || (!args.has("output-dir") && !args.has("bench"))) {
      usage();
      return 2;
    }
    SimOptions options;
    apply_sim_options(args, options);
    options.write_files = !args.has("bench");
    const SimSummary s = simulate(args.text("config"), args.text("output-dir", "."), options);
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
    std::printf("petdaq-sim: generated in %.3f s: %.2f M frames/s (%s)\n", s.generate_seconds,
                s.frames / s.generate_seconds / 1e6,
                options.write_files ? "including writing the files" : "no files written");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "petdaq-sim: %s\n", e.what());
    return 1;
  }
}

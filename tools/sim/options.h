// The simulation options petdaq-sim and petdaq-sim-check share, declared once on a CLI11
// command line (common/cli.h).
#pragma once

#include <limits>
#include <string>

#include "tools/sim/sim.h"

namespace CLI {
class App;
}

namespace petdaq::sim {

// Declares the simulation options on `app`, writing into `options` (whose values are the
// defaults shown by --help). `source` and `phantom` hold the shape names until
// finish_sim_options() turns them into the options' enums.
struct SimOptionText {
  std::string source = "cylinder";
  std::string phantom = "auto";  // auto, none, water, nema-mouse, nema-rat
  std::string source_position = "0,0,0";
  std::string motion_axis = "z";
  bool no_background = false;
  // The line source's settings as given (NaN: not given, the phantom's or the default).
  double line_offset_mm = std::numeric_limits<double>::quiet_NaN();
  double line_length_mm = std::numeric_limits<double>::quiet_NaN();
  double line_radius_mm = std::numeric_limits<double>::quiet_NaN();
  std::string dead_time_model = "non-paralysable";
  std::string dead_time_unit = "du";
};
void add_sim_options(CLI::App& app, SimOptions& options, SimOptionText& text);

// Applies the named values and checks the combinations; throws std::invalid_argument naming
// the option.
void finish_sim_options(const SimOptionText& text, SimOptions& options);

}  // namespace petdaq::sim

// Command-line parsing shared by petdaq-sim and petdaq-sim-check.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tools/sim/sim.h"

namespace petdaq::sim {

// "--key value" pairs and bare "--flag"s; throws std::invalid_argument naming a bad option.
class Args {
 public:
  Args(int argc, char** argv, const std::vector<std::string>& flags);
  bool has(const std::string& key) const { return values_.count(key) != 0; }
  std::string text(const std::string& key, const std::string& fallback = "") const;
  double number(const std::string& key, double fallback) const;
  std::uint64_t count(const std::string& key, std::uint64_t fallback) const;
  // Throws if an option was given that is not in `known`.
  void only(const std::vector<std::string>& known) const;

 private:
  std::map<std::string, std::string> values_;
};

// Fills the simulation options from the arguments (the options both tools share).
void apply_sim_options(const Args& args, SimOptions& options);
// The names apply_sim_options() understands.
std::vector<std::string> sim_option_names();
// One line per option for --help.
const char* sim_options_help();

}  // namespace petdaq::sim

// petdaqd's command line (common/cli.h: the convention every petdaq binary shares).
#pragma once

#include <filesystem>
#include <optional>

#include "core/settings.h"

namespace petdaq::daemon {

struct Options {
  std::filesystem::path config;
  std::optional<BackendKind> backend;  // overrides the config's `backend`
  bool check_config = false;
  bool print_rates = false;
};

// Fills `options` from the command line. Returns the exit code when petdaqd should stop
// here: 0 after --help or --version, 2 after a usage error (printed, naming the option).
std::optional<int> parse_options(int argc, char** argv, Options& options);

}  // namespace petdaq::daemon

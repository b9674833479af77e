// petdaqd's command line.
#pragma once

#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>

#include "core/settings.h"

namespace petdaq::daemon {

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Options {
  std::filesystem::path config;
  std::optional<BackendKind> backend;  // overrides the config's `backend`
  bool check_config = false;
  bool version = false;
  bool help = false;
  bool print_rates = false;
};

Options parse_options(int argc, char** argv);
const char* usage();

}  // namespace petdaq::daemon

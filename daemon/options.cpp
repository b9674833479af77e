#include "daemon/options.h"

#include <string>

#include "common/cli.h"

namespace petdaq::daemon {

std::optional<int> parse_options(int argc, char** argv, Options& o) {
  cli::App app("petdaqd", "petdaqd: UDP frames from the scanner in, coincidences out over ZeroMQ.");
  cli::add_config(app, o.config, "the YAML configuration (see config/petdaq.yaml)")->required();
  std::string backend;
  cli::add_backend(app, backend);
  app.add_flag("--check-config", o.check_config,
               "validate the configuration and calibration, then exit (0 or 2)");
  app.add_flag("--print-rates", o.print_rates, "print the rates to stderr once a second");
  if (const auto rc = app.parse_or_exit(argc, argv)) return rc;
  if (!backend.empty()) o.backend = parse_backend(backend);  // checked by add_backend
  return std::nullopt;
}

}  // namespace petdaq::daemon

#include "daemon/options.h"

#include <string_view>

namespace petdaq::daemon {

const char* usage() {
  return "usage: petdaqd --config FILE [--backend cpu|gpu|auto] [--check-config] [--print-rates]\n"
         "       petdaqd --version\n"
         "  --config FILE     the YAML configuration (see config/petdaq.yaml)\n"
         "  --backend KIND    override the configuration's backend\n"
         "  --check-config    validate the configuration and calibration, then exit (0 or 2)\n"
         "  --print-rates     print the rates to stderr once a second\n";
}

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    auto value = [&](std::string_view name) -> std::string {
      if (i + 1 >= argc) throw UsageError(std::string(name) + " needs a value");
      return argv[++i];
    };
    if (a == "--config" || a == "-c") {
      o.config = value(a);
    } else if (a.starts_with("--config=")) {
      o.config = std::string(a.substr(9));
    } else if (a == "--backend" || a.starts_with("--backend=")) {
      const std::string v = a == "--backend" ? value(a) : std::string(a.substr(10));
      if (v == "cpu") o.backend = BackendKind::cpu;
      else if (v == "gpu") o.backend = BackendKind::gpu;
      else if (v == "auto") o.backend = BackendKind::auto_select;
      else throw UsageError("--backend must be cpu, gpu or auto, not '" + v + "'");
    } else if (a == "--check-config") {
      o.check_config = true;
    } else if (a == "--print-rates") {
      o.print_rates = true;
    } else if (a == "--version" || a == "-V") {
      o.version = true;
    } else if (a == "--help" || a == "-h") {
      o.help = true;
    } else {
      throw UsageError("unknown argument '" + std::string(a) + "'");
    }
  }
  if (!o.version && !o.help && o.config.empty()) throw UsageError("--config FILE is required");
  return o;
}

}  // namespace petdaq::daemon

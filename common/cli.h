// One command-line convention for every petdaq binary, over CLI11 (docs/tools.md,
// "Command lines"): -h/--help, --version (the project version from CMake), and a usage
// error that names the offending option and exits 2. The options several tools share are
// declared here once, so the same thing has the same flag everywhere.
#pragma once

#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/settings.h"

#ifndef PETDAQ_VERSION
#error "PETDAQ_VERSION comes from CMake (link the petdaq_common target)"
#endif

namespace petdaq::cli {

// Exit codes every tool shares: 0 done, 1 a run-time fault (the message says what), 2 a
// usage or configuration error.
inline constexpr int kExitUsage = 2;

// "petdaq-sim (petdaq) 0.1.0": GNU style, which help2man reads.
inline std::string version_line(std::string_view program) {
  return std::string(program) + " (petdaq) " + PETDAQ_VERSION;
}

// A usage error found after parsing (options that exclude each other, a value out of
// range): the message names the option. Returns the exit code.
inline int usage_error(std::string_view program, std::string_view message) {
  std::fprintf(stderr, "%.*s: %.*s\nRun with --help for more information.\n",
               static_cast<int>(program.size()), program.data(), static_cast<int>(message.size()),
               message.data());
  return kExitUsage;
}

class App : public CLI::App {
 public:
  App(std::string program, std::string description) : CLI::App(std::move(description), program) {
    set_version_flag("--version", version_line(program));
    footer("petdaq " PETDAQ_VERSION ". Exit codes: 0 success, 1 run-time failure, 2 usage or "
           "configuration error.");
    option_defaults()->always_capture_default();
    get_formatter()->column_width(34);
  }

  // Parses the command line. Returns an exit code when the program should stop here: 0
  // after --help or --version (printed on stdout), 2 after a usage error (on stderr, naming
  // the option); std::nullopt when it should run.
  std::optional<int> parse_or_exit(int argc, char** argv) {
    try {
      parse(argc, argv);
    } catch (const CLI::CallForHelp&) {
      std::fputs(help().c_str(), stdout);
      return 0;
    } catch (const CLI::CallForAllHelp&) {
      std::fputs(help("", CLI::AppFormatMode::All).c_str(), stdout);
      return 0;
    } catch (const CLI::CallForVersion&) {
      std::printf("%s\n", version_line(get_name()).c_str());
      return 0;
    } catch (const CLI::ParseError& e) {
      // CLI11 checks required options before unexpected ones; an unknown option is the
      // more useful thing to name ("--bogus", not "--config is required").
      if (remaining_size() > 0) {
        std::string extras;
        for (const std::string& a : remaining()) extras += " " + a;
        return cli::usage_error(get_name(), "unexpected argument(s):" + extras);
      }
      return cli::usage_error(get_name(), e.what());
    }
    return std::nullopt;
  }

  int usage_error(std::string_view message) const { return cli::usage_error(get_name(), message); }
};

// ---- the options several tools share: one spelling, one meaning ----

// -c, --config FILE: the petdaq YAML configuration.
inline CLI::Option* add_config(CLI::App& app, std::filesystem::path& file, std::string what) {
  return app.add_option("-c,--config", file, std::move(what))->type_name("FILE");
}

// -i, --input FILE, also accepted as the one positional argument.
inline CLI::Option* add_input(CLI::App& app, std::filesystem::path& file, std::string what) {
  return app.add_option("input,-i,--input", file, std::move(what))->type_name("FILE");
}

// -o, --output FILE.
inline CLI::Option* add_output(CLI::App& app, std::filesystem::path& file, std::string what) {
  return app.add_option("-o,--output", file, std::move(what))->type_name("FILE");
}

// --endpoint EP: where petdaqd publishes (ZeroMQ); default output.zmq.endpoint of --config.
inline CLI::Option* add_endpoint(CLI::App& app, std::string& endpoint) {
  return app
      .add_option("--endpoint", endpoint,
                  "where petdaqd publishes (ZeroMQ endpoint; default: output.zmq.endpoint of "
                  "--config, else tcp://127.0.0.1:5556)")
      ->type_name("EP");
}

// --flush-us US: a BDM's partly filled datagram leaves after US microseconds.
inline CLI::Option* add_flush_us(CLI::App& app, double& flush_us) {
  return app
      .add_option("--flush-us", flush_us,
                  "a BDM's partly filled datagram is sent once its oldest frame has waited US "
                  "microseconds of acquisition time")
      ->type_name("US")
      ->check(CLI::NonNegativeNumber);
}

// -q, --quiet: no progress lines.
inline CLI::Option* add_quiet(CLI::App& app, bool& quiet) {
  return app.add_flag("-q,--quiet", quiet, "no progress lines");
}

// --backend auto|cpu|gpu (kBackendNames; empty: the configuration's `backend`).
inline CLI::Option* add_backend(CLI::App& app, std::string& backend) {
  std::vector<std::string> names;
  for (const auto& [name, kind] : kBackendNames) names.emplace_back(name);
  return app.add_option("--backend", backend, "override the configuration's backend")
      ->type_name("KIND")
      ->check(CLI::IsMember(names));
}

// --seed N.
inline CLI::Option* add_seed(CLI::App& app, std::uint64_t& seed, std::string what) {
  return app.add_option("--seed", seed, std::move(what))->type_name("N");
}

// --repetitions N: passes of a benchmark; the median is reported.
template <typename Count>
CLI::Option* add_repetitions(CLI::App& app, Count& repetitions,
                             std::string what = "passes; the median is reported") {
  return app.add_option("--repetitions", repetitions, std::move(what))
      ->type_name("N")
      ->check(CLI::PositiveNumber);
}

// --duration-s S.
inline CLI::Option* add_duration_s(CLI::App& app, double& seconds, std::string what) {
  return app.add_option("--duration-s", seconds, std::move(what))->type_name("S");
}

}  // namespace petdaq::cli

// petdaq-export: a list-mode (.plm) file to HDF5 or to CASToR list-mode (docs/export.md).
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "core/geometry.h"
#include "core/output.h"
#include "core/settings.h"
#include "tools/common/cli.h"
#include "tools/common/progress.h"
#include "tools/export/castor.h"
#ifdef PETDAQ_HAVE_HDF5
#include "tools/export/hdf5_writer.h"
#endif

namespace {

using namespace petdaq;
constexpr const char* kProgram = "petdaq-export";

struct Options {
  std::filesystem::path input, config, output;
  std::string format = "hdf5";
  int compression = 4;
  bool quiet = false;
};

// Each option is declared once here; adding one is one add_option line and one field.
std::optional<int> parse(int argc, char** argv, Options& o) {
  cli::App app(kProgram,
               "Exports a list-mode (.plm) file, also one still being written (up to its last "
               "complete message), to HDF5 (prompts, delayed, messages, settings, counts and "
               "the scanner geometry) or to CASToR list-mode (OUTPUT.cdh, .cdf and the scanner "
               "LUT OUTPUT.hscan, .lut).");
  cli::add_input(app, o.input, "the .plm file")->required();
  cli::add_output(app, o.output, "the HDF5 file, or the CASToR files' common path (no extension)")
      ->required();
  cli::add_config(app, o.config,
                  "the configuration the file was made with (scanner dimensions, settings; "
                  "default: config/petdaq.yaml's defaults)");
  app.add_option("--format", o.format, "output format")
      ->check(CLI::IsMember({"hdf5", "castor"}))
      ->type_name("FORMAT");
  app.add_option("--compression", o.compression, "HDF5 deflate level (0: none)")
      ->check(CLI::Range(0, 9))
      ->type_name("N");
  cli::add_quiet(app, o.quiet);
  return app.parse_or_exit(argc, argv);
}

std::string read_text(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (const auto rc = parse(argc, argv, o)) return *rc;
#ifndef PETDAQ_HAVE_HDF5
  if (o.format == "hdf5")
    return cli::usage_error(kProgram, "--format hdf5: this build has no HDF5 (libhdf5-dev)");
#endif
  Settings settings;
  std::string config_text;
  try {
    if (!o.config.empty()) {
      settings = load_settings(o.config);
      config_text = read_text(o.config);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", kProgram, e.what());
    return cli::kExitUsage;
  }
  try {
    PlmReader reader(o.input);
    const PlmHeader& h = reader.header();
    const Geometry g = Geometry::from(settings.scanner);
    if (h.crystal_count != g.crystal_count() || h.crystals_per_ring != g.crystals_per_ring()) {
      std::fprintf(stderr,
                   "%s: %s has %u crystals (%u per ring) but the scanner of %s has %u (%u per "
                   "ring): give the configuration the file was made with (--config)\n",
                   kProgram, o.input.c_str(), h.crystal_count, h.crystals_per_ring,
                   o.config.empty() ? "the default configuration" : o.config.c_str(),
                   g.crystal_count(), g.crystals_per_ring());
      return cli::kExitUsage;
    }
    std::error_code ec;
    const auto input_bytes = std::filesystem::file_size(o.input, ec);
    cli::Progress progress(kProgram, !o.quiet);
    MessageHeader m;
    std::vector<CoincRecord> records;
    std::uint64_t messages = 0, record_count = 0;
    auto each = [&](auto&& write) {
      while (reader.next_complete(m, records)) {
        write(m, records.data(), records.size());
        ++messages;
        record_count += records.size();
        if (input_bytes > 0)
          progress.update(double(reader.offset()) / double(input_bytes),
                          std::to_string(record_count) + " records");
      }
    };
    std::string written;
    if (o.format == "castor") {
      exporter::CastorWriter w(o.output, settings, h.tick_ps);
      each([&](const MessageHeader& mh, const CoincRecord* r, std::size_t n) { w.add(mh, r, n); });
      w.finish();
      written = std::to_string(w.events()) + " prompts to " + o.output.string() +
                ".cdh/.cdf, scanner " + o.output.string() + ".hscan/.lut";
    }
#ifdef PETDAQ_HAVE_HDF5
    if (o.format == "hdf5") {
      exporter::Hdf5Writer w(o.output, h, settings, config_text, o.compression);
      each([&](const MessageHeader& mh, const CoincRecord* r, std::size_t n) { w.add(mh, r, n); });
      w.finish(o.input.string());
      written = std::to_string(record_count) + " records to " + o.output.string();
    }
#endif
    progress.done();
    if (reader.partial_tail_bytes())
      std::fprintf(stderr,
                   "%s: %s: read up to the last complete message; %llu bytes of a partial "
                   "message follow (file still being written, or truncated)\n",
                   kProgram, o.input.c_str(),
                   static_cast<unsigned long long>(reader.partial_tail_bytes()));
    std::fprintf(stderr, "%s: %llu messages, %s\n", kProgram,
                 static_cast<unsigned long long>(messages), written.c_str());
    if (messages == 0) {
      std::fprintf(stderr, "%s: warning: %s holds no complete message\n", kProgram, o.input.c_str());
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", kProgram, e.what());
    return 1;
  }
}

// petdaq-export: a list-mode (.plm) file to HDF5 or to CASToR list-mode (docs/export.md).
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <stdexcept>
#include <vector>

#ifdef PETDAQ_HAVE_ZMQ
#include <zmq.hpp>
#endif

#include "common/cli.h"
#include "common/stop_signal.h"
#include "core/geometry.h"
#include "core/histograms.h"
#include "core/plm_file.h"
#include "core/settings.h"
#include "proto/records.h"
#include "proto/topics.h"
#include "tools/common/same_file.h"
#include "tools/common/progress.h"
#include "tools/export/castor.h"
#include "tools/export/petsird_writer.h"
#include "tools/export/corrections.h"
#ifdef PETDAQ_HAVE_HDF5
#include "tools/export/hdf5_writer.h"
#endif

namespace {

using namespace petdaq;
constexpr const char* kProgram = "petdaq-export";

struct Options {
  std::filesystem::path input, config, output;
  std::filesystem::path histograms;  // a histogram file (.pdh) to export with the records
  std::string endpoint;  // live: subscribe here instead of reading --input
  double duration_s = 0;
  std::uint64_t messages = 0;
  std::string format = "hdf5";
  std::filesystem::path normalization;  // petdaq-calibrate normalization's output directory
  std::string randoms = "auto";         // with --histograms: the randoms model
  std::string castor_mode = "list";
  int compression = 4;
  exporter::PetsirdOptions petsird;
  bool quiet = false;
};

// Each option is declared once here; adding one is one add_option line and one field.
std::optional<int> parse(int argc, char** argv, Options& o) {
  cli::App app(kProgram,
               "Exports a list-mode (.plm) file, also one still being written (up to its last "
               "complete message), to HDF5 (prompts, delayed, messages, settings, counts and "
               "the scanner geometry), to CASToR list-mode (OUTPUT.cdh, .cdf and the scanner "
               "LUT OUTPUT.hscan, .lut) or to PETSIRD 0.9.1 (yardl binary: geometry, prompts "
               "and delayed with TOF, dead time, singles).");
  CLI::Option* input = cli::add_input(app, o.input, "the .plm file");
  cli::add_output(app, o.output,
                  "the HDF5 or PETSIRD file, or the CASToR files' common path (no extension)")
      ->required();
  cli::add_config(app, o.config,
                  "the configuration the file was made with (scanner dimensions, settings; "
                  "default: config/petdaq.yaml's defaults)");
  app.add_option("--format", o.format, "output format")
      ->check(CLI::IsMember({"hdf5", "castor", "petsird"}))
      ->type_name("FORMAT");
  app.add_option("--compression", o.compression, "HDF5 deflate level (0: none)")
      ->check(CLI::Range(0, 9))
      ->type_name("N");
  app.add_option("--histograms", o.histograms,
                 "the run's histogram file (petdaqd's .pdh beside the .plm, or petdaq-offline "
                 "--histograms): its per-crystal singles give each prompt's randoms rate (CASToR, "
                 "HDF5) and PETSIRD's singles-histogram block; HDF5 also exports the histograms "
                 "(live, the `histograms` topic too)")
      ->check(CLI::ExistingFile)
      ->type_name("FILE.pdh");
  app.add_option("--time-block-ms", o.petsird.time_block_ms,
                 "PETSIRD: duration of each event time block (the events' time resolution)")
      ->check(CLI::Range(1u, 3600000u))
      ->type_name("MS");
  app.add_option("--tof-bin-ticks", o.petsird.tof_bin_ticks,
                 "PETSIRD: width of a TOF bin in ticks (1: the signed Δt exactly)")
      ->check(CLI::Range(1u, 1000000u))
      ->type_name("N");
  app.add_option("--normalization", o.normalization,
                 "directory of the normalisation table (petdaq-calibrate normalization): each "
                 "prompt gets its normalisation factor")
      ->check(CLI::ExistingDirectory)
      ->type_name("DIR");
  app.add_option("--randoms", o.randoms,
                 "randoms per crystal pair (needs --histograms): singles-rate 2τ·s_i·s_j, scaled "
                 "to the singles-prompts model's total (auto: where it covers the policy), or not")
      ->check(CLI::IsMember({"auto", "singles-rate", "singles-prompts", "none"}))
      ->type_name("MODEL");
  app.add_option("--castor-mode", o.castor_mode,
                 "CASToR: list-mode events with TOF, or a histogram (prompts per line of "
                 "response, every line the sorter can form, no TOF)")
      ->check(CLI::IsMember({"list", "histogram"}))
      ->type_name("MODE");
  cli::add_quiet(app, o.quiet);
  const char* live = "Live (instead of --input; needs petdaq built with ZeroMQ)";
  app.add_option("--endpoint", o.endpoint,
                 "export what petdaqd publishes there (ZeroMQ endpoint); stops on "
                 "SIGINT/SIGTERM, after --duration-s or after --messages")
      ->type_name("EP")
      ->excludes(input)
      ->group(live);
  cli::add_duration_s(app, o.duration_s, "live: stop after S seconds (0: no limit)")
      ->check(CLI::NonNegativeNumber)
      ->group(live);
  app.add_option("--messages", o.messages, "live: stop after N messages (0: no limit)")
      ->type_name("N")
      ->group(live);
  if (const auto rc = app.parse_or_exit(argc, argv)) return rc;
  if (o.input.empty() && o.endpoint.empty())
    return app.usage_error("--input FILE or --endpoint EP is required");
  if (!o.histograms.empty() && o.format == "petsird" && !o.endpoint.empty())
    return app.usage_error("--histograms with --format petsird: a file export only (--input)");
  o.petsird.singles_histograms = !o.histograms.empty();
  if (o.castor_mode != "list" && o.format != "castor")
    return app.usage_error("--castor-mode: only with --format castor");
  if (o.castor_mode != "list" && !o.endpoint.empty())
    return app.usage_error("--castor-mode histogram: from a file only");
  if ((o.randoms == "singles-rate" || o.randoms == "singles-prompts") && o.histograms.empty())
    return app.usage_error("--randoms " + o.randoms + " needs --histograms (per-crystal singles)");
  // The files it will write, none of which may be one it reads.
  std::vector<std::filesystem::path> outputs = {o.output};
  if (o.format == "castor") {
    outputs.clear();
    for (const char* ext : {".cdh", ".cdf", "_norm.cdh", "_norm.cdf"})
      outputs.push_back(o.output.string() + ext);
  }
  for (const auto& out : outputs)
    if (const auto why = cli::output_is_an_input(
            "--output", out,
            {{"input", o.input}, {"configuration", o.config}, {"histogram", o.histograms}}))
      return app.usage_error(*why);
  return std::nullopt;
}

std::string read_text(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

#ifdef PETDAQ_HAVE_ZMQ
// What petdaqd publishes, message by message, until a stop condition (live export).
class LiveSource {
 public:
  explicit LiveSource(const Options& o)
      : o_(o), sub_(ctx_, zmq::socket_type::sub), start_(std::chrono::steady_clock::now()) {
    sub_.set(zmq::sockopt::linger, 0);
    sub_.set(zmq::sockopt::rcvhwm, 100000);
    sub_.set(zmq::sockopt::subscribe, topic::prompts);
    sub_.set(zmq::sockopt::subscribe, topic::delayed);
    if (o.format == "hdf5") sub_.set(zmq::sockopt::subscribe, topic::histograms);
    sub_.connect(o.endpoint);
    install_stop_signals();
  }

  bool next(MessageHeader& h, std::vector<CoincRecord>& records) {
    for (;;) {
      const double elapsed_s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
      if (stop_requested() || (o_.duration_s > 0 && elapsed_s >= o_.duration_s) ||
          (o_.messages > 0 && taken_ >= o_.messages))
        return false;
      zmq::pollitem_t item{sub_.handle(), 0, ZMQ_POLLIN, 0};
      try {
        zmq::poll(&item, 1, std::chrono::milliseconds(100));
      } catch (const zmq::error_t& e) {
        if (e.num() == EINTR) continue;
        throw;
      }
      if (!(item.revents & ZMQ_POLLIN)) continue;
      std::vector<zmq::message_t> parts;
      for (bool more = true; more;) {
        zmq::message_t part;
        if (!sub_.recv(part, zmq::recv_flags::none)) break;
        more = part.more();
        parts.push_back(std::move(part));
      }
      if (parts.size() == 3 && parts[0].to_string_view() == "histograms") {
        if (const std::string why = take_histograms(parts); !why.empty()) {
          ++refused_;
          last_refusal_ = "histograms: " + why;
        }
        continue;
      }
      if (const std::string why = decode(parts, h, records); !why.empty()) {
        ++refused_;
        last_refusal_ = why;
        continue;
      }
      ++taken_;
      return true;
    }
  }
  std::uint64_t refused() const { return refused_; }
  const std::string& last_refusal() const { return last_refusal_; }
  // Receives each `histograms` message body (a histogram file); throws HistogramFileError.
  std::function<void(std::vector<std::uint8_t>)> on_histograms;

 private:
  // The reason a `histograms` message is refused, or "" once on_histograms took its body.
  std::string take_histograms(const std::vector<zmq::message_t>& parts) {
    if (parts[1].size() != kMessageHeaderBytes) return "message header is not 64 bytes";
    const MessageHeader h = decode_message_header(parts[1].data<std::uint8_t>());
    if (h.magic != kMessageMagic || !message_version_supported(h.version) ||
        h.kind != static_cast<std::uint16_t>(MessageKind::histograms) || h.record_count != 1 ||
        h.record_size != parts[2].size())
      return "bad message header (magic, version, kind, record count or size)";
    if (!on_histograms) return "";
    const auto* body = parts[2].data<std::uint8_t>();
    try {
      on_histograms(std::vector<std::uint8_t>(body, body + parts[2].size()));
    } catch (const HistogramFileError& e) {
      return e.what();
    }
    return "";
  }

  // The reason a message is not a coincidence batch, or "" and the batch.
  static std::string decode(const std::vector<zmq::message_t>& parts, MessageHeader& h,
                            std::vector<CoincRecord>& records) {
    if (parts.size() != 3) return std::to_string(parts.size()) + " frames instead of 3";
    const auto name = parts[0].to_string_view();
    const auto kind = name == topic::prompts   ? MessageKind::prompts
                      : name == topic::delayed ? MessageKind::delayed
                                               : MessageKind{};
    if (kind == MessageKind{}) return "unexpected topic";
    if (parts[1].size() != kMessageHeaderBytes) return "message header is not 64 bytes";
    h = decode_message_header(parts[1].data<std::uint8_t>());
    if (h.magic != kMessageMagic || !message_version_supported(h.version) ||
        h.kind != static_cast<std::uint16_t>(kind) || h.record_size != sizeof(CoincRecord))
      return "bad message header (magic, version, kind or record size)";
    if (parts[2].size() != std::size_t{h.record_count} * sizeof(CoincRecord))
      return "body length disagrees with record_count";
    records.resize(h.record_count);
    if (h.record_count) std::memcpy(records.data(), parts[2].data(), parts[2].size());
    return "";
  }

  const Options& o_;
  zmq::context_t ctx_{1};
  zmq::socket_t sub_;
  std::chrono::steady_clock::time_point start_;
  std::uint64_t taken_ = 0, refused_ = 0;
  std::string last_refusal_;
};
#else
class LiveSource {
 public:
  explicit LiveSource(const Options&) {
    throw std::runtime_error("--endpoint: this build has no ZeroMQ (libzmq3-dev, cppzmq-dev)");
  }
  bool next(MessageHeader&, std::vector<CoincRecord>&) { return false; }
  std::uint64_t refused() const { return 0; }
  const std::string& last_refusal() const { return none_; }
  std::function<void(std::vector<std::uint8_t>)> on_histograms;

 private:
  std::string none_;
};
#endif

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
  // A histogram file is checked before anything is written: a refused one is a bad argument.
  std::vector<std::uint8_t> histogram_bytes;
  if (!o.histograms.empty()) {
    try {
      histogram_bytes = read_histogram_file(o.histograms);  // its errors name the file
    } catch (const HistogramFileError& e) {
      std::fprintf(stderr, "%s: %s\n", kProgram, e.what());
      return cli::kExitUsage;
    }
    try {
      parse_histogram_file(histogram_bytes.data(), histogram_bytes.size());
    } catch (const HistogramFileError& e) {
      std::fprintf(stderr, "%s: %s: %s\n", kProgram, o.histograms.c_str(), e.what());
      return cli::kExitUsage;
    }
  }
  try {
    std::optional<PlmReader> reader;
    std::optional<LiveSource> live;
    PlmHeader h;
    if (!o.endpoint.empty()) {
      live.emplace(o);
      h = make_plm_header(settings);
    } else {
      reader.emplace(o.input);
      h = reader->header();
    }
    const std::string source = reader ? o.input.string() : o.endpoint;
    const Geometry g = Geometry::from(settings.scanner);
    if (h.crystal_count != g.crystal_count() || h.crystals_per_ring != g.crystals_per_ring()) {
      std::fprintf(stderr,
                   "%s: %s has %u crystals (%u per ring) but the scanner of %s has %u (%u per "
                   "ring): give the configuration the file was made with (--config)\n",
                   kProgram, source.c_str(), h.crystal_count, h.crystals_per_ring,
                   o.config.empty() ? "the default configuration" : o.config.c_str(),
                   g.crystal_count(), g.crystals_per_ring());
      return cli::kExitUsage;
    }
    // Corrections: the live time from the file's dead intervals, the normalisation table, the
    // randoms per crystal pair from the histograms' singles. Refused tables are input errors.
    exporter::Corrections corrections;
    try {
      if (reader) {
        corrections.live = exporter::scan_live_time(o.input, h.tick_ps);
        corrections.live_known = true;
      }
      if (!o.normalization.empty()) corrections.normalization.emplace(o.normalization, g);
      if (!histogram_bytes.empty() && o.randoms != "none" && (reader || o.randoms != "auto")) {
        if (!reader)
          throw std::runtime_error("--randoms with --endpoint: randoms need a file's live time");
        const RandomsSettings rs = RandomsSettings::from(settings);
        const bool prompts_model = o.randoms == "singles-prompts" ||
                                   (o.randoms == "auto" && window_model_covers(rs));
        corrections.randoms.emplace(
            settings, g, exporter::crystal_singles_of(histogram_bytes, g.crystal_count()),
            corrections.live,
            prompts_model ? exporter::PairRandoms::Model::singles_prompts
                          : exporter::PairRandoms::Model::singles_rate);
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: %s\n", kProgram, e.what());
      return cli::kExitUsage;
    }
    std::error_code ec;
    const auto input_bytes = reader ? std::filesystem::file_size(o.input, ec) : 0;
    cli::Progress progress(kProgram, !o.quiet);
    MessageHeader m;
    std::vector<CoincRecord> records;
    std::vector<std::uint8_t> body;
    std::vector<Single> singles;
    std::uint64_t messages = 0, record_count = 0, single_count = 0;
    std::map<std::uint16_t, std::uint64_t> skipped;  // kinds this tool does not export
    // A file's messages of every kind: coincidences to `write`, singles to `write_singles`,
    // any other kind skipped and counted.
    auto next = [&](auto&& write_singles) {
      if (!reader) return live->next(m, records);
      while (reader->next_message(m, body, true)) {
        if (m.kind == static_cast<std::uint16_t>(MessageKind::singles)) {
          singles.resize(m.record_count);
          std::memcpy(singles.data(), body.data(), body.size());
          write_singles(m, singles.data(), singles.size());
          single_count += singles.size();
          ++messages;
        } else if (m.kind == static_cast<std::uint16_t>(MessageKind::prompts) ||
                   m.kind == static_cast<std::uint16_t>(MessageKind::delayed)) {
          records.resize(m.record_count);
          std::memcpy(records.data(), body.data(), body.size());
          return true;
        } else {
          ++skipped[m.kind];
        }
      }
      return false;
    };
    auto each = [&](auto&& write, auto&& write_singles) {
      while (next(write_singles)) {
        write(m, records.data(), records.size());
        ++messages;
        record_count += records.size();
        progress.update(input_bytes > 0 ? double(reader->offset()) / double(input_bytes) : -1.0,
                        std::to_string(messages) + " messages, " + std::to_string(record_count) +
                            " records");
      }
    };
    std::string written;
    if (o.format == "castor") {
      exporter::CastorWriter w(o.output, settings, h.tick_ps, corrections,
                               o.castor_mode == "histogram" ? exporter::CastorMode::histogram
                                                            : exporter::CastorMode::list);
      try {
        each([&](const MessageHeader& mh, const CoincRecord* r, std::size_t n) { w.add(mh, r, n); },
             [](const MessageHeader&, const Single*, std::size_t) {});
      } catch (const exporter::BadRecord& e) {
        // Nothing half-written is left for a reconstruction to read.
        std::filesystem::remove(o.output.string() + ".cdf", ec);
        std::fprintf(stderr, "%s: %s: %s\n", kProgram, source.c_str(), e.what());
        return cli::kExitUsage;
      }
      w.finish();
      written = std::to_string(w.events()) + " prompts (" +
                (w.histogram_lines() ? "a histogram of " + std::to_string(w.histogram_lines()) + " lines"
                                     : std::string("TOF")) +
                (w.writes_randoms() ? ", randoms" : "") +
                (w.writes_normalization() ? ", normalisation" : "") + ") to " +
                o.output.string() + ".cdh/.cdf, scanner " + o.output.string() + ".hscan/.lut" +
                (w.normalization_lines()
                     ? ", " + std::to_string(w.normalization_lines()) + " lines' normalisation to " +
                           o.output.string() + "_norm.cdh/.cdf"
                     : std::string());
    }
    if (o.format == "petsird") {
      exporter::RunSingles singles;  // checked before anything is written
      if (!histogram_bytes.empty()) {
        try {
          singles = exporter::crystal_singles(histogram_bytes, g.crystal_count());
        } catch (const std::invalid_argument& e) {
          std::fprintf(stderr, "%s: %s: %s\n", kProgram, o.histograms.c_str(), e.what());
          return cli::kExitUsage;
        }
      }
      exporter::PetsirdWriter w(o.output, settings, h.tick_ps, o.petsird);
      if (o.petsird.singles_histograms) w.add_singles(singles.run_id, std::move(singles.counts));
      if (reader) {
        // Every kind of message: the dead intervals (kind 5) too, which PlmReader refuses.
        const auto c = exporter::petsird_from_plm(
            o.input, w, [&](double fraction, const exporter::PetsirdFileCounts& n) {
              progress.update(fraction, std::to_string(n.messages) + " messages, " +
                                            std::to_string(n.records) + " records");
            });
        messages = c.messages;
        record_count = c.records;
        if (c.skipped_messages)
          std::fprintf(stderr, "%s: %llu messages of kinds PETSIRD does not carry skipped\n",
                       kProgram, static_cast<unsigned long long>(c.skipped_messages));
        if (c.partial_tail_bytes)
          std::fprintf(stderr,
                       "%s: %s: read up to the last complete message; %llu bytes of a partial "
                       "message follow (file still being written, or truncated)\n",
                       kProgram, o.input.c_str(),
                       static_cast<unsigned long long>(c.partial_tail_bytes));
      } else {
        each([&](const MessageHeader& mh, const CoincRecord* r, std::size_t n) { w.add(mh, r, n); },
             [](const MessageHeader&, const Single*, std::size_t) {});
      }
      w.finish();
      for (const std::string& line : w.losses()) std::fprintf(stderr, "%s: %s\n", kProgram, line.c_str());
      written = w.summary() + " to " + o.output.string();
    }
#ifdef PETDAQ_HAVE_HDF5
    if (o.format == "hdf5") {
      exporter::Hdf5Writer w(o.output, h, settings, config_text, o.compression, corrections);
      if (!histogram_bytes.empty()) w.add_histograms(std::move(histogram_bytes));
      if (live)
        live->on_histograms = [&w](std::vector<std::uint8_t> bytes) {
          w.add_histograms(std::move(bytes));
        };
      try {
        each([&](const MessageHeader& mh, const CoincRecord* r, std::size_t n) { w.add(mh, r, n); },
             [&](const MessageHeader& mh, const Single* sg, std::size_t n) {
               w.add_singles(mh, sg, n);
             });
      } catch (const exporter::BadRecord& e) {
        std::filesystem::remove(o.output, ec);
        std::fprintf(stderr, "%s: %s: %s\n", kProgram, source.c_str(), e.what());
        return cli::kExitUsage;
      }
      w.finish(source);
      written = std::to_string(record_count) + " records" +
                (single_count ? ", " + std::to_string(single_count) + " singles" : std::string()) +
                (w.histogram_runs() ? ", histograms of " + std::to_string(w.histogram_runs()) +
                                          " run(s)"
                                    : std::string()) +
                " to " + o.output.string();
    }
#endif
    progress.done();
    if (corrections.live_known)
      std::fprintf(stderr, "%s: live time %.6g of %.6g s (fraction %.6f, %llu dead intervals)\n",
                   kProgram, corrections.live.live_s(), corrections.live.acquisition_s,
                   corrections.live.live_fraction(),
                   static_cast<unsigned long long>(corrections.live.dead_intervals));
    if (corrections.randoms)
      std::fprintf(stderr, "%s: randoms %.6g per s (%s)\n", kProgram,
                   corrections.randoms->total_per_s(),
                   corrections.randoms->model() == exporter::PairRandoms::Model::singles_prompts
                       ? "singles-rate per pair scaled to the singles-prompts model"
                       : "singles-rate per pair");
    if (reader && reader->partial_tail_bytes())
      std::fprintf(stderr,
                   "%s: %s: read up to the last complete message; %llu bytes of a partial "
                   "message follow (file still being written, or truncated)\n",
                   kProgram, o.input.c_str(),
                   static_cast<unsigned long long>(reader->partial_tail_bytes()));
    if (o.format == "castor" && single_count)
      std::fprintf(stderr, "%s: %llu singles not exported (CASToR list-mode holds coincidences)\n",
                   kProgram, static_cast<unsigned long long>(single_count));
    for (const auto& [kind, n] : skipped)
      std::fprintf(stderr, "%s: skipped %llu message(s) of kind %u (not exported)\n", kProgram,
                   static_cast<unsigned long long>(n), static_cast<unsigned>(kind));
    if (live && live->refused())
      std::fprintf(stderr, "%s: %llu malformed messages refused (last: %s)\n", kProgram,
                   static_cast<unsigned long long>(live->refused()), live->last_refusal().c_str());
    std::fprintf(stderr, "%s: %llu messages from %s, %s\n", kProgram,
                 static_cast<unsigned long long>(messages), source.c_str(), written.c_str());
    if (messages == 0) {
      std::fprintf(stderr, "%s: warning: no complete message from %s\n", kProgram, source.c_str());
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", kProgram, e.what());
    return 1;
  }
}

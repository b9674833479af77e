// petdaq-record: subscribes to petdaqd's coincidence batches (and, with --singles, its
// singles) and writes them to a .plm list-mode file that is complete at every message
// boundary while it runs, counting the messages it missed. See docs/tools.md.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <zmq.hpp>

#include "common/cli.h"
#include "common/stop_signal.h"
#include "tools/common/same_file.h"
#include "core/plm_file.h"
#include "core/settings.h"
#include "proto/records.h"
#include "proto/topics.h"
#include "tools/record/message_ids.h"

namespace {

using namespace petdaq;
using Clock = std::chrono::steady_clock;


constexpr const char* kProgram = "petdaq-record";

struct Options {
  std::filesystem::path config;
  std::filesystem::path output;
  std::string endpoint;
  std::optional<double> duration_s;
  std::optional<std::uint64_t> messages;
  bool prompts_only = false;
  bool singles = false;
  bool across_publishers = false;
  bool quiet = false;
};

// Each option is declared once here; adding one is one add_option line and one field.
std::optional<int> parse_args(int argc, char** argv, Options& o) {
  cli::App app(kProgram,
               "Subscribes to petdaqd's coinc.prompt and coinc.delayed batches (and with "
               "--singles its singles) and writes them, exactly as published, to a .plm "
               "list-mode file, flushed to whole messages at least every 0.2 s while it runs. "
               "Stops on SIGINT/SIGTERM, after --duration-s or after --messages, and flushes "
               "the file. Exits 1 when nothing was received.");
  double duration_s = 0;
  std::uint64_t messages = 0;
  cli::add_config(app, o.config,
                  "petdaq configuration: the endpoint, and the tick_ps, crystal counts and "
                  "settings hash of the file header")
      ->required();
  cli::add_output(app, o.output, "the .plm file to write (replaced if it exists)")->required();
  cli::add_endpoint(app, o.endpoint);
  CLI::Option* duration = cli::add_duration_s(app, duration_s, "stop after S seconds")
                              ->check(CLI::PositiveNumber);
  CLI::Option* count = app.add_option("--messages", messages,
                                      "stop after N messages (every kind together)")
                           ->type_name("N")
                           ->check(CLI::PositiveNumber);
  app.add_flag("--prompts-only", o.prompts_only, "do not subscribe to coinc.delayed");
  app.add_flag("--singles", o.singles,
               "also record the singles topic (kind-3 messages; petdaqd publishes it with "
               "output.singles.enabled)");
  app.add_flag("--across-publishers", o.across_publishers,
               "go on recording when messages come from another publisher (a restarted "
               "petdaqd: another publisher_id in the header); without it the recording stops "
               "there (exit 1) and the file holds the first publisher's messages only");
  cli::add_quiet(app, o.quiet);
  if (const auto rc = app.parse_or_exit(argc, argv)) return rc;
  if (duration->count()) o.duration_s = duration_s;
  if (count->count()) o.messages = messages;
  if (const auto why = cli::output_is_an_input("--output", o.output, {{"configuration", o.config}}))
    return app.usage_error(*why);
  return std::nullopt;
}

struct Tally {
  record::MessageIdTracker ids[3];  // prompts, delayed, singles
  std::uint64_t records[3] = {};
  std::uint64_t refused = 0;
  std::string last_refusal;
  std::uint32_t publisher = 0;  // publisher_id of the messages written (0: none yet, or version 1)
  std::uint64_t publisher_changes = 0;
  std::uint64_t dead_intervals = 0;  // deadtime messages (DESIGN section 6, "Overload")
  std::uint64_t dead_ticks = 0;
};

const char* kind_name(int k) { return k == 0 ? "prompts" : k == 1 ? "delayed" : "singles"; }

// How long at most a received message waits in the writer's buffer before it is in the file.
constexpr auto kFlushInterval = std::chrono::milliseconds(200);

std::string progress_text(const Tally& t, double elapsed_s, std::uint64_t file_bytes,
                          bool singles) {
  char buf[640];
  std::snprintf(buf, sizeof buf,
                "%.1f s  prompts %llu msgs %llu records  delayed %llu msgs %llu records  "
                "missed %llu prompts %llu delayed  refused %llu  dead intervals %llu  file %.1f MB",
                elapsed_s, static_cast<unsigned long long>(t.ids[0].received()),
                static_cast<unsigned long long>(t.records[0]),
                static_cast<unsigned long long>(t.ids[1].received()),
                static_cast<unsigned long long>(t.records[1]),
                static_cast<unsigned long long>(t.ids[0].missed()),
                static_cast<unsigned long long>(t.ids[1].missed()),
                static_cast<unsigned long long>(t.refused),
                static_cast<unsigned long long>(t.dead_intervals), file_bytes / 1e6);
  std::string text = buf;
  if (singles) {
    std::snprintf(buf, sizeof buf, "  singles %llu msgs %llu records missed %llu",
                  static_cast<unsigned long long>(t.ids[2].received()),
                  static_cast<unsigned long long>(t.records[2]),
                  static_cast<unsigned long long>(t.ids[2].missed()));
    text += buf;
  }
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (const auto rc = parse_args(argc, argv, o)) return *rc;
  install_stop_signals();

  Settings settings;
  try {
    settings = load_settings(o.config);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "petdaq-record: %s: %s\n", o.config.c_str(), e.what());
    return cli::kExitUsage;
  }
  const std::string endpoint = o.endpoint.empty() ? settings.output.zmq.endpoint : o.endpoint;

  zmq::context_t ctx(1);
  zmq::socket_t sub(ctx, zmq::socket_type::sub);
  try {
    sub.set(zmq::sockopt::linger, 0);
    // A recorder should rather queue than drop: the daemon counts what its own socket refuses.
    sub.set(zmq::sockopt::rcvhwm, 100000);
    sub.set(zmq::sockopt::rcvbuf, 8 << 20);
    sub.set(zmq::sockopt::subscribe, topic::prompts);
    if (!o.prompts_only) sub.set(zmq::sockopt::subscribe, topic::delayed);
    if (o.singles) sub.set(zmq::sockopt::subscribe, topic::singles);
    // The dead intervals belong in the file: they make the live fraction that corrects it.
    sub.set(zmq::sockopt::subscribe, topic::deadtime);
    sub.connect(endpoint);
  } catch (const zmq::error_t& e) {
    std::fprintf(stderr, "petdaq-record: cannot subscribe to %s: %s\n", endpoint.c_str(), e.what());
    return 1;
  }

  std::optional<PlmWriter> writer;
  try {
    writer.emplace(o.output, make_plm_header(settings));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "petdaq-record: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "petdaq-record: %s -> %s\n", endpoint.c_str(), o.output.c_str());

  Tally t;
  const auto start = Clock::now();
  auto next_progress = start + std::chrono::seconds(1);
  auto next_flush = start + kFlushInterval;
  std::uint64_t unflushed = 0;  // messages written since the last flush
  std::uint64_t total = 0;
  int rc = 0;
  try {
    zmq::message_t parts[3];
    while (!stop_requested()) {
      const auto now = Clock::now();
      const double elapsed_s = std::chrono::duration<double>(now - start).count();
      if (o.duration_s && elapsed_s >= *o.duration_s) break;
      if (o.messages && total >= *o.messages) break;
      if (now >= next_progress) {
        if (!o.quiet) {
          std::fprintf(stderr, "petdaq-record: %s\n",
                       progress_text(t, elapsed_s, writer->bytes_written(), o.singles).c_str());
        }
        next_progress += std::chrono::seconds(1);
      }
      // The file ends at a whole message after every flush: readers (petdaq.read_plm,
      // petdaq-dump, petdaq-export) see every message received up to the last one.
      if (unflushed && now >= next_flush) {
        writer->flush();
        unflushed = 0;
      }
      if (now >= next_flush) next_flush = now + kFlushInterval;
      zmq::pollitem_t item{sub.handle(), 0, ZMQ_POLLIN, 0};
      try {
        zmq::poll(&item, 1, std::chrono::milliseconds(50));
      } catch (const zmq::error_t& e) {
        if (e.num() == EINTR) continue;
        throw;
      }
      if (!(item.revents & ZMQ_POLLIN)) continue;
      // Read one whole message; a message with a number of frames other than 3 is refused
      // after all its frames were taken off the socket.
      std::size_t n = 0;
      bool more = true;
      while (more) {
        zmq::message_t scratch;
        zmq::message_t& m = n < 3 ? parts[n] : scratch;
        if (!sub.recv(m, zmq::recv_flags::none)) break;
        more = m.more();
        ++n;
      }
      auto refuse = [&](const std::string& why) {
        ++t.refused;
        if (t.refused == 1 || t.last_refusal != why) {
          std::fprintf(stderr, "petdaq-record: refused a message: %s\n", why.c_str());
        }
        t.last_refusal = why;
      };
      if (n != 3) {
        refuse(std::to_string(n) + " frames instead of 3");
        continue;
      }
      const auto name = parts[0].to_string_view();
      if (name == topic::deadtime) {
        const MessageHeader h = parts[1].size() == kMessageHeaderBytes
                                    ? decode_message_header(parts[1].data<std::uint8_t>())
                                    : MessageHeader{};
        if (parts[1].size() != kMessageHeaderBytes || h.magic != kMessageMagic ||
            !message_version_supported(h.version) ||
            h.kind != static_cast<std::uint16_t>(MessageKind::deadtime) ||
            h.record_size != sizeof(DeadInterval) ||
            parts[2].size() != std::size_t{h.record_count} * sizeof(DeadInterval)) {
          refuse("bad deadtime message (header, kind, record size or body)");
          continue;
        }
        writer->write_message(h, parts[2].data(), parts[2].size());
        ++t.dead_intervals;
        t.dead_ticks += h.t_end > h.t_begin ? h.t_end - h.t_begin : 0;
        continue;
      }
      const int k = name == topic::prompts ? 0
                    : name == topic::delayed ? 1
                    : (o.singles && name == topic::singles) ? 2
                                                              : -1;
      if (k < 0) {
        refuse("unexpected topic '" + std::string(name) + "'");
        continue;
      }
      if (parts[1].size() != kMessageHeaderBytes) {
        refuse("message header of " + std::to_string(parts[1].size()) + " bytes instead of 64");
        continue;
      }
      const MessageHeader h = decode_message_header(parts[1].data<std::uint8_t>());
      constexpr MessageKind kKinds[3] = {MessageKind::prompts, MessageKind::delayed,
                                         MessageKind::singles};
      const auto expected_kind = static_cast<std::uint16_t>(kKinds[k]);
      const std::size_t record_size = plm_record_size(expected_kind);
      if (h.magic != kMessageMagic || !message_version_supported(h.version) ||
          h.kind != expected_kind || h.record_size != record_size) {
        refuse("bad message header (magic, version, kind or record size)");
        continue;
      }
      if (parts[2].size() != std::size_t{h.record_count} * record_size) {
        refuse("body of " + std::to_string(parts[2].size()) + " bytes for " +
               std::to_string(h.record_count) + " records");
        continue;
      }
      if (h.publisher_id != 0 && t.publisher != 0 && h.publisher_id != t.publisher) {
        ++t.publisher_changes;
        if (!o.across_publishers) {
          std::fprintf(stderr,
                       "petdaq-record: messages from another publisher (publisher_id %08x, "
                       "was %08x: petdaqd restarted, or another process serves %s); stopped: "
                       "%s holds the first publisher's messages only (--across-publishers "
                       "records on)\n",
                       h.publisher_id, t.publisher, endpoint.c_str(), o.output.c_str());
          rc = 1;
          break;
        }
        std::fprintf(stderr,
                     "petdaq-record: messages from another publisher from here on (publisher_id "
                     "%08x, was %08x); message ids start again\n",
                     h.publisher_id, t.publisher);
        t.ids[0].new_publisher();
        t.ids[1].new_publisher();
      }
      if (h.publisher_id != 0) t.publisher = h.publisher_id;
      writer->write_message(h, parts[2].data(), parts[2].size());
      t.ids[k].see(h.message_id);
      t.records[k] += h.record_count;
      ++total;
      ++unflushed;
    }
    writer->close();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "petdaq-record: %s\n", e.what());
    rc = 1;
  }

  const double elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
  std::fprintf(stderr, "petdaq-record: %s: %s\n", stop_requested() ? "stopped by signal" : "finished",
               progress_text(t, elapsed_s, writer->bytes_written(), o.singles).c_str());
  for (int k = 0; k < 3; ++k) {
    const auto& ids = t.ids[k];
    if (!ids.started()) continue;
    std::fprintf(stderr,
                 "  %-8s first message id %llu, received %llu, missed %llu%s\n", kind_name(k),
                 static_cast<unsigned long long>(ids.first_id()),
                 static_cast<unsigned long long>(ids.received()),
                 static_cast<unsigned long long>(ids.missed()),
                 ids.went_back() ? (", ids went back " + std::to_string(ids.went_back()) +
                                    " time(s) (publisher restarted?)")
                                       .c_str()
                                 : "");
  }
  if (t.publisher_changes > 0)
    std::fprintf(stderr, "  publisher changed %llu time(s) during the recording\n",
                 static_cast<unsigned long long>(t.publisher_changes));
  if (rc == 0 && total == 0) {
    std::fprintf(stderr,
                 "petdaq-record: warning: no message received from %s in %.1f s (is petdaqd "
                 "running and publishing there?); %s holds no coincidence\n",
                 endpoint.c_str(), elapsed_s, o.output.c_str());
    rc = 1;
  }
  return rc;
}

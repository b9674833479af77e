// petdaq-record: subscribes to petdaqd's coincidence batches and writes them to a .plm
// list-mode file, counting the messages it missed. See docs/tools.md.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <zmq.hpp>

#include "tools/stop_signal.h"
#include "core/output.h"
#include "core/settings.h"
#include "proto/records.h"
#include "tools/record/message_ids.h"

namespace {

using namespace petdaq;
using Clock = std::chrono::steady_clock;


const char* kUsage = R"(usage: petdaq-record --config FILE --output FILE.plm [options]

Subscribes to petdaqd's coinc.prompt and coinc.delayed batches and writes them, exactly as
published, to a .plm list-mode file. Stops on SIGINT/SIGTERM, after --duration-s or after
--messages, and flushes the file.
  --config FILE       petdaq configuration (tick_ps, crystal counts and settings hash of the
                      file header)
  --output FILE       the .plm file to write (replaced if it exists)
  --endpoint EP       where petdaqd publishes (default: output.zmq.endpoint of --config)
  --duration-s S      stop after S seconds
  --messages N        stop after N messages (both kinds together)
  --prompts-only      do not subscribe to coinc.delayed
  --quiet             no progress line
)";

struct Options {
  std::string config;
  std::string output;
  std::string endpoint;
  std::optional<double> duration_s;
  std::optional<std::uint64_t> messages;
  bool prompts_only = false;
  bool quiet = false;
};

[[noreturn]] void usage_error(const std::string& msg) {
  std::fprintf(stderr, "petdaq-record: %s\n(run with --help for the options)\n", msg.c_str());
  std::exit(1);
}

Options parse_args(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage_error(a + " needs a value");
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (a == "--config") {
      o.config = value();
    } else if (a == "--output" || a == "-o") {
      o.output = value();
    } else if (a == "--endpoint") {
      o.endpoint = value();
    } else if (a == "--duration-s") {
      const std::string v = value();
      char* end = nullptr;
      o.duration_s = std::strtod(v.c_str(), &end);
      if (*end || !(*o.duration_s > 0)) usage_error("--duration-s needs a positive number");
    } else if (a == "--messages") {
      const std::string v = value();
      char* end = nullptr;
      o.messages = std::strtoull(v.c_str(), &end, 10);
      if (*end || v.empty() || *o.messages == 0) usage_error("--messages needs a positive count");
    } else if (a == "--prompts-only") {
      o.prompts_only = true;
    } else if (a == "--quiet") {
      o.quiet = true;
    } else {
      usage_error("unknown option " + a);
    }
  }
  if (o.config.empty()) usage_error("--config FILE is required (the file header comes from it)");
  if (o.output.empty()) usage_error("--output FILE is required");
  return o;
}

struct Tally {
  record::MessageIdTracker ids[2];  // prompts, delayed
  std::uint64_t records[2] = {};
  std::uint64_t refused = 0;
  std::string last_refusal;
};

const char* kind_name(int k) { return k == 0 ? "prompts" : "delayed"; }

std::string progress_text(const Tally& t, double elapsed_s, std::uint64_t file_bytes) {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "%.1f s  prompts %llu msgs %llu records  delayed %llu msgs %llu records  "
                "missed %llu prompts %llu delayed  refused %llu  file %.1f MB",
                elapsed_s, static_cast<unsigned long long>(t.ids[0].received()),
                static_cast<unsigned long long>(t.records[0]),
                static_cast<unsigned long long>(t.ids[1].received()),
                static_cast<unsigned long long>(t.records[1]),
                static_cast<unsigned long long>(t.ids[0].missed()),
                static_cast<unsigned long long>(t.ids[1].missed()),
                static_cast<unsigned long long>(t.refused), file_bytes / 1e6);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse_args(argc, argv);
  install_stop_signals();

  Settings settings;
  try {
    settings = load_settings(o.config);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "petdaq-record: %s: %s\n", o.config.c_str(), e.what());
    return 1;
  }
  const std::string endpoint = o.endpoint.empty() ? settings.output.zmq.endpoint : o.endpoint;

  zmq::context_t ctx(1);
  zmq::socket_t sub(ctx, zmq::socket_type::sub);
  try {
    sub.set(zmq::sockopt::linger, 0);
    // A recorder should rather queue than drop: the daemon counts what its own socket refuses.
    sub.set(zmq::sockopt::rcvhwm, 100000);
    sub.set(zmq::sockopt::rcvbuf, 8 << 20);
    sub.set(zmq::sockopt::subscribe, "coinc.prompt");
    if (!o.prompts_only) sub.set(zmq::sockopt::subscribe, "coinc.delayed");
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
                       progress_text(t, elapsed_s, writer->bytes_written()).c_str());
        }
        next_progress += std::chrono::seconds(1);
      }
      zmq::pollitem_t item{sub.handle(), 0, ZMQ_POLLIN, 0};
      try {
        zmq::poll(&item, 1, std::chrono::milliseconds(100));
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
      const auto topic = parts[0].to_string_view();
      const int k = topic == "coinc.prompt" ? 0 : topic == "coinc.delayed" ? 1 : -1;
      if (k < 0) {
        refuse("unexpected topic '" + std::string(topic) + "'");
        continue;
      }
      if (parts[1].size() != kMessageHeaderBytes) {
        refuse("message header of " + std::to_string(parts[1].size()) + " bytes instead of 64");
        continue;
      }
      const MessageHeader h = decode_message_header(parts[1].data<std::uint8_t>());
      const auto expected_kind = static_cast<std::uint16_t>(k == 0 ? MessageKind::prompts
                                                                   : MessageKind::delayed);
      if (h.magic != kMessageMagic || h.version != kMessageVersion || h.kind != expected_kind ||
          h.record_size != sizeof(CoincRecord)) {
        refuse("bad message header (magic, version, kind or record size)");
        continue;
      }
      if (parts[2].size() != std::size_t{h.record_count} * sizeof(CoincRecord)) {
        refuse("body of " + std::to_string(parts[2].size()) + " bytes for " +
               std::to_string(h.record_count) + " records");
        continue;
      }
      writer->write_message(h, parts[2].data(), parts[2].size());
      t.ids[k].see(h.message_id);
      t.records[k] += h.record_count;
      ++total;
    }
    writer->close();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "petdaq-record: %s\n", e.what());
    rc = 1;
  }

  const double elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
  std::fprintf(stderr, "petdaq-record: %s: %s\n", stop_requested() ? "stopped by signal" : "finished",
               progress_text(t, elapsed_s, writer->bytes_written()).c_str());
  for (int k = 0; k < 2; ++k) {
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
  return rc;
}

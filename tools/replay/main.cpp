// petdaq-replay: streams a recorded acquisition over UDP the way the scanner would, for
// testing and benchmarking petdaqd without a scanner. See docs/tools.md.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <sys/prctl.h>

#include "common/cli.h"
#include "common/stop_signal.h"
#include "tools/common/si.h"
#include "core/settings.h"
#include "tools/replay/input.h"
#include "tools/replay/packer.h"
#include "tools/replay/pacer.h"
#include "tools/replay/sender.h"

namespace {

using namespace petdaq;
using namespace petdaq::replay;
using cli::si;


constexpr const char* kProgram = "petdaq-replay";
// Some datagrams were refused by the kernel (2 is a usage error, as in every petdaq tool).
constexpr int kExitSendErrors = 3;

struct Options {
  std::filesystem::path input;
  std::vector<std::string> to;
  std::size_t payload_bytes = 8972;
  std::uint32_t sources = 0;
  Framing framing = Framing::raw;
  double flush_us = 100;
  std::uint16_t source_port_base = 0;
  std::optional<double> speed;
  std::optional<double> rate;
  double burst_ms = 50;
  bool max = false;
  std::optional<double> tick_ps;
  std::filesystem::path config;
  std::uint64_t loops = 1;
  std::string format;
  std::uint32_t batch = 256;
  int send_buffer_bytes = 4 << 20;
  bool quiet = false;
  std::uint32_t threads = 1;
};

// A usage error found once the options are known (a missing tick): exit 2.
[[noreturn]] void usage_error(const std::string& msg) {
  std::exit(cli::usage_error(kProgram, msg));
}

// Each option is declared once here; adding one is one add_option line and one field.
std::optional<int> parse_args(int argc, char** argv, Options& o) {
  cli::App app(kProgram,
               "Streams INPUT over UDP like the scanner: a frame file (16-byte frames back to "
               "back, as petdaq-sim writes them) or a pcap/pcapng capture of UDP traffic "
               "(payloads re-sent as captured).");
  double speed = 1, rate = 0, tick_ps = 0;
  std::string framing = "raw";
  cli::add_input(app, o.input, "the frame file or capture to send")->required();
  cli::add_config(app, o.config,
                  "petdaq configuration: destinations from input.endpoints, tick from "
                  "scanner.tick_ps (explicit --to and --tick-ps override)");
  const char* shape = "Destination and shape";
  app.add_option("--to", o.to,
                 "destination (repeatable; source s goes to destination s % count); default: "
                 "the config's input.endpoints, else 127.0.0.1:5600")
      ->type_name("ADDRESS:PORT")
      ->default_str("")
      ->group(shape);
  app.add_option("--payload-bytes", o.payload_bytes,
                 "datagram payload size (8972 for a 9000-byte MTU; 1472 for a standard MTU)")
      ->type_name("N")
      ->check(CLI::PositiveNumber)
      ->group(shape);
  app.add_option("--sources", o.sources,
                 "sending sockets; BDM b goes out from socket b % N (0: one per BDM in the "
                 "file; pcap: one per captured sender)")
      ->type_name("N")
      ->group(shape);
  std::vector<std::string> framing_names;
  for (const auto& [name, kind] : kFramingNames) framing_names.emplace_back(name);
  app.add_option("--framing", framing,
                 "frame files only: plain frames, or a 16-byte sequenced header (per-source "
                 "sequence +1 per datagram)")
      ->check(CLI::IsMember(framing_names))
      ->type_name("KIND")
      ->group(shape);
  cli::add_flush_us(app, o.flush_us)->group(shape);
  app.add_option("--source-port-base", o.source_port_base,
                 "bind source s to port P + s (0: ephemeral ports)")
      ->type_name("P")
      ->group(shape);
  const char* pace = "Pace (frame files need the tick for --speed: --tick-ps or --config)";
  CLI::Option* speed_option =
      app.add_option("--speed", speed,
                     "follow the input's own time line X times faster than real time (the "
                     "default when the tick or a capture's times are known)")
          ->type_name("X")
          ->check(CLI::PositiveNumber)
          ->group(pace);
  CLI::Option* rate_option = app.add_option("--rate", rate, "a fixed frame rate")
                                 ->type_name("FRAMES_PER_S")
                                 ->check(CLI::PositiveNumber)
                                 ->group(pace);
  app.add_option("--burst-ms", o.burst_ms,
                 "with --rate: how much of a stall is caught up afterwards, in milliseconds of "
                 "frames sent back to back")
      ->type_name("MS")
      ->check(CLI::NonNegativeNumber)
      ->group(pace);
  CLI::Option* max_option = app.add_flag("--max", o.max, "as fast as possible")->group(pace);
  speed_option->excludes(rate_option)->excludes(max_option);
  rate_option->excludes(max_option);
  CLI::Option* tick_option =
      app.add_option("--tick-ps", tick_ps, "tick length of the frames' time stamps")
          ->type_name("PS")
          ->check(CLI::PositiveNumber)
          ->group(pace);
  app.add_option("--loop", o.loops, "send the input N times (0: until interrupted)")
      ->type_name("N")
      ->group(pace);
  const char* other = "Other";
  app.add_option("--format", o.format, "input kind (default: recognised from the first bytes)")
      ->check(CLI::IsMember({"frames", "pcap"}))
      ->type_name("KIND")
      ->group(other);
  app.add_option("--batch", o.batch, "datagrams per sendmmsg round")
      ->type_name("N")
      ->check(CLI::PositiveNumber)
      ->group(other);
  app.add_option("--send-buffer-bytes", o.send_buffer_bytes, "SO_SNDBUF per socket")
      ->type_name("N")
      ->check(CLI::NonNegativeNumber)
      ->group(other);
  app.add_option("--threads", o.threads,
                 "sender threads for a frame file: thread k sends the sources s with s % N == k "
                 "(each source stays on one thread, in order), each pacing its share")
      ->type_name("N")
      ->check(CLI::Range(1u, 256u))
      ->group(other);
  cli::add_quiet(app, o.quiet)->group(other);
  if (const auto rc = app.parse_or_exit(argc, argv)) return rc;
  if (speed_option->count()) o.speed = speed;
  if (rate_option->count()) o.rate = rate;
  if (tick_option->count()) o.tick_ps = tick_ps;
  for (const auto& [name, kind] : kFramingNames)
    if (name == framing) o.framing = kind;
  return std::nullopt;
}

// Destinations and tick from --config where not given on the command line.
void apply_config(Options& o) {
  if (!o.config.empty()) {
    const Settings settings = load_settings(o.config);
    if (o.to.empty())
      for (const UdpEndpoint& e : settings.input.endpoints) o.to.push_back(e.to_string());
    if (!o.tick_ps) o.tick_ps = settings.scanner.tick_ps;
  }
  if (o.to.empty()) o.to.emplace_back("127.0.0.1:5600");
}

bool looks_like_capture(const std::uint8_t* p, std::size_t n) {
  if (n < 4) return false;
  const std::uint32_t le = bytes::load_le32(p);
  return le == 0xA1B2C3D4 || le == 0xD4C3B2A1 || le == 0xA1B23C4D || le == 0x4D3CB2A1 ||
         le == 0x0A0D0D0A;
}

// The send loop shared by both inputs: pacing, batching, progress.
class Run {
 public:
  Run(Pacer pacer, UdpSender& sender, bool quiet) : pacer_(pacer), sender_(sender), quiet_(quiet) {}

  void start() {
    start_ = Clock::now();
    pacer_.start(start_);
    next_progress_ = start_ + std::chrono::seconds(1);
    last_progress_time_ = start_;
  }

  void send(std::uint32_t source, const std::uint8_t* data, std::uint32_t bytes,
            std::uint32_t frames, std::uint32_t token, std::int64_t input_ns) {
    Clock::time_point now = Clock::now();
    const Clock::time_point due = pacer_.due(frames, input_ns, now);
    if (due > now) {
      // What is queued is due now: send it before sleeping. Long waits (a pause in the
      // input's time line) go in steps so progress goes on and Ctrl-C is heard.
      flush();
      for (;;) {
        progress(now);
        const auto step_end = std::min(due, now + std::chrono::milliseconds(200));
        sleep_until(step_end);
        now = Clock::now();
        if (now >= due) break;
        if (stop_requested()) return;
      }
    }
    sender_.enqueue(source, data, bytes, frames, token);
    if (sender_.pending() == 0) last_send_ = Clock::now();
    pacer_.commit(frames, due, now);
    progress(now);
  }

  void flush() {
    if (sender_.pending() == 0) return;
    sender_.flush();
    last_send_ = Clock::now();
  }

  void finish(const std::string& input_line, const std::string& skipped_line) {
    flush();
    const SendStats& s = sender_.stats();
    const double elapsed_s =
        s.datagrams ? std::chrono::duration<double>(last_send_ - start_).count() : 0.0;
    const double fps = elapsed_s > 0 ? s.frames / elapsed_s : 0.0;
    const double dps = elapsed_s > 0 ? s.datagrams / elapsed_s : 0.0;
    std::fprintf(stderr,
                 "petdaq-replay: %s\n"
                 "  input            %s\n"
                 "%s"
                 "  datagrams        %llu\n"
                 "  frames           %llu\n"
                 "  bytes            %llu\n"
                 "  elapsed_s        %.6f\n"
                 "  frames_per_s     %.1f\n"
                 "  datagrams_per_s  %.1f\n"
                 "  behind_max_ms    %.3f\n"
                 "  behind_end_ms    %.3f\n"
                 "  send_errors      %llu\n",
                 stop_requested() ? "interrupted" : "finished", input_line.c_str(), skipped_line.c_str(),
                 static_cast<unsigned long long>(s.datagrams),
                 static_cast<unsigned long long>(s.frames),
                 static_cast<unsigned long long>(s.bytes), elapsed_s, fps, dps,
                 pacer_.behind_max_s() * 1e3, pacer_.behind_last_s() * 1e3,
                 static_cast<unsigned long long>(s.send_errors));
    if (s.send_errors) std::fprintf(stderr, "  first error      %s\n", s.first_error.c_str());
  }

 private:
  void progress(Clock::time_point now) {
    if (now < next_progress_) return;
    const SendStats& s = sender_.stats();
    const double since_s = std::chrono::duration<double>(now - last_progress_time_).count();
    const double t_s = std::chrono::duration<double>(now - start_).count();
    if (!quiet_) {
      std::fprintf(stderr,
                   "petdaq-replay: %6.1f s  %llu datagrams  %s frames  %s frames/s  behind %.1f ms"
                   "  send errors %llu\n",
                   t_s, static_cast<unsigned long long>(s.datagrams), si(double(s.frames)).c_str(),
                   si(double(s.frames - last_progress_frames_) / std::max(since_s, 1e-9)).c_str(),
                   pacer_.behind_last_s() * 1e3, static_cast<unsigned long long>(s.send_errors));
    }
    last_progress_frames_ = s.frames;
    last_progress_time_ = now;
    next_progress_ += std::chrono::seconds(1);
    if (next_progress_ < now) next_progress_ = now + std::chrono::seconds(1);
  }

  Pacer pacer_;
  UdpSender& sender_;
  bool quiet_;
  Clock::time_point start_{};
  Clock::time_point last_send_{};
  Clock::time_point next_progress_{};
  Clock::time_point last_progress_time_{};
  std::uint64_t last_progress_frames_ = 0;
};

std::vector<Destination> destinations(const Options& o) {
  std::vector<Destination> out;
  for (const auto& t : o.to) out.push_back(parse_destination(t));
  return out;
}

Pacer make_pacer(const Options& o, bool have_time_line, std::uint32_t frames_per_datagram) {
  if (o.max) return Pacer::max();
  if (o.rate) {
    // The bucket's depth is how much of a stall (a busy machine, a slow wake-up) is caught
    // up afterwards, and how long the burst that does so may be; the tokens that pile up
    // during one sendmmsg round fill the next batch. At least two datagrams, so low rates
    // still send whole datagrams on time.
    const double bucket = std::max(*o.rate * o.burst_ms * 1e-3, 2.0 * frames_per_datagram);
    return Pacer::rate(*o.rate, bucket);
  }
  if (!have_time_line) {
    usage_error("--speed needs the tick length of the frames' time stamps: give --tick-ps or "
                "--config (or pace with --rate FRAMES_PER_S or --max)");
  }
  return Pacer::speed(o.speed.value_or(1.0));
}

int replay_frames(const Options& o, const MappedFile& file) {
  const FrameFileInfo info = scan_frame_file(file.data(), file.size());
  const std::optional<double> tick_ps = o.tick_ps;
  if (info.trailing_bytes) {
    std::fprintf(stderr,
                 "petdaq-replay: %s: %zu trailing bytes after %zu whole frames are not sent "
                 "(file truncated?)\n",
                 o.input.c_str(), info.trailing_bytes, info.frame_count);
  }
  if (info.frame_count == 0) {
    std::fprintf(stderr, "petdaq-replay: %s: no whole frame to send\n", o.input.c_str());
    return 1;
  }
  const std::uint32_t sources = o.sources ? o.sources : info.bdm_limit;

  PackerConfig pc;
  pc.framing = o.framing;
  pc.payload_bytes = o.payload_bytes;
  pc.source_count = sources;
  pc.in_flight = o.batch;
  pc.flush_ticks = tick_ps ? static_cast<std::uint64_t>(o.flush_us * 1e6 / *tick_ps) : 0;
  const std::uint32_t threads = std::min(o.threads, sources);

  // Frames per thread, for each thread's share of a fixed --rate.
  std::vector<std::uint64_t> thread_frames(threads, 0);
  if (threads > 1)
    for (std::size_t i = 0; i < info.frame_count; ++i)
      ++thread_frames[frame_bdm(file.data() + i * kFrameBytes) % sources % threads];

  struct Lane {
    Packer packer;
    UdpSender sender;
    std::optional<Run> run;
    std::uint64_t loops = 0;
    Lane(const PackerConfig& p, const Options& o, std::uint32_t sources)
        : packer(p), sender(destinations(o), sources, o.batch, o.send_buffer_bytes, o.source_port_base) {}
  };
  std::vector<std::unique_ptr<Lane>> lanes;
  for (std::uint32_t k = 0; k < threads; ++k) {
    lanes.push_back(std::make_unique<Lane>(pc, o, sources));
    Lane& lane = *lanes.back();
    lane.sender.set_release([&packer = lane.packer](std::uint32_t b) { packer.release(b); });
    Options share = o;
    if (o.rate && threads > 1)
      share.rate = *o.rate * static_cast<double>(thread_frames[k]) /
                   static_cast<double>(info.frame_count);
    lane.run.emplace(make_pacer(share, tick_ps.has_value(),
                                static_cast<std::uint32_t>(lane.packer.frames_per_datagram())),
                     lane.sender, o.quiet || k > 0);
  }

  std::fprintf(stderr,
               "petdaq-replay: %s: %zu frames from %u BDMs, %u sources, %zu frames per "
               "datagram, %s framing, %zu destination(s), %u sender thread(s)\n",
               o.input.c_str(), info.frame_count, info.bdm_limit, sources,
               lanes[0]->packer.frames_per_datagram(), to_string(o.framing), o.to.size(), threads);

  const std::uint64_t span_ticks = info.max_time_ticks - info.min_time_ticks + 1;
  // Thread k sends the sources s with s % threads == k: each source in its order of time.
  auto send_lane = [&](std::uint32_t k) {
    Lane& lane = *lanes[k];
    std::uint64_t& loop = lane.loops;
    auto emit = [&](const Datagram& d) {
      std::int64_t input_ns = 0;
      if (tick_ps) {
        const double ticks = double(loop) * double(span_ticks) +
                             double(d.data_time_ticks - info.min_time_ticks);
        input_ns = static_cast<std::int64_t>(ticks * *tick_ps * 1e-3);
      }
      lane.run->send(d.source, d.data, d.bytes, d.frames, d.buffer, input_ns);
    };
    lane.run->start();
    for (; (o.loops == 0 || loop < o.loops) && !stop_requested(); ++loop) {
      lane.packer.restart_time();
      for (std::size_t i = 0; i < info.frame_count && !stop_requested(); ++i) {
        const std::uint8_t* f = file.data() + i * kFrameBytes;
        if (threads > 1 && frame_bdm(f) % sources % threads != k) continue;
        lane.packer.add(f, emit);
      }
      lane.packer.flush(emit);
    }
    lane.run->flush();
  };
  if (threads == 1) {
    send_lane(0);
  } else {
    std::vector<std::thread> workers;
    for (std::uint32_t k = 0; k < threads; ++k) workers.emplace_back(send_lane, k);
    for (auto& w : workers) w.join();
  }
  const std::uint64_t loop = lanes[0]->loops;
  char line[512];
  std::snprintf(line, sizeof line, "%s: %zu frames x %llu pass(es), %zu trailing bytes not sent",
                o.input.c_str(), info.frame_count, static_cast<unsigned long long>(loop),
                info.trailing_bytes);
  if (threads == 1) {
    lanes[0]->run->finish(line, "");
    return lanes[0]->sender.stats().send_errors ? kExitSendErrors : 0;
  }
  // Several threads: each lane's figures, then the sum.
  SendStats total;
  for (std::uint32_t k = 0; k < threads; ++k) {
    char lane_line[600];
    std::snprintf(lane_line, sizeof lane_line, "%s (thread %u of %u)", line, k, threads);
    lanes[k]->run->finish(lane_line, "");
    const SendStats& st = lanes[k]->sender.stats();
    total.datagrams += st.datagrams;
    total.frames += st.frames;
    total.bytes += st.bytes;
    total.send_errors += st.send_errors;
  }
  std::fprintf(stderr, "petdaq-replay: all %u threads: %llu datagrams, %llu frames, %llu bytes, "
                       "%llu send errors\n",
               threads, static_cast<unsigned long long>(total.datagrams),
               static_cast<unsigned long long>(total.frames),
               static_cast<unsigned long long>(total.bytes),
               static_cast<unsigned long long>(total.send_errors));
  return total.send_errors ? kExitSendErrors : 0;
}

int replay_capture(const Options& o) {
  if (o.framing != Framing::raw) {
    std::fprintf(stderr, "petdaq-replay: --framing is ignored for captures: payloads are re-sent "
                         "as captured\n");
  }
  const Capture cap = load_capture(o.input);
  const std::uint64_t skipped = cap.skipped_not_udp + cap.skipped_fragment +
                                cap.skipped_truncated + cap.skipped_link_type;
  char skipped_line[256];
  std::snprintf(skipped_line, sizeof skipped_line,
                "  skipped_packets  %llu (not UDP %llu, fragments %llu, truncated %llu, "
                "unknown link type %llu)\n",
                static_cast<unsigned long long>(skipped),
                static_cast<unsigned long long>(cap.skipped_not_udp),
                static_cast<unsigned long long>(cap.skipped_fragment),
                static_cast<unsigned long long>(cap.skipped_truncated),
                static_cast<unsigned long long>(cap.skipped_link_type));
  if (cap.datagrams.empty()) {
    std::fprintf(stderr, "petdaq-replay: %s: no UDP datagram to send\n%s", o.input.c_str(),
                 skipped_line);
    return 1;
  }
  const auto captured_sources = static_cast<std::uint32_t>(cap.source_names.size());
  const std::uint32_t sources = o.sources ? o.sources : captured_sources;
  UdpSender sender(destinations(o), sources, o.batch, o.send_buffer_bytes, o.source_port_base);
  std::uint32_t max_frames = 1;
  for (const auto& d : cap.datagrams) max_frames = std::max(max_frames, d.bytes / 16u);
  Run run(make_pacer(o, true, max_frames), sender, o.quiet);
  std::fprintf(stderr, "petdaq-replay: %s: %zu UDP datagrams from %u sender(s), %llu packets "
                       "skipped, %u sources, %zu destination(s)\n",
               o.input.c_str(), cap.datagrams.size(), captured_sources,
               static_cast<unsigned long long>(skipped), sources, o.to.size());

  const std::int64_t span_ns = cap.datagrams.back().time_ns + 1;
  std::uint64_t loop = 0;
  run.start();
  for (; (o.loops == 0 || loop < o.loops) && !stop_requested(); ++loop) {
    for (std::size_t i = 0; i < cap.datagrams.size() && !stop_requested(); ++i) {
      const CapturedDatagram& d = cap.datagrams[i];
      run.send(d.source % sources, cap.payloads.data() + d.offset, d.bytes,
               d.bytes / static_cast<std::uint32_t>(kFrameBytes), 0,
               static_cast<std::int64_t>(loop) * span_ns + d.time_ns);
    }
  }
  char line[512];
  std::snprintf(line, sizeof line, "%s: %zu datagrams x %llu pass(es)", o.input.c_str(),
                cap.datagrams.size(), static_cast<unsigned long long>(loop));
  run.finish(line, skipped_line);
  return sender.stats().send_errors ? kExitSendErrors : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (const auto rc = parse_args(argc, argv, o)) return *rc;
  try {
    apply_config(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", kProgram, e.what());
    return cli::kExitUsage;
  }
  install_stop_signals();
  // Deadlines are absolute, so finer timer slack only sharpens them.
  ::prctl(PR_SET_TIMERSLACK, 1000UL);
  try {
    const MappedFile file(o.input);
    const bool capture = o.format.empty() ? looks_like_capture(file.data(), file.size())
                                          : o.format == "pcap";
    return capture ? replay_capture(o) : replay_frames(o, file);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", kProgram, e.what());
    return 1;
  }
}

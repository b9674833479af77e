// petdaqd over UDP loopback: the highest sending rate with zero loss (DESIGN section 11),
// with slice latency and resident memory at that rate, as a ratio to the loopback ceiling
// measured in the same run. Starts the daemon on the test scanner with one receiver thread
// per sender, sends raw 8 960-byte datagrams (560 frames) from N sender threads (one socket
// each, so SO_REUSEPORT spreads them over the receivers; sendmmsg; each sender owns a
// quarter of the scanner's BDMs, so every source stays in order) at a paced rate, and
// searches the rate: doubling until frames are lost, then bisecting. The ceiling is the
// same senders, unpaced, into plain receivers that only count (recvmmsg).
//
// With --trials N (or --rates), no search: N trials at each rate, one table row each, for
// trial-to-trial reproducibility and for the overload curve (frames taken per second and the
// lost fraction against the offered rate; DESIGN section 6, "Overload").
//
//   petdaqd_bench [--duration-s S] [--start-mfps R] [--max-mfps R] [--steps N]
//                 [--backend cpu|gpu] [--senders N] [--trials N] [--rates R,R,...]
//                 [--recovery-mfps R --recovery-s S]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/cli.h"
#include "core/test_scanner.h"
#include "core/thread_placement.h"
#include "daemon/receiver.h"
#include "daemon_harness.h"
#include "tests/support/wait.h"
#include "tools/common/host_probe.h"

using namespace petdaq;
using namespace petdaq::test;
using namespace std::chrono_literals;

namespace {

// DESIGN section 11: the 2-core machine with the CPU backend, the H100 machine with the GPU.
constexpr double kCpuTargetFramesPerS = 10e6;
constexpr double kGpuTargetFramesPerS = 300e6;
constexpr std::size_t kFramesPerDatagram = 560;

struct Trial {
  double rate_fps = 0;
  double achieved_fps = 0;
  std::uint64_t sent_frames = 0;
  std::uint64_t received_frames = 0;
  std::uint64_t kernel_drops = 0;
  std::uint64_t ring_full = 0;
  std::uint64_t late = 0;
  std::uint64_t refused = 0;
  std::uint64_t slices = 0;
  std::uint64_t splits = 0;  // slices the backend had to split (core/backend.h)
  std::uint64_t exact = 0;   // chunks that took the slicer's per-frame pass
  std::uint64_t jumps = 0;   // stream.time_jump
  std::uint64_t skipped_passes = 0;  // passes a sender skipped between trials (0: one clock)
  std::uint64_t sender_waits = 0;    // 50 us waits of senders ahead of the slowest
  double sender_behind_ms = 0;       // the furthest a sender was behind its schedule
  double sender_call_ms = 0;         // the longest sendmmsg call of a sender
  double sender_shift_ms = 0;        // the longest shift of a sender's pass to the next
  double sender_sync_ms = 0;         // the longest wait of a sender for the slowest's pass
  double sender_runq_ms = 0;         // the most a sender thread waited for a CPU in all (schedstat)
  double daemon_cores = 0;           // petdaqd's CPU time over the sending, in cores
  double steal = 0, steal_cpu_max = 0;  // the host's steal time while sending (steal_shares)
  std::uint64_t dead = 0;     // stream.dead_frames: shed as dead time
  std::uint64_t pending_full = 0;
  std::uint64_t intervals = 0;  // stream.dead_intervals
  // stream.loss_intervals and stream.loss_unconverted: a socket's losses made dead time for
  // every board, and those left to the socket's boards.
  std::uint64_t loss_intervals = 0, loss_unconverted = 0;
  std::uint64_t backlog_chunks = 0;  // rx.backlog_chunks: chunks a receiver filled behind
  double seconds = 0;           // of sending at the trial's rate
  double recovery_seconds = 0;  // of sending at the recovery rate after it (its frames count)
  double live_fraction = 1;     // the last rates document's deadtime.live_fraction_run
  double recovery_ms = -1;      // after the trial: last dead interval published (-1: not run)
  std::uint64_t recovery_lost = 0;  // frames lost in the recovery phase
  // Frames that went on to coincidence finding: received less every drop after receipt.
  double taken_fps() const {
    return static_cast<double>(taken()) / (seconds + recovery_seconds);
  }
  std::uint64_t taken() const {
    const std::uint64_t out = dead + late + jumps + pending_full;
    return received_frames > out ? received_frames - out : 0;
  }
  double lost_fraction() const {
    return sent_frames ? 1.0 - static_cast<double>(taken()) / static_cast<double>(sent_frames) : 0;
  }
  // The senders, kept on one clock, sent less than asked (or skipped scanner time): the trial
  // measured the senders, not the daemon.
  bool void_trial() const { return skipped_passes > 0 || achieved_fps < 0.99 * rate_fps; }
  double p50_ms = 0;
  double p99_ms = 0;
  std::uint64_t rss_kib = 0;
  bool lossless() const {
    return received_frames == sent_frames && kernel_drops == 0 && ring_full == 0 && late == 0 && jumps == 0 &&
           refused == 0 && dead == 0 && pending_full == 0;
  }
};

struct Snapshot {
  std::uint64_t frames, kernel, ring, late, refused, slices, splits, exact, jumps, dead,
      pending_full, intervals, backlog_chunks, loss_intervals, loss_unconverted;
  std::uint64_t lost() const { return kernel + ring + late + jumps + dead + pending_full; }
};
Snapshot snapshot(const std::string& j) {
  return {json_counter(j, "rx.frames"), json_counter(j, "rx.kernel_drops"),
          json_counter(j, "rx.ring_full"), json_counter(j, "stream.late"),
          json_counter(j, "out.zmq_refused"), json_counter(j, "stream.slices"),
          json_counter(j, "stream.split_slices"), json_counter(j, "stream.exact_blocks"),
          json_counter(j, "stream.time_jump"), json_counter(j, "stream.dead_frames"),
          json_counter(j, "stream.pending_full"), json_counter(j, "stream.dead_intervals"),
          json_counter(j, "rx.backlog_chunks"), json_counter(j, "stream.loss_intervals"),
          json_counter(j, "stream.loss_unconverted")};
}

// The worker's phases between two rates documents `a` and `b` (docs/daemon.md, "Worker
// phases"), one line each: seconds and share of the worker's wall time, calls, mean and
// longest call, and the calls of 1 ms or more by log2 bucket. `between` are the documents
// after `a` up to `b`: the longest calls and the ring's high-water mark come from them.
void print_phases(const nlohmann::ordered_json& a, const nlohmann::ordered_json& b,
                  const std::vector<nlohmann::ordered_json>& between) {
  if (!a.contains("worker") || !b.contains("worker")) return;
  const double wall_s = b["worker"]["seconds"].get<double>() - a["worker"]["seconds"].get<double>();
  std::size_t ring_used_max = 0, sealed_max = 0, staging_max = 0;
  for (const auto& j : between) {
    ring_used_max = std::max(ring_used_max, j["queues"]["ring_used_max"].get<std::size_t>());
    sealed_max = std::max(sealed_max, j["queues"]["sealed_max"].get<std::size_t>());
    staging_max = std::max(staging_max, j["queues"]["staging_max"].get<std::size_t>());
  }
  std::printf("    worker %.3f s, on a core %.3f s, %llu involuntary context switches; ring used "
              "max %zu of %zu chunks (sealed, waiting for the worker: max %zu; copy not done: "
              "max %zu)\n",
              wall_s, b["worker"]["cpu_seconds"].get<double>() - a["worker"]["cpu_seconds"].get<double>(),
              static_cast<unsigned long long>(b["worker"]["involuntary_switches"].get<std::uint64_t>() -
                                              a["worker"]["involuntary_switches"].get<std::uint64_t>()),
              ring_used_max, b["queues"]["ring_chunks"].get<std::size_t>(), sealed_max, staging_max);
  std::printf("    %-16s %9s %6s %9s %9s %9s  %s\n", "phase", "seconds", "share", "calls",
              "mean_us", "max_ms", "calls >= 1 ms by bucket (lower bound ms:calls)");
  for (const auto& [name, pb] : b["worker"]["phases"].items()) {
    const auto& pa = a["worker"]["phases"][name];
    const std::uint64_t calls = pb["calls"].get<std::uint64_t>() - pa["calls"].get<std::uint64_t>();
    if (calls == 0) continue;
    const double sec = pb["seconds"].get<double>() - pa["seconds"].get<double>();
    double max_ms = 0;
    for (const auto& j : between)
      max_ms = std::max(max_ms, j["worker"]["phases"][name]["max_ms"].get<double>());
    std::string tail;
    const auto& hb = pb["log2_us"];
    const auto& ha = pa["log2_us"];
    // Bucket k holds calls in [2^(k-1), 2^k) µs: from k = 11 they last 1.024 ms or more.
    for (std::size_t k = 11; k < hb.size(); ++k) {
      const std::uint64_t n = hb[k].get<std::uint64_t>() - ha[k].get<std::uint64_t>();
      if (n == 0) continue;
      const long long lower_ms = std::llround(std::ldexp(1.0, static_cast<int>(k) - 1) / 1000.0);
      tail += (tail.empty() ? "" : " ") + std::to_string(lower_ms) + ":" + std::to_string(n);
    }
    std::printf("    %-16s %9.3f %5.1f%% %9llu %9.1f %9.2f  %s\n", name.c_str(), sec,
                wall_s > 0 ? 100.0 * sec / wall_s : 0.0, static_cast<unsigned long long>(calls),
                sec / static_cast<double>(calls) * 1e6, max_ms, tail.empty() ? "-" : tail.c_str());
  }
}

std::uint64_t unix_ns() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

// The acquisition is replayed whole in a loop, by several senders: sender k sends the
// datagrams of the BDMs b with b % senders == k. Each pass is shifted in time just past
// the previous one so the stream keeps going forward without gaps. A datagram is shifted
// to its sender's pass right before it is sent (prepare()), so that no sender stops between
// passes to shift them all, as a board never stops. A sender that finished fewer passes than
// the others in a trial is moved on to them before the next one (align()): the boards of a
// scanner share one clock, and a sender left a pass behind would stay a whole pass of
// scanner time behind the others in every later trial.
class Source {
 public:
  Source(const TestScanner& sc, std::size_t frames, std::uint32_t senders) : parts_(senders) {
    std::mt19937_64 rng(42);
    AcquisitionOptions o;
    o.events = frames * 10 / 17;  // about 1.7 frames per event
    o.mean_gap_ticks = 3200;      // ~20 M singles/s of scanner time
    o.bad_fraction = 0;
    const auto acq = random_acquisition(sc, rng, o);
    span_ticks_ = frame_time(acq.back().bytes) + 10'000'000;
    for (Datagram& d : make_datagrams(acq, Framing::raw, kFramesPerDatagram, kBdmGroups)) {
      Part& p = parts_[frame_bdm(d.data()) % kBdmGroups % senders];
      p.frames += d.size() / kFrameBytes;
      p.datagrams.push_back(std::move(d));
      p.shifted.push_back(0);
    }
  }
  static constexpr std::uint32_t kBdmGroups = 4;  // datagrams hold the frames of bdm % 4
  // Sender k's next pass (its datagrams are shifted as they are sent).
  void advance(std::size_t k) { ++parts_[k].passes; }
  // Brings every sender to the pass the furthest one reached, without sending; returns the
  // passes skipped.
  std::uint64_t align() {
    std::uint64_t furthest = 0, skipped = 0;
    for (const Part& p : parts_) furthest = std::max(furthest, p.passes);
    for (Part& p : parts_) {
      skipped += furthest - p.passes;
      p.passes = furthest;
    }
    return skipped;
  }
  const std::vector<Datagram>& datagrams(std::size_t k) const { return parts_[k].datagrams; }
  // Shifts sender k's datagrams [first, first + n) to its current pass: UdpSender::send calls
  // it before each batch.
  void prepare(std::size_t k, std::size_t first, std::size_t n) {
    Part& p = parts_[k];
    for (std::size_t i = first; i < first + n; ++i) {
      const std::uint64_t by = (p.passes - p.shifted[i]) * span_ticks_;
      if (by == 0) continue;
      Datagram& d = p.datagrams[i];
      for (std::size_t at = 0; at < d.size(); at += kFrameBytes) {
        std::uint8_t* t = d.data() + at + frame_offset::time;
        bytes::store_be64(t, bytes::load_be64(t) + by);
      }
      p.shifted[i] = p.passes;
    }
  }
  // The hook for UdpSender::send that prepares sender k's batches.
  UdpSender::BeforeBatch before_batch(std::size_t k) {
    return [this, k](std::size_t first, std::size_t n) { prepare(k, first, n); };
  }
  // Scanner time one pass covers, ticks.
  std::uint64_t span_ticks() const { return span_ticks_; }
  std::uint64_t frames(std::size_t k) const { return parts_[k].frames; }
  std::uint64_t frames() const {
    std::uint64_t n = 0;
    for (const Part& p : parts_) n += p.frames;
    return n;
  }

 private:
  struct Part {
    std::vector<Datagram> datagrams;
    std::vector<std::uint64_t> shifted;  // the pass each datagram's times are at
    std::uint64_t frames = 0;
    std::uint64_t passes = 0;  // passes sent or skipped
  };
  std::vector<Part> parts_;
  std::uint64_t span_ticks_ = 0;
};

// The senders' nice value (--sender-nice); kKeepNice: this process's own.
constexpr int kKeepNice = 1000;
int g_sender_nice = kKeepNice;

// Runs `senders` threads; thread k calls send(k) until the deadline and returns the frames
// all of them sent. `runq_max_ns` (if given) gets the most any of them waited for a CPU.
template <class Send>
std::uint64_t run_senders(std::uint32_t senders, double seconds, Send send,
                          std::uint64_t* runq_max_ns = nullptr) {
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                         std::chrono::duration<double>(seconds));
  std::vector<std::uint64_t> sent(senders, 0), waited(senders, 0);
  std::vector<std::thread> threads;
  for (std::uint32_t k = 0; k < senders; ++k)
    threads.emplace_back([&, k] {
      if (g_sender_nice != kKeepNice) setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), g_sender_nice);
      const std::uint64_t wait0 = host_probe::run_queue_wait_ns();
      while (std::chrono::steady_clock::now() < until) sent[k] += send(k);
      waited[k] = host_probe::run_queue_wait_ns() - wait0;
    });
  for (auto& t : threads) t.join();
  std::uint64_t total = 0;
  for (auto n : sent) total += n;
  if (runq_max_ns) *runq_max_ns = *std::max_element(waited.begin(), waited.end());
  return total;
}

// The loopback ceiling: the same senders, unpaced, into plain receivers on one port
// (SO_REUSEPORT spread by board as the daemon's, one socket and thread each) that count what
// recvmmsg gives them.
double loopback_ceiling_fps(Source& source, std::uint32_t senders, double seconds) {
  std::vector<int> fds;
  std::uint16_t port = 0;
  for (std::uint32_t k = 0; k < senders; ++k) {
    const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
    const int one = 1, buffer = 64 << 20;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    if (::setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buffer, sizeof buffer) != 0)
      ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer, sizeof buffer);
    timeval tv{0, 100'000};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
      throw std::runtime_error(std::string("ceiling: bind: ") + std::strerror(errno));
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    if (k == 0 && senders > 1 && !daemon::spread_by_board(fd, Framing::raw, senders))
      std::fprintf(stderr, "ceiling: cannot spread by board: %s\n", std::strerror(errno));
    port = ntohs(a.sin_port);
    fds.push_back(fd);
  }
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> received_bytes{0};
  std::vector<std::thread> receivers;
  for (int fd : fds)
    receivers.emplace_back([&, fd] {
      constexpr std::size_t kBatch = 64, kSlot = 9216;
      std::vector<std::uint8_t> buffer(kBatch * kSlot);
      std::vector<mmsghdr> msgs(kBatch);
      std::vector<iovec> iovs(kBatch);
      std::uint64_t bytes = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        for (std::size_t i = 0; i < kBatch; ++i) {
          iovs[i] = {buffer.data() + i * kSlot, kSlot};
          msgs[i] = {};
          msgs[i].msg_hdr.msg_iov = &iovs[i];
          msgs[i].msg_hdr.msg_iovlen = 1;
        }
        const int got = ::recvmmsg(fd, msgs.data(), kBatch, 0, nullptr);
        for (int i = 0; i < got; ++i) bytes += msgs[i].msg_len;
      }
      received_bytes += bytes;
    });
  std::vector<UdpSender> tx(senders);
  const auto start = std::chrono::steady_clock::now();
  run_senders(senders, seconds, [&](std::size_t k) {
    tx[k].send(source.datagrams(k), port, 0);
    return source.frames(k);
  });
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  stop = true;
  for (auto& t : receivers) t.join();
  for (int fd : fds) ::close(fd);
  return static_cast<double>(received_bytes.load()) / kFrameBytes / elapsed;
}

}  // namespace

// The systemd unit runs petdaqd at Nice=-10 (systemd/petdaqd.service.in): above the other
// processes of the acquisition computer, and here above this benchmark's senders, which
// stand in for the detector boards. Every thread of the running daemon gets it; returns
// whether all did (it needs root or CAP_SYS_NICE).
namespace {
constexpr int kUnitNice = -10;
bool renice_daemon(pid_t pid) {
  bool all = true;
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    const auto tid = static_cast<id_t>(std::stoul(task.path().filename().string()));
    all &= setpriority(PRIO_PROCESS, tid, kUnitNice) == 0;
  }
  return all && !ec;
}
// This process's threads (and the threads it starts later) on the CPUs of a taskset list.
bool set_cpus(const std::string& list) {
  const std::vector<int> cpus = cpu_list(list);
  return !cpus.empty() && confine_this_thread(cpus);
}

// --pin-threads: the daemon's `cpus` section (DESIGN section 9) from --daemon-cpus's list in
// its order: a CPU per receiver, the next for the worker, the rest for the backend's pool
// (a short list wraps).
std::string cpus_section(const std::vector<int>& cpus, std::uint32_t receivers) {
  auto at = [&](std::size_t i) { return std::to_string(cpus[i % cpus.size()]); };
  std::string rx, pool;
  for (std::uint32_t k = 0; k < receivers; ++k) rx += (k ? "," : "") + at(k);
  for (std::size_t i = receivers + 1; i < cpus.size(); ++i) pool += (pool.empty() ? "" : ",") + at(i);
  return "cpus:\n  receivers: \"" + rx + "\"\n  worker: \"" + at(receivers) + "\"\n  backend: \"" +
         pool + "\"\n";
}
// Where the daemon's named threads (core/thread_placement.h) may run: "petdaq-rx0 on 8, ...".
std::string thread_placement(pid_t pid) {
  std::string out;
  for (const auto& [name, allowed] : allowed_cpus_by_thread(pid))
    if (name.rfind("petdaq-", 0) == 0) out += (out.empty() ? "" : ", ") + name + " on " + allowed;
  return out;
}
}  // namespace

int main(int argc, char** argv) {
  // Each option is declared once here; adding one is one add_option line and one variable.
  double seconds = 3, start_mfps = 2, max_mfps = 64;
  int bisect_steps = 4;
  std::string backend = "cpu";
  std::uint32_t senders = 1;
  double max_future_ms = 0;  // 0: the test scanner's stream.max_future_ps
  std::uint32_t backend_threads = 0;  // 0: the daemon's default
  int trials = 0;                     // 0: search the highest zero-loss rate
  std::vector<double> rates_mfps;     // fixed rates (each --trials times, at least once)
  double recovery_mfps = 0, recovery_s = 0;
  std::uint32_t ring_chunks = 256;    // the daemon's input.ring_chunks
  std::uint32_t ring_chunk_mib = 1;   // and input.ring_chunk_bytes, in MiB
  bool scaled_tolerances = false;
  std::string daemon_cpus, sender_cpus;  // taskset lists ("" : anywhere)
  bool pin_threads = false;
  std::vector<double> shed_fractions;    // input.shed_high_fraction, shed_low_fraction
  cli::App app("petdaqd_bench",
               "petdaqd over UDP loopback: the highest sending rate with zero loss, with slice "
               "latency and resident memory at that rate.");
  cli::add_duration_s(app, seconds, "seconds of sending per rate tried")->check(CLI::PositiveNumber);
  app.add_option("--start-mfps", start_mfps, "first rate tried, M frames/s")
      ->type_name("R")
      ->check(CLI::PositiveNumber);
  app.add_option("--max-mfps", max_mfps, "highest rate tried, M frames/s")
      ->type_name("R")
      ->check(CLI::PositiveNumber);
  app.add_option("--steps", bisect_steps, "bisection steps once frames are lost")
      ->type_name("N")
      ->check(CLI::NonNegativeNumber);
  cli::add_backend(app, backend);
  app.add_option("--senders", senders,
                 "sender threads, and the daemon's receiver threads (each sender owns a quarter "
                 "of the test scanner's 4 BDMs, so at most 4)")
      ->type_name("N")
      ->check(CLI::Range(1u, Source::kBdmGroups));
  app.add_option("--max-future-ms", max_future_ms,
                 "the daemon's stream.max_future_ps in ms of scanner time (0: the test "
                 "scanner's); chunks span up to half of it and a frame further ahead of the "
                 "horizon is a time jump")
      ->type_name("MS")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--backend-threads", backend_threads,
                 "the daemon's backend_threads (0: its default, the cores left after its receiver "
                 "threads and worker, which does not know that this benchmark's senders share "
                 "the machine)")
      ->type_name("N")
      ->check(CLI::Range(0u, 256u));
  bool image = false;
  app.add_flag("--image", image,
               "the live image on (output.image.enabled with its defaults and the delayed "
               "subtracted, published every 1 s; docs/image.md)");
  app.add_option("--trials", trials,
                 "no search: this many consecutive trials at --start-mfps (or at each of "
                 "--rates), one table row each; the senders keep one clock, and a trial in "
                 "which they sent less than 99 % of the rate asked is reported VOID")
      ->type_name("N")
      ->check(CLI::Range(1, 1000));
  app.add_option("--rates", rates_mfps,
                 "no search: trials at each of these rates, M frames/s (the overload curve)")
      ->type_name("R,R,...")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  app.add_option("--recovery-mfps", recovery_mfps,
                 "after each fixed-rate trial, send at this rate for --recovery-s and report "
                 "when the last dead interval was published after the trial ended")
      ->type_name("R")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--ring-chunks", ring_chunks,
                 "the daemon's input.ring_chunks (default 256 of 1 MiB, its default ring); a "
                 "smaller ring reaches a steady overload within a short trial")
      ->type_name("N")
      ->check(CLI::Range(4u, 4096u));
  app.add_option("--ring-chunk-mib", ring_chunk_mib,
                 "the daemon's input.ring_chunk_bytes in MiB (default 1)")
      ->type_name("N")
      ->check(CLI::Range(1u, 64u));
  app.add_flag("--scaled-tolerances", scaled_tolerances,
               "multiply stream.max_future_ps and stream.max_lag_ms by how much faster than the "
               "wall clock the replay runs scanner time at the highest rate asked (the "
               "acquisition is sparser than a scanner sending that rate in real time); default: "
               "the test scanner's");
  app.add_option("--daemon-cpus", daemon_cpus,
                 "run petdaqd on these CPUs (taskset list, e.g. 8-15)")
      ->type_name("LIST");
  app.add_option("--sender-cpus", sender_cpus,
                 "run this benchmark's senders and subscribers on these CPUs (taskset list, "
                 "e.g. 0-7), apart from the daemon as a scanner's boards are")
      ->type_name("LIST");
  app.add_flag("--pin-threads", pin_threads,
               "the daemon's cpus section from --daemon-cpus (which it needs), in its order: a "
               "CPU per receiver, one for the worker, the rest for the backend's pool");
  app.add_option("--shed-fractions", shed_fractions,
                 "the daemon's input.shed_high_fraction and shed_low_fraction (default: its own)")
      ->expected(2)
      ->delimiter(',')
      ->type_name("HIGH,LOW");
  int sender_nice = kKeepNice;
  app.add_option("--sender-nice", sender_nice,
                 "the senders' nice value while the daemon runs (default: this benchmark's "
                 "own, below the daemon's -10). Detector boards, and the kernel's receive path "
                 "whose work the senders do on loopback, do not wait for the daemon's threads: "
                 "-11 keeps the senders on their schedule on a machine the daemon fills")
      ->type_name("N")
      ->check(CLI::Range(-20, 19));
  app.add_option("--recovery-s", recovery_s, "seconds of the recovery phase (0: none)")
      ->type_name("S")
      ->check(CLI::NonNegativeNumber);
  if (const auto rc = app.parse_or_exit(argc, argv)) return *rc;
  if (pin_threads && cpu_list(daemon_cpus).empty()) {
    std::fprintf(stderr, "petdaqd_bench: --pin-threads needs --daemon-cpus\n");
    return 2;
  }
  const bool fixed = trials > 0 || !rates_mfps.empty();
  if (fixed && rates_mfps.empty()) rates_mfps.push_back(start_mfps);
  if (fixed && trials == 0) trials = 1;

  TestScanner sc;
  auto& st = sc.settings.stream;
  // The GPU runs the daemon's default slice sizes (config/petdaq.yaml); the CPU backend
  // smaller ones, which a 2-core machine's memory holds beside the ring.
  if (backend != "gpu") {
    st.max_slice_frames = 1u << 20;
    st.max_pending_frames = 4u << 20;
  }
  st.max_carry_singles = 1u << 20;
  std::printf("generating the acquisition...\n");
  Source source(sc, 2'000'000, senders);
  // The replay runs scanner time faster than the wall clock (a pass of scanner time is sent
  // in a fraction of it); --scaled-tolerances scales the time tolerances, which bound
  // wall-clock skew and waiting in a real-time stream, by that factor.
  {
    const double pass_scanner_s = static_cast<double>(source.span_ticks()) * sc.settings.scanner.tick_ps * 1e-12;
    double top_mfps = fixed ? 0 : max_mfps;
    for (double r : rates_mfps) top_mfps = std::max(top_mfps, r);
    const double pass_wall_s = static_cast<double>(source.frames()) / (top_mfps * 1e6);
    const double speed = pass_scanner_s / pass_wall_s;
    std::printf("the replay runs scanner time %.1fx faster than the wall clock at %.0f M frames/s\n",
                speed, top_mfps);
    if (scaled_tolerances && speed > 1) {
      st.max_future_ps *= speed;
      st.max_lag_ms *= speed;
      std::printf("stream.max_future_ps and stream.max_lag_ms scaled by %.1f\n", speed);
    }
  }
  if (max_future_ms > 0) st.max_future_ps = max_future_ms * 1e9;
  std::printf("stream.max_future_ps %.0f (%.1f ms of scanner time), stream.max_lag_ms %.1f, "
              "max_slice_frames %llu, max_pending_frames %llu\n",
              st.max_future_ps, st.max_future_ps * 1e-9, st.max_lag_ms,
              static_cast<unsigned long long>(st.max_slice_frames),
              static_cast<unsigned long long>(st.max_pending_frames));
  DaemonConfig dc;
  dc.udp_port = free_udp_port();
  dc.zmq_endpoint = "ipc://" + (sc.dir / "pub.sock").string();
  // The daemon's default ring (config/petdaq.yaml): what it holds in time is what absorbs
  // the worker's longest pauses.
  dc.ring_chunk_bytes = std::size_t{ring_chunk_mib} << 20;
  dc.ring_chunks = ring_chunks;
  dc.receive_buffer_bytes = 64u << 20;
  dc.rates_interval_ms = 500;
  dc.receiver_threads = senders;
  if (!shed_fractions.empty()) {
    dc.input_extra += "  shed_high_fraction: " + std::to_string(shed_fractions[0]) +
                      "\n  shed_low_fraction: " + std::to_string(shed_fractions[1]) + "\n";
    std::printf("input.shed_high_fraction %.3f, shed_low_fraction %.3f\n", shed_fractions[0],
                shed_fractions[1]);
  }
  if (image) dc.output_extra = "  image:\n    enabled: true\n    subtract_delayed: true\n";
  const auto config = sc.write_config();
  {
    std::FILE* f = std::fopen(config.c_str(), "a");
    std::string y = daemon_yaml(dc);
    if (backend_threads > 0) y += "backend_threads: " + std::to_string(backend_threads) + "\n";
    if (pin_threads) y += cpus_section(cpu_list(daemon_cpus), senders);
    std::fwrite(y.data(), 1, y.size(), f);
    std::fclose(f);
  }
  if (backend_threads > 0) std::printf("backend_threads %u\n", backend_threads);
  if (image) std::printf("output.image on (defaults, delayed subtracted)\n");
  if (!daemon_cpus.empty()) {
    // petdaqd through taskset: DaemonProcess starts what PETDAQD names.
    const char* real = std::getenv("PETDAQD");
    const std::string daemon = real && *real ? real : PETDAQD_BINARY_PATH;
    const auto wrapper = sc.dir / "petdaqd-pinned";
    std::ofstream(wrapper) << "#!/bin/sh\nexec taskset -c " << daemon_cpus << " " << daemon << " \"$@\"\n";
    std::filesystem::permissions(wrapper, std::filesystem::perms::owner_all);
    ::setenv("PETDAQD", wrapper.c_str(), 1);
    std::printf("petdaqd on CPUs %s\n", daemon_cpus.c_str());
  }
  if (!sender_cpus.empty()) {
    if (!set_cpus(sender_cpus)) {
      std::fprintf(stderr, "petdaqd_bench: --sender-cpus %s: not a CPU list this machine has\n",
                   sender_cpus.c_str());
      return 2;
    }
    std::printf("senders and subscribers on CPUs %s\n", sender_cpus.c_str());
  }
  std::printf("loopback ceiling: %u sender thread(s) into %u counting receiver(s), %.1f s...\n",
              senders, senders, seconds);
  std::fflush(stdout);
  const double ceiling_fps = loopback_ceiling_fps(source, senders, seconds);
  std::printf("loopback ceiling: %.2f M frames/s\n", ceiling_fps / 1e6);

  DaemonProcess d(config, sc.dir / "petdaqd.log", {"--backend", backend});
  // The rates on a connection of their own, so that they never queue behind coincidences;
  // a second subscriber takes every coincidence batch (and drops it), as a consumer would.
  Subscriber sub(dc.zmq_endpoint, 0, true, true, std::string(topic::rates));
  Subscriber consumer(dc.zmq_endpoint, 0, true, false, "coinc.");
  // The dead intervals (DESIGN section 6, "Overload"): when the last one came.
  Subscriber dead_sub(dc.zmq_endpoint, 0, true, true, std::string(topic::deadtime));
  if (!sub.wait_rates([](const std::string&) { return true; }, 20s)) {
    std::fprintf(stderr, "petdaqd did not start:\n%s\n", d.log().c_str());
    return 1;
  }
  if (renice_daemon(d.pid()))
    std::printf("petdaqd at nice %d, as its systemd unit runs it\n", kUnitNice);
  else
    std::printf("petdaqd could not be given the systemd unit's nice %d (%s): it runs at this "
                "benchmark's priority\n",
                kUnitNice, std::strerror(errno));
  if (pin_threads) std::printf("petdaqd threads: %s\n", thread_placement(d.pid()).c_str());
  if (sender_nice != kKeepNice) {
    // Tried here once, on this thread, so that a refusal is reported; the senders then take
    // it each (the loopback ceiling above ran at the benchmark's own).
    const int own = getpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()));
    if (setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), sender_nice) == 0) {
      setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), own);
      g_sender_nice = sender_nice;
      std::printf("senders at nice %d\n", sender_nice);
    } else {
      std::printf("senders could not be given nice %d (%s): they run at this benchmark's "
                  "priority\n", sender_nice, std::strerror(errno));
    }
  }
  std::vector<UdpSender> tx(senders);
  std::printf("petdaqd pid %d, %s backend, %u receiver thread(s), %u sender(s), %zu-frame datagrams "
              "(%zu bytes), %.1f s per trial\n",
              d.pid(), backend.c_str(), senders, senders, kFramesPerDatagram,
              kFramesPerDatagram * kFrameBytes, seconds);
  std::fflush(stdout);

  // Quiet: the same counts in two looks 600 ms apart and nothing pending (24 s at most).
  auto settle = [&] {
    std::string last;
    wait_until(
        [&] {
          const std::string now = *sub.last_rates();
          const bool quiet = !last.empty() &&
                             json_counter(now, "rx.frames") == json_counter(last, "rx.frames") &&
                             json_counter(now, "rx.kernel_drops") ==
                                 json_counter(last, "rx.kernel_drops") &&
                             json_number(now, "pending_frames") == 0;
          last = now;
          return quiet;
        },
        24s, 600ms);
    return last;
  };

  auto trial = [&](double rate_fps) {
    Trial t;
    t.rate_fps = rate_fps;
    const std::string before_json = settle();
    const Snapshot before = snapshot(before_json);
    const double datagrams_per_s = rate_fps / kFramesPerDatagram;
    const auto start = std::chrono::steady_clock::now();
    const std::size_t first_message = sub.messages().size();
    const std::uint64_t send_begin_ns = unix_ns();
    // Each sender paces its share of the rate on one schedule for the whole trial, so that the
    // time between its passes (the shift of the next pass's times) is caught up. The senders
    // keep one clock: a sender a whole pass ahead of the slowest waits for it, and at the end
    // the slower ones finish up to the furthest pass, so that every board's scanner time goes
    // on without a gap, as a scanner's boards share one clock. Where the senders cannot keep
    // the schedule they send less than asked: the trial is void (it measured the senders).
    for (auto& sender : tx) {
      sender.take_max_behind();
      sender.take_max_call();
    }
    const host_probe::CpuTimes cpu_before = host_probe::cpu_times();
    const double daemon_cpu_before = host_probe::process_cpu_seconds(d.pid());
    std::uint64_t runq_max_ns = 0;
    std::vector<std::uint64_t> datagrams_sent(senders, 0);
    std::vector<std::atomic<std::uint64_t>> done(senders);
    std::vector<std::uint64_t> waits(senders, 0);
    std::vector<double> shift_ms(senders, 0), sync_ms(senders, 0);
    const auto trial_end = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                       std::chrono::duration<double>(seconds));
    auto send_pass = [&](std::size_t k, bool paced) {
      const double share = static_cast<double>(source.frames(k)) / static_cast<double>(source.frames());
      tx[k].send(source.datagrams(k), dc.udp_port, paced ? datagrams_per_s * share : 0, start,
                 datagrams_sent[k], source.before_batch(k));
      datagrams_sent[k] += source.datagrams(k).size();
      const auto shifting = std::chrono::steady_clock::now();
      source.advance(k);
      shift_ms[k] = std::max(shift_ms[k], std::chrono::duration<double, std::milli>(
                                              std::chrono::steady_clock::now() - shifting).count());
      done[k].fetch_add(1, std::memory_order_release);
      return source.frames(k);
    };
    t.sent_frames = run_senders(senders, seconds, [&](std::size_t k) {
      const std::uint64_t mine = done[k].load(std::memory_order_relaxed);
      const auto syncing = std::chrono::steady_clock::now();
      for (;;) {
        std::uint64_t least = mine;
        for (const auto& d : done) least = std::min(least, d.load(std::memory_order_acquire));
        if (least >= mine || std::chrono::steady_clock::now() >= trial_end) break;
        ++waits[k];
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
      sync_ms[k] = std::max(sync_ms[k], std::chrono::duration<double, std::milli>(
                                            std::chrono::steady_clock::now() - syncing).count());
      if (std::chrono::steady_clock::now() >= trial_end) return std::uint64_t{0};
      return send_pass(k, true);
    }, &runq_max_ns);
    std::uint64_t furthest = 0;
    for (const auto& d : done) furthest = std::max<std::uint64_t>(furthest, d.load());
    for (std::size_t k = 0; k < senders; ++k)
      while (done[k].load() < furthest) t.sent_frames += send_pass(k, false);
    t.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    t.skipped_passes = source.align();  // 0: the senders ended on one pass
    for (auto n : waits) t.sender_waits += n;
    t.sender_shift_ms = *std::max_element(shift_ms.begin(), shift_ms.end());
    t.sender_sync_ms = *std::max_element(sync_ms.begin(), sync_ms.end());
    std::tie(t.steal, t.steal_cpu_max) = host_probe::steal_shares(cpu_before, host_probe::cpu_times());
    t.daemon_cores = (host_probe::process_cpu_seconds(d.pid()) - daemon_cpu_before) / t.seconds;
    t.sender_runq_ms = static_cast<double>(runq_max_ns) / 1e6;
    for (auto& sender : tx) {
      t.sender_behind_ms = std::max(t.sender_behind_ms,
                                    std::chrono::duration<double, std::milli>(sender.take_max_behind()).count());
      t.sender_call_ms = std::max(t.sender_call_ms,
                                  std::chrono::duration<double, std::milli>(sender.take_max_call()).count());
    }
    t.achieved_fps = static_cast<double>(t.sent_frames) / t.seconds;
    const std::uint64_t send_end_ns = unix_ns();
    const std::size_t dead_before_recovery = dead_sub.messages().size();
    const auto overload_end = std::chrono::steady_clock::now();
    const std::uint64_t overload_end_ns = unix_ns();
    if (fixed && recovery_s > 0 && recovery_mfps > 0) {
      // The overload ends: the same senders at the recovery rate, on a schedule of their own.
      std::atomic<bool> done{false};
      std::thread recovery([&] {
        const auto from = std::chrono::steady_clock::now();
        std::vector<std::uint64_t> sent(senders, 0);
        t.sent_frames += run_senders(senders, recovery_s, [&](std::size_t k) {
          const double share = static_cast<double>(source.frames(k)) / static_cast<double>(source.frames());
          tx[k].send(source.datagrams(k), dc.udp_port, recovery_mfps * 1e6 / kFramesPerDatagram * share,
                     from, sent[k], source.before_batch(k));
          sent[k] += source.datagrams(k).size();
          source.advance(k);
          return source.frames(k);
        });
        done = true;
      });
      std::size_t seen = dead_before_recovery;
      auto last = overload_end;
      while (!done) {
        const std::size_t n = dead_sub.messages().size();
        if (n > seen) {
          seen = n;
          last = std::chrono::steady_clock::now();
        }
        std::this_thread::sleep_for(5ms);
      }
      recovery.join();
      source.align();
      t.recovery_seconds = recovery_s;
      t.recovery_ms = seen > dead_before_recovery
                          ? std::chrono::duration<double, std::milli>(last - overload_end).count()
                          : 0.0;
    }
    // Latency is taken from the intervals while frames were coming (send_end_ns): after the
    // last one, the tail waits for the sources to be declared idle, which is not a
    // steady-state figure.
    const std::string after_json = settle();
    const Snapshot after = snapshot(after_json);
    // The worker's phases over the sending: from the document before it to the first one
    // after it.
    const nlohmann::ordered_json phases_from = nlohmann::ordered_json::parse(before_json);
    nlohmann::ordered_json phases_to = nlohmann::ordered_json::parse(after_json);
    std::vector<nlohmann::ordered_json> phases_between;
    for (const auto& m : sub.messages()) {
      nlohmann::ordered_json j = nlohmann::ordered_json::parse(m.body.begin(), m.body.end());
      const auto at = j["time_unix_ns"].get<std::uint64_t>();
      if (at <= phases_from["time_unix_ns"].get<std::uint64_t>()) continue;
      phases_between.push_back(j);
      if (at >= send_end_ns) {
        phases_to = std::move(j);
        break;
      }
    }
    t.received_frames = after.frames - before.frames;
    t.kernel_drops = after.kernel - before.kernel;
    t.ring_full = after.ring - before.ring;
    t.late = after.late - before.late;
    t.refused = after.refused - before.refused;
    t.slices = after.slices - before.slices;
    t.splits = after.splits - before.splits;
    t.exact = after.exact - before.exact;
    t.jumps = after.jumps - before.jumps;
    t.dead = after.dead - before.dead;
    t.pending_full = after.pending_full - before.pending_full;
    t.intervals = after.intervals - before.intervals;
    t.backlog_chunks = after.backlog_chunks - before.backlog_chunks;
    t.loss_intervals = after.loss_intervals - before.loss_intervals;
    t.loss_unconverted = after.loss_unconverted - before.loss_unconverted;
    t.live_fraction = json_number(after_json, "live_fraction_run");
    if (t.recovery_ms >= 0) {
      // Frames lost from 1 s after the overload ended to the end.
      for (const auto& m : sub.messages()) {
        const std::string j(m.body.begin(), m.body.end());
        if (static_cast<std::uint64_t>(json_number(j, "time_unix_ns")) < overload_end_ns + 1'000'000'000ull)
          continue;
        t.recovery_lost = after.lost() - snapshot(j).lost();
        break;
      }
    }
    std::vector<double> p50, p99;
    const auto messages = sub.messages();
    const auto interval_ns = static_cast<std::uint64_t>(dc.rates_interval_ms * 1e6);
    for (std::size_t i = first_message; i < messages.size(); ++i) {
      const std::string j(messages[i].body.begin(), messages[i].body.end());
      const auto at_ns = static_cast<std::uint64_t>(json_number(j, "time_unix_ns"));
      if (at_ns > send_begin_ns + interval_ns && at_ns <= send_end_ns) {
        p50.push_back(json_number(j, "p50"));
        p99.push_back(json_number(j, "p99"));
      }
    }
    if (!p50.empty()) {
      std::sort(p50.begin(), p50.end());
      t.p50_ms = p50[p50.size() / 2];
      t.p99_ms = *std::max_element(p99.begin(), p99.end());
    }
    t.rss_kib = vm_rss_kib(d.pid());
    std::printf("  asked %6.2f M frames/s, sent %6.2f M/s: %s  sent %llu received %llu  kernel_drops %llu "
                "ring_full %llu late %llu time_jump %llu refused %llu  slices %llu split %llu exact_chunks %llu  passes skipped %llu  senders up to %.1f ms behind (longest sendmmsg %.1f ms, pass shift %.1f ms, wait for the slowest %.1f ms; waited for a CPU %.1f ms in all)  petdaqd on %.1f cores  steal %.1f %% (CPU max %.1f %%)  latency p50 %.2f ms p99 %.2f ms  VmRSS %.1f MiB\n",
                rate_fps / 1e6, t.achieved_fps / 1e6, t.lossless() ? "zero loss" : "LOSS     ",
                static_cast<unsigned long long>(t.sent_frames),
                static_cast<unsigned long long>(t.received_frames),
                static_cast<unsigned long long>(t.kernel_drops),
                static_cast<unsigned long long>(t.ring_full), static_cast<unsigned long long>(t.late),
                static_cast<unsigned long long>(t.jumps),
                static_cast<unsigned long long>(t.refused), static_cast<unsigned long long>(t.slices),
                static_cast<unsigned long long>(t.splits), static_cast<unsigned long long>(t.exact),
                static_cast<unsigned long long>(t.skipped_passes), t.sender_behind_ms, t.sender_call_ms,
                t.sender_shift_ms, t.sender_sync_ms, t.sender_runq_ms, t.daemon_cores, 100 * t.steal, 100 * t.steal_cpu_max, t.p50_ms, t.p99_ms,
                t.rss_kib / 1024.0);
    print_phases(phases_from, phases_to, phases_between);
    std::fflush(stdout);
    return t;
  };

  // Every source sends once before the trials: a source holds the horizon only once it has
  // sent, so senders that start at different times would make the first trial's first
  // frames late; and the backend's first slices pay for its start-up.
  run_senders(senders, 0.5, [&](std::size_t k) {
    tx[k].send(source.datagrams(k), dc.udp_port, 20e6 / kFramesPerDatagram / senders, std::nullopt, 0,
               source.before_batch(k));
    source.advance(k);
    return source.frames(k);
  });
  source.align();
  settle();

  if (fixed) {
    // No search: `trials` trials at each rate, one row each (and one TRIAL line of JSON each,
    // for scripts).
    std::vector<Trial> done;
    for (double r : rates_mfps)
      for (int i = 0; i < trials; ++i) done.push_back(trial(r * 1e6));
    d.signal(SIGTERM);
    const auto status = d.wait_for(20s);
    std::printf("\n%u sender(s), %s backend, %.1f s per trial; loopback ceiling %.2f M frames/s\n",
                senders, backend.c_str(), seconds, ceiling_fps / 1e6);
    std::printf("%5s %8s %8s %9s %7s %7s %9s %9s %9s %8s %8s %6s %8s  %s\n", "trial", "asked_M",
                "sent_M", "taken_M/s", "lost_%", "dead_%", "ring_full", "kernel", "late+jump",
                "p50_ms", "p99_ms", "passes", "recov_ms", "verdict");
    for (std::size_t i = 0; i < done.size(); ++i) {
      const Trial& t = done[i];
      const double sent = static_cast<double>(t.sent_frames);
      const char* verdict = t.void_trial() ? "VOID (the senders fell short)"
                            : t.lossless() ? "zero loss"
                                           : "LOSS";
      std::printf("%5zu %8.2f %8.2f %9.2f %7.2f %7.2f %9llu %9llu %9llu %8.2f %8.2f %6llu %8.0f  %s\n",
                  i + 1, t.rate_fps / 1e6, t.achieved_fps / 1e6,
                  t.taken_fps() / 1e6, 100.0 * t.lost_fraction(),
                  sent > 0 ? 100.0 * static_cast<double>(t.dead) / sent : 0.0,
                  static_cast<unsigned long long>(t.ring_full),
                  static_cast<unsigned long long>(t.kernel_drops),
                  static_cast<unsigned long long>(t.late + t.jumps), t.p50_ms, t.p99_ms,
                  static_cast<unsigned long long>(t.skipped_passes), t.recovery_ms, verdict);
    }
    for (const Trial& t : done) {
      nlohmann::ordered_json j = {
          {"asked_fps", t.rate_fps},        {"sent_fps", t.achieved_fps},
          {"seconds", t.seconds},           {"sent", t.sent_frames},
          {"received", t.received_frames},  {"taken", t.taken()},
          {"taken_fps", t.taken_fps()},
          {"recovery_seconds", t.recovery_seconds},
          {"lost_fraction", t.lost_fraction()},
          {"dead", t.dead},                 {"dead_intervals", t.intervals},
          {"backlog_chunks", t.backlog_chunks},
          {"loss_intervals", t.loss_intervals}, {"loss_unconverted", t.loss_unconverted},
          {"live_fraction_run", t.live_fraction},
          {"ring_full", t.ring_full},       {"kernel_drops", t.kernel_drops},
          {"late", t.late},                 {"time_jump", t.jumps},
          {"pending_full", t.pending_full}, {"p50_ms", t.p50_ms},
          {"p99_ms", t.p99_ms},             {"skipped_passes", t.skipped_passes},
          {"void", t.void_trial()},         {"sender_waits", t.sender_waits},
          {"sender_behind_ms", t.sender_behind_ms}, {"sender_call_ms", t.sender_call_ms},
          {"sender_shift_ms", t.sender_shift_ms}, {"sender_sync_ms", t.sender_sync_ms},
          {"sender_runq_ms", t.sender_runq_ms}, {"daemon_cores", t.daemon_cores}, {"lossless", t.lossless()},
          {"steal", t.steal},               {"steal_cpu_max", t.steal_cpu_max},
          {"recovery_ms", t.recovery_ms},   {"recovery_lost_after_1s", t.recovery_lost},
          {"ceiling_fps", ceiling_fps}};
      std::printf("TRIAL %s\n", j.dump().c_str());
    }
    std::printf("petdaqd exit %d\n", status.value_or(-1));
    return 0;
  }

  std::optional<Trial> best;
  double lo = 0, hi = 0;
  for (double r = start_mfps * 1e6; r <= max_mfps * 1e6; r *= 2) {
    const Trial t = trial(r);
    // A sender that cannot reach the asked rate measures the sender, not the daemon.
    if (t.lossless() && t.achieved_fps >= 0.85 * r) {
      best = t;
      lo = r;
    } else {
      hi = r;
      break;
    }
  }
  for (int i = 0; i < bisect_steps && lo > 0 && hi > 0; ++i) {
    const double mid = (lo + hi) / 2;
    const Trial t = trial(mid);
    if (t.lossless() && t.achieved_fps >= 0.85 * mid) {
      best = t;
      lo = mid;
    } else {
      hi = mid;
    }
  }
  d.signal(SIGTERM);
  const auto status = d.wait_for(20s);
  char cpu[256] = "unknown";
  if (std::FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (!std::fgets(cpu, sizeof cpu, f)) cpu[0] = 0;
    std::fclose(f);
  }
  std::printf("load average at the end: %s", cpu);
  // The whole run's phases, as petdaqd logged them at exit.
  const std::string log = d.log();
  if (const auto at = log.find("worker phases: "); at != std::string::npos)
    std::printf("petdaqd %s\n", log.substr(at, log.find('\n', at) - at).c_str());
  const double target = backend == "gpu" ? kGpuTargetFramesPerS : kCpuTargetFramesPerS;
  if (!best) {
    std::printf("no rate without loss from %.2f M frames/s\n", start_mfps);
    return 1;
  }
  std::printf("highest zero-loss rate: %.2f M frames/s (target %.0f M frames/s, ratio %.2f; "
              "loopback ceiling of the same %u sender(s) %.2f M frames/s, ratio %.2f); "
              "slice latency p50 %.2f ms, p99 %.2f ms; VmRSS %.1f MiB; petdaqd exit %d\n",
              best->achieved_fps / 1e6, target / 1e6, best->achieved_fps / target, senders,
              ceiling_fps / 1e6, best->achieved_fps / ceiling_fps, best->p50_ms, best->p99_ms,
              best->rss_kib / 1024.0, status.value_or(-1));
  return 0;
}

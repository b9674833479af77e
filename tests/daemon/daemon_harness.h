// Test harness for petdaqd end to end: runs the daemon as a child process on a small test
// scanner, sends frames over UDP (raw or sequenced framing), subscribes over ZeroMQ and
// reads the published batches and `rates` documents.
#pragma once

#include <chrono>
#include <utility>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "core/settings.h"
#include "proto/datagram.h"
#include "proto/frame.h"
#include "proto/records.h"
#include "proto/topics.h"
#include "tests/support/ports.h"
#include "tests/support/process.h"

namespace petdaq::test {

// Extra YAML appended to the test scanner's config: the daemon's input and output.
struct DaemonConfig {
  std::uint16_t udp_port = 0;
  std::string zmq_endpoint;  // ipc:// in the test folder, unique per test
  Framing framing = Framing::raw;
  std::string allowed_sources = "127.0.0.0/8";
  std::uint64_t ring_chunk_bytes = 1u << 20;
  std::uint32_t ring_chunks = 32;
  std::uint64_t receive_buffer_bytes = 8u << 20;
  std::int32_t send_hwm = 100000;
  double rates_interval_ms = 200;
  std::uint32_t receiver_threads = 1;
  std::filesystem::path file_directory;  // list-mode file sink there (empty: off)
  std::uint64_t file_rotate_bytes = 1u << 20;
  std::string input_extra;  // more keys of the input section ("  key: value\n")
  std::string output_extra;  // more keys of the output section ("  key: value\n")
  std::string extra;        // more YAML sections
};
std::string daemon_yaml(const DaemonConfig& c);

// petdaqd as a child process (tests/support/process.h), stdout and stderr in one log file.
// The PETDAQD environment variable names another binary (a build moved to another machine).
class DaemonProcess : public Child {
 public:
  DaemonProcess(const std::filesystem::path& config, const std::filesystem::path& log,
                const std::vector<std::string>& extra_args = {});
  std::string log() const;

 private:
  std::filesystem::path log_;
};

// Runs petdaqd to completion (e.g. --check-config) and returns its exit status and log;
// a daemon still running after 20 s is killed (status 128 + SIGKILL).
std::pair<int, std::string> run_daemon_to_exit(const std::vector<std::string>& args,
                                               const std::filesystem::path& log);

struct Published {
  std::string topic;
  MessageHeader header;
  std::vector<std::uint8_t> body;
};

// A CURVE client's keys (Z85) and the server's public key.
struct CurveClient {
  std::string server_public;
  std::string public_key;
  std::string secret_key;
};

class Subscriber {
 public:
  // keep_batches = false keeps only the `rates` documents (long benchmarks).
  // `topic`: the subscription prefix ("" for everything).
  explicit Subscriber(const std::string& endpoint, int rcvhwm = 0, bool read = true,
                      bool keep_batches = true, const std::string& topic = "",
                      std::optional<CurveClient> curve = std::nullopt);
  ~Subscriber();
  // Waits until a `rates` document satisfies pred; returns it (or nullopt on timeout).
  std::optional<std::string> wait_rates(const std::function<bool(const std::string&)>& pred,
                                        std::chrono::milliseconds timeout);
  std::vector<Published> messages();
  std::optional<std::string> last_rates();
  // Once the daemon has exited: waits until the subscriber has seen its connection close and
  // has then found nothing more to receive, so messages() holds everything the daemon sent
  // (its last `rates` document included). False on timeout.
  bool wait_drained(std::chrono::milliseconds timeout);

 private:
  void run(std::string endpoint, int rcvhwm, std::string topic, std::optional<CurveClient> curve);
  zmq::context_t context_{1};
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<Published> messages_;
  std::optional<std::string> last_rates_;
  bool drained_ = false;  // disconnected, and a receive found nothing after that
  bool stop_ = false;
  bool read_;
  bool keep_batches_;
  std::thread thread_;
};

// A number in a JSON document by key ("rx.frames", "run_id", "p99"); the first occurrence.
double json_number(const std::string& json, const std::string& key);
std::uint64_t json_counter(const std::string& json, const std::string& name);

using Datagram = std::vector<std::uint8_t>;

// Splits frames into per-source datagrams (source = bdm byte % sources), at most
// frames_per_datagram each, frames in their given order, datagrams in the order of their
// first frame's time (the way boards interleave); sequenced framing numbers each source's
// datagrams from first_sequence.
std::vector<Datagram> make_datagrams(const std::vector<RawFrame>& frames, Framing framing,
                                     std::size_t frames_per_datagram, std::uint32_t sources,
                                     std::uint32_t first_sequence = 0);

class UdpSender {
 public:
  explicit UdpSender(const std::string& bind_address = "127.0.0.1");
  ~UdpSender();
  // Sends with sendmmsg; datagrams_per_s = 0 sends as fast as the socket takes them. A paced
  // send that continues an earlier one keeps its schedule: `paced_from` is when the first of
  // them began and `paced_before` the datagrams they sent, so time spent between calls is
  // caught up instead of lost.
  // `before_batch(first, n)`, if given, is called right before datagrams [first, first + n)
  // are sent (the caller may still change their contents).
  using BeforeBatch = std::function<void(std::size_t first, std::size_t n)>;
  void send(const std::vector<Datagram>& datagrams, std::uint16_t port, double datagrams_per_s = 0,
            std::optional<std::chrono::steady_clock::time_point> paced_from = std::nullopt,
            std::uint64_t paced_before = 0, const BeforeBatch& before_batch = {});
  void send_one(const Datagram& d, std::uint16_t port);
  // How far behind its schedule a paced send has been at most since the last call (the
  // time between a batch's due time and its sending): a sender that falls behind and
  // catches up sends a burst, and holds the horizon back for every other sender's boards.
  std::chrono::nanoseconds take_max_behind() { return std::exchange(max_behind_, {}); }
  // The longest single sendmmsg call since the last call (the kernel's loopback delivery runs
  // inside it).
  std::chrono::nanoseconds take_max_call() { return std::exchange(max_call_, {}); }

 private:
  int fd_ = -1;
  std::chrono::nanoseconds max_behind_{0};
  std::chrono::nanoseconds max_call_{0};
};

// The coincidence records of one kind, in publication order, with the checks every
// subscriber can make: message ids consecutive from 0, batches tiling time within a run.
struct Stream {
  std::vector<CoincRecord> records;
  std::size_t messages = 0;
  bool ids_consecutive = true;
  bool tiles_time = true;
  std::vector<std::uint64_t> run_ids;
};
Stream collect(const std::vector<Published>& messages, MessageKind kind);

// Resident memory of a process, from /proc/<pid>/status.
std::uint64_t vm_rss_kib(pid_t pid);
// The CPUs each named thread of a process may run on, by name (comm), as the kernel lists
// them (/proc/<pid>/task/<tid>/status, Cpus_allowed_list: "8", "0-15").
std::map<std::string, std::string> allowed_cpus_by_thread(pid_t pid);

}  // namespace petdaq::test

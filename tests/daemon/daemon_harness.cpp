#include "daemon_harness.h"

#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

#include <zmq_addon.hpp>

#include "tests/support/files.h"

namespace petdaq::test {

using namespace std::chrono_literals;

std::string daemon_yaml(const DaemonConfig& c) {
  std::ostringstream y;
  y << "input:\n"
    << "  endpoints: [\"127.0.0.1:" << c.udp_port << "\"]\n"
    << "  framing: " << to_string(c.framing) << "\n"
    << "  allowed_sources: [\"" << c.allowed_sources << "\"]\n"
    << "  receive_buffer_bytes: " << c.receive_buffer_bytes << "\n"
    << "  flush_ms: 2\n"
    << "  receiver_threads: " << c.receiver_threads << "\n"
    << "  ring_chunk_bytes: " << c.ring_chunk_bytes << "\n"
    << "  ring_chunks: " << c.ring_chunks << "\n"
    << c.input_extra
    << "output:\n"
    << "  zmq:\n"
    << "    endpoint: \"" << c.zmq_endpoint << "\"\n"
    << "    send_hwm: " << c.send_hwm << "\n"
    << "  rates_interval_ms: " << c.rates_interval_ms << "\n"
    << c.output_extra;
  if (!c.file_directory.empty())
    y << "  file:\n"
      << "    enabled: true\n"
      << "    directory: \"" << c.file_directory.string() << "\"\n"
      << "    rotate_bytes: " << c.file_rotate_bytes << "\n";
  y
    << "backend: cpu\n"
    << c.extra;
  return y.str();
}

// ---- the daemon process ----

namespace {
std::vector<std::string> daemon_argv(const std::vector<std::string>& args) {
  const char* other = std::getenv("PETDAQD");
  std::vector<std::string> argv = {other && *other ? other : PETDAQD_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

std::vector<std::string> with_config(const std::filesystem::path& config,
                                     const std::vector<std::string>& extra_args) {
  std::vector<std::string> args = {"--config", config.string()};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  return daemon_argv(args);
}
}  // namespace

DaemonProcess::DaemonProcess(const std::filesystem::path& config, const std::filesystem::path& log,
                             const std::vector<std::string>& extra_args)
    : Child(with_config(config, extra_args), log, log), log_(log) {}

std::string DaemonProcess::log() const { return read_text(log_); }

std::pair<int, std::string> run_daemon_to_exit(const std::vector<std::string>& args,
                                               const std::filesystem::path& log) {
  Child daemon(daemon_argv(args), log, log);
  std::optional<int> status = daemon.wait_for(20s);
  if (!status) {
    daemon.signal(SIGKILL);
    status = daemon.wait_for(20s);
  }
  return {status.value_or(128 + SIGKILL), read_text(log)};
}

// ---- subscriber ----

Subscriber::Subscriber(const std::string& endpoint, int rcvhwm, bool read, bool keep_batches,
                       const std::string& topic, std::optional<CurveClient> curve)
    : read_(read), keep_batches_(keep_batches) {
  thread_ = std::thread(
      [this, endpoint, rcvhwm, topic, curve] { run(endpoint, rcvhwm, topic, curve); });
}

Subscriber::~Subscriber() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  thread_.join();
}

namespace {
// Whether the subscriber's connection is up, from the socket's monitor events. libzmq reports
// a disconnection after it has queued every message read before the peer closed.
class ConnectionMonitor : public zmq::monitor_t {
 public:
  bool connected = false;
  bool ever_connected = false;
  void on_event_connected(const zmq_event_t&, const char*) override {
    connected = ever_connected = true;
  }
  void on_event_disconnected(const zmq_event_t&, const char*) override { connected = false; }
};
}  // namespace

void Subscriber::run(std::string endpoint, int rcvhwm, std::string topic,
                     std::optional<CurveClient> curve) {
  zmq::socket_t sub(context_, zmq::socket_type::sub);
  ConnectionMonitor monitor;
  monitor.init(sub, "inproc://subscriber-monitor",
               ZMQ_EVENT_CONNECTED | ZMQ_EVENT_DISCONNECTED);
  if (curve) {
    sub.set(zmq::sockopt::curve_serverkey, curve->server_public);
    sub.set(zmq::sockopt::curve_publickey, curve->public_key);
    sub.set(zmq::sockopt::curve_secretkey, curve->secret_key);
  }
  if (rcvhwm > 0) {
    sub.set(zmq::sockopt::rcvhwm, rcvhwm);
    sub.set(zmq::sockopt::rcvbuf, 4096);
  }
  sub.set(zmq::sockopt::subscribe, topic);
  sub.set(zmq::sockopt::rcvtimeo, 20);
  sub.set(zmq::sockopt::linger, 0);
  sub.connect(endpoint);
  for (;;) {
    {
      std::lock_guard lock(mutex_);
      if (stop_) return;
    }
    if (!read_) {
      // A subscriber that does not read, on purpose: look again for stop_ a little later.
      std::this_thread::sleep_for(20ms);
      continue;
    }
    while (monitor.check_event(0)) {
    }
    std::vector<zmq::message_t> parts;
    const auto got = zmq::recv_multipart(sub, std::back_inserter(parts));
    if (!got) {
      std::lock_guard lock(mutex_);
      drained_ = monitor.ever_connected && !monitor.connected;
      if (drained_) cv_.notify_all();
      continue;
    }
    if (parts.size() != 3 || parts[1].size() != kMessageHeaderBytes) {
      std::lock_guard lock(mutex_);
      messages_.push_back({"<malformed>", {}, {}});
      continue;
    }
    Published p;
    p.topic = parts[0].to_string();
    if (!keep_batches_ && p.topic != topic::rates) continue;
    p.header = decode_message_header(parts[1].data<std::uint8_t>());
    p.body.assign(parts[2].data<std::uint8_t>(), parts[2].data<std::uint8_t>() + parts[2].size());
    std::lock_guard lock(mutex_);
    if (p.topic == topic::rates) last_rates_ = std::string(p.body.begin(), p.body.end());
    messages_.push_back(std::move(p));
    cv_.notify_all();
  }
}

std::optional<std::string> Subscriber::wait_rates(
    const std::function<bool(const std::string&)>& pred, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  const auto until = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (last_rates_ && pred(*last_rates_)) return last_rates_;
    if (cv_.wait_until(lock, until) == std::cv_status::timeout) {
      if (last_rates_ && pred(*last_rates_)) return last_rates_;
      return std::nullopt;
    }
  }
}

bool Subscriber::wait_drained(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  return cv_.wait_for(lock, timeout, [this] { return drained_; });
}

std::vector<Published> Subscriber::messages() {
  std::lock_guard lock(mutex_);
  return messages_;
}

std::optional<std::string> Subscriber::last_rates() {
  std::lock_guard lock(mutex_);
  return last_rates_;
}

namespace {
// The first member named `key`, depth first (the rates document's names are unique).
const nlohmann::json* find_member(const nlohmann::json& j, const std::string& key) {
  if (!j.is_object()) return nullptr;
  if (const auto it = j.find(key); it != j.end()) return &*it;
  for (const auto& [name, value] : j.items())
    if (const nlohmann::json* found = find_member(value, key)) return found;
  return nullptr;
}
}  // namespace

double json_number(const std::string& json, const std::string& key) {
  const nlohmann::json doc = nlohmann::json::parse(json);
  const nlohmann::json* v = find_member(doc, key);
  if (!v || !v->is_number()) throw std::runtime_error("no number " + key + " in " + json);
  return v->get<double>();
}

std::uint64_t json_counter(const std::string& json, const std::string& name) {
  const nlohmann::json doc = nlohmann::json::parse(json);
  const auto& counters = doc.at("counters");
  if (!counters.contains(name)) throw std::runtime_error("no counter " + name);
  return counters.at(name).get<std::uint64_t>();
}

// ---- sending ----

std::vector<Datagram> make_datagrams(const std::vector<RawFrame>& frames, Framing framing,
                                     std::size_t frames_per_datagram, std::uint32_t sources,
                                     std::uint32_t first_sequence) {
  std::vector<std::vector<RawFrame>> by_source(sources);
  for (const RawFrame& f : frames) by_source[frame_bdm(f.bytes) % sources].push_back(f);
  struct Pending {
    std::uint64_t first_time;
    std::uint32_t source;
    std::size_t begin, end;
  };
  std::vector<Pending> order;
  for (std::uint32_t s = 0; s < sources; ++s)
    for (std::size_t i = 0; i < by_source[s].size(); i += frames_per_datagram)
      order.push_back({frame_time(by_source[s][i].bytes), s, i,
                       std::min(by_source[s].size(), i + frames_per_datagram)});
  std::stable_sort(order.begin(), order.end(),
                   [](const Pending& a, const Pending& b) { return a.first_time < b.first_time; });
  std::vector<std::uint32_t> sequence(sources, first_sequence);
  std::vector<Datagram> out;
  out.reserve(order.size());
  for (const Pending& p : order) {
    const std::size_t n = p.end - p.begin;
    Datagram d;
    std::size_t at = 0;
    if (framing == Framing::sequenced) {
      d.resize(kSequencedHeaderBytes + n * kFrameBytes);
      SequencedHeader h;
      h.source_id = static_cast<std::uint16_t>(p.source);
      h.sequence = sequence[p.source]++;
      h.frame_count = static_cast<std::uint32_t>(n);
      encode_sequenced_header(h, d.data());
      at = kSequencedHeaderBytes;
    } else {
      d.resize(n * kFrameBytes);
    }
    std::memcpy(d.data() + at, by_source[p.source].data() + p.begin, n * kFrameBytes);
    out.push_back(std::move(d));
  }
  return out;
}

UdpSender::UdpSender(const std::string& bind_address) {
  fd_ = socket(AF_INET, SOCK_DGRAM, 0);
  int big = 16 << 20;
  setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  inet_pton(AF_INET, bind_address.c_str(), &a.sin_addr);
  if (bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
    throw std::runtime_error("cannot bind sender to " + bind_address + ": " + std::strerror(errno));
}

UdpSender::~UdpSender() { close(fd_); }

void UdpSender::send(const std::vector<Datagram>& datagrams, std::uint16_t port,
                     double datagrams_per_s,
                     std::optional<std::chrono::steady_clock::time_point> paced_from,
                     std::uint64_t paced_before, const BeforeBatch& before_batch) {
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  constexpr std::size_t kBatch = 32;
  std::vector<mmsghdr> msgs(kBatch);
  std::vector<iovec> iovs(kBatch);
  const auto start = paced_from.value_or(std::chrono::steady_clock::now());
  std::size_t sent = 0;
  while (sent < datagrams.size()) {
    if (datagrams_per_s > 0) {
      const auto due = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                   std::chrono::duration<double>(
                                       static_cast<double>(paced_before + sent) / datagrams_per_s));
      std::this_thread::sleep_until(due);
      max_behind_ = std::max(max_behind_, std::chrono::duration_cast<std::chrono::nanoseconds>(
                                              std::chrono::steady_clock::now() - due));
    }
    const std::size_t n = std::min(kBatch, datagrams.size() - sent);
    if (before_batch) before_batch(sent, n);
    for (std::size_t i = 0; i < n; ++i) {
      const Datagram& d = datagrams[sent + i];
      iovs[i] = {const_cast<std::uint8_t*>(d.data()), d.size()};
      msgs[i] = {};
      msgs[i].msg_hdr.msg_name = &to;
      msgs[i].msg_hdr.msg_namelen = sizeof to;
      msgs[i].msg_hdr.msg_iov = &iovs[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
    }
    const auto called = std::chrono::steady_clock::now();
    const int r = sendmmsg(fd_, msgs.data(), static_cast<unsigned>(n), 0);
    max_call_ = std::max(max_call_, std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now() - called));
    if (r < 0) {
      if (errno == EINTR || errno == ENOBUFS || errno == EAGAIN) continue;
      throw std::runtime_error(std::string("sendmmsg: ") + std::strerror(errno));
    }
    sent += static_cast<std::size_t>(r);
  }
}

void UdpSender::send_one(const Datagram& d, std::uint16_t port) { send({d}, port); }

Stream collect(const std::vector<Published>& messages, MessageKind kind) {
  Stream s;
  const std::string_view name = kind == MessageKind::prompts ? topic::prompts : topic::delayed;
  std::optional<MessageHeader> prev;
  for (const Published& p : messages) {
    if (p.topic != name) continue;
    const MessageHeader& h = p.header;
    if (h.message_id != s.messages) s.ids_consecutive = false;
    if (prev && prev->run_id == h.run_id && prev->t_end != h.t_begin) s.tiles_time = false;
    if (s.run_ids.empty() || s.run_ids.back() != h.run_id) s.run_ids.push_back(h.run_id);
    ++s.messages;
    for (std::size_t at = 0; at + sizeof(CoincRecord) <= p.body.size(); at += sizeof(CoincRecord))
      s.records.push_back(decode_record(p.body.data() + at));
    prev = h;
  }
  return s;
}

std::map<std::string, std::string> allowed_cpus_by_thread(pid_t pid) {
  std::map<std::string, std::string> out;
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::string name, line;
    std::getline(std::ifstream(task.path() / "comm"), name);
    std::ifstream status(task.path() / "status");
    while (std::getline(status, line))
      if (line.rfind("Cpus_allowed_list:", 0) == 0) out[name] = line.substr(line.find_first_not_of(" \t", 18));
  }
  return out;
}

std::uint64_t vm_rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::strtoull(line.c_str() + 6, nullptr, 10);
  return 0;
}

}  // namespace petdaq::test

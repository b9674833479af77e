#include "daemon/preflight.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <thread>

#include <fmt/format.h>
#include <zmq.hpp>

#include "backends/select_backend.h"
#include "daemon/curve.h"
#include "daemon/file_sink.h"
#include "daemon/publisher.h"
#include "daemon/raw_sink.h"
#include "daemon/worker_views.h"
#include "core/histograms.h"
#include "core/message_arena.h"
#include "core/slicer.h"
#include "core/thread_placement.h"
#include "backends/select_backend.h"
#include "proto/frame.h"
#include "proto/records.h"

namespace petdaq::daemon {

namespace {

// RAII for a probe socket.
struct Fd {
  int fd;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

// Binds a probe UDP socket; returns errno (0 when it bound).
int probe_udp_bind(const UdpEndpoint& e) {
  Fd s(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (s.fd < 0) return errno;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(e.address);
  a.sin_port = htons(e.port);
  if (::bind(s.fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) return errno;
  return 0;
}

std::uint64_t read_u64_file(const std::string& path, std::uint64_t fallback) {
  std::ifstream f(path);
  std::string v;
  if (!(f >> v) || v == "max") return fallback;
  std::uint64_t n = 0;
  const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  return ec == std::errc() ? n : fallback;
}

// The cgroup (v2) this process runs in, e.g. "/system.slice/petdaqd.service".
std::string own_cgroup() {
  std::ifstream f("/proc/self/cgroup");
  std::string line;
  while (std::getline(f, line))
    if (line.starts_with("0::")) return line.substr(3);
  return "";
}

std::string gib(std::uint64_t bytes) { return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1u << 30)); }

void check_input(const Settings& s, std::vector<Problem>& out) {
  for (std::size_t i = 0; i < s.input.endpoints.size(); ++i) {
    const std::string key = fmt::format("input.endpoints[{}]", i);
    const std::string text = s.input.endpoints[i].to_string();
    const int err = probe_udp_bind(s.input.endpoints[i]);
    if (err == EADDRINUSE)
      out.push_back({key + ": UDP " + text + " is already bound by another process (another petdaqd?)",
                     true});
    else if (err != 0)
      out.push_back({key + ": cannot bind UDP " + text + ": " + std::strerror(err)});
  }
}

void check_zmq(const Settings& s, std::vector<Problem>& out) {
  const std::string& ep = s.output.zmq.endpoint;
  const std::string key = "output.zmq.endpoint";
  if (ep.starts_with("ipc://")) {
    const std::filesystem::path path = ep.substr(6);
    if (path.empty() || path.native().size() >= sizeof(sockaddr_un{}.sun_path)) {
      out.push_back({key + ": '" + ep + "': the socket path must be 1.." +
                     std::to_string(sizeof(sockaddr_un{}.sun_path) - 1) + " characters"});
      return;
    }
    const auto dir = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec))
      out.push_back({key + ": '" + ep + "': directory " + dir.string() + " does not exist"});
    else if (access(dir.c_str(), W_OK | X_OK) != 0)
      out.push_back({key + ": '" + ep + "': directory " + dir.string() + " is not writable"});
    else if (auto holder = ipc_endpoint_in_use(ep))
      out.push_back({key + ": " + *holder, true});
    return;
  }
  if (!ep.starts_with("tcp://")) {
    out.push_back({key + ": '" + ep + "': must be tcp://ADDRESS:PORT or ipc://PATH"});
    return;
  }
  // libzmq's own parser and resolver decide: bind a probe and let it go at once.
  try {
    zmq::context_t context(1);
    zmq::socket_t probe(context, zmq::socket_type::pub);
    probe.set(zmq::sockopt::linger, 0);
    probe.bind(ep);
  } catch (const zmq::error_t& e) {
    out.push_back({key + ": cannot bind '" + ep + "': " + e.what() +
                       (e.num() == EADDRINUSE ? " (another process holds it)" : ""),
                   e.num() == EADDRINUSE});
  }
}

// output.metrics.listen: a TCP socket bound there and let go (the exposer binds with
// SO_REUSEADDR too, so a socket in TIME_WAIT is no problem, a listener is).
void check_metrics(const Settings& s, std::vector<Problem>& out) {
  const std::string& listen = s.output.metrics.listen;
  if (listen.empty()) return;
  const std::string key = "output.metrics.listen";
  const auto colon = listen.rfind(':');
  const std::string host = listen.substr(0, colon);
  const std::string port = listen.substr(colon + 1);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    out.push_back({key + ": cannot resolve '" + listen + "': " + ::gai_strerror(rc)});
    return;
  }
  const std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owner(found, &::freeaddrinfo);
  Fd fd(::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const int one = 1;
  if (fd.fd >= 0) ::setsockopt(fd.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (fd.fd < 0 || ::bind(fd.fd, found->ai_addr, found->ai_addrlen) != 0 ||
      ::listen(fd.fd, 1) != 0) {
    const int err = errno;
    out.push_back({key + ": cannot listen on '" + listen + "': " + std::strerror(err) +
                       (err == EADDRINUSE ? " (another process holds it)" : ""),
                   err == EADDRINUSE});
  }
}

void check_curve(const Settings& s, std::vector<Problem>& out) {
  if (s.output.zmq.curve_secret_key_file.empty()) return;
  try {
    (void)load_curve_keys(s.output.zmq);
  } catch (const std::exception& e) {
    out.push_back({e.what()});
  }
}

void check_file_sink(const Settings& s, std::vector<Problem>& out) {
  if (!s.output.file.enabled) return;
  const auto& dir = s.output.file.directory;
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec))
    out.push_back({"output.file.directory: " + dir.string() + " does not exist"});
  else if (!std::filesystem::is_directory(dir, ec))
    out.push_back({"output.file.directory: " + dir.string() + " is not a directory"});
  else if (access(dir.c_str(), W_OK | X_OK) != 0)
    out.push_back({"output.file.directory: " + dir.string() + " is not writable by this user"});
}

// output.catalogue.path: its directory must exist and be writable (SQLite adds -wal, -shm
// and the lock file beside the database).
void check_catalogue(const Settings& s, std::vector<Problem>& out) {
  const auto& path = s.output.catalogue.path;
  if (path.empty()) return;
  const auto dir = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    out.push_back({"output.catalogue.path: directory " + dir.string() + " does not exist"});
  else if (access(dir.c_str(), W_OK | X_OK) != 0)
    out.push_back({"output.catalogue.path: directory " + dir.string() + " is not writable by this user"});
}

void check_backend(BackendKind backend, std::vector<Problem>& out) {
  if (backend != BackendKind::gpu) return;
  std::string reason;
  if (!gpu_backend_usable(reason)) out.push_back({"backend: gpu asked for but not usable: " + reason});
}

}  // namespace

void check_cpus(const Settings& s, std::vector<Problem>& out) {
  std::vector<int> cpus;
  auto check = [&](const char* key, const std::string& list) {
    if (!parse_cpu_list(list, cpus)) {
      out.push_back({fmt::format("{}: '{}' is not a CPU list such as 8-11,14", key, list)});
      return;
    }
    const std::vector<int> refused = cpus_not_allowed(cpus);
    if (!refused.empty())
      out.push_back({fmt::format("{}: CPU {} is not one petdaqd may run on (this machine's CPUs "
                                 "0-{}, less any that taskset, CPUAffinity= or a cpuset takes away)",
                                 key, refused.front(), std::thread::hardware_concurrency() - 1)});
  };
  check("cpus.receivers", s.cpus.receivers);
  check("cpus.worker", s.cpus.worker);
  check("cpus.backend", s.cpus.backend);
}

std::optional<std::string> ipc_endpoint_in_use(const std::string& endpoint) {
  if (!endpoint.starts_with("ipc://")) return std::nullopt;
  const std::string path = endpoint.substr(6);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof a.sun_path) return std::nullopt;
  std::memcpy(a.sun_path, path.data(), path.size());
  Fd s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (s.fd < 0) return std::nullopt;
  if (::connect(s.fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) return std::nullopt;
  return "ipc endpoint " + endpoint + " is served by another process (another petdaqd?)";
}

std::optional<std::string> udp_port_in_use(const UdpEndpoint& endpoint) {
  if (endpoint.port == 0 || probe_udp_bind(endpoint) != EADDRINUSE) return std::nullopt;
  return "UDP " + endpoint.to_string() + " is already bound by another process (another petdaqd?)";
}

MemoryPlan memory_plan(const Settings& s, std::optional<BackendKind> kind) {
  MemoryPlan p;
  p.ring_bytes = s.input.ring_chunk_bytes * s.input.ring_chunks;
  // As each owner reports it. The message arena, and the bodies libzmq holds outside it.
  p.message_bytes = MessageArena::memory_bytes(s);
  p.held_bytes = Publisher::memory_bytes(s);
  // The worker's live views (their encoded bodies and the image's window; the backend's
  // histograms and image are the engine's), the raw capture's and the list-mode file's
  // write buffers.
  p.output_bytes = LiveHistograms::memory_bytes(s) + LiveImage::memory_bytes(s) +
                   RawSink::memory_bytes(s) + FileSink::memory_bytes(s);
  // The backend (the CPU's store, take, stages, outputs and threads; the GPU's pinned buffers
  // and host copies) and the slicer.
  p.engine_bytes = backend_host_bytes(kind.value_or(s.backend), s) +
                   Slicer::memory_bytes(s, s.stream.max_slice_frames);
  return p;
}

std::uint64_t memory_limit_bytes(std::string& source) {
  std::uint64_t limit = static_cast<std::uint64_t>(sysconf(_SC_PHYS_PAGES)) *
                        static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
  source = "physical memory";
  const std::string cg = own_cgroup();
  if (!cg.empty()) {
    const std::uint64_t max = read_u64_file("/sys/fs/cgroup" + cg + "/memory.max",
                                            std::numeric_limits<std::uint64_t>::max());
    if (max < limit) {
      limit = max;
      source = "the cgroup's memory.max (MemoryMax=)";
    }
  }
  for (auto [resource, name] : {std::pair{RLIMIT_AS, "RLIMIT_AS"}, std::pair{RLIMIT_DATA, "RLIMIT_DATA"}}) {
    rlimit r{};
    if (getrlimit(resource, &r) == 0 && r.rlim_cur != RLIM_INFINITY && r.rlim_cur < limit) {
      limit = r.rlim_cur;
      source = name;
    }
  }
  return limit;
}

std::vector<Problem> check_sizes(const Settings& s, std::optional<BackendKind> kind) {
  std::vector<Problem> out;
  const MemoryPlan p = memory_plan(s, kind);
  std::string source;
  const std::uint64_t limit = memory_limit_bytes(source);
  if (p.total() <= limit) return out;
  const std::string total = fmt::format(
      "the host ring ({} = input.ring_chunk_bytes x input.ring_chunks), the engine buffers "
      "({}, from stream.max_slice_frames, max_pending_frames, max_carry_singles, "
      "max_records_per_single), the message arena ({}, output.zmq.message_buffer_bytes), "
      "the message bodies held for subscribers ({}, output.zmq.held_bytes_max) "
      "and the other outputs ({}, histograms and file buffers) need {}, more than {} allows "
      "({})",
      gib(p.ring_bytes), gib(p.engine_bytes), gib(p.message_bytes), gib(p.held_bytes),
      gib(p.output_bytes), gib(p.total()), source, gib(limit));
  // Name the key that contributes most.
  std::string key;
  if (p.held_bytes >= p.ring_bytes && p.held_bytes >= p.engine_bytes &&
      p.held_bytes >= p.message_bytes) {
    key = "output.zmq.held_bytes_max";
  } else if (p.message_bytes >= p.ring_bytes && p.message_bytes >= p.engine_bytes) {
    key = "output.zmq.message_buffer_bytes";
  } else if (p.ring_bytes >= p.engine_bytes) {
    key = "input.ring_chunks";
  } else {
    const auto& st = s.stream;
    key = st.max_pending_frames * sizeof(RawFrame) >= p.engine_bytes / 2 ? "stream.max_pending_frames"
          : st.max_carry_singles > st.max_slice_frames                    ? "stream.max_carry_singles"
                                                                          : "stream.max_slice_frames";
  }
  out.push_back({key + ": " + total});
  return out;
}

std::vector<Problem> preflight(const Settings& s, BackendKind backend) {
  std::vector<Problem> out = check_sizes(s, backend);
  check_input(s, out);
  check_zmq(s, out);
  check_metrics(s, out);
  check_curve(s, out);
  check_file_sink(s, out);
  check_catalogue(s, out);
  check_backend(backend, out);
  check_cpus(s, out);
  return out;
}

std::vector<std::string> preflight_warnings(const Calibration& calibration) {
  std::vector<std::string> out;
  const auto& e = calibration.energy_correction;
  const auto bad = static_cast<std::size_t>(
      std::count_if(e.begin(), e.end(), [](float v) { return !std::isfinite(v); }));
  if (bad > 0 && bad < e.size())
    out.push_back(fmt::format(
        "calibration.energy_correction: {} of {} entries are NaN or infinite; a single that "
        "falls on one is energy-rejected (single.energy_rejected)",
        bad, e.size()));
  return out;
}

std::vector<Problem> calibration_problems(const Calibration& calibration) {
  std::vector<Problem> out;
  const auto& e = calibration.energy_correction;
  if (!e.empty() && std::none_of(e.begin(), e.end(), [](float v) { return std::isfinite(v); }))
    out.push_back({fmt::format("calibration.energy_correction: all {} entries are NaN or "
                               "infinite: no single could ever be accepted",
                               e.size())});
  return out;
}

}  // namespace petdaq::daemon

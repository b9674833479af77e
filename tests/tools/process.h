// Running the tools as a person would, from the tests: child processes with their output in
// files, a scratch folder, and a UDP receiver that records every datagram it gets.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace petdaq::test {

// Polls `ready` every 50 ms until it holds or `limit` passes.
inline bool wait_until(const std::function<bool()>& ready,
                       std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  for (;;) {
    if (ready()) return true;
    if (std::chrono::steady_clock::now() >= end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

inline std::filesystem::path bin_dir() { return std::filesystem::path(PETDAQ_BINARY_DIR) / "bin"; }
inline std::filesystem::path source_dir() { return PETDAQ_SOURCE_DIR; }

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A fresh folder under the system's temporary directory, removed with its contents.
class ScratchDir {
 public:
  ScratchDir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            ("petdaq-tools-test-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }
  // An ipc:// endpoint inside the folder: no port to collide with other tests.
  std::string ipc(const std::string& name) const { return "ipc://" + (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// A child process; stdout and stderr go to files. Killed (SIGKILL) if still running when
// destroyed.
class Child {
 public:
  Child(const std::vector<std::string>& argv, const std::filesystem::path& out,
        const std::filesystem::path& err) {
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int in = ::open("/dev/null", O_RDONLY);
      ::dup2(o, 1);
      ::dup2(e, 2);
      ::dup2(in, 0);
      ::execv(args[0], args.data());
      ::_exit(127);
    }
  }
  ~Child() {
    if (running()) {
      ::kill(pid_, SIGKILL);
      wait_for(std::chrono::seconds(5));
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  bool running() const { return pid_ > 0 && !status_; }
  void signal(int sig) const {
    if (running()) ::kill(pid_, sig);
  }
  // Exit code (128 + signal for a signal), or nullopt if still running after `limit`.
  std::optional<int> wait_for(std::chrono::milliseconds limit) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (!status_) {
      int st = 0;
      const pid_t r = ::waitpid(pid_, &st, WNOHANG);
      if (r == pid_) {
        status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        break;
      }
      if (std::chrono::steady_clock::now() >= end) return std::nullopt;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return status_;
  }

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
};

// Runs a command to the end (at most `limit`); returns its exit code, or -1 on time-out.
inline int run_command(const std::vector<std::string>& argv, const std::filesystem::path& out,
                       const std::filesystem::path& err,
                       std::chrono::milliseconds limit = std::chrono::seconds(60)) {
  Child c(argv, out, err);
  const auto rc = c.wait_for(limit);
  return rc ? *rc : -1;
}

// A UDP socket on 127.0.0.1 (ephemeral port) that stores every datagram on its own thread,
// with the sender's port and the kernel's receive time stamp (immune to this thread being
// scheduled late on a busy machine).
class UdpReceiver {
 public:
  struct Datagram {
    std::uint16_t source_port = 0;
    std::size_t size = 0;
    std::int64_t kernel_ns = 0;       // SO_TIMESTAMPNS, CLOCK_REALTIME
    std::vector<std::uint8_t> bytes;  // empty unless payloads are kept
  };

  explicit UdpReceiver(bool keep_payloads = true) : keep_(keep_payloads) {
    fd_ = ::socket(AF_INET, SOCK_DGRAM, 0);
    int size = 64 << 20;
    // FORCE may exceed rmem_max where permitted; the plain option is the fallback.
    if (::setsockopt(fd_, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof size) != 0) {
      ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
    }
    int on = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof on);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    timeval tv{0, 50'000};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    thread_ = std::thread([this] { loop(); });
  }
  ~UdpReceiver() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  UdpReceiver(const UdpReceiver&) = delete;
  UdpReceiver& operator=(const UdpReceiver&) = delete;

  std::uint16_t port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

  // Waits until nothing arrived for `quiet`, then returns everything received so far.
  std::vector<Datagram> settle(std::chrono::milliseconds quiet = std::chrono::milliseconds(300)) {
    std::size_t last = SIZE_MAX;
    for (;;) {
      std::this_thread::sleep_for(quiet);
      std::lock_guard<std::mutex> lock(mutex_);
      if (received_.size() == last) return received_;
      last = received_.size();
    }
  }

 private:
  void loop() {
    std::vector<std::uint8_t> buf(65536);
    alignas(cmsghdr) char control[256];
    while (!stop_) {
      sockaddr_in from{};
      iovec iov{buf.data(), buf.size()};
      msghdr msg{};
      msg.msg_name = &from;
      msg.msg_namelen = sizeof from;
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = control;
      msg.msg_controllen = sizeof control;
      const ssize_t n = ::recvmsg(fd_, &msg, 0);
      if (n < 0) continue;
      Datagram d;
      d.source_port = ntohs(from.sin_port);
      d.size = static_cast<std::size_t>(n);
      for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
          timespec ts{};
          std::memcpy(&ts, CMSG_DATA(c), sizeof ts);
          d.kernel_ns = std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
        }
      }
      if (keep_) d.bytes.assign(buf.begin(), buf.begin() + n);
      std::lock_guard<std::mutex> lock(mutex_);
      received_.push_back(std::move(d));
    }
  }

  bool keep_;
  int fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::vector<Datagram> received_;
  std::thread thread_;
};

// "  key   value" lines of a tool's final report.
inline std::map<std::string, std::string> report_fields(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string key, value;
    if (line.rfind("  ", 0) == 0 && (ls >> key >> value)) out[key] = value;
  }
  return out;
}

}  // namespace petdaq::test

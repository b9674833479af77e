// Running the tools as a person would, from the tests: where the built programs are, a UDP
// receiver that records every datagram it gets, and the tools' report lines. Scratch
// folders, files, child processes and waiting: tests/support.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/files.h"
#include "tests/support/process.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/wait.h"

namespace petdaq::test {

// The tools under test: the build's, or those in $PETDAQ_BIN_DIR (binaries copied to another
// machine, e.g. one with a GPU).
inline std::filesystem::path bin_dir() {
  if (const char* dir = std::getenv("PETDAQ_BIN_DIR"); dir && *dir) return dir;
  return std::filesystem::path(PETDAQ_BINARY_DIR) / "bin";
}
inline std::filesystem::path source_dir() { return PETDAQ_SOURCE_DIR; }

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

  // Everything received, once the senders have finished: on loopback a datagram is queued on
  // this socket before its send returns, so what is still to come is in the socket's queue.
  // Waits until that queue is empty and the thread has stored what it took before.
  std::vector<Datagram> settle() {
    std::uint64_t pass = 0;
    const bool empty = wait_until(
        [&] {
          pass = passes_.load();
          int queued = 0;
          return ::ioctl(fd_, FIONREAD, &queued) == 0 && queued == 0;
        },
        std::chrono::seconds(30), std::chrono::milliseconds(5));
    // A datagram taken in the pass under way when the queue was seen empty is stored by the
    // time the next pass begins.
    if (empty)
      wait_until([&] { return passes_.load() > pass; }, std::chrono::seconds(5),
                 std::chrono::milliseconds(1));
    std::lock_guard<std::mutex> lock(mutex_);
    return received_;
  }

 private:
  void loop() {
    std::vector<std::uint8_t> buf(65536);
    alignas(cmsghdr) char control[256];
    while (!stop_) {
      ++passes_;
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
  std::atomic<std::uint64_t> passes_{0};  // receive loops begun
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

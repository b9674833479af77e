#include "tools/replay/sender.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace petdaq::replay {

Destination parse_destination(const std::string& text) {
  std::string host;
  std::string port;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      throw std::invalid_argument("destination '" + text + "': expected [address]:port");
    }
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string::npos || colon == 0) {
      throw std::invalid_argument("destination '" + text + "': expected address:port");
    }
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  if (port.empty() || port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoul(port) == 0 || std::stoul(port) > 65535) {
    throw std::invalid_argument("destination '" + text + "': port must be 1..65535");
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found);
  if (rc != 0 || !found) {
    throw std::invalid_argument("destination '" + text + "': " + ::gai_strerror(rc));
  }
  Destination d;
  std::memcpy(&d.address, found->ai_addr, found->ai_addrlen);
  d.address_len = found->ai_addrlen;
  d.text = text;
  ::freeaddrinfo(found);
  return d;
}

UdpSender::UdpSender(const std::vector<Destination>& destinations, std::uint32_t source_count,
                     std::uint32_t batch_capacity, int send_buffer_bytes,
                     std::uint16_t source_port_base)
    : capacity_(batch_capacity) {
  if (destinations.empty()) throw std::invalid_argument("no destination (--to address:port)");
  if (source_count == 0 || batch_capacity == 0) throw std::invalid_argument("empty sender");
  fds_.assign(source_count, -1);
  for (std::uint32_t s = 0; s < source_count; ++s) {
    const Destination& d = destinations[s % destinations.size()];
    destination_text_.push_back(d.text);
    const int fd = ::socket(d.address.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
    fds_[s] = fd;
    if (send_buffer_bytes > 0) {
      ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &send_buffer_bytes, sizeof send_buffer_bytes);
    }
    if (source_port_base) {
      sockaddr_storage local{};
      socklen_t local_len = 0;
      const unsigned port = source_port_base + s;
      if (port > 65535) throw std::invalid_argument("--source-port-base + sources exceeds 65535");
      if (d.address.ss_family == AF_INET6) {
        auto* a = reinterpret_cast<sockaddr_in6*>(&local);
        a->sin6_family = AF_INET6;
        a->sin6_addr = in6addr_any;
        a->sin6_port = htons(static_cast<std::uint16_t>(port));
        local_len = sizeof *a;
      } else {
        auto* a = reinterpret_cast<sockaddr_in*>(&local);
        a->sin_family = AF_INET;
        a->sin_addr.s_addr = htonl(INADDR_ANY);
        a->sin_port = htons(static_cast<std::uint16_t>(port));
        local_len = sizeof *a;
      }
      if (::bind(fd, reinterpret_cast<sockaddr*>(&local), local_len) != 0) {
        throw std::runtime_error("cannot bind source port " + std::to_string(port) + ": " +
                                 std::strerror(errno));
      }
    }
    // Connected: no route look-up per datagram, and ICMP "port unreachable" comes back as
    // ECONNREFUSED on a later send, which is reported.
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&d.address), d.address_len) != 0) {
      throw std::runtime_error("cannot reach " + d.text + ": " + std::strerror(errno));
    }
  }
  const std::size_t slots = std::size_t{source_count} * capacity_;
  msgs_.resize(slots);
  iovs_.resize(slots);
  entries_.resize(slots);
  counts_.assign(source_count, 0);
  active_.reserve(source_count);
  for (std::size_t i = 0; i < slots; ++i) {
    msgs_[i].msg_hdr = msghdr{};
    msgs_[i].msg_hdr.msg_iov = &iovs_[i];
    msgs_[i].msg_hdr.msg_iovlen = 1;
  }
}

UdpSender::~UdpSender() {
  for (int fd : fds_) {
    if (fd >= 0) ::close(fd);
  }
}

void UdpSender::enqueue(std::uint32_t source, const std::uint8_t* data, std::uint32_t bytes,
                        std::uint32_t frames, std::uint32_t token) {
  std::uint32_t& n = counts_[source];
  if (n == 0) active_.push_back(source);
  const std::size_t slot = std::size_t{source} * capacity_ + n;
  iovs_[slot].iov_base = const_cast<std::uint8_t*>(data);
  iovs_[slot].iov_len = bytes;
  entries_[slot] = {frames, token};
  ++n;
  ++pending_;
  if (pending_ >= capacity_) flush();
}

void UdpSender::flush() {
  for (std::uint32_t s : active_) send_source(s);
  active_.clear();
  pending_ = 0;
}

void UdpSender::send_source(std::uint32_t source) {
  const std::size_t base = std::size_t{source} * capacity_;
  const std::uint32_t n = counts_[source];
  std::uint32_t done = 0;
  while (done < n) {
    const int sent = ::sendmmsg(fds_[source], &msgs_[base + done], n - done, 0);
    if (sent < 0) {
      if (errno == EINTR) continue;
      // The datagram at `done` is lost; the rest of the batch is still tried.
      if (stats_.send_errors == 0) {
        stats_.first_error = "sending to " + destination_text_[source] + ": " +
                             std::strerror(errno) +
                             (errno == ECONNREFUSED ? " (nothing listening there?)" : "");
      }
      ++stats_.send_errors;
      if (release_) release_(entries_[base + done].token);
      ++done;
      continue;
    }
    for (int i = 0; i < sent; ++i) {
      const std::size_t slot = base + done + static_cast<std::uint32_t>(i);
      ++stats_.datagrams;
      stats_.frames += entries_[slot].frames;
      stats_.bytes += iovs_[slot].iov_len;
      if (release_) release_(entries_[slot].token);
    }
    done += static_cast<std::uint32_t>(sent);
  }
  counts_[source] = 0;
}

}  // namespace petdaq::replay

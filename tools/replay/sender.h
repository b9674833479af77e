// UDP sending for petdaq-replay: one socket per source (so each source has its own source
// port, as each BDM has on the scanner), connected to its destination, datagrams batched per
// socket and sent with sendmmsg. All arrays are sized at construction.
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace petdaq::replay {

struct Destination {
  sockaddr_storage address{};
  socklen_t address_len = 0;
  std::string text;  // as given
};

// "address:port", "host:port" or "[v6address]:port". Throws std::invalid_argument.
Destination parse_destination(const std::string& text);

struct SendStats {
  std::uint64_t datagrams = 0;
  std::uint64_t frames = 0;
  std::uint64_t bytes = 0;
  std::uint64_t send_errors = 0;  // datagrams the kernel refused (each lost)
  std::string first_error;         // the first refusal, with its destination
};

class UdpSender {
 public:
  // Source s sends to destinations[s % destinations.size()]; with source_port_base > 0 it is
  // bound to source_port_base + s, otherwise to an ephemeral port.
  UdpSender(const std::vector<Destination>& destinations, std::uint32_t source_count,
            std::uint32_t batch_capacity, int send_buffer_bytes, std::uint16_t source_port_base);
  ~UdpSender();
  UdpSender(const UdpSender&) = delete;
  UdpSender& operator=(const UdpSender&) = delete;

  // Queues a datagram; the bytes must stay valid until the next flush(). Sends everything
  // queued when the batch is full. `token` is handed to the release callback after sending.
  void enqueue(std::uint32_t source, const std::uint8_t* data, std::uint32_t bytes,
               std::uint32_t frames, std::uint32_t token);
  void flush();
  std::size_t pending() const { return pending_; }

  // Called with each token once its datagram left (or was refused).
  void set_release(std::function<void(std::uint32_t)> release) { release_ = std::move(release); }

  const SendStats& stats() const { return stats_; }

 private:
  struct Entry {
    std::uint32_t frames;
    std::uint32_t token;
  };
  void send_source(std::uint32_t source);

  std::vector<int> fds_;
  std::vector<std::string> destination_text_;  // per source
  std::uint32_t capacity_;
  // Per source: capacity_ slots each.
  std::vector<mmsghdr> msgs_;
  std::vector<iovec> iovs_;
  std::vector<Entry> entries_;
  std::vector<std::uint32_t> counts_;
  std::vector<std::uint32_t> active_;  // sources with something queued, in first-use order
  std::size_t pending_ = 0;
  std::function<void(std::uint32_t)> release_;
  SendStats stats_;
};

}  // namespace petdaq::replay

// The UDP receiver (DESIGN sections 1 and 2): one socket per thread on the configured
// endpoints (SO_REUSEPORT where threads share a port), Asio to wait for readability,
// recvmmsg to drain straight into the current ring chunk. Datagrams are filtered by source,
// split by their framing, sequence-checked, and every refusal is counted.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/chunk_summary.h"
#include "core/counters.h"
#include "core/settings.h"
#include "daemon/host_ring.h"

namespace petdaq::daemon {

// Room one datagram gets in a chunk: a 9000-byte-MTU jumbo frame's payload (8972 bytes on
// IPv4) fits. A longer datagram is truncated by the kernel, refused whole and counted.
inline constexpr std::size_t kDatagramSlotBytes = 9216;
// Datagrams one recvmmsg call may return.
inline constexpr std::size_t kRecvBatch = 64;

struct BoundEndpoint {
  std::string address;
  std::uint16_t port = 0;
  std::size_t receive_buffer_bytes = 0;  // what the kernel gave
};

// Makes the sockets sharing fd's port take datagrams by board: socket (BDM of the first frame)
// mod `sockets`, in the order they were bound (docs/daemon.md, "Receiver"). False, with errno,
// where the kernel refuses it (it then spreads by the senders' addresses).
bool spread_by_board(int fd, Framing framing, std::uint32_t sockets);

class Receiver {
 public:
  // Binds every socket (throws std::runtime_error with the endpoint and the reason).
  // `rule` names each frame's source for the chunk summaries (core/chunk_summary.h); a
  // chunk whose frames span more than `max_chunk_span_ticks` is sealed.
  Receiver(const InputSettings& input, const SourceRule& rule, std::uint64_t max_chunk_span_ticks,
           HostRing& ring, Counters& counters);
  ~Receiver();
  Receiver(const Receiver&) = delete;
  Receiver& operator=(const Receiver&) = delete;

  // Receiver thread k (one per lane) runs on cpus[k % cpus.size()] (empty: anywhere).
  void start(const std::vector<int>& cpus = {});
  // Stops the threads, seals every partly filled chunk, and counts the sequence numbers
  // still outstanding as missing.
  void stop();

  const std::vector<BoundEndpoint>& bound() const { return bound_; }

 private:
  struct Lane;
  std::vector<std::unique_ptr<Lane>> lanes_;
  std::vector<std::thread> threads_;
  std::vector<BoundEndpoint> bound_;
  bool running_ = false;
};

}  // namespace petdaq::daemon

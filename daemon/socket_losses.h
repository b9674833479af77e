// What one receiving socket lost, and for which boards (DESIGN section 6, "Losses at a
// socket"): the boards whose datagrams came on it (by each datagram's first frame: a board's
// datagrams are its own), its kernel drops not yet counted for them (bdm.socket_kernel_drops),
// and a loss the next datagram taken records in its chunk.
#pragma once

#include <array>
#include <cstdint>
#include <utility>

#include "core/counters.h"

namespace petdaq::daemon {

class SocketLosses {
 public:
  void saw_board(std::uint8_t b) { boards_[b / 64] |= std::uint64_t{1} << (b % 64); }
  bool seen(std::uint32_t b) const { return b < 256 && (boards_[b / 64] >> (b % 64)) & 1; }

  // The kernel dropped `n` datagrams: counted for the boards at the next attribute().
  void kernel_drops(std::uint64_t n) { kernel_drops_ += n; }
  // Adds the kernel drops not yet counted to every board seen on the socket.
  void attribute(Counters& counters) {
    if (kernel_drops_ == 0) return;
    const std::uint64_t n = std::exchange(kernel_drops_, 0);
    for (std::uint32_t b = 0; b < counters.bdm_count(); ++b)
      if (seen(b)) counters.add_bdm_socket_kernel_drops(b, n);
  }

  // Datagrams were lost (the kernel's drops, or a full ring) after frames up to `latest`.
  void lost(std::uint64_t latest) {
    if (!pending_) from_ = latest;
    pending_ = true;
  }
  bool pending() const { return pending_; }
  // The loss since the last datagram taken, if any: true and its `from`, and it is taken.
  bool take_loss(std::uint64_t& from) {
    if (!pending_) return false;
    pending_ = false;
    from = from_;
    return true;
  }

 private:
  std::array<std::uint64_t, 4> boards_{};
  std::uint64_t kernel_drops_ = 0;
  bool pending_ = false;
  std::uint64_t from_ = 0;
};

}  // namespace petdaq::daemon

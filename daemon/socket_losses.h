// What one receiving socket lost, and for which boards (DESIGN section 6, "Losses at a
// socket"): the boards whose datagrams came on it (by each datagram's first frame: a board's
// datagrams are its own), its kernel drops not yet counted for them (bdm.socket_kernel_drops),
// and a loss the next datagram taken records in its chunk.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "core/counters.h"
#include "core/frame_source.h"
#include "proto/frame.h"

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
  // The loss since the last datagram taken, if any, ended by the datagram of `n` frames taken
  // now: true, and its `from` and `to` (that datagram's earliest frame time with a source: a
  // frame without one has no time to trust), and it is taken. A datagram with no frame that
  // has a source leaves the loss to the next.
  bool take_loss(const std::uint8_t* frames, std::size_t n, const SourceRule& rule,
                 std::uint64_t& from, std::uint64_t& to) {
    if (!pending_) return false;
    std::uint64_t earliest = ~std::uint64_t{0};
    for (std::size_t f = 0; f < n; ++f) {
      const std::uint8_t* frame = frames + f * kFrameBytes;
      if (rule.source_of(frame) >= 0) earliest = std::min(earliest, frame_time(frame));
    }
    if (earliest == ~std::uint64_t{0}) return false;
    pending_ = false;
    from = from_;
    to = earliest;
    return true;
  }

 private:
  std::array<std::uint64_t, 4> boards_{};
  std::uint64_t kernel_drops_ = 0;
  bool pending_ = false;
  std::uint64_t from_ = 0;
};

}  // namespace petdaq::daemon

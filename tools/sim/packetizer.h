// The boards' datagrams: each BDM's ordered frames cut into packets (full, or flushed after
// a while), the BDMs interleaved by the time their packets reach the network.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <queue>
#include <vector>

#include "proto/frame.h"
#include "tools/sim/block.h"
#include "tools/sim/sim.h"
#include "tools/sim/truth.h"

namespace petdaq::sim {

// Where ordered frames go, packet by packet.
class FrameSink {
 public:
  virtual ~FrameSink() = default;
  virtual void write(const RawFrame* frames, const TruthRecord* truth, std::size_t n) = 0;
};

class Packetizer {
 public:
  Packetizer(std::uint32_t bdm_count, const SimOptions& options, double tick_ps, FrameSink& sink);

  // The next frame of one BDM, in that BDM's key order.
  void add(std::uint32_t bdm, const SimFrame& f);
  // Every frame with key < cut has been added: flush what timed out, send what left before.
  void advance(std::uint64_t cut);
  // The end of the acquisition: flushes and sends everything.
  void finish();

  std::uint64_t packets_sent() const { return packets_sent_; }

 private:
  struct Packet {
    std::uint32_t bdm = 0;
    std::uint64_t sequence = 0;
    std::uint64_t first_key = 0;
    std::uint64_t send_ticks = 0;
    std::vector<RawFrame> raw;
    std::vector<TruthRecord> truth;
  };
  struct Later {
    bool operator()(const Packet* a, const Packet* b) const {
      if (a->send_ticks != b->send_ticks) return a->send_ticks > b->send_ticks;
      if (a->bdm != b->bdm) return a->bdm > b->bdm;
      return a->sequence > b->sequence;
    }
  };

  Packet* take_packet(std::uint32_t bdm);
  void close(std::uint32_t bdm, std::uint64_t close_ticks);
  void send_earliest();  // the closed packet that reaches the network first

  std::uint32_t frames_per_packet_;
  std::uint64_t flush_ticks_;
  double jitter_ticks_;
  std::uint64_t seed_;
  FrameSink& sink_;
  std::vector<Packet*> open_;
  std::vector<std::uint64_t> last_send_;
  std::vector<std::uint64_t> sequence_;
  std::vector<std::unique_ptr<Packet>> pool_;
  std::vector<Packet*> free_;
  std::priority_queue<Packet*, std::vector<Packet*>, Later> closed_;
  std::uint64_t packets_sent_ = 0;
};

// Once per frame: inline.
inline void Packetizer::add(std::uint32_t bdm, const SimFrame& f) {
  if (open_[bdm] == nullptr) {
    open_[bdm] = take_packet(bdm);
    open_[bdm]->first_key = f.key;
  } else if (f.key > open_[bdm]->first_key + flush_ticks_) {
    close(bdm, open_[bdm]->first_key + flush_ticks_);
    open_[bdm] = take_packet(bdm);
    open_[bdm]->first_key = f.key;
  }
  Packet& p = *open_[bdm];
  p.raw.push_back(f.raw);
  p.truth.push_back(f.truth);
  if (p.raw.size() >= frames_per_packet_) close(bdm, f.key);
}

}  // namespace petdaq::sim

#include "tools/sim/packetizer.h"

#include <algorithm>
#include <cmath>

#include "tools/sim/rng.h"

namespace petdaq::sim {

namespace {
constexpr std::uint64_t kLinkStream = 0x6C69'6E6B;
}  // namespace

Packetizer::Packetizer(std::uint32_t bdm_count, const SimOptions& options, double tick_ps,
                       FrameSink& sink)
    : frames_per_packet_(std::max<std::uint32_t>(1, options.packet_frames)),
      flush_ticks_(static_cast<std::uint64_t>(std::llround(options.packet_flush_us * 1e6 / tick_ps))),
      jitter_ticks_(options.link_jitter_us * 1e6 / tick_ps),
      seed_(options.seed),
      sink_(sink),
      open_(bdm_count),
      last_send_(bdm_count, 0),
      sequence_(bdm_count, 0) {}

void Packetizer::advance(std::uint64_t cut) {
  for (std::uint32_t b = 0; b < open_.size(); ++b)
    if (open_[b] && open_[b]->first_key + flush_ticks_ < cut) close(b, open_[b]->first_key + flush_ticks_);
  while (!closed_.empty() && closed_.top()->send_ticks < cut) send_earliest();
}

void Packetizer::finish() {
  for (std::uint32_t b = 0; b < open_.size(); ++b)
    if (open_[b]) close(b, open_[b]->first_key + flush_ticks_);
  while (!closed_.empty()) send_earliest();
}

void Packetizer::send_earliest() {
  Packet* p = closed_.top();
  closed_.pop();
  sink_.write(p->raw.data(), p->truth.data(), p->raw.size());
  ++packets_sent_;
  free_.push_back(p);
}

Packetizer::Packet* Packetizer::take_packet(std::uint32_t bdm) {
  Packet* p;
  if (free_.empty()) {
    pool_.push_back(std::make_unique<Packet>());
    p = pool_.back().get();
    p->raw.reserve(frames_per_packet_);
    p->truth.reserve(frames_per_packet_);
  } else {
    p = free_.back();
    free_.pop_back();
  }
  p->raw.clear();
  p->truth.clear();
  p->bdm = bdm;
  p->sequence = sequence_[bdm]++;
  return p;
}

void Packetizer::close(std::uint32_t bdm, std::uint64_t close_ticks) {
  Packet* p = open_[bdm];
  open_[bdm] = nullptr;
  // A link does not reorder one board's datagrams: the jitter only delays them.
  const double u = static_cast<double>(mix_seed(seed_, kLinkStream, (std::uint64_t{bdm} << 40) ^ p->sequence) >> 11) * 0x1.0p-53;
  p->send_ticks = std::max(close_ticks + static_cast<std::uint64_t>(u * jitter_ticks_), last_send_[bdm]);
  last_send_[bdm] = p->send_ticks;
  closed_.push(p);
}

}  // namespace petdaq::sim

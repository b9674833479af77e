// Groups frames into datagrams the way the scanner does: each source (a BDM, or BDM modulo the
// number of sources) fills its own datagram up to the payload size and sends it when full, or
// when its oldest frame has waited `flush_ticks` of data time. All buffers are taken once, at
// construction; packing never allocates.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "proto/datagram.h"
#include "proto/frame.h"

namespace petdaq::replay {

struct PackerConfig {
  Framing framing = Framing::raw;
  std::size_t payload_bytes = 8972;
  std::uint32_t source_count = 1;  // source of a frame = its BDM % source_count
  std::uint64_t flush_ticks = 0;   // 0: a datagram waits until it is full (or the input ends)
  std::uint32_t in_flight = 256;   // closed datagrams that may wait in the sender at once
};

// A closed datagram. `buffer` goes back with Packer::release() once it was sent.
struct Datagram {
  const std::uint8_t* data = nullptr;
  std::uint32_t bytes = 0;
  std::uint32_t frames = 0;
  std::uint32_t source = 0;
  std::uint64_t data_time_ticks = 0;  // the input's time when the datagram closed
  std::uint32_t buffer = 0;
};

class Packer {
 public:
  explicit Packer(const PackerConfig& config) : config_(config) {
    const std::size_t header = config.framing == Framing::sequenced ? kSequencedHeaderBytes : 0;
    if (config.payload_bytes < header + kFrameBytes || config.payload_bytes > 65507) {
      throw std::invalid_argument("payload size must hold at least one frame" +
                                  std::string(header ? " after the 16-byte header" : "") +
                                  " and at most 65507 bytes");
    }
    if (config.source_count == 0 || config.in_flight == 0) {
      throw std::invalid_argument("need at least one source and one datagram in flight");
    }
    header_bytes_ = header;
    frames_per_datagram_ = (config.payload_bytes - header) / kFrameBytes;
    const std::size_t buffer_count = std::size_t{config.source_count} + config.in_flight;
    storage_.resize(buffer_count * config.payload_bytes);
    free_.reserve(buffer_count);
    for (std::size_t i = buffer_count; i-- > 0;) free_.push_back(static_cast<std::uint32_t>(i));
    open_.resize(config.source_count);
    for (auto& o : open_) o.buffer = take();
    sequence_.assign(config.source_count, 0);
  }

  std::size_t frames_per_datagram() const { return frames_per_datagram_; }

  // Adds one frame; `emit(const Datagram&)` is called for every datagram this closes (the
  // frame's own and any that waited longer than flush_ticks). The caller must release()
  // emitted datagrams before more than `in_flight` of them are outstanding.
  template <class Emit>
  void add(const std::uint8_t* frame, Emit&& emit) {
    const std::uint64_t t = frame_time(frame);
    if (!have_time_ || t > now_ticks_) now_ticks_ = t;
    have_time_ = true;
    const std::uint32_t src = frame_bdm(frame) % config_.source_count;
    Open& o = open_[src];
    if (o.frames == 0) o.first_time_ticks = now_ticks_;
    std::uint8_t* dst = buffer(o.buffer) + header_bytes_ + std::size_t{o.frames} * kFrameBytes;
    for (std::size_t i = 0; i < kFrameBytes; ++i) dst[i] = frame[i];
    if (++o.frames == frames_per_datagram_) close(src, emit);
    if (config_.flush_ticks && now_ticks_ >= next_flush_check_ticks_) {
      for (std::uint32_t s = 0; s < config_.source_count; ++s) {
        if (open_[s].frames && now_ticks_ - open_[s].first_time_ticks >= config_.flush_ticks) {
          close(s, emit);
        }
      }
      // Checking every quarter of the flush time keeps the scan off the per-frame path.
      next_flush_check_ticks_ = now_ticks_ + (config_.flush_ticks + 3) / 4;
    }
  }

  // Closes every partly filled datagram (end of the input), in source order.
  template <class Emit>
  void flush(Emit&& emit) {
    for (std::uint32_t s = 0; s < config_.source_count; ++s) {
      if (open_[s].frames) close(s, emit);
    }
  }

  void release(std::uint32_t buffer_index) { free_.push_back(buffer_index); }

  // Data time restarts (a new pass over the input): flush times are measured afresh.
  void restart_time() {
    have_time_ = false;
    next_flush_check_ticks_ = 0;
  }

 private:
  struct Open {
    std::uint32_t buffer = 0;
    std::uint32_t frames = 0;
    std::uint64_t first_time_ticks = 0;
  };

  std::uint8_t* buffer(std::uint32_t i) { return storage_.data() + i * config_.payload_bytes; }

  std::uint32_t take() {
    if (free_.empty()) throw std::logic_error("packer: more datagrams in flight than configured");
    const std::uint32_t b = free_.back();
    free_.pop_back();
    return b;
  }

  template <class Emit>
  void close(std::uint32_t src, Emit&& emit) {
    Open& o = open_[src];
    std::uint8_t* p = buffer(o.buffer);
    if (config_.framing == Framing::sequenced) {
      SequencedHeader h;
      h.source_id = static_cast<std::uint16_t>(src);
      h.sequence = sequence_[src]++;
      h.frame_count = o.frames;
      encode_sequenced_header(h, p);
    }
    Datagram d;
    d.data = p;
    d.bytes = static_cast<std::uint32_t>(header_bytes_ + std::size_t{o.frames} * kFrameBytes);
    d.frames = o.frames;
    d.source = src;
    d.data_time_ticks = now_ticks_;
    d.buffer = o.buffer;
    o.frames = 0;
    o.buffer = take();
    emit(d);
  }

  PackerConfig config_;
  std::size_t header_bytes_ = 0;
  std::size_t frames_per_datagram_ = 0;
  std::vector<std::uint8_t> storage_;
  std::vector<std::uint32_t> free_;  // reserved for every buffer: push_back never allocates
  std::vector<Open> open_;
  std::vector<std::uint32_t> sequence_;
  std::uint64_t now_ticks_ = 0;
  bool have_time_ = false;
  std::uint64_t next_flush_check_ticks_ = 0;
};

}  // namespace petdaq::replay

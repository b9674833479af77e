// Named, cumulative counters (DESIGN section 8). The hot path never looks a name up: stages
// count into plain local structs and add them to the registry once per batch; the registry
// is a fixed array of relaxed atomics indexed by an enum.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string_view>

namespace petdaq {

#define PETDAQ_COUNTERS(X)                                                      \
  X(rx_datagrams, "rx.datagrams") X(rx_bytes, "rx.bytes") X(rx_frames, "rx.frames") \
  X(rx_trailing_bytes, "rx.trailing_bytes") X(rx_bad_header, "rx.bad_header")   \
  X(rx_empty, "rx.empty") X(rx_oversize, "rx.oversize") X(rx_kernel_drops, "rx.kernel_drops") \
  X(rx_ring_full, "rx.ring_full") X(rx_seq_missing, "rx.seq_missing")           \
  X(rx_seq_duplicate, "rx.seq_duplicate") X(rx_seq_reordered, "rx.seq_reordered") \
  X(rx_foreign_source, "rx.foreign_source") X(frame_bad_marker, "frame.bad_marker") \
  X(frame_bad_bdm, "frame.bad_bdm") X(frame_bad_du, "frame.bad_du")             \
  X(frame_bad_position, "frame.bad_position") X(frame_no_crystal, "frame.no_crystal") \
  X(frame_bad_time, "frame.bad_time") X(single_accepted, "single.accepted")     \
  X(single_energy_rejected, "single.energy_rejected") X(stream_late, "stream.late") \
  X(stream_time_jump, "stream.time_jump") X(stream_source_idle, "stream.source_idle") \
  X(stream_runs, "stream.runs") X(stream_slices, "stream.slices")               \
  X(stream_pending_full, "stream.pending_full") X(stream_carry_overflow, "stream.carry_overflow") X(stream_split_slices, "stream.split_slices") X(stream_exact_blocks, "stream.exact_blocks") X(coinc_prompts, "coinc.prompts") \
  X(coinc_delayed, "coinc.delayed") X(coinc_multiples, "coinc.multiples")       \
  X(coinc_delayed_multiples, "coinc.delayed_multiples")                         \
  X(coinc_records_overflow, "coinc.records_overflow")                           \
  X(out_zmq_refused, "out.zmq_refused") X(out_messages, "out.messages")         \
  X(out_message_copies, "out.message_copies")                                   \
  X(out_file_bytes, "out.file_bytes")                                           \
  X(out_raw_bytes, "out.raw_bytes") X(out_raw_lost_frames, "out.raw_lost_frames") \
  X(out_zmq_subscriptions, "out.zmq_subscriptions")                             \
  X(out_zmq_subscriptions_refused, "out.zmq_subscriptions_refused")             \
  X(out_zmq_resets, "out.zmq_resets") X(out_zmq_connects, "out.zmq_connects")   \
  X(out_zmq_disconnects, "out.zmq_disconnects")                                 \
  X(out_file_errors, "out.file_errors") X(out_file_dropped_bytes, "out.file_dropped_bytes") \
  X(rx_seq_restarts, "rx.seq_restarts") X(rx_seq_wild, "rx.seq_wild")              \
  X(out_zmq_auth_refused, "out.zmq_auth_refused")                               \
  X(ctl_commands, "ctl.commands") X(ctl_refused, "ctl.refused")                 \
  X(out_catalogue_errors, "out.catalogue_errors")                               \
  X(out_catalogue_dropped, "out.catalogue_dropped")                             \
  X(out_zmq_over_budget, "out.zmq_over_budget")                                 \
  X(out_zmq_stalled_dropped, "out.zmq_stalled_dropped")                         \
  X(stream_source_lagging, "stream.source_lagging") X(stream_dead_frames, "stream.dead_frames") \
  X(stream_dead_intervals, "stream.dead_intervals")                             \
  X(stream_loss_intervals, "stream.loss_intervals")                             \
  X(stream_loss_unconverted, "stream.loss_unconverted")                         \
  X(rx_backlog_chunks, "rx.backlog_chunks")

enum class Counter : std::uint16_t {
#define PETDAQ_COUNTER_ENUM(id, name) id,
  PETDAQ_COUNTERS(PETDAQ_COUNTER_ENUM)
#undef PETDAQ_COUNTER_ENUM
      count_
};

inline constexpr std::size_t kCounterCount = static_cast<std::size_t>(Counter::count_);

constexpr std::string_view counter_name(Counter c) {
  constexpr std::array<std::string_view, kCounterCount> names = {
#define PETDAQ_COUNTER_NAME(id, name) name,
      PETDAQ_COUNTERS(PETDAQ_COUNTER_NAME)
#undef PETDAQ_COUNTER_NAME
  };
  return names[static_cast<std::size_t>(c)];
}

// A plain, non-atomic set of counts that one thread fills and then adds to the registry.
struct CounterDelta {
  std::array<std::uint64_t, kCounterCount> value{};
  std::uint64_t& operator[](Counter c) { return value[static_cast<std::size_t>(c)]; }
  std::uint64_t operator[](Counter c) const { return value[static_cast<std::size_t>(c)]; }
  CounterDelta& operator+=(const CounterDelta& o) {
    for (std::size_t i = 0; i < kCounterCount; ++i) value[i] += o.value[i];
    return *this;
  }
};

class Counters {
 public:
  // bdm_count sizes the per-BDM singles and energy-rejected counts.
  explicit Counters(std::uint32_t bdm_count);

  void add(Counter c, std::uint64_t n = 1) {
    values_[static_cast<std::size_t>(c)].fetch_add(n, std::memory_order_relaxed);
  }
  void add(const CounterDelta& d);
  std::uint64_t get(Counter c) const {
    return values_[static_cast<std::size_t>(c)].load(std::memory_order_relaxed);
  }
  // By dotted name; throws std::out_of_range for an unknown name (tests, tools).
  std::uint64_t get(std::string_view name) const;

  std::uint32_t bdm_count() const { return bdm_count_; }
  // Per-BDM counts, each with its named accessors below.
  enum class PerBdm : std::uint8_t {
    singles,          // single.accepted
    energy_rejected,  // single.energy_rejected
    // Losses (DESIGN section 6): frames dropped as late (stream.late; a lagging source's
    // frames behind the horizon among them) and in dead time (stream.dead_frames).
    late,
    dead,
    // Losses at the receiving socket: frames of the board's own datagrams dropped for a full
    // ring (rx.ring_full; exact), and the datagrams the kernel dropped at the socket that
    // receives the board's datagrams (rx.kernel_drops of that socket, counted for each board
    // seen on it: which boards the dropped datagrams were of, nobody knows).
    ring_full,
    socket_kernel_drops,
    kinds
  };
  void add_bdm(PerBdm k, std::uint32_t b, std::uint64_t n) {
    per_bdm_[index(k, b)].fetch_add(n, std::memory_order_relaxed);
  }
  std::uint64_t bdm(PerBdm k, std::uint32_t b) const {
    return per_bdm_[index(k, b)].load(std::memory_order_relaxed);
  }
  void add_bdm_singles(std::uint32_t b, std::uint64_t n) { add_bdm(PerBdm::singles, b, n); }
  void add_bdm_energy_rejected(std::uint32_t b, std::uint64_t n) { add_bdm(PerBdm::energy_rejected, b, n); }
  void add_bdm_late(std::uint32_t b, std::uint64_t n) { add_bdm(PerBdm::late, b, n); }
  void add_bdm_dead(std::uint32_t b, std::uint64_t n) { add_bdm(PerBdm::dead, b, n); }
  void add_bdm_ring_full(std::uint32_t b, std::uint64_t n) { add_bdm(PerBdm::ring_full, b, n); }
  void add_bdm_socket_kernel_drops(std::uint32_t b, std::uint64_t n) {
    add_bdm(PerBdm::socket_kernel_drops, b, n);
  }
  std::uint64_t bdm_singles(std::uint32_t b) const { return bdm(PerBdm::singles, b); }
  std::uint64_t bdm_energy_rejected(std::uint32_t b) const { return bdm(PerBdm::energy_rejected, b); }
  std::uint64_t bdm_late(std::uint32_t b) const { return bdm(PerBdm::late, b); }
  std::uint64_t bdm_dead(std::uint32_t b) const { return bdm(PerBdm::dead, b); }
  std::uint64_t bdm_ring_full(std::uint32_t b) const { return bdm(PerBdm::ring_full, b); }
  std::uint64_t bdm_socket_kernel_drops(std::uint32_t b) const {
    return bdm(PerBdm::socket_kernel_drops, b);
  }

 private:
  std::size_t index(PerBdm k, std::uint32_t b) const {
    return static_cast<std::size_t>(k) * bdm_count_ + b;
  }
  std::array<std::atomic<std::uint64_t>, kCounterCount> values_{};
  std::uint32_t bdm_count_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> per_bdm_;  // [kind][bdm]
};

}  // namespace petdaq

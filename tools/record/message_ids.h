// Counts what a subscriber missed from the message ids of one kind (DESIGN section 7:
// consecutive per kind from 0). A subscriber that connects late starts at whatever id comes
// first; that is not a gap. An id that goes back means the publisher restarted (new ids
// from 0) or repeated a message.
#pragma once

#include <cstdint>

namespace petdaq::record {

class MessageIdTracker {
 public:
  void see(std::uint64_t id) {
    if (!started_) {
      started_ = true;
      first_id_ = id;
    } else if (fresh_) {
      // Another publisher counts its ids on its own: neither a gap nor a step back.
    } else if (id > next_) {
      missed_ += id - next_;
    } else if (id < next_) {
      ++went_back_;
    }
    fresh_ = false;
    next_ = id + 1;
    ++received_;
  }
  // The next id comes from another publisher (its publisher_id changed); counts are kept.
  void new_publisher() { fresh_ = true; }

  bool started() const { return started_; }
  std::uint64_t first_id() const { return first_id_; }
  std::uint64_t received() const { return received_; }
  std::uint64_t missed() const { return missed_; }        // ids skipped over
  std::uint64_t went_back() const { return went_back_; }  // restarts or repeats

 private:
  bool started_ = false;
  bool fresh_ = false;
  std::uint64_t first_id_ = 0;
  std::uint64_t next_ = 0;
  std::uint64_t received_ = 0;
  std::uint64_t missed_ = 0;
  std::uint64_t went_back_ = 0;
};

}  // namespace petdaq::record

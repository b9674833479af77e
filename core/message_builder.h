// The headers of the published coincidence batches (DESIGN section 7; the header itself is
// MessageHeader in proto/records.h), made from slice results: one builder per process, for
// the publisher and the .plm files alike (core/plm_file.h).
#pragma once

#include <cstdint>

#include "core/backend.h"
#include "proto/records.h"

namespace petdaq {

struct Settings;

// Does this configuration publish a delayed message for every slice?
bool publishes_delayed(const Settings& settings);

// Makes the 64-byte message headers. message_id is consecutive per kind from 0 over the
// builder's lifetime (one builder per process), so a subscriber can count what it missed.
class MessageBuilder {
 public:
  // Header of the `kind` message (prompts or delayed) of one slice result; consumes an id.
  MessageHeader build(MessageKind kind, std::uint64_t run_id, const SliceResult& result);
  // The id the next message of `kind` will get.
  std::uint64_t next_id(MessageKind kind) const;

 private:
  std::uint64_t next_id_[8] = {};  // by kind (1..7)
};

}  // namespace petdaq

// The ZeroMQ PUB side of DESIGN section 7: three-frame messages (topic, 64-byte header,
// body). Sends never wait: a message the socket refuses (a subscriber's queue is at
// output.zmq.send_hwm) is counted in out.zmq_refused, and its message_id is simply missing
// downstream.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <zmq.hpp>

#include "core/counters.h"
#include "core/settings.h"
#include "proto/records.h"

namespace petdaq::daemon {

namespace topic {
inline constexpr std::string_view prompts = "coinc.prompt";
inline constexpr std::string_view delayed = "coinc.delayed";
inline constexpr std::string_view rates = "rates";
inline constexpr std::string_view singles = "singles";
inline constexpr std::string_view histograms = "histograms";
}  // namespace topic

class Publisher {
 public:
  // Binds output.zmq.endpoint; throws std::runtime_error naming the endpoint.
  Publisher(const ZmqSettings& zmq, Counters& counters);
  ~Publisher();
  Publisher(const Publisher&) = delete;
  Publisher& operator=(const Publisher&) = delete;

  // `topic` must outlive the process (one of the constants above): it is sent without a
  // copy. The header and the body are copied into the message, because the backend reuses
  // its record buffers for the next slice. Returns false when refused (counted).
  bool send(std::string_view topic, const MessageHeader& header, const void* body,
            std::size_t body_bytes);

  const std::string& endpoint() const { return endpoint_; }

 private:
  Counters& counters_;
  zmq::context_t context_;
  zmq::socket_t socket_;
  std::string endpoint_;
};

}  // namespace petdaq::daemon

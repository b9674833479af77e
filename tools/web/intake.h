// The ZeroMQ side of petdaq-web: one thread subscribed to petdaqd's `rates`, `histograms`
// and `image` topics. It parses, builds the page's message and hands it to the server loop without ever
// waiting on it, so no browser can slow it down.
#pragma once

#include <atomic>
#include <cstddef>
#include <string>
#include <string_view>

#include <zmq.hpp>

#include "proto/topics.h"
#include "tools/web/messages.h"
#include "tools/web/server.h"
#include "tools/web/web_counters.h"

namespace petdaq::web {

class Intake {
 public:
  // Connects and subscribes; throws std::runtime_error naming the endpoint when it cannot.
  Intake(const std::string& endpoint, Server& server, WebCounters& counters);

  // Receives until `stop` is set (checked every 100 ms).
  void run(const std::atomic<bool>& stop);

  // One received message (its frames in order): counts it, and posts a rates or histograms
  // update.
  void take(const std::string_view* frames, std::size_t frame_count);

 private:
  zmq::context_t context_{1};
  zmq::socket_t sub_;
  Server& server_;
  WebCounters& counters_;
  void report(const std::string& why);
  void take_image(const std::string_view* frames, std::size_t frame_count);

  RatesMessageBuilder builder_;
  FiguresCache figures_;
  std::string last_error_;
  std::uint32_t publisher_id_ = 0;  // of the last message (0: none yet, or version 1)
};

}  // namespace petdaq::web

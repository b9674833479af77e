#include "daemon/publisher.h"

#include <cstring>
#include <stdexcept>

namespace petdaq::daemon {

Publisher::Publisher(const ZmqSettings& zmq_settings, Counters& counters)
    : counters_(counters), context_(1), socket_(context_, zmq::socket_type::pub) {
  socket_.set(zmq::sockopt::sndhwm, zmq_settings.send_hwm);
  // Give the last messages time to reach subscribers when the daemon stops.
  socket_.set(zmq::sockopt::linger, 2000);
  // Refuse (EAGAIN) instead of dropping silently, so refusals can be counted.
  socket_.set(zmq::sockopt::xpub_nodrop, true);
  try {
    socket_.bind(zmq_settings.endpoint);
  } catch (const zmq::error_t& e) {
    throw std::runtime_error("cannot bind ZeroMQ PUB to " + zmq_settings.endpoint + ": " +
                             e.what());
  }
  endpoint_ = socket_.get(zmq::sockopt::last_endpoint);
}

Publisher::~Publisher() = default;

bool Publisher::send(std::string_view topic, const MessageHeader& header, const void* body,
                     std::size_t body_bytes) {
  // A constant topic goes out without a copy (no free function: libzmq never frees it).
  zmq::message_t topic_msg(const_cast<char*>(topic.data()), topic.size(), nullptr, nullptr);
  std::uint8_t h[kMessageHeaderBytes];
  encode_message_header(header, h);
  // The high-water mark is checked on the first frame only; once it is taken the whole
  // message is (libzmq counts whole messages against the mark).
  if (!socket_.send(topic_msg, zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
    counters_.add(Counter::out_zmq_refused);
    return false;
  }
  socket_.send(zmq::const_buffer(h, sizeof h), zmq::send_flags::sndmore);
  socket_.send(zmq::const_buffer(body, body_bytes), zmq::send_flags::none);
  counters_.add(Counter::out_messages);
  return true;
}

}  // namespace petdaq::daemon

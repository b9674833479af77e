#include "tools/web/intake.h"

#include <array>
#include <cstdio>
#include <stdexcept>

#include <zmq.hpp>

#include "core/histograms.h"
#include "core/image.h"
#include "tools/web/image_message.h"
#include "proto/records.h"

namespace petdaq::web {

namespace {
// topic, header, body (DESIGN section 7); one more frame is read to tell "too many".
constexpr std::size_t kMaxFrames = 4;
}  // namespace

void Intake::take(const std::string_view* frames, std::size_t frame_count) {
  const std::string_view topic_name = frame_count > 0 ? frames[0] : std::string_view();
  if (topic_name == topic::image) {
    take_image(frames, frame_count);
    return;
  }
  const bool histograms = topic_name.starts_with(topic::histograms);
  if (histograms) counters_.add(WebCounter::histograms_received);
  const WebCounter malformed =
      histograms ? WebCounter::histograms_malformed : WebCounter::messages_malformed;
  if ((topic_name != topic::rates && topic_name != topic::histograms) || frame_count != 3 ||
      frames[1].size() != kMessageHeaderBytes) {
    counters_.add(malformed);
    return;
  }
  const MessageHeader h =
      decode_message_header(reinterpret_cast<const std::uint8_t*>(frames[1].data()));
  if (h.magic != kMessageMagic || !message_version_supported(h.version) ||
      (histograms && h.kind != static_cast<std::uint16_t>(MessageKind::histograms))) {
    counters_.add(malformed);
    return;
  }
  if (h.publisher_id != 0) {
    if (publisher_id_ != 0 && h.publisher_id != publisher_id_) {
      counters_.add(WebCounter::publisher_changes);
      char why[160];
      std::snprintf(why, sizeof why,
                    "another publisher (publisher_id %08x, was %08x): petdaqd restarted, or "
                    "another process serves the endpoint",
                    h.publisher_id, publisher_id_);
      report(why);
    }
    publisher_id_ = h.publisher_id;
  }
  if (histograms) {
    try {
      server_.post_histograms(histograms_message(frames[2], {}, &figures_));
    } catch (const HistogramFileError& e) {
      counters_.add(WebCounter::histograms_malformed);
      report(std::string("histograms message skipped: ") + e.what());
    }
    return;
  }
  try {
    RatesUpdate u = builder_.build(frames[2]);
    counters_.add(WebCounter::rates_received);
    server_.post_rates(std::move(u));
  } catch (const MalformedRates& e) {
    counters_.add(WebCounter::rates_malformed);
    report(std::string("rates document skipped: ") + e.what());
  }
}

// An `image` message (DESIGN section 7, "Image"): the page's image views.
void Intake::take_image(const std::string_view* frames, std::size_t frame_count) {
  counters_.add(WebCounter::image_received);
  if (frame_count != 3 || frames[1].size() != kMessageHeaderBytes) {
    counters_.add(WebCounter::image_malformed);
    return;
  }
  const MessageHeader h =
      decode_message_header(reinterpret_cast<const std::uint8_t*>(frames[1].data()));
  if (h.magic != kMessageMagic || h.version != kMessageVersion ||
      h.kind != static_cast<std::uint16_t>(MessageKind::image)) {
    counters_.add(WebCounter::image_malformed);
    return;
  }
  try {
    server_.post_image(image_message(frames[2]));
  } catch (const ImageFileError& e) {
    counters_.add(WebCounter::image_malformed);
    report(std::string("image message skipped: ") + e.what());
  }
}

void Intake::report(const std::string& why) {
  // One line per new reason, not one per message: a publisher stuck on a bad message must
  // not flood the journal.
  if (last_error_ == why) return;
  last_error_ = why;
  std::fprintf(stderr, "petdaq-web: %s\n", why.c_str());
}

Intake::Intake(const std::string& endpoint, Server& server, WebCounters& counters)
    : sub_(context_, zmq::socket_type::sub), server_(server), counters_(counters) {
  sub_.set(zmq::sockopt::linger, 0);
  sub_.set(zmq::sockopt::rcvtimeo, 100);
  try {
    sub_.connect(endpoint);
  } catch (const zmq::error_t& e) {
    throw std::runtime_error("cannot subscribe to " + endpoint + ": " + e.what());
  }
  sub_.set(zmq::sockopt::subscribe, topic::rates);
  sub_.set(zmq::sockopt::subscribe, topic::histograms);
  sub_.set(zmq::sockopt::subscribe, topic::image);
}

void Intake::run(const std::atomic<bool>& stop) {
  std::array<zmq::message_t, kMaxFrames> parts;
  std::array<std::string_view, kMaxFrames> frames;
  while (!stop.load(std::memory_order_relaxed)) {
    if (!sub_.recv(parts[0], zmq::recv_flags::none)) continue;  // time-out: check stop
    std::size_t n = 1;
    bool more = parts[0].more();
    while (more) {
      // Past kMaxFrames the extra frames are received into the last slot and discarded.
      zmq::message_t& into = parts[std::min(n, kMaxFrames - 1)];
      if (!sub_.recv(into, zmq::recv_flags::none)) break;
      more = into.more();
      ++n;
    }
    for (std::size_t i = 0; i < std::min(n, kMaxFrames); ++i) frames[i] = parts[i].to_string_view();
    take(frames.data(), n > kMaxFrames ? kMaxFrames : n);
  }
}

}  // namespace petdaq::web

// A stand-in for petdaqd's publisher in the tools' tests: publishes known rates documents
// and/or known coincidence batches (test_messages.h) on an endpoint.
//
//   petdaq-test-publisher --endpoint EP [--wait-subscriptions N]
//       [--rates --interval-ms MS --duration-s S [--histograms FILE] [--image FILE]]
//       [--batches N --skip-prompt-ids 3,7 --gap-ms MS] [--bad-first]
//
// --bad-first sends malformed messages before the good ones: for batches, a wrong magic, a
// two-frame message and a body that disagrees with record_count; for rates, a document that
// is not JSON.
//
// --rates-count N sends exactly N rates documents (numbered from 0), --interval-ms apart,
// instead of sending for --duration-s. --opaque-histograms N sends N messages on topic
// `histograms` whose body is bytes 0..255 (a layout no reader knows), before the rates.
//
// --publisher-id ID puts ID in every header's publisher_id; --new-publisher-from N sends the
// batches from index N on as another publisher would (publisher_id ID + 1, ids from 0).
//
// With --wait-subscriptions it publishes nothing before N subscriptions arrived (XPUB), so a
// test does not lose the first messages to ZeroMQ's slow-joiner effect.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "tests/support/files.h"
#include "common/cli.h"
#include "tests/tools/test_messages.h"
#include "proto/topics.h"

using namespace petdaq;
using Clock = std::chrono::steady_clock;

namespace {

std::uint32_t g_publisher_id = 0;

void send_message(zmq::socket_t& pub, std::string_view topic, const MessageHeader& h,
                  const void* body, std::size_t body_bytes) {
  std::uint8_t header[kMessageHeaderBytes];
  MessageHeader stamped = h;
  if (g_publisher_id != 0) stamped.publisher_id = g_publisher_id;
  encode_message_header(stamped, header);
  pub.send(zmq::buffer(topic), zmq::send_flags::sndmore);
  pub.send(zmq::buffer(header, sizeof header), zmq::send_flags::sndmore);
  pub.send(zmq::const_buffer(body, body_bytes), zmq::send_flags::none);
}

}  // namespace

int main(int argc, char** argv) {
  std::string endpoint;
  int wait_subscriptions = 0;
  bool rates = false;
  int interval_ms = 200;
  double duration_s = 5;
  int batches = 0;
  std::set<std::uint64_t> skip_prompt_ids;
  int gap_ms = 5;
  bool bad_first = false;
  cli::App app("petdaq-test-publisher",
               "Publishes known batches and rates documents for the tools' tests.");
  cli::add_endpoint(app, endpoint)->required();
  app.add_option("--wait-subscriptions", wait_subscriptions,
                 "publish nothing before N subscriptions arrived (XPUB)")
      ->type_name("N");
  app.add_flag("--rates", rates, "publish rates documents");
  app.add_option("--interval-ms", interval_ms, "between rates documents")->type_name("MS");
  cli::add_duration_s(app, duration_s, "how long to publish rates");
  app.add_option("--batches", batches, "coincidence batches to publish")->type_name("N");
  std::vector<std::uint64_t> skip_ids;
  app.add_option("--skip-prompt-ids", skip_ids, "prompt message ids not sent")
      ->type_name("ID,ID,...")
      ->delimiter(',');
  app.add_flag("--bad-first", bad_first, "malformed messages before the good ones");
  app.add_option("--gap-ms", gap_ms, "between batches")->type_name("MS");
  long rates_count = -1;
  int opaque_histograms = 0;
  app.add_option("--rates-count", rates_count, "publish this many rates documents (implies --rates)")
      ->type_name("N");
  app.add_option("--opaque-histograms", opaque_histograms,
                 "histograms messages of no known layout to publish")
      ->type_name("N");
  std::string histograms;  // a .pdh file, also published with each rates document
  app.add_option("--histograms", histograms, "a histogram file published with each rates document")
      ->type_name("FILE.pdh");
  std::string image;  // a .pdim file, also published with each rates document
  app.add_option("--image", image, "an image file published with each rates document")
      ->type_name("FILE.pdim");
  int new_publisher_from = -1;
  app.add_option("--publisher-id", g_publisher_id, "publisher_id of every header")->type_name("ID");
  app.add_option("--new-publisher-from", new_publisher_from,
                 "batches from this index on come from another publisher (id + 1, ids from 0)")
      ->type_name("N");
  if (const auto rc = app.parse_or_exit(argc, argv)) return *rc;
  skip_prompt_ids.insert(skip_ids.begin(), skip_ids.end());
  if (rates_count >= 0) rates = true;

  zmq::context_t ctx(1);
  zmq::socket_t pub(ctx, zmq::socket_type::xpub);
  pub.set(zmq::sockopt::linger, 2000);
  // Every subscription is reported, also a second subscriber's to the same topic.
  pub.set(zmq::sockopt::xpub_verbose, 1);
  pub.bind(endpoint);
  for (int seen = 0; seen < wait_subscriptions;) {
    zmq::message_t m;
    if (pub.recv(m) && m.size() > 0 && m.data<std::uint8_t>()[0] == 1) ++seen;
  }
  std::fprintf(stderr, "test-publisher: publishing on %s\n", endpoint.c_str());

  if (bad_first && batches > 0) {
    const auto records = test::test_batch_records(MessageKind::prompts, 0);
    std::vector<std::uint8_t> body(records.size() * sizeof(CoincRecord));
    for (std::size_t j = 0; j < records.size(); ++j) encode_record(records[j], &body[j * 32]);
    MessageHeader h = test::test_batch_header(MessageKind::prompts, 0, 0,
                                              static_cast<std::uint32_t>(records.size()));
    h.magic = 0x12345678;
    send_message(pub, topic::prompts, h, body.data(), body.size());
    h = test::test_batch_header(MessageKind::prompts, 0, 0,
                                static_cast<std::uint32_t>(records.size()));
    send_message(pub, topic::prompts, h, body.data(), body.size() - 32);
    pub.send(zmq::buffer(topic::delayed), zmq::send_flags::sndmore);
    pub.send(zmq::str_buffer("no header"), zmq::send_flags::none);
  }
  if (bad_first && rates) {
    const std::string broken = "{\"version\": 1, \"rates\": ";
    MessageHeader h;
    send_message(pub, topic::rates, h, broken.data(), broken.size());
  }

  for (int i = 0; i < opaque_histograms; ++i) {
    std::uint8_t body[256];
    for (int j = 0; j < 256; ++j) body[j] = static_cast<std::uint8_t>(j);
    MessageHeader h;
    h.message_id = static_cast<std::uint64_t>(i);
    send_message(pub, topic::histograms, h, body, sizeof body);
  }

  // Coincidence batches: prompts and delayed alternate; message ids count per kind.
  std::uint64_t prompt_id = 0;
  int first_index = 0;  // of the current publisher
  for (int i = 0; i < batches; ++i) {
    if (i == new_publisher_from) {
      ++g_publisher_id;
      prompt_id = 0;
      first_index = i;
    }
    for (MessageKind kind : {MessageKind::prompts, MessageKind::delayed}) {
      const auto records = test::test_batch_records(kind, static_cast<std::uint64_t>(i));
      std::uint64_t id = static_cast<std::uint64_t>(i - first_index);
      if (kind == MessageKind::prompts) {
        id = prompt_id++;
        // A skipped id is a message that was "lost": the id is used, nothing is sent.
        if (skip_prompt_ids.count(id)) continue;
      }
      const MessageHeader h = test::test_batch_header(kind, static_cast<std::uint64_t>(i), id,
                                                      static_cast<std::uint32_t>(records.size()));
      std::vector<std::uint8_t> body(records.size() * sizeof(CoincRecord));
      for (std::size_t j = 0; j < records.size(); ++j) encode_record(records[j], &body[j * 32]);
      send_message(pub, kind == MessageKind::prompts ? topic::prompts : topic::delayed, h,
                   body.data(), body.size());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(gap_ms));
  }

  const std::string histogram_bytes = histograms.empty() ? "" : test::read_text(histograms);
  const std::string image_bytes = image.empty() ? "" : test::read_text(image);
  if (rates && rates_count >= 0) {
    for (long seq = 0; seq < rates_count; ++seq) {
      const std::string doc = test::test_rates_json(static_cast<std::uint64_t>(seq));
      MessageHeader h;
      h.message_id = static_cast<std::uint64_t>(seq);
      send_message(pub, topic::rates, h, doc.data(), doc.size());
      if (interval_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(interval_ms));
    }
  } else if (rates) {
    const auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(duration_s));
    for (std::uint64_t seq = 0; Clock::now() < end; ++seq) {
      const std::string doc = test::test_rates_json(seq);
      MessageHeader h;  // kind 0, no records: the body is JSON
      send_message(pub, topic::rates, h, doc.data(), doc.size());
      if (!histogram_bytes.empty()) {
        MessageHeader hh;
        hh.kind = static_cast<std::uint16_t>(MessageKind::histograms);
        hh.message_id = seq;
        hh.record_count = 1;
        hh.record_size = static_cast<std::uint32_t>(histogram_bytes.size());
        send_message(pub, topic::histograms, hh, histogram_bytes.data(), histogram_bytes.size());
      }
      if (!image_bytes.empty()) {
        MessageHeader hi;
        hi.kind = static_cast<std::uint16_t>(MessageKind::image);
        hi.message_id = seq;
        hi.record_count = 1;
        hi.record_size = static_cast<std::uint32_t>(image_bytes.size());
        send_message(pub, topic::image, hi, image_bytes.data(), image_bytes.size());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(interval_ms));
    }
  }
  return 0;
}

// petdaqd end to end on loopback (DESIGN section 10): the daemon as a child process, frames
// over UDP, coincidences over ZeroMQ, compared with the batch result of the same frames.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <iostream>
#include <limits>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/plm_file.h"
#include "core/test_scanner.h"
#include "daemon_harness.h"
#include "tests/support/files.h"
#include "tests/support/wait.h"

namespace petdaq {
// Readable test names for the framing parameter.
inline void PrintTo(Framing f, std::ostream* os) { *os << to_string(f); }
}  // namespace petdaq

namespace petdaq::test {
namespace {

using namespace std::chrono_literals;

// A test scanner and a running daemon configured for it.
struct Rig {
  TestScanner scanner;
  DaemonConfig daemon;
  std::filesystem::path config;

  Rig() {
    // Small engine buffers: the tests' acquisitions are small.
    auto& st = scanner.settings.stream;
    st.max_slice_frames = 1u << 16;
    st.max_pending_frames = 1u << 18;
    st.max_carry_singles = 1u << 16;
    daemon.udp_port = free_udp_port();
    daemon.zmq_endpoint = "ipc://" + (scanner.dir / "pub.sock").string();
  }
  void write() {
    config = scanner.write_config();
    std::ofstream(config, std::ios::app) << daemon_yaml(daemon);
  }
  std::unique_ptr<DaemonProcess> start(std::vector<std::string> args = {}) {
    write();
    return std::make_unique<DaemonProcess>(config, scanner.dir / "petdaqd.log", std::move(args));
  }
};

bool any_rates(const std::string&) { return true; }

// Waits for the daemon's first rates document: sockets bound, backend up, subscriber joined.
void wait_up(Subscriber& sub, DaemonProcess& d) {
  const auto r = sub.wait_rates(any_rates, 20s);
  ASSERT_TRUE(r.has_value()) << "no rates from petdaqd; log:\n" << d.log();
}

// Waits until the daemon counted `datagrams` datagrams.
std::string wait_datagrams(Subscriber& sub, std::uint64_t datagrams, DaemonProcess& d) {
  const auto r = sub.wait_rates(
      [&](const std::string& j) { return json_counter(j, "rx.datagrams") >= datagrams; }, 30s);
  EXPECT_TRUE(r.has_value()) << "petdaqd did not count " << datagrams << " datagrams; log:\n"
                             << d.log();
  return r.value_or("");
}

// SIGTERM, exit 0, and every message of the final drain delivered.
std::vector<Published> stop_and_collect(Subscriber& sub, DaemonProcess& d) {
  const auto t0 = std::chrono::steady_clock::now();
  d.signal(SIGTERM);
  const auto status = d.wait_for(15s);
  EXPECT_TRUE(status.has_value()) << "petdaqd did not exit after SIGTERM";
  EXPECT_EQ(status.value_or(-1), 0) << d.log();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  // The last message published is the final rates document: take everything the daemon sent.
  EXPECT_TRUE(sub.wait_drained(10s)) << "the subscriber did not see the daemon go";
  return sub.messages();
}

std::string final_rates(const std::vector<Published>& messages) {
  for (auto it = messages.rbegin(); it != messages.rend(); ++it)
    if (it->topic == topic::rates) return std::string(it->body.begin(), it->body.end());
  return "";
}

void expect_no_drops(const std::string& rates) {
  for (const char* c : {"rx.ring_full", "rx.kernel_drops", "rx.foreign_source", "rx.oversize",
                        "rx.seq_missing", "rx.seq_duplicate", "stream.late", "stream.time_jump",
                        "stream.pending_full", "stream.carry_overflow", "coinc.records_overflow",
                        "out.zmq_refused"})
    EXPECT_EQ(json_counter(rates, c), 0u) << c;
}

// The worker's phases in the last rates document (docs/daemon.md, "Worker phases"): they add
// up to no more than the worker's wall time and cover nearly all of it, every phase a run
// must pass through was called, the publish and slice phases were called once per published
// batch and per slice, and each histogram holds its phase's calls. The ring's high-water mark
// stays within the ring and saw the chunks the run used.
void expect_worker_phases(const std::vector<Published>& messages, std::size_t batches) {
  std::size_t ring_used_max = 0, sealed_max = 0, staging_max = 0, ring_chunks = 0;
  nlohmann::json last;
  for (const Published& p : messages) {
    if (p.topic != topic::rates) continue;
    last = nlohmann::json::parse(p.body.begin(), p.body.end());
    ring_used_max = std::max(ring_used_max, last["queues"]["ring_used_max"].get<std::size_t>());
    sealed_max = std::max(sealed_max, last["queues"]["sealed_max"].get<std::size_t>());
    staging_max = std::max(staging_max, last["queues"]["staging_max"].get<std::size_t>());
    ring_chunks = last["queues"]["ring_chunks"].get<std::size_t>();
  }
  ASSERT_TRUE(last.contains("worker"));
  EXPECT_GE(ring_used_max, 1u);
  EXPECT_LE(ring_used_max, ring_chunks);
  EXPECT_GE(sealed_max, 1u);  // every chunk was sealed before the worker took it
  EXPECT_LE(sealed_max, ring_chunks);
  EXPECT_LE(staging_max, ring_chunks);
  const double wall_s = last["worker"]["seconds"].get<double>();
  EXPECT_GT(wall_s, 0.0);
  EXPECT_LE(wall_s, last["uptime_s"].get<double>());
  // One thread's CPU time fits in its wall time (with the kernel's accounting granularity).
  EXPECT_GT(last["worker"]["cpu_seconds"].get<double>(), 0.0);
  EXPECT_LE(last["worker"]["cpu_seconds"].get<double>(), wall_s + 0.02);
  double sum_s = 0;
  for (const auto& [name, phase] : last["worker"]["phases"].items()) {
    const double s = phase["seconds"].get<double>();
    EXPECT_GE(s, 0.0) << name;
    sum_s += s;
    std::uint64_t in_buckets = 0;
    for (const auto& n : phase["log2_us"]) in_buckets += n.get<std::uint64_t>();
    EXPECT_EQ(in_buckets, phase["calls"].get<std::uint64_t>()) << name;
    EXPECT_LE(phase["max_ms"].get<double>(), phase["max_ms_since_start"].get<double>()) << name;
    EXPECT_LE(phase["max_ms_since_start"].get<double>() * 1e-3, s + 1e-12) << name;
  }
  EXPECT_LE(sum_s, wall_s + 1e-9);
  EXPECT_GE(sum_s, 0.9 * wall_s);
  const auto& phases = last["worker"]["phases"];
  for (const char* name : {"wait_chunk", "chunk_scan", "slicer_push", "backend_stage", "release",
                           "slicer_poll", "latency", "submit", "collect", "publish", "rates",
                           "tick", "finish", "loop"})
    EXPECT_GT(phases[name]["calls"].get<std::uint64_t>(), 0u) << name;
  const std::uint64_t slices = last["counters"]["stream.slices"].get<std::uint64_t>();
  EXPECT_EQ(phases["submit"]["calls"].get<std::uint64_t>(), slices);
  EXPECT_EQ(phases["collect"]["calls"].get<std::uint64_t>(), slices);
  EXPECT_EQ(phases["publish"]["calls"].get<std::uint64_t>(), batches);
  // The CPU backend waits on no device.
  EXPECT_EQ(phases["count_wait"]["calls"].get<std::uint64_t>(), 0u);
  EXPECT_EQ(phases["partition_wait"]["calls"].get<std::uint64_t>(), 0u);
}

class EndToEnd : public ::testing::TestWithParam<Framing> {};

TEST_P(EndToEnd, SameCoincidencesAsOfflineAndNothingLost) {
  Rig rig;
  rig.daemon.framing = GetParam();
  std::mt19937_64 rng(7);
  AcquisitionOptions o;
  o.events = 150000;  // > 1 MiB of records: the file sink rotates
  const std::vector<RawFrame> frames = random_acquisition(rig.scanner, rng, o);
  const BatchResult ref = batch_process(rig.scanner, frames);
  ASSERT_GT(ref.prompts.size(), 1000u);
  ASSERT_GT(ref.delayed.size(), 10u);

  // The list-mode file sink too, rotated at 1 MiB.
  rig.daemon.file_directory = rig.scanner.dir / "plm";
  std::filesystem::create_directories(rig.daemon.file_directory);
  auto d = rig.start({"--print-rates"});
  Subscriber sub(rig.daemon.zmq_endpoint);
  wait_up(sub, *d);
  const auto datagrams = make_datagrams(frames, GetParam(), 37, 4);
  UdpSender tx;
  tx.send(datagrams, rig.daemon.udp_port);
  wait_datagrams(sub, datagrams.size(), *d);
  const auto messages = stop_and_collect(sub, *d);

  const Stream prompts = collect(messages, MessageKind::prompts);
  const Stream delayed = collect(messages, MessageKind::delayed);
  EXPECT_TRUE(prompts.ids_consecutive);
  EXPECT_TRUE(delayed.ids_consecutive);
  EXPECT_TRUE(prompts.tiles_time);
  EXPECT_TRUE(delayed.tiles_time);
  EXPECT_EQ(prompts.messages, delayed.messages);
  ASSERT_EQ(prompts.records.size(), ref.prompts.size());
  EXPECT_TRUE(prompts.records == ref.prompts);
  ASSERT_EQ(delayed.records.size(), ref.delayed.size());
  EXPECT_TRUE(delayed.records == ref.delayed);

  const std::string rates = final_rates(messages);
  ASSERT_FALSE(rates.empty());
  expect_no_drops(rates);
  EXPECT_EQ(json_counter(rates, "rx.datagrams"), datagrams.size());
  EXPECT_EQ(json_counter(rates, "rx.frames"), frames.size());
  EXPECT_EQ(json_counter(rates, "coinc.prompts"), ref.prompts.size());
  EXPECT_EQ(json_counter(rates, "coinc.delayed"), ref.delayed.size());
  EXPECT_EQ(json_counter(rates, "single.accepted"), ref.counters[Counter::single_accepted]);
  EXPECT_EQ(json_counter(rates, "frame.bad_bdm"), ref.counters[Counter::frame_bad_bdm]);
  EXPECT_EQ(json_counter(rates, "frame.bad_marker"), ref.counters[Counter::frame_bad_marker]);
  EXPECT_EQ(json_counter(rates, "frame.no_crystal"), ref.counters[Counter::frame_no_crystal]);
  // The per-BDM singles rates are there, one number per BDM.
  EXPECT_NE(rates.find("\"singles_per_s\":["), std::string::npos);
  // The trues estimate names the randoms estimate it used (docs/randoms.md).
  EXPECT_NE(rates.find("\"randoms_method\":\""), std::string::npos) << rates;
  EXPECT_NE(rates.find("\"randoms_singles_rate\":"), std::string::npos) << rates;
  EXPECT_NE(d->log().find("final counters: rx.datagrams="), std::string::npos);
  expect_worker_phases(messages, prompts.messages);
  EXPECT_NE(d->log().find("worker phases: "), std::string::npos);

  // The files hold exactly the published coincidence messages, in order.
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(rig.daemon.file_directory))
    files.push_back(e.path());
  std::sort(files.begin(), files.end());
  EXPECT_GE(files.size(), 2u) << "no rotation: " << json_counter(final_rates(messages), "out.file_bytes");
  std::vector<const Published*> published;
  for (const Published& p : messages)
    if (p.topic == topic::prompts || p.topic == topic::delayed) published.push_back(&p);
  std::size_t at = 0;
  std::uint64_t file_bytes = 0;
  for (const auto& f : files) {
    PlmReader reader(f);
    EXPECT_EQ(reader.header().crystal_count, rig.scanner.geometry().crystal_count());
    MessageHeader h;
    std::vector<CoincRecord> records;
    while (reader.next(h, records)) {
      ASSERT_LT(at, published.size());
      const Published& p = *published[at++];
      std::uint8_t a[kMessageHeaderBytes], b[kMessageHeaderBytes];
      encode_message_header(h, a);
      encode_message_header(p.header, b);
      EXPECT_EQ(std::memcmp(a, b, sizeof a), 0);
      ASSERT_EQ(records.size() * sizeof(CoincRecord), p.body.size());
      EXPECT_EQ(std::memcmp(records.data(), p.body.data(), p.body.size()), 0);
    }
    file_bytes += std::filesystem::file_size(f) - kPlmHeaderBytes;
  }
  EXPECT_EQ(at, published.size());
  EXPECT_EQ(json_counter(rates, "out.file_bytes"), file_bytes);
}

INSTANTIATE_TEST_SUITE_P(Framings, EndToEnd, ::testing::Values(Framing::raw, Framing::sequenced),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// One frame on its own in a datagram of source `source` (sequenced framing: its own
// numbering, so the good sources' sequences are untouched).
Datagram lone_frame(const RawFrame& f, Framing framing, std::uint16_t source, std::uint32_t seq) {
  std::vector<RawFrame> one{f};
  Datagram d;
  if (framing == Framing::raw) {
    d.assign(f.bytes, f.bytes + kFrameBytes);
    return d;
  }
  d.resize(kSequencedHeaderBytes + kFrameBytes);
  SequencedHeader h;
  h.source_id = source;
  h.sequence = seq;
  h.frame_count = 1;
  encode_sequenced_header(h, d.data());
  std::memcpy(d.data() + kSequencedHeaderBytes, f.bytes, kFrameBytes);
  return d;
}

class BadTraffic : public ::testing::TestWithParam<Framing> {};

TEST_P(BadTraffic, CountedWhileGoodTrafficGivesTheReference) {
  const Framing framing = GetParam();
  Rig rig;
  rig.daemon.framing = framing;
  rig.daemon.allowed_sources = "127.0.0.1/32";
  // The test pauses mid-acquisition; the sources must not be taken for idle meanwhile.
  rig.scanner.settings.stream.source_idle_ms = 60'000;
  std::mt19937_64 rng(11);
  AcquisitionOptions o;
  o.events = 20000;
  o.bad_fraction = 0;
  const std::vector<RawFrame> frames = random_acquisition(rig.scanner, rng, o);
  const BatchResult ref = batch_process(rig.scanner, frames);
  auto good = make_datagrams(frames, framing, 50, 4);
  ASSERT_GT(good.size(), 100u);

  auto d = rig.start();
  Subscriber sub(rig.daemon.zmq_endpoint);
  wait_up(sub, *d);
  UdpSender tx;
  UdpSender foreign("127.0.0.2");
  const std::size_t half = good.size() / 2;
  std::vector<Datagram> first(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(half));
  std::vector<Datagram> second(good.begin() + static_cast<std::ptrdiff_t>(half), good.end());
  std::uint64_t sent = 0;
  tx.send(first, rig.daemon.udp_port);
  sent += first.size();
  // Coincidences published: the horizon has passed the start of the acquisition.
  ASSERT_TRUE(sub.wait_rates([](const std::string& j) { return json_counter(j, "coinc.prompts") > 0; },
                             20s))
      << d->log();

  // Malformed datagrams.
  std::vector<std::uint8_t> garbage(9000);
  for (auto& b : garbage) b = static_cast<std::uint8_t>(rng());
  tx.send({Datagram{}, Datagram(15, 0x5A), garbage}, rig.daemon.udp_port);
  sent += 3;
  // A foreign source: good-looking data, dropped unseen.
  foreign.send({first.back()}, rig.daemon.udp_port);
  sent += 1;
  // Wild timestamps: one far in the future (a time jump), one far in the past (late).
  const std::uint64_t now_ticks = frame_time(second.front().data() +
                                             (framing == Framing::sequenced ? kSequencedHeaderBytes : 0));
  tx.send({lone_frame(rig.scanner.frame(0, 0, 1, now_ticks + 1'000'000'000'000ull, 511), framing, 100, 0),
           lone_frame(rig.scanner.frame(1, 0, 2, 10, 511), framing, 101, 0)},
          rig.daemon.udp_port);
  sent += 2;
  if (framing == Framing::sequenced) {
    // A duplicate of the last good datagram (its frames must not be counted twice) and a
    // gap: the next datagram of one source skips a number.
    tx.send({first.back()}, rig.daemon.udp_port);
    sent += 1;
    for (Datagram& g : second) {
      SequencedHeader h = decode_sequenced_header(g.data());
      if (h.source_id == 2) {
        h.sequence += 1;
        encode_sequenced_header(h, g.data());
      }
    }
  }
  tx.send(second, rig.daemon.udp_port);
  sent += second.size();
  wait_datagrams(sub, sent, *d);
  ASSERT_TRUE(d->running()) << d->log();
  const auto messages = stop_and_collect(sub, *d);

  const Stream prompts = collect(messages, MessageKind::prompts);
  const Stream delayed = collect(messages, MessageKind::delayed);
  EXPECT_TRUE(prompts.ids_consecutive);
  EXPECT_TRUE(prompts.records == ref.prompts) << prompts.records.size() << " vs " << ref.prompts.size();
  EXPECT_TRUE(delayed.records == ref.delayed) << delayed.records.size() << " vs " << ref.delayed.size();

  const std::string rates = final_rates(messages);
  ASSERT_FALSE(rates.empty());
  EXPECT_EQ(json_counter(rates, "rx.foreign_source"), 1u);
  EXPECT_EQ(json_counter(rates, "stream.time_jump"), 1u);
  EXPECT_EQ(json_counter(rates, "stream.late"), 1u);
  EXPECT_EQ(json_counter(rates, "rx.ring_full"), 0u);
  if (framing == Framing::raw) {
    EXPECT_EQ(json_counter(rates, "rx.empty"), 2u);             // 0 and 15 bytes
    EXPECT_EQ(json_counter(rates, "rx.trailing_bytes"), 15u + 8u);  // 15 and 9000 % 16
    // 562 garbage frames, each refused under its first bad field.
    std::uint64_t bad = 0;
    for (const char* c : {"frame.bad_marker", "frame.bad_bdm", "frame.bad_du",
                          "frame.bad_position", "frame.no_crystal", "frame.bad_time",
                          "stream.late", "stream.time_jump", "single.energy_rejected"})
      bad += json_counter(rates, c);
    EXPECT_GE(bad, 562u);
  } else {
    EXPECT_EQ(json_counter(rates, "rx.bad_header"), 3u);
    EXPECT_EQ(json_counter(rates, "rx.seq_duplicate"), 1u);
    EXPECT_EQ(json_counter(rates, "rx.seq_missing"), 1u);
    EXPECT_EQ(json_counter(rates, "rx.frames"), frames.size() + 2);  // + the two wild frames
  }
}

INSTANTIATE_TEST_SUITE_P(Framings, BadTraffic, ::testing::Values(Framing::raw, Framing::sequenced),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// Isolated pairs, each far from the next (more than the delayed offset plus a window), so
// any subset of frames gives a known subset of records: a record is either exactly its
// pair's or wrong.
std::vector<RawFrame> isolated_pairs(const TestScanner& sc, std::uint64_t first_pair,
                                     std::uint64_t pairs, std::mt19937_64& rng) {
  std::vector<RawFrame> out;
  out.reserve(pairs * 2);
  std::uniform_int_distribution<std::uint32_t> du(0, 3), crystal(0, 15);
  for (std::uint64_t i = first_pair; i < first_pair + pairs; ++i) {
    const std::uint64_t t = 1'000'000 + i * 20'000;
    const auto b = static_cast<std::uint32_t>(i % 2);
    out.push_back(sc.frame(b, du(rng), crystal(rng), t, 500));
    out.push_back(sc.frame(b + 2, du(rng), crystal(rng), t + 40, 520));
  }
  return out;
}

TEST(Overload, DropsAreCountedMemoryStaysFlatAndTheDaemonRecovers) {
  Rig rig;
  rig.daemon.ring_chunk_bytes = 1u << 16;
  rig.daemon.ring_chunks = 16;
  rig.daemon.receive_buffer_bytes = 8u << 20;
  // Drops leave gaps in time far longer than the default 10 ms; the frames after a gap are
  // real data, not corrupt timestamps.
  rig.scanner.settings.stream.max_future_ps = 1e15;
  std::mt19937_64 rng(5);
  // Warm-up, overload, recovery: consecutive stretches of time.
  const std::uint64_t warm_pairs = 200'000, burst_pairs = 1'500'000, calm_pairs = 20'000;
  const auto warm = isolated_pairs(rig.scanner, 0, warm_pairs, rng);
  const auto burst = isolated_pairs(rig.scanner, warm_pairs, burst_pairs, rng);
  const auto calm = isolated_pairs(rig.scanner, warm_pairs + burst_pairs, calm_pairs, rng);
  std::vector<RawFrame> all = warm;
  all.insert(all.end(), burst.begin(), burst.end());
  all.insert(all.end(), calm.begin(), calm.end());
  const BatchResult ref = batch_process(rig.scanner, all);
  ASSERT_EQ(ref.prompts.size(), warm_pairs + burst_pairs + calm_pairs);
  std::map<std::uint64_t, CoincRecord> expected;
  for (const CoincRecord& r : ref.prompts) expected[r.time_a] = r;

  auto d = rig.start();
  Subscriber sub(rig.daemon.zmq_endpoint);
  wait_up(sub, *d);
  UdpSender tx;
  std::uint64_t sent = 0;
  auto send = [&](const std::vector<RawFrame>& frames, double datagrams_per_s) {
    const auto dg = make_datagrams(frames, Framing::raw, 560, 4);
    tx.send(dg, rig.daemon.udp_port, datagrams_per_s);
    sent += dg.size();
  };
  auto settle = [&] {
    // Counted datagrams stop changing once the burst is absorbed or dropped: the same count
    // in two rates documents one after the other (a loaded machine may publish late, so the
    // looks compare documents, not moments).
    std::uint64_t last = ~0ull;
    double last_doc = -1;
    std::string rates;
    EXPECT_TRUE(wait_until(
        [&] {
          rates = sub.last_rates().value_or("");
          if (rates.empty()) return false;
          const double doc = json_number(rates, "time_unix_ns");
          if (doc == last_doc) return false;
          last_doc = doc;
          const std::uint64_t now =
              json_counter(rates, "rx.datagrams") + json_counter(rates, "rx.kernel_drops");
          const bool still = now == last;
          last = now;
          return still;
        },
        15s, 100ms))
        << "the datagram count did not settle";
    return rates;
  };

  send(warm, 0);  // touches every buffer once
  settle();
  const std::uint64_t rss_start_kib = vm_rss_kib(d->pid());
  send(burst, 0);
  const std::string after_burst = settle();
  const std::uint64_t rss_burst_kib = vm_rss_kib(d->pid());
  // Shed as dead time (DESIGN section 6) or, past that, dropped by the receiver.
  const std::uint64_t dropped = json_counter(after_burst, "rx.ring_full") +
                                json_counter(after_burst, "rx.kernel_drops") +
                                json_counter(after_burst, "stream.dead_frames");
  EXPECT_GT(dropped, 0u) << "the burst did not overload the daemon";
  // The burst's backlog is worked off before the calm stretch: every ring chunk is free again
  // but the one the receiver may be filling.
  EXPECT_TRUE(sub.wait_rates(
                     [](const std::string& j) {
                       return json_number(j, "ring_free") + 1 >= json_number(j, "ring_chunks");
                     },
                     20s)
                  .has_value())
      << "the ring did not drain; last rates: " << sub.last_rates().value_or("");
  // The counters once the burst is wholly worked off (on a loaded machine the receiver may
  // still have been taking the burst's last datagrams from the socket when it first settled).
  const std::string before_calm = settle();
  send(calm, 100);
  const std::string after_calm = settle();
  const std::uint64_t rss_calm_kib = vm_rss_kib(d->pid());
  // The calm stretch is taken whole: no drop counter moved.
  EXPECT_EQ(json_counter(after_calm, "rx.ring_full"), json_counter(before_calm, "rx.ring_full"));
  EXPECT_EQ(json_counter(after_calm, "rx.kernel_drops"), json_counter(before_calm, "rx.kernel_drops"));
  ASSERT_TRUE(d->running()) << d->log();
  const auto messages = stop_and_collect(sub, *d);

  // Memory: fixed after start-up, whatever the load.
  std::cerr << "VmRSS kiB: after warm-up " << rss_start_kib << ", after the burst " << rss_burst_kib
            << ", after recovery " << rss_calm_kib << "; dropped datagrams " << dropped << "\n";
  EXPECT_LE(rss_burst_kib, rss_start_kib + 8 * 1024) << rss_start_kib << " -> " << rss_burst_kib;
  EXPECT_LE(rss_calm_kib, rss_start_kib + 8 * 1024) << rss_start_kib << " -> " << rss_calm_kib;

  // What was accepted was processed correctly: every record is its pair's, once.
  const Stream prompts = collect(messages, MessageKind::prompts);
  EXPECT_TRUE(prompts.ids_consecutive);
  std::set<std::uint64_t> seen;
  for (const CoincRecord& r : prompts.records) {
    const auto it = expected.find(r.time_a);
    ASSERT_NE(it, expected.end()) << "a record no pair makes, at " << r.time_a;
    EXPECT_TRUE(it->second == r);
    EXPECT_TRUE(seen.insert(r.time_a).second) << "published twice: " << r.time_a;
  }
  EXPECT_LT(prompts.records.size(), expected.size());
  // ... and every pair of the calm stretch came through.
  const std::uint64_t calm_from_ticks = 1'000'000 + (warm_pairs + burst_pairs) * 20'000 - 100;
  std::size_t calm_found = 0;
  std::vector<std::uint64_t> calm_missing;
  for (const auto& [t, r] : expected)
    if (t >= calm_from_ticks) {
      calm_found += seen.count(t);
      if (!seen.count(t)) calm_missing.push_back((t - calm_from_ticks) / 20'000);
    }
  if (!calm_missing.empty())
    std::cerr << "calm pairs missing: " << calm_missing.size() << ", first " << calm_missing.front()
              << ", last " << calm_missing.back() << "\n";
  const std::string rates = final_rates(messages);
  // Datagrams the kernel dropped at the end of the burst show on the first datagram after
  // them, the calm stretch's: that loss makes the time up to the boards' disorder past that
  // datagram dead for every board (DESIGN section 6, "Losses at a socket"), and nothing else
  // of the calm stretch is lost.
  const Settings& st = rig.scanner.settings;
  const std::uint64_t disorder = ps_to_ticks(st.stream.max_disorder_ps, st.scanner.tick_ps);
  for (const std::uint64_t k : calm_missing) EXPECT_LE(k * 20'000, disorder + 100) << "calm pair " << k;
  if (!calm_missing.empty()) EXPECT_GT(json_counter(rates, "stream.loss_intervals"), 0u) << rates;
  EXPECT_LE(calm_missing.size(), disorder / 20'000 + 1);
  EXPECT_EQ(json_counter(rates, "stream.late"), 0u);
  EXPECT_EQ(json_counter(rates, "stream.time_jump"), 0u);
}

TEST(Subscribers, AStalledSubscriberLosesAloneTheOthersMissNothing) {
  Rig rig;
  rig.daemon.send_hwm = 20;
  std::mt19937_64 rng(3);
  AcquisitionOptions o;
  o.events = 75000;
  o.bad_fraction = 0;
  // Two stretches of acquisition, the second after the first in time: the pause between
  // them makes every source idle, which closes the first stretch.
  auto frames = random_acquisition(rig.scanner, rng, o);
  const std::uint64_t first_end = frame_time(frames.back().bytes);
  auto datagrams = make_datagrams(frames, Framing::raw, 100, 4);
  const std::size_t half = datagrams.size();
  o.start_ticks = first_end + 1'000'000;
  o.events = 30000;
  const auto later = random_acquisition(rig.scanner, rng, o);
  const auto later_datagrams = make_datagrams(later, Framing::raw, 100, 4);
  frames.insert(frames.end(), later.begin(), later.end());
  datagrams.insert(datagrams.end(), later_datagrams.begin(), later_datagrams.end());

  auto d = rig.start();
  Subscriber early(rig.daemon.zmq_endpoint);
  wait_up(early, *d);
  UdpSender tx;
  tx.send({datagrams.begin(), datagrams.begin() + static_cast<std::ptrdiff_t>(half)},
          rig.daemon.udp_port, 20000);
  wait_datagrams(early, half, *d);

  // A late subscriber: it joins mid-run and sees consecutive ids from where it joined.
  Subscriber late(rig.daemon.zmq_endpoint);
  ASSERT_TRUE(late.wait_rates(any_rates, 10s).has_value());
  // A stalled one: it never reads, so its queue fills and it misses messages.
  auto stalled = std::make_unique<Subscriber>(rig.daemon.zmq_endpoint, 1, false);
  const auto three = early.wait_rates(
      [](const std::string& j) { return json_number(j, "subscribers") == 3; }, 10s);
  ASSERT_TRUE(three.has_value()) << "the rates document does not count 3 subscribers";
  // Slowly, so that many slices (and messages) are published while it is stalled.
  tx.send({datagrams.begin() + static_cast<std::ptrdiff_t>(half), datagrams.end()},
          rig.daemon.udp_port, 250);
  const std::string rates = wait_datagrams(early, datagrams.size(), *d);
  ASSERT_TRUE(d->running());
  stalled.reset();
  ASSERT_FALSE(rates.empty());
  EXPECT_EQ(json_counter(rates, "out.zmq_refused"), 0u);
  EXPECT_EQ(json_counter(rates, "rx.ring_full"), 0u);
  EXPECT_EQ(json_counter(rates, "rx.kernel_drops"), 0u);
  EXPECT_EQ(json_counter(rates, "rx.frames"), frames.size());
  EXPECT_EQ(json_counter(rates, "stream.late"), 0u);
  EXPECT_EQ(json_counter(rates, "out.zmq_connects"), 3u);
  const auto messages = stop_and_collect(early, *d);
  // The healthy subscriber missed nothing while the stalled one held its queue full: every
  // message id, every prompt of the batch result.
  const Stream prompts = collect(messages, MessageKind::prompts);
  const BatchResult ref = batch_process(rig.scanner, frames);
  EXPECT_TRUE(prompts.ids_consecutive);
  EXPECT_TRUE(prompts.tiles_time);
  EXPECT_EQ(prompts.records.size(), ref.prompts.size());
  EXPECT_EQ(json_counter(final_rates(messages), "coinc.prompts"), ref.prompts.size());

  const auto late_messages = late.messages();
  std::optional<std::uint64_t> first_id;
  for (const Published& p : late_messages)
    if (p.topic == topic::prompts && !first_id) first_id = p.header.message_id;
  ASSERT_TRUE(first_id.has_value());
  EXPECT_GT(*first_id, 0u);
}

// A local process that opens a flood of subscriptions that can match nothing: the daemon
// refuses and counts them, and its resident memory stays bounded while the flood goes on
// and after the flooder left.
TEST(Subscribers, ASubscriptionFloodCannotGrowTheDaemonsMemory) {
  Rig rig;
  auto d = rig.start();
  {
    Subscriber first(rig.daemon.zmq_endpoint);
    wait_up(first, *d);
  }
  const std::uint64_t before_kib = vm_rss_kib(d->pid());
  std::uint64_t peak_kib = before_kib;
  {
    zmq::context_t context(1);
    zmq::socket_t flood(context, zmq::socket_type::sub);
    flood.set(zmq::sockopt::sndhwm, 0);
    flood.set(zmq::sockopt::linger, 0);
    flood.connect(rig.daemon.zmq_endpoint);
    char topic[64];
    for (int i = 0; i < 400000; ++i) {
      const int n = std::snprintf(topic, sizeof topic, "no-such-topic-%09d-abcdefghijklmnopqrstuvw", i);
      flood.set(zmq::sockopt::subscribe, std::string_view(topic, static_cast<std::size_t>(n)));
      if (i % 2000 == 0) peak_kib = std::max(peak_kib, vm_rss_kib(d->pid()));
    }
    // The flooder stays connected a while (its subscriptions are sent again each time it
    // reconnects): time passing is the test here, the memory sampled all along.
    const auto until = std::chrono::steady_clock::now() + 3s;
    while (std::chrono::steady_clock::now() < until) {
      peak_kib = std::max(peak_kib, vm_rss_kib(d->pid()));
      std::this_thread::sleep_for(20ms);
    }
  }
  Subscriber watcher(rig.daemon.zmq_endpoint);
  const auto rates = watcher.wait_rates(
      [](const std::string& j) { return json_counter(j, "out.zmq_resets") >= 1; }, 20s);
  ASSERT_TRUE(rates.has_value()) << d->log();
  EXPECT_GT(json_counter(*rates, "out.zmq_subscriptions_refused"),
            std::uint64_t{4096});
  // What the reset freed is given back: wait for the resident memory to come down.
  std::uint64_t after_kib = 0;
  wait_until([&] {
    after_kib = vm_rss_kib(d->pid());
    return after_kib < before_kib + 32 * 1024;
  }, 10s);
  std::cerr << "resident memory: " << before_kib << " KiB before, peak " << peak_kib
            << " KiB during the flood, " << after_kib << " KiB after\n";
  // Kept, these subscriptions took some 210 MiB for good. Now libzmq holds a few thousand at
  // a time before the socket is reset, and what it freed is given back. The peak also holds
  // what libzmq's I/O thread buffers for the flooding connection (more on a busy machine):
  // it is only checked against a generous bound; the unit's MemoryMax= caps it.
  EXPECT_LT(peak_kib, before_kib + 384 * 1024);
  EXPECT_LT(after_kib, before_kib + 32 * 1024);
  EXPECT_TRUE(d->running());
}

struct KeyPair {
  std::string public_key, secret_key;
  KeyPair() {
    char pub[41], sec[41];
    EXPECT_EQ(zmq_curve_keypair(pub, sec), 0);
    public_key = pub;
    secret_key = sec;
  }
};

// With CURVE keys configured, only a client whose public key is listed can subscribe; a
// client without CURVE or with another key gets nothing, and each refusal is counted.
TEST(Subscribers, CurveAdmitsOnlyTheListedClients) {
  Rig rig;
  const KeyPair server, allowed, stranger;
  std::ofstream(rig.scanner.dir / "server.key") << "# petdaqd's secret key\n" << server.secret_key << "\n";
  // Readable by every user first: refused, naming the key.
  std::filesystem::permissions(rig.scanner.dir / "server.key", std::filesystem::perms::owner_read |
                                                                   std::filesystem::perms::owner_write |
                                                                   std::filesystem::perms::others_read);
  std::ofstream(rig.scanner.dir / "clients.keys") << "# recorder\n" << allowed.public_key << "\n";
  rig.daemon.extra = "";
  rig.write();
  {
    std::string text = read_text(rig.config);
    const std::string hwm = "    send_hwm: " + std::to_string(rig.daemon.send_hwm) + "\n";
    text.replace(text.find(hwm), hwm.size(),
                 hwm + "    curve_secret_key_file: server.key\n    curve_client_keys_file: clients.keys\n");
    std::ofstream(rig.config) << text;
  }
  {
    const auto [status, out] = run_daemon_to_exit({"--config", rig.config.string(), "--check-config"},
                                                  rig.scanner.dir / "check.log");
    ASSERT_EQ(status, 2) << out;
    EXPECT_NE(out.find("curve_secret_key_file"), std::string::npos) << out;
    EXPECT_NE(out.find("readable by every user"), std::string::npos) << out;
  }
  std::filesystem::permissions(rig.scanner.dir / "server.key",
                               std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  {
    const auto [status, out] = run_daemon_to_exit({"--config", rig.config.string(), "--check-config"},
                                                  rig.scanner.dir / "check.log");
    ASSERT_EQ(status, 0) << out;
  }
  auto d = std::make_unique<DaemonProcess>(rig.config, rig.scanner.dir / "petdaqd.log");
  Subscriber plain(rig.daemon.zmq_endpoint);
  Subscriber wrong(rig.daemon.zmq_endpoint, 0, true, true, "",
                   CurveClient{server.public_key, stranger.public_key, stranger.secret_key});
  Subscriber good(rig.daemon.zmq_endpoint, 0, true, true, "",
                  CurveClient{server.public_key, allowed.public_key, allowed.secret_key});
  const auto first = good.wait_rates(any_rates, 20s);
  ASSERT_TRUE(first.has_value()) << d->log();
  const auto r = good.wait_rates(
      [](const std::string& j) { return json_counter(j, "out.zmq_auth_refused") >= 2; }, 20s);
  ASSERT_TRUE(r.has_value()) << d->log() << good.last_rates().value_or("");
  EXPECT_FALSE(plain.last_rates().has_value());
  EXPECT_FALSE(wrong.last_rates().has_value());
  EXPECT_TRUE(plain.messages().empty());
  EXPECT_TRUE(wrong.messages().empty());
  // A bad key file is refused by name.
  std::ofstream(rig.scanner.dir / "clients.keys") << "not-a-key\n";
  const auto [status, out] = run_daemon_to_exit({"--config", rig.config.string(), "--check-config"},
                                                rig.scanner.dir / "check.log");
  EXPECT_EQ(status, 2) << out;
  EXPECT_NE(out.find("output.zmq.curve_client_keys_file"), std::string::npos) << out;
}

TEST(Lifecycle, CheckConfigAcceptsAGoodConfiguration) {
  Rig rig;
  rig.write();
  const auto [status, out] = run_daemon_to_exit({"--config", rig.config.string(), "--check-config"},
                                                rig.scanner.dir / "check.log");
  EXPECT_EQ(status, 0) << out;
}

TEST(Lifecycle, UnknownKeyIsRefusedWithItsPathAndExitCode2) {
  Rig rig;
  rig.daemon.input_extra = "  flush_msec: 5\n";
  rig.write();
  for (bool check : {true, false}) {
    std::vector<std::string> args = {"--config", rig.config.string()};
    if (check) args.push_back("--check-config");
    const auto [status, out] = run_daemon_to_exit(args, rig.scanner.dir / "bad.log");
    EXPECT_EQ(status, 2) << out;
    EXPECT_NE(out.find("input.flush_msec"), std::string::npos) << out;
  }
}

TEST(Lifecycle, MissingCalibrationIsRefusedWithItsFileAndExitCode2) {
  Rig rig;
  rig.write();
  std::filesystem::remove(rig.scanner.dir / "energy_correction.npy");
  const auto [status, out] =
      run_daemon_to_exit({"--config", rig.config.string()}, rig.scanner.dir / "nocal.log");
  EXPECT_EQ(status, 2) << out;
  EXPECT_NE(out.find("energy_correction.npy"), std::string::npos) << out;
}

TEST(Lifecycle, BadCommandLineExits2) {
  TestScanner sc;
  const auto [status, out] = run_daemon_to_exit({"--backend", "tpu"}, sc.dir / "usage.log");
  EXPECT_EQ(status, 2);
  EXPECT_NE(out.find("--backend: tpu not in {auto,cpu,gpu}"), std::string::npos) << out;
}

TEST(Lifecycle, PortInUseFailsToStartWithExitCode1) {
  Rig rig;
  // Hold the daemon's port with a socket of our own.
  const int fd = socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(rig.daemon.udp_port);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  rig.write();
  const auto [status, out] =
      run_daemon_to_exit({"--config", rig.config.string()}, rig.scanner.dir / "busy.log");
  close(fd);
  EXPECT_EQ(status, 1) << out;
  EXPECT_NE(out.find("cannot bind UDP"), std::string::npos) << out;
}

// A second daemon on the port of a running one is refused at start, naming the port, even
// where SO_REUSEPORT (several receiver threads) would let it bind and take half the traffic.
TEST(Lifecycle, ASecondDaemonOnTheSameUdpPortIsRefused) {
  Rig first;
  first.daemon.receiver_threads = 2;
  auto d1 = first.start();
  Subscriber sub(first.daemon.zmq_endpoint);
  wait_up(sub, *d1);
  Rig second;
  second.daemon.receiver_threads = 2;
  second.daemon.udp_port = first.daemon.udp_port;
  second.write();
  const auto [status, out] =
      run_daemon_to_exit({"--config", second.config.string()}, second.scanner.dir / "second.log");
  EXPECT_EQ(status, 1) << out;
  EXPECT_NE(out.find("127.0.0.1:" + std::to_string(first.daemon.udp_port)), std::string::npos) << out;
  EXPECT_NE(out.find("already bound"), std::string::npos) << out;
  EXPECT_TRUE(d1->running());
}

// A second daemon on the ipc endpoint of a running one is refused; the first keeps serving it.
TEST(Lifecycle, ASecondDaemonOnTheSameIpcEndpointIsRefused) {
  Rig first;
  auto d1 = first.start();
  Subscriber sub(first.daemon.zmq_endpoint);
  wait_up(sub, *d1);
  Rig second;
  second.daemon.zmq_endpoint = first.daemon.zmq_endpoint;
  second.write();
  for (bool check : {true, false}) {
    std::vector<std::string> args = {"--config", second.config.string()};
    if (check) args.push_back("--check-config");
    const auto [status, out] = run_daemon_to_exit(args, second.scanner.dir / "second.log");
    EXPECT_EQ(status, 1) << out;
    EXPECT_NE(out.find(first.daemon.zmq_endpoint), std::string::npos) << out;
  }
  // Still the first daemon's: a new subscriber gets its rates.
  Subscriber later(first.daemon.zmq_endpoint);
  EXPECT_TRUE(later.wait_rates(any_rates, 10s).has_value());
  EXPECT_TRUE(d1->running());
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

// Every start-up failure --check-config can know of is caught there, by key, instead of
// passing the check and failing at start (a restart loop under systemd).
TEST(Lifecycle, CheckConfigCatchesWhatWouldFailAtStart) {
  Rig rig;
  rig.daemon.file_directory = rig.scanner.dir / "plm";
  std::filesystem::create_directories(rig.daemon.file_directory);
  rig.write();
  const std::string base = read_text(rig.config);
  {
    const auto [status, out] = run_daemon_to_exit({"--config", rig.config.string(), "--check-config"},
                                                  rig.scanner.dir / "check.log");
    ASSERT_EQ(status, 0) << out;
  }
  const std::string port = std::to_string(rig.daemon.udp_port);
  struct Case {
    std::string name, from, to, key;
  };
  const std::vector<Case> cases = {
      {"an address that is no address", "127.0.0.1:" + port, "256.1.1.1:" + port, "input.endpoints[0]"},
      {"a host name", "127.0.0.1:" + port, "no-such-host.invalid:" + port, "input.endpoints[0]"},
      {"an address not on this machine", "127.0.0.1:" + port, "192.0.2.1:" + port, "input.endpoints[0]"},
      {"a ZeroMQ endpoint that is no endpoint", rig.daemon.zmq_endpoint, "garbage", "output.zmq.endpoint"},
      {"a ZeroMQ host that does not resolve", rig.daemon.zmq_endpoint,
       "tcp://no-such-host.invalid:5556", "output.zmq.endpoint"},
      {"an ipc directory that does not exist", rig.daemon.zmq_endpoint,
       "ipc://" + (rig.scanner.dir / "nowhere" / "pub.sock").string(), "output.zmq.endpoint"},
      {"a missing sink directory", "plm\"", "no-such-directory\"", "output.file.directory"},
      {"a ring larger than memory", "ring_chunk_bytes: 1048576\n  ring_chunks: 32",
       "ring_chunk_bytes: 4294967296\n  ring_chunks: 1048576", "input.ring_chunks"},
      {"a slice larger than memory", "max_slice_frames: 65536\n  max_pending_frames: 262144",
       "max_slice_frames: 1073741824\n  max_pending_frames: 1073741824", "stream.max_slice_frames"},
      {"a message arena larger than memory", "send_hwm: " + std::to_string(rig.daemon.send_hwm) + "\n",
       "send_hwm: " + std::to_string(rig.daemon.send_hwm) + "\n    message_buffer_bytes: 1099511627776\n",
       "output.zmq.message_buffer_bytes"},
  };
  for (const Case& c : cases) {
    std::ofstream(rig.config) << replaced(base, c.from, c.to);
    const auto [status, out] = run_daemon_to_exit({"--config", rig.config.string(), "--check-config"},
                                                  rig.scanner.dir / "check.log");
    EXPECT_EQ(status, 2) << c.name << "\n" << out;
    EXPECT_NE(out.find(c.key), std::string::npos) << c.name << "\n" << out;
    // The daemon itself refuses the sizes before mapping anything, naming the key (exit 2,
    // quickly).
    if (c.key == "input.ring_chunks" || c.key == "stream.max_slice_frames" ||
        c.key == "output.zmq.message_buffer_bytes") {
      const auto t0 = std::chrono::steady_clock::now();
      const auto [st, o] = run_daemon_to_exit({"--config", rig.config.string()}, rig.scanner.dir / "start.log");
      EXPECT_EQ(st, 2) << c.name << "\n" << o;
      EXPECT_NE(o.find(c.key), std::string::npos) << c.name << "\n" << o;
      EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s) << c.name;
    }
  }
  // A port another process holds: exit 1 (it may clear), naming the key and the port.
  {
    std::ofstream(rig.config) << base;
    const int fd = socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(rig.daemon.udp_port);
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    const auto [status, out] = run_daemon_to_exit({"--config", rig.config.string(), "--check-config"},
                                                  rig.scanner.dir / "check.log");
    close(fd);
    EXPECT_EQ(status, 1) << out;
    EXPECT_NE(out.find("input.endpoints[0]"), std::string::npos) << out;
    EXPECT_NE(out.find("already bound"), std::string::npos) << out;
  }
}

// An energy-correction table with some NaN or infinite gains loads (crystals taken out of
// use), and the check says what it will do; one with no finite gain at all is refused at
// the check and at start (exit 2), naming the key.
TEST(Lifecycle, CheckConfigWarnsOfNonFiniteEnergyCorrectionsAndRefusesAllOfThem) {
  Rig rig;
  rig.write();
  const auto table = rig.scanner.dir / "energy_correction.npy";
  NpyArray a = read_npy(table);
  ASSERT_EQ(a.dtype, "<f4");
  std::vector<float> gains(a.element_count(), 1.0f);
  gains[0] = std::numeric_limits<float>::infinity();
  gains[1] = std::numeric_limits<float>::quiet_NaN();
  write_npy(table, a.shape, gains);
  {
    const auto [status, out] = run_daemon_to_exit(
        {"--config", rig.config.string(), "--check-config"}, rig.scanner.dir / "check.log");
    EXPECT_EQ(status, 0) << out;
    EXPECT_NE(out.find("warning: calibration.energy_correction: 2 of " +
                       std::to_string(gains.size()) + " entries are NaN or infinite"),
              std::string::npos)
        << out;
  }
  std::fill(gains.begin(), gains.end(), std::numeric_limits<float>::quiet_NaN());
  gains[0] = std::numeric_limits<float>::infinity();
  write_npy(table, a.shape, gains);
  for (const bool check : {true, false}) {
    std::vector<std::string> args = {"--config", rig.config.string()};
    if (check) args.push_back("--check-config");
    const auto [status, out] = run_daemon_to_exit(args, rig.scanner.dir / "check.log");
    EXPECT_EQ(status, 2) << out;
    EXPECT_NE(out.find("configuration refused: calibration.energy_correction: all " +
                       std::to_string(gains.size()) + " entries are NaN or infinite"),
              std::string::npos)
        << out;
  }
}

// A run_id names one run across restarts of the daemon.
// DESIGN section 9, `cpus`: each busy thread runs where the section puts it (the kernel's
// own record of it, /proc/<pid>/task/<tid>/status), and a CPU the daemon may not run on is
// refused at the check and at start, naming the key.
TEST(Lifecycle, CpusPlaceTheBusyThreadsAndACpuItMayNotUseIsRefused) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  std::vector<int> mine;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) mine.push_back(c);
  const std::string first = std::to_string(mine.front()), last = std::to_string(mine.back());
  Rig rig;
  rig.daemon.receiver_threads = 2;
  rig.daemon.extra = "backend_threads: 3\ncpus:\n  receivers: \"" + last + "," + first +
                     "\"\n  worker: \"" + first + "\"\n  backend: \"" + last + "\"\n";
  {
    auto d = rig.start({"--backend", "cpu"});
    Subscriber sub(rig.daemon.zmq_endpoint);
    ASSERT_TRUE(sub.wait_rates(any_rates, 20s).has_value()) << d->log();
    const auto placed = allowed_cpus_by_thread(d->pid());
    auto at = [&](const std::string& name) {
      const auto it = placed.find(name);
      return it == placed.end() ? std::string("(no such thread)") : it->second;
    };
    EXPECT_EQ(at("petdaq-rx0"), last);
    EXPECT_EQ(at("petdaq-rx1"), first);
    EXPECT_EQ(at("petdaq-worker"), first);
    EXPECT_EQ(at("petdaq-pool1"), last);
    EXPECT_EQ(at("petdaq-pool2"), last);  // the list wraps
    d->signal(SIGTERM);
    ASSERT_EQ(d->wait_for(15s).value_or(-1), 0);
  }
  // A CPU this process may not run on: the check and the start refuse it (exit 2).
  int outside = 0;
  while (CPU_ISSET(outside, &set)) ++outside;
  rig.daemon.extra = "cpus:\n  worker: \"" + std::to_string(outside) + "\"\n";
  rig.write();
  for (const bool check : {true, false}) {
    std::vector<std::string> args = {"--config", rig.config.string()};
    if (check) args.push_back("--check-config");
    const auto [status, out] = run_daemon_to_exit(args, rig.scanner.dir / "cpus.log");
    EXPECT_EQ(status, 2) << out;
    EXPECT_NE(out.find("cpus.worker: CPU " + std::to_string(outside) + " is not one petdaqd may run on"),
              std::string::npos)
        << out;
  }
}

TEST(Lifecycle, RunIdsAreUniqueAcrossRestarts) {
  Rig rig;
  std::vector<std::uint64_t> ids;
  for (int i = 0; i < 2; ++i) {
    auto d = rig.start();
    Subscriber sub(rig.daemon.zmq_endpoint);
    const auto r = sub.wait_rates(any_rates, 20s);
    ASSERT_TRUE(r.has_value()) << d->log();
    ids.push_back(static_cast<std::uint64_t>(json_number(*r, "run_id")));
    d->signal(SIGTERM);
    ASSERT_EQ(d->wait_for(15s).value_or(-1), 0);
  }
  EXPECT_GT(ids[1], ids[0]);
  EXPECT_GT(ids[0], 0u);
}

TEST(Lifecycle, SighupAppliesANewWindowAsANewRun) {
  Rig rig;
  auto d = rig.start();
  Subscriber sub(rig.daemon.zmq_endpoint);
  const auto first_rates = sub.wait_rates(any_rates, 20s);
  ASSERT_TRUE(first_rates.has_value()) << d->log();
  const auto run0_id = static_cast<std::uint64_t>(json_number(*first_rates, "run_id"));
  std::mt19937_64 rng(9);
  AcquisitionOptions o;
  o.events = 5000;
  const auto frames = random_acquisition(rig.scanner, rng, o);
  UdpSender tx;
  const auto dg = make_datagrams(frames, Framing::raw, 50, 4);
  tx.send(dg, rig.daemon.udp_port);
  wait_datagrams(sub, dg.size(), *d);
  const BatchResult ref = batch_process(rig.scanner, frames);

  // A new coincidence window (live) and a new ring size (needs a restart).
  rig.scanner.settings.coincidence.window_ps = 3000;
  rig.daemon.ring_chunks = 16;
  rig.write();
  d->signal(SIGHUP);
  ASSERT_TRUE(sub.wait_rates(
      [&](const std::string& j) { return json_number(j, "run_id") >= static_cast<double>(run0_id + 1); },
      10s))
      << d->log();
  EXPECT_TRUE(d->running());
  const auto messages = stop_and_collect(sub, *d);
  const std::string log = d->log();
  EXPECT_NE(log.find("reload: applied coincidence"), std::string::npos) << log;
  EXPECT_NE(log.find("`input` changed; it takes effect only after a restart"), std::string::npos) << log;
  const Stream prompts = collect(messages, MessageKind::prompts);
  EXPECT_TRUE(prompts.ids_consecutive);
  ASSERT_FALSE(prompts.run_ids.empty());
  EXPECT_EQ(prompts.run_ids.front(), run0_id);
  // The first run's records are the batch result of its frames.
  std::vector<CoincRecord> run0;
  for (const Published& p : messages)
    if (p.topic == topic::prompts && p.header.run_id == run0_id)
      for (std::size_t at = 0; at < p.body.size(); at += sizeof(CoincRecord))
        run0.push_back(decode_record(p.body.data() + at));
  EXPECT_TRUE(run0 == ref.prompts);
}

}  // namespace
}  // namespace petdaq::test

namespace petdaq::test {
namespace {

// systemd's notify protocol, with this test as the service manager: a datagram socket named
// by NOTIFY_SOCKET, and WATCHDOG_USEC asking for watchdog pings.
TEST(Lifecycle, NotifiesReadyStatusWatchdogAndStopping) {
  Rig rig;
  const std::filesystem::path notify_path = rig.scanner.dir / "notify.sock";
  const int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(notify_path.string().size(), sizeof addr.sun_path);
  std::strcpy(addr.sun_path, notify_path.c_str());
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  timeval tv{0, 100'000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);

  setenv("NOTIFY_SOCKET", notify_path.c_str(), 1);
  setenv("WATCHDOG_USEC", "200000", 1);
  auto d = rig.start();
  unsetenv("NOTIFY_SOCKET");
  unsetenv("WATCHDOG_USEC");

  std::vector<std::string> got;
  auto receive_for = [&](std::chrono::milliseconds span) {
    const auto until = std::chrono::steady_clock::now() + span;
    char buf[4096];
    while (std::chrono::steady_clock::now() < until) {
      const ssize_t n = recv(fd, buf, sizeof buf, 0);
      if (n > 0) got.emplace_back(buf, static_cast<std::size_t>(n));
    }
  };
  receive_for(1500ms);
  auto count = [&](const std::string& prefix) {
    return std::count_if(got.begin(), got.end(),
                         [&](const std::string& m) { return m.rfind(prefix, 0) == 0; });
  };
  EXPECT_EQ(count("READY=1"), 1) << d->log();
  // Pings at half the watchdog interval (100 ms), from the worker's loop.
  EXPECT_GE(count("WATCHDOG=1"), 5);
  EXPECT_GE(count("STATUS=run "), 2);
  d->signal(SIGTERM);
  EXPECT_EQ(d->wait_for(10s).value_or(-1), 0);
  receive_for(200ms);
  EXPECT_EQ(count("STOPPING=1"), 1);
  close(fd);
}

}  // namespace
}  // namespace petdaq::test

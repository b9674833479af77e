// petdaqd at the edge (DESIGN section 6), end to end on loopback with the CPU backend:
// * a lagging board costs only itself: three boards sent in real time and one at 0.6 of it;
//   every coincidence between two on-time boards is the batch definition's (petdaq-offline's)
//   of the whole acquisition, and the slow board's frames sent are its frames taken plus its
//   late frames, to the frame;
// * an overload sheds scanner-wide dead time: the fraction of pairs kept is the same for every
//   pair of boards, no published coincidence lies in a dead interval, and the live fraction
//   the daemon publishes predicts the prompts' shortfall.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/geometry.h"
#include "core/plm_file.h"
#include "core/test_scanner.h"
#include "daemon_harness.h"
#include "tests/support/wait.h"

namespace petdaq::test {
namespace {

using namespace std::chrono_literals;

struct Rig {
  TestScanner scanner;
  DaemonConfig daemon;
  Rig() {
    daemon.udp_port = free_udp_port();
    daemon.zmq_endpoint = "ipc://" + (scanner.dir / "pub.sock").string();
    daemon.rates_interval_ms = 100;
    daemon.receive_buffer_bytes = 32u << 20;
  }
  std::unique_ptr<DaemonProcess> start() {
    const auto config = scanner.write_config();
    std::ofstream(config, std::ios::app) << daemon_yaml(daemon);
    return std::make_unique<DaemonProcess>(config, scanner.dir / "petdaqd.log");
  }
};

std::vector<Published> stop_and_collect(Subscriber& sub, DaemonProcess& d) {
  d.signal(SIGTERM);
  const auto status = d.wait_for(20s);
  EXPECT_EQ(status.value_or(-1), 0) << d.log();
  EXPECT_TRUE(sub.wait_drained(10s));
  return sub.messages();
}

std::vector<nlohmann::json> rates_documents(const std::vector<Published>& messages) {
  std::vector<nlohmann::json> out;
  for (const Published& p : messages)
    if (p.topic == topic::rates) out.push_back(nlohmann::json::parse(p.body.begin(), p.body.end()));
  return out;
}

// Waits until the daemon has counted `datagrams` datagrams (received or dropped by the kernel).
void wait_datagrams(Subscriber& sub, std::uint64_t datagrams, DaemonProcess& d) {
  EXPECT_TRUE(sub.wait_rates(
                     [&](const std::string& j) {
                       return json_counter(j, "rx.datagrams") + json_counter(j, "rx.kernel_drops") >=
                              datagrams;
                     },
                     60s)
                  .has_value())
      << d.log();
}

// The pairs alone: a window's multiplicity counts the singles the daemon kept.
std::vector<CoincRecord> pairs_of(const std::vector<CoincRecord>& in, const Geometry& g,
                                  std::uint32_t without_bdm) {
  std::vector<CoincRecord> out;
  for (CoincRecord r : in) {
    if (g.address_of(r.crystal_a).bdm == without_bdm || g.address_of(r.crystal_b).bdm == without_bdm)
      continue;
    r.flags &= coinc_flag::delayed;
    out.push_back(r);
  }
  return out;
}

TEST(Lag, ALaggingBoardCostsOnlyItself) {
  Rig rig;
  Settings& s = rig.scanner.settings;
  // Independent pairs, and a stage that a board's lag would fill in a fraction of a second.
  s.coincidence.window_mode = WindowMode::every_single;
  s.coincidence.policy = Policy::take_all_goods;
  s.stream.max_slice_frames = 1u << 16;
  s.stream.max_pending_frames = 1u << 18;
  s.stream.max_carry_singles = 1u << 16;
  s.stream.max_lag_ms = 100;
  // No dead time here: only the lag is under test.
  rig.daemon.input_extra = "  shed_high_fraction: 1.0\n  shed_low_fraction: 0.5\n";
  std::mt19937_64 rng(3);
  AcquisitionOptions o;
  o.events = 400'000;
  o.mean_gap_ticks = 160'000;  // 2.5 µs: 1 s of acquisition, ~0.7 M frames
  o.bad_fraction = 0;
  const std::vector<RawFrame> frames = random_acquisition(rig.scanner, rng, o);
  const double span_s = static_cast<double>(frame_time(frames.back().bytes) - o.start_ticks) *
                        s.scanner.tick_ps * 1e-12;
  ASSERT_GT(span_s, 0.8);
  const BatchResult ref = batch_process(rig.scanner, frames);
  constexpr std::uint32_t kSlow = 1;
  std::vector<RawFrame> slow_frames;
  for (const RawFrame& f : frames)
    if (f.bytes[frame_offset::bdm] == kSlow) slow_frames.push_back(f);
  const std::uint64_t slow_no_crystal =
      batch_process(rig.scanner, slow_frames).counters[Counter::frame_no_crystal];

  // Each board's first frame goes first, alone, in time order: a board holds the horizon
  // once it has sent, and boards that start apart would lose their first frames as late.
  std::vector<RawFrame> firsts, rest;
  std::uint32_t started = 0;
  for (const RawFrame& f : frames) {
    const std::uint32_t bdm = f.bytes[frame_offset::bdm];
    if (!(started & (1u << bdm))) {
      started |= 1u << bdm;
      firsts.push_back(f);
    } else {
      rest.push_back(f);
    }
  }
  ASSERT_EQ(started, 0xFu);
  const std::vector<Datagram> first = make_datagrams(firsts, Framing::raw, 1, 4);
  std::vector<Datagram> on_time, slow;
  for (Datagram& d : make_datagrams(rest, Framing::raw, 64, 4))
    (frame_bdm(d.data()) == kSlow ? slow : on_time).push_back(std::move(d));

  auto d = rig.start();
  Subscriber sub(rig.daemon.zmq_endpoint);
  ASSERT_TRUE(sub.wait_rates([](const std::string&) { return true; }, 20s)) << d->log();
  {
    UdpSender tx;
    tx.send(first, rig.daemon.udp_port);
  }
  // The boards in real time, the slow one at 0.6 of it (its link is saturated).
  std::thread slow_link([&] {
    UdpSender tx;
    tx.send(slow, rig.daemon.udp_port, static_cast<double>(slow.size()) / span_s * 0.6);
  });
  {
    UdpSender tx;
    tx.send(on_time, rig.daemon.udp_port, static_cast<double>(on_time.size()) / span_s);
  }
  slow_link.join();
  wait_datagrams(sub, first.size() + on_time.size() + slow.size(), *d);
  const auto messages = stop_and_collect(sub, *d);
  const auto docs = rates_documents(messages);
  ASSERT_FALSE(docs.empty());
  const nlohmann::json& last = docs.back();

  // It was declared lagging, the others never, and the log names it.
  bool slow_lagged = false;
  for (const auto& j : docs) {
    slow_lagged = slow_lagged || j["bdm"]["lagging"][kSlow].get<bool>();
    for (std::uint32_t b = 0; b < 4; ++b)
      if (b != kSlow) EXPECT_FALSE(j["bdm"]["lagging"][b].get<bool>()) << "bdm " << b;
  }
  EXPECT_TRUE(slow_lagged);
  EXPECT_GE(last["counters"]["stream.source_lagging"].get<std::uint64_t>(), 1u);
  EXPECT_NE(d->log().find("BDM 1 is lagging"), std::string::npos) << d->log();

  // Nothing else was lost.
  for (const char* c : {"rx.ring_full", "rx.kernel_drops", "stream.time_jump", "stream.pending_full",
                        "stream.dead_frames", "stream.runs", "coinc.records_overflow"})
    EXPECT_EQ(last["counters"][c].get<std::uint64_t>(), 0u) << c;
  EXPECT_EQ(last["counters"]["rx.frames"].get<std::uint64_t>(), frames.size());

  // Every coincidence between two on-time boards is the batch definition's.
  const Geometry g = rig.scanner.geometry();
  const auto got = pairs_of(collect(messages, MessageKind::prompts).records, g, kSlow);
  const auto want = pairs_of(ref.prompts, g, kSlow);
  ASSERT_GT(want.size(), 1000u);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_TRUE(got == want);
  const auto got_d = pairs_of(collect(messages, MessageKind::delayed).records, g, kSlow);
  const auto want_d = pairs_of(ref.delayed, g, kSlow);
  ASSERT_EQ(got_d.size(), want_d.size());
  EXPECT_TRUE(got_d == want_d);

  // The slow board's frames: taken or late, to the frame; the on-time boards lost none.
  const std::uint64_t late = last["bdm"]["late"][kSlow].get<std::uint64_t>();
  EXPECT_GT(late, slow_frames.size() / 10);
  EXPECT_EQ(last["counters"]["stream.late"].get<std::uint64_t>(), late);
  EXPECT_EQ(slow_frames.size(),
            last["bdm"]["frames_taken"][kSlow].get<std::uint64_t>() + late + slow_no_crystal);
  for (std::uint32_t b = 0; b < 4; ++b)
    if (b != kSlow) EXPECT_EQ(last["bdm"]["late"][b].get<std::uint64_t>(), 0u) << "bdm " << b;
}

// Isolated pairs of every pair of boards in turn, 312 ns apart.
std::vector<RawFrame> pairs_of_every_board_pair(const TestScanner& sc, std::uint64_t pairs,
                                                std::mt19937_64& rng) {
  static constexpr std::uint32_t kPairs[6][2] = {{0, 1}, {0, 2}, {0, 3}, {1, 2}, {1, 3}, {2, 3}};
  std::vector<RawFrame> out;
  out.reserve(pairs * 2);
  std::uniform_int_distribution<std::uint32_t> du(0, 3), crystal(0, 15);
  for (std::uint64_t i = 0; i < pairs; ++i) {
    const std::uint64_t t = 1'000'000 + i * 20'000;
    const auto& p = kPairs[i % 6];
    out.push_back(sc.frame(p[0], du(rng), crystal(rng), t, 500));
    out.push_back(sc.frame(p[1], du(rng), crystal(rng), t + 40, 520));
  }
  return out;
}

TEST(Overload, ShedsScannerWideDeadTimeThatTheLiveFractionCorrects) {
  Rig rig;
  Settings& s = rig.scanner.settings;
  // Small slices make a slow worker: a paced sender on loopback overloads it, and the
  // receiver keeps up.
  s.stream.max_slice_frames = 128;
  s.stream.max_pending_frames = 1u << 16;
  s.stream.max_carry_singles = 1u << 14;
  // A ring that holds ~90 ms at the sending rate between the high mark and full.
  rig.daemon.ring_chunk_bytes = 1u << 20;
  rig.daemon.ring_chunks = 16;
  rig.daemon.receive_buffer_bytes = 64u << 20;
  rig.daemon.extra = "backend_threads: 1\n";
  rig.daemon.input_extra = "  shed_high_fraction: 0.5\n  shed_low_fraction: 0.25\n";
  rig.daemon.file_directory = rig.scanner.dir / "plm";
  rig.daemon.file_rotate_bytes = 1u << 30;
  std::filesystem::create_directories(rig.daemon.file_directory);
  std::mt19937_64 rng(11);
  constexpr std::uint64_t kPairsSent = 1'200'000;
  constexpr double kFramesPerSecond = 6e6;
  const std::vector<RawFrame> frames = pairs_of_every_board_pair(rig.scanner, kPairsSent, rng);
  // Each board's first frame alone first (see the lag test), then the rest in full datagrams.
  std::vector<RawFrame> firsts, rest;
  std::uint32_t started = 0;
  for (const RawFrame& f : frames) {
    const std::uint32_t bdm = f.bytes[frame_offset::bdm];
    (started & (1u << bdm) ? rest : firsts).push_back(f);
    started |= 1u << bdm;
  }
  const auto first = make_datagrams(firsts, Framing::raw, 1, 4);
  const auto datagrams = make_datagrams(rest, Framing::raw, 560, 4);

  auto d = rig.start();
  Subscriber sub(rig.daemon.zmq_endpoint);
  ASSERT_TRUE(sub.wait_rates([](const std::string&) { return true; }, 20s)) << d->log();
  {
    UdpSender tx;
    tx.send(first, rig.daemon.udp_port);
    tx.send(datagrams, rig.daemon.udp_port, kFramesPerSecond / 560);
  }
  wait_datagrams(sub, first.size() + datagrams.size(), *d);
  const auto messages = stop_and_collect(sub, *d);
  const auto docs = rates_documents(messages);
  ASSERT_FALSE(docs.empty());
  const nlohmann::json& last = docs.back();
  const auto counter = [&](const char* c) { return last["counters"][c].get<std::uint64_t>(); };

  // It was overloaded, and shed whole intervals instead of datagrams.
  ASSERT_GT(counter("stream.dead_frames"), 0u) << "the daemon was not overloaded";
  // rx.ring_full is the last resort: none on an idle machine; a machine loaded by others may
  // deschedule the worker for longer than the ring's headroom (then a few datagrams).
  const double ring_full = static_cast<double>(counter("rx.ring_full")) /
                           static_cast<double>(datagrams.size());
  std::printf("rx.ring_full %llu datagrams\n", static_cast<unsigned long long>(counter("rx.ring_full")));
  EXPECT_LT(ring_full, 0.01);
  EXPECT_EQ(counter("rx.kernel_drops"), 0u);
  // An overload: no board was declared lagging (the chunks waited for the worker, not for a
  // board), and none lost frames of its own.
  EXPECT_EQ(counter("stream.source_lagging"), 0u);
  EXPECT_EQ(counter("stream.late"), 0u);
  EXPECT_EQ(counter("stream.time_jump"), 0u);
  EXPECT_EQ(counter("stream.pending_full"), 0u);
  EXPECT_EQ(counter("rx.datagrams"), first.size() + datagrams.size());

  // The dead intervals: published, in the file, and no published coincidence inside one.
  std::vector<DeadInterval> dead;
  for (const Published& p : messages)
    if (p.topic == topic::deadtime) {
      ASSERT_EQ(p.header.kind, static_cast<std::uint16_t>(MessageKind::deadtime));
      ASSERT_EQ(p.body.size(), sizeof(DeadInterval));
      DeadInterval di;
      std::memcpy(&di, p.body.data(), sizeof di);
      EXPECT_LT(di.t_begin, di.t_end);
      dead.push_back(di);
    }
  ASSERT_FALSE(dead.empty());
  EXPECT_EQ(dead.size(), counter("stream.dead_intervals"));
  std::uint64_t dead_ticks = 0, dead_frames = 0;
  for (const DeadInterval& di : dead) {
    dead_ticks += di.t_end - di.t_begin;
    dead_frames += di.frames_dropped;
  }
  EXPECT_LE(dead_frames, counter("stream.dead_frames"));
  std::size_t file_dead = 0;
  for (const auto& e : std::filesystem::directory_iterator(rig.daemon.file_directory)) {
    PlmReader reader(e.path());
    MessageHeader h;
    std::vector<CoincRecord> records;
    while (reader.next(h, records))
      if (h.kind == static_cast<std::uint16_t>(MessageKind::deadtime))
        file_dead += reader.dead_intervals().size();
  }
  EXPECT_EQ(file_dead, dead.size());
  const auto prompts = collect(messages, MessageKind::prompts);
  EXPECT_TRUE(prompts.ids_consecutive);
  for (const CoincRecord& r : prompts.records)
    for (const DeadInterval& di : dead)
      ASSERT_FALSE(r.time_a >= di.t_begin && r.time_a < di.t_end) << "a prompt in dead time";

  // The same fraction of every pair of boards is kept.
  const Geometry g = rig.scanner.geometry();
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::uint64_t> kept;
  for (const CoincRecord& r : prompts.records) {
    std::uint32_t a = g.address_of(r.crystal_a).bdm, b = g.address_of(r.crystal_b).bdm;
    if (a > b) std::swap(a, b);
    ++kept[{a, b}];
  }
  ASSERT_EQ(kept.size(), 6u);
  const double expected_per_pair = static_cast<double>(kPairsSent) / 6;
  const double f = static_cast<double>(prompts.records.size()) / static_cast<double>(kPairsSent);
  std::printf("kept %.4f of the pairs in all, dead intervals %zu; frames %llu dead %llu singles %llu "
              "prompts counted %llu\n",
              f, dead.size(), static_cast<unsigned long long>(counter("rx.frames")),
              static_cast<unsigned long long>(counter("stream.dead_frames")),
              static_cast<unsigned long long>(counter("single.accepted")),
              static_cast<unsigned long long>(counter("coinc.prompts")));
  for (const auto& [pair, n] : kept) {
    const double fk = static_cast<double>(n) / expected_per_pair;
    const double sigma = std::sqrt(f * (1 - f) / expected_per_pair);
    std::printf("  bdm %u-%u: kept %.4f\n", pair.first, pair.second, fk);
    EXPECT_NEAR(fk, f, 5 * sigma + 1e-3) << "bdm " << pair.first << "-" << pair.second;
  }
  // The live fraction the daemon published predicts the prompts' shortfall.
  const double live = last["deadtime"]["live_fraction_run"].get<double>();
  const double span_ticks = static_cast<double>(kPairsSent - 1) * 20'000;
  std::printf("live fraction published %.4f, from the dead intervals %.4f, prompts kept %.4f\n",
              live, 1.0 - static_cast<double>(dead_ticks) / span_ticks, f);
  EXPECT_LT(live, 0.999);
  EXPECT_NEAR(live, f, 0.01 + 2 * ring_full);
  EXPECT_NEAR(1.0 - static_cast<double>(dead_ticks) / span_ticks, f, 0.01 + 2 * ring_full);
}

}  // namespace
}  // namespace petdaq::test

namespace petdaq::test {
namespace {

// A reload that changes the coincidence window builds the next engine (slicer and backend,
// with the full-size buffers of stream.max_slice_frames) on a thread of its own: the worker
// goes on taking chunks meanwhile, so a ring that holds only ~130 ms at the sending rate
// loses nothing across the switch to the new run.
TEST(Reload, ANewWindowIsAppliedWithoutStallingIntake) {
  Rig rig;
  rig.daemon.ring_chunk_bytes = 256u << 10;
  rig.daemon.ring_chunks = 8;  // 2 MiB: ~130 ms at 1 M frames/s
  rig.daemon.receive_buffer_bytes = 8u << 20;
  rig.daemon.extra = "backend_threads: 1\n";
  std::mt19937_64 rng(23);
  constexpr double kFramesPerSecond = 1e6;
  const std::vector<RawFrame> frames = pairs_of_every_board_pair(rig.scanner, 900'000, rng);
  const auto datagrams = make_datagrams(frames, Framing::raw, 560, 4);

  auto d = rig.start();
  Subscriber sub(rig.daemon.zmq_endpoint);
  const auto first = sub.wait_rates([](const std::string&) { return true; }, 20s);
  ASSERT_TRUE(first.has_value()) << d->log();
  const auto run0 = static_cast<std::uint64_t>(nlohmann::json::parse(*first)["run_id"].get<double>());
  std::thread sender([&] {
    UdpSender tx;
    tx.send(datagrams, rig.daemon.udp_port, kFramesPerSecond / 560);
  });
  // A third of the way in, a new window.
  EXPECT_TRUE(sub.wait_rates(
                     [&](const std::string& j) {
                       return json_counter(j, "rx.datagrams") >= datagrams.size() / 3;
                     },
                     60s)
                  .has_value());
  rig.scanner.settings.coincidence.window_ps = rig.scanner.settings.coincidence.window_ps / 2;
  const auto config = rig.scanner.write_config();
  std::ofstream(config, std::ios::app) << daemon_yaml(rig.daemon);
  d->signal(SIGHUP);
  sender.join();
  wait_datagrams(sub, datagrams.size(), *d);
  const auto messages = stop_and_collect(sub, *d);
  const auto docs = rates_documents(messages);
  ASSERT_FALSE(docs.empty());
  const nlohmann::json& last = docs.back();
  EXPECT_GT(last["run_id"].get<double>(), static_cast<double>(run0)) << d->log();
  for (const char* c : {"rx.ring_full", "rx.kernel_drops", "stream.dead_frames", "stream.late",
                        "stream.time_jump", "stream.pending_full"})
    EXPECT_EQ(last["counters"][c].get<std::uint64_t>(), 0u) << c << "\n" << d->log();
  EXPECT_EQ(last["counters"]["rx.frames"].get<std::uint64_t>(), frames.size());
  EXPECT_NE(d->log().find("reload: applied coincidence"), std::string::npos) << d->log();
}

}  // namespace
}  // namespace petdaq::test

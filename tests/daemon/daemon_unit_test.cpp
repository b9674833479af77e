// The daemon's parts in-process: sequence accounting, source filter, latency percentiles,
// the reload plan, the host ring, and the receiver on a real loopback socket.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <csignal>
#include <filesystem>
#include <cstring>
#include <random>
#include <sstream>
#include <set>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "core/counters.h"
#include "core/randoms.h"
#include "core/settings.h"
#include "daemon/file_sink.h"
#include "daemon/host_ring.h"
#include "daemon/notify.h"
#include "daemon/rate_limited_log.h"
#include "daemon/rates.h"
#include "daemon/receiver.h"
#include "daemon/sequence_tracker.h"
#include "core/cpu_backend.h"
#include "daemon/source_filter.h"
#include "daemon/timed_backend.h"
#include "tests/core/test_scanner.h"
#include "daemon/worker.h"
#include "tests/support/wait.h"
#include "proto/datagram.h"

namespace petdaq::daemon {
namespace {

using namespace std::chrono_literals;

TEST(SequenceTracker, InOrderCountsNothing) {
  SequenceTracker t;
  SequenceCounts c;
  for (std::uint32_t s = 5; s < 1000; ++s) EXPECT_TRUE(t.observe(3, s, c));
  t.flush(c);
  EXPECT_EQ(c.missing, 0u);
  EXPECT_EQ(c.duplicate, 0u);
  EXPECT_EQ(c.reordered, 0u);
}

TEST(SequenceTracker, GapsCountEveryMissingDatagram) {
  SequenceTracker t;
  SequenceCounts c;
  t.observe(0, 0, c);
  t.observe(0, 1, c);
  t.observe(0, 5, c);    // 2, 3, 4 missing (not yet final)
  EXPECT_EQ(c.missing, 0u);
  // 6 .. 399: 394 missing; 2, 3, 4 fall out of the window. A jump past the window is
  // believed once a run of kRestartRun datagrams follows it.
  constexpr std::uint32_t kRun = SequenceTracker::kRestartRun;
  for (std::uint32_t s = 400; s < 400 + kRun; ++s) EXPECT_FALSE(t.observe(0, s, c));
  EXPECT_EQ(c.missing, 0u);  // held back: nothing is final yet
  EXPECT_TRUE(t.observe(0, 400 + kRun, c));
  t.flush(c);
  // 400 .. 400 + kRun - 1 were held back until the run confirmed the jump: missing too.
  EXPECT_EQ(c.missing, 3u + 394u + kRun);
  EXPECT_EQ(c.reordered, 0u);
  EXPECT_EQ(c.wild, 0u);
  EXPECT_EQ(c.restarts, 0u);
}

// Two forged headers far ahead, one after the other (a short run): they are wild, no loss is
// invented, and the genuine datagrams that follow are all processed.
TEST(SequenceTracker, TwoForgedHeadersAheadAreWildNotALoss) {
  SequenceTracker t;
  SequenceCounts c;
  for (std::uint32_t s = 0; s < 100; ++s) ASSERT_TRUE(t.observe(4, s, c));
  EXPECT_FALSE(t.observe(4, 1100, c));
  EXPECT_FALSE(t.observe(4, 1101, c));
  std::size_t processed = 0;
  for (std::uint32_t s = 100; s < 200; ++s) processed += t.observe(4, s, c);
  t.flush(c);
  EXPECT_EQ(processed, 100u);
  EXPECT_EQ(c.wild, 2u);
  EXPECT_EQ(c.missing, 0u);
  EXPECT_EQ(c.restarts, 0u);
  EXPECT_EQ(c.duplicate, 0u);
}

// One corrupt or forged header far ahead must not move the window: the duplicates that
// follow are still recognised, and nothing is counted missing.
TEST(SequenceTracker, OneWildHeaderAheadKeepsDuplicateDetection) {
  SequenceTracker t;
  SequenceCounts c;
  for (std::uint32_t s = 0; s < 100; ++s) ASSERT_TRUE(t.observe(4, s, c));
  EXPECT_FALSE(t.observe(4, 1100, c));  // wild
  std::size_t processed = 0;
  for (std::uint32_t s = 100; s < 150; ++s) processed += t.observe(4, s, c);
  for (std::uint32_t s = 100; s < 150; ++s) processed += t.observe(4, s, c);  // duplicated
  t.flush(c);
  EXPECT_EQ(processed, 50u);
  EXPECT_EQ(c.duplicate, 50u);
  EXPECT_EQ(c.wild, 1u);
  EXPECT_EQ(c.missing, 0u);
  EXPECT_EQ(c.reordered, 0u);
  EXPECT_EQ(c.restarts, 0u);
}

TEST(SequenceTracker, OneWildHeaderBehindIsDroppedAndCounted) {
  SequenceTracker t;
  SequenceCounts c;
  for (std::uint32_t s = 1000; s < 1300; ++s) ASSERT_TRUE(t.observe(4, s, c));
  EXPECT_FALSE(t.observe(4, 3, c));
  for (std::uint32_t s = 1300; s < 1310; ++s) EXPECT_TRUE(t.observe(4, s, c));
  EXPECT_FALSE(t.observe(4, 1305, c));
  t.flush(c);
  EXPECT_EQ(c.wild, 1u);
  EXPECT_EQ(c.duplicate, 1u);
  EXPECT_EQ(c.missing, 0u);
  EXPECT_EQ(c.restarts, 0u);
}

TEST(SequenceTracker, ARestartIsToldFromLossAndDuplicatesAfterItAreCaught) {
  SequenceTracker t;
  SequenceCounts c;
  for (std::uint32_t s = 5000; s < 5200; ++s) ASSERT_TRUE(t.observe(9, s, c));
  // The source restarts at 0: a short jump back, believed after a run of datagrams.
  EXPECT_FALSE(t.observe(9, 0, c));
  for (std::uint32_t s = 1; s < SequenceTracker::kRestartRun; ++s) EXPECT_FALSE(t.observe(9, s, c));
  for (std::uint32_t s = SequenceTracker::kRestartRun; s < 300; ++s) EXPECT_TRUE(t.observe(9, s, c));
  for (std::uint32_t s = 250; s < 300; ++s) EXPECT_FALSE(t.observe(9, s, c));
  t.flush(c);
  EXPECT_EQ(c.restarts, 1u);
  EXPECT_EQ(c.duplicate, 50u);
  EXPECT_EQ(c.missing, std::uint64_t{SequenceTracker::kRestartRun});  // held back until believed
  EXPECT_EQ(c.wild, 0u);
  EXPECT_EQ(c.reordered, 0u);
}

// Property: random streams of in-order runs, real gaps, small reorders and duplicates (of
// recent or long-gone numbers). Every number of the span is processed exactly once or
// counted missing; nothing is processed twice.
TEST(SequenceTracker, EveryNumberIsProcessedOnceOrCountedMissing) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    SequenceTracker t;
    SequenceCounts c;
    std::vector<std::uint32_t> stream;
    std::uint32_t next = static_cast<std::uint32_t>(rng());
    for (int i = 0; i < 2000; ++i) {
      const auto kind = rng() % 100;
      if (kind < 3) next += 1 + rng() % 1000;  // a gap: real loss
      if (kind >= 95 && stream.size() > 200) {  // a duplicate, recent or old
        stream.push_back(stream[stream.size() / 2 + rng() % (stream.size() / 2)]);
        continue;
      }
      stream.push_back(next++);
    }
    for (std::size_t i = 1; i + 1 < stream.size(); ++i)
      if (rng() % 20 == 0) std::swap(stream[i], stream[i + 1]);  // small reorders
    // The source goes on after the last gap (a gap no run follows stays unconfirmed).
    for (std::uint32_t k = 0; k < SequenceTracker::kRestartRun; ++k) stream.push_back(next++);
    std::multiset<std::uint32_t> processed;
    for (std::uint32_t s : stream)
      if (t.observe(0, s, c)) processed.insert(s);
    t.flush(c);
    for (std::uint32_t s : processed) ASSERT_EQ(processed.count(s), 1u) << "trial " << trial;
    const std::uint32_t first = stream.front();
    const std::uint32_t last = *std::max_element(stream.begin(), stream.end(),
        [&](std::uint32_t a, std::uint32_t b) { return a - first < b - first; });
    EXPECT_EQ(processed.size() + c.missing, std::uint64_t{last - first} + 1) << "trial " << trial;
    EXPECT_EQ(c.restarts, 0u) << "trial " << trial;
  }
}

// A disk that refuses writes (here RLIMIT_FSIZE, which fails a write the way a full disk
// does): the error and every dropped byte are counted, the file ends on its last whole
// message, and writing resumes on a new file once the disk takes data again.
TEST(FileSink, RefusedWritesAreCountedFilesEndOnAMessageAndWritingResumes) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("petdaq-file-sink-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  Settings s;
  s.output.file.enabled = true;
  s.output.file.directory = dir;
  s.output.file.rotate_bytes = 1ull << 30;
  Counters counters(1);
  std::signal(SIGXFSZ, SIG_IGN);
  rlimit unlimited{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &unlimited), 0);
  constexpr std::size_t kRecords = 100;
  constexpr std::uint64_t kMessageBytes = kMessageHeaderBytes + kRecords * sizeof(CoincRecord);
  std::vector<std::uint8_t> body(kRecords * sizeof(CoincRecord));
  auto message = [&](std::uint64_t id) {
    MessageHeader h;
    h.kind = 1;
    h.message_id = id;
    h.record_count = kRecords;
    h.record_size = sizeof(CoincRecord);
    std::fill(body.begin(), body.end(), static_cast<std::uint8_t>(id));
    return h;
  };
  auto limit = [&](rlim_t bytes) {
    rlimit r = unlimited;
    r.rlim_cur = bytes;
    ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &r), 0);
  };
  {
    FileSink sink(s, counters, 0ms);
    // Room for 10 messages and part of the 11th.
    limit(kPlmHeaderBytes + 10 * kMessageBytes + 1000);
    for (std::uint64_t id = 0; id <= 10; ++id) sink.write(message(id), body.data(), body.size());
    EXPECT_EQ(counters.get(Counter::out_file_errors), 1u);
    // The disk takes nothing: every retry fails, every message is dropped and counted.
    limit(0);
    for (std::uint64_t id = 11; id <= 14; ++id) sink.write(message(id), body.data(), body.size());
    // Space again: a new file.
    ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &unlimited), 0);
    for (std::uint64_t id = 15; id <= 19; ++id) sink.write(message(id), body.data(), body.size());
    sink.close();
  }
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &unlimited), 0);
  EXPECT_EQ(counters.get(Counter::out_file_errors), 5u);
  EXPECT_EQ(counters.get(Counter::out_file_dropped_bytes), 5 * kMessageBytes);
  EXPECT_EQ(counters.get(Counter::out_file_bytes), 15 * kMessageBytes);
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(std::filesystem::file_size(files[0]), kPlmHeaderBytes + 10 * kMessageBytes);
  std::vector<std::uint64_t> ids;
  for (const auto& f : files) {
    PlmReader reader(f);  // throws on a message cut short
    MessageHeader h;
    std::vector<CoincRecord> records;
    while (reader.next(h, records)) {
      ids.push_back(h.message_id);
      EXPECT_EQ(records.size(), kRecords);
    }
  }
  const std::vector<std::uint64_t> expected = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 18, 19};
  EXPECT_EQ(ids, expected);
  std::filesystem::remove_all(dir);
}

// A warning held back by the rate limit is printed by the next flush once its interval has
// passed, with the occurrences since the line before, instead of waiting for the next one.
TEST(RateLimitedWarning, WhatWasHeldBackIsFlushed) {
  auto lines = std::make_shared<std::ostringstream>();
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(*lines);
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("test", sink));
  {
    RateLimitedWarning w(std::chrono::milliseconds(50));
    w.warn("host ring full: {} datagrams dropped", 1);
    w.warn("host ring full: {} datagrams dropped", 300);
    w.warn("host ring full: {} datagrams dropped", 30583);
    flush_held_back_warnings();  // too early: the interval has not passed
    const std::string so_far = lines->str();
    EXPECT_EQ(std::count(so_far.begin(), so_far.end(), '\n'), 1) << so_far;
    std::this_thread::sleep_for(60ms);  // time passing is the test: the interval runs out
    flush_held_back_warnings();
    flush_held_back_warnings();  // nothing more held back
  }
  spdlog::set_default_logger(previous);
  const std::string text = lines->str();
  EXPECT_NE(text.find("host ring full: 1 datagrams dropped (1 occurrences"), std::string::npos) << text;
  EXPECT_NE(text.find("host ring full: 30583 datagrams dropped (2 occurrences"), std::string::npos)
      << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2) << text;
}

// A counted warning gives the total since the line before, not one call's count: 1 at
// once, then the 300 + 30583 held back, flushed once the interval has passed.
TEST(RateLimitedWarning, ACountedWarningGivesTheTotalSinceTheLastLine) {
  auto lines = std::make_shared<std::ostringstream>();
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(*lines);
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("test", sink));
  {
    RateLimitedWarning w(std::chrono::milliseconds(50));
    w.warn_count(1, "host ring full, datagrams dropped");
    w.warn_count(300, "host ring full, datagrams dropped");
    w.warn_count(30583, "host ring full, datagrams dropped");
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    auto line_count = [&] {
      const std::string t = lines->str();
      return std::count(t.begin(), t.end(), '\n');
    };
    while (line_count() < 2 && std::chrono::steady_clock::now() < deadline)
      flush_held_back_warnings();
  }
  spdlog::set_default_logger(previous);
  const std::string text = lines->str();
  EXPECT_NE(text.find("host ring full, datagrams dropped: 1 since the last such warning"),
            std::string::npos) << text;
  EXPECT_NE(text.find("host ring full, datagrams dropped: 30883 since the last such warning"),
            std::string::npos) << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2) << text;
}

TEST(SourceFilter, CidrMatching) {
  auto net = [](const char* s) { return parse_ipv4_network(s).value(); };
  SourceFilter f({net("127.0.0.1/32"), net("10.1.0.0/16")});
  auto ip = [](const char* s) {
    in_addr a{};
    inet_pton(AF_INET, s, &a);
    return ntohl(a.s_addr);
  };
  EXPECT_TRUE(f.allows(ip("127.0.0.1")));
  EXPECT_FALSE(f.allows(ip("127.0.0.2")));
  EXPECT_TRUE(f.allows(ip("10.1.255.3")));
  EXPECT_FALSE(f.allows(ip("10.2.0.1")));
  EXPECT_TRUE(SourceFilter({net("0.0.0.0/0")}).allows(ip("192.168.1.1")));
  EXPECT_FALSE(SourceFilter({}).allows(ip("127.0.0.1")));
}

TEST(LatencyWindow, Percentiles) {
  LatencyWindow w;
  for (int i = 1; i <= 1000; ++i) w.add(i);
  const auto s = w.take();
  EXPECT_EQ(s.samples, 1000u);
  EXPECT_NEAR(s.p50_ms, 500, 1);
  EXPECT_NEAR(s.p99_ms, 990, 1);
  EXPECT_EQ(s.max_ms, 1000);
  EXPECT_EQ(w.take().samples, 0u);  // a new interval
  // Past its capacity it thins the samples but keeps the shape and the maximum.
  for (int i = 0; i < 100000; ++i) w.add(i % 100);
  w.add(5000);
  const auto t = w.take();
  EXPECT_NEAR(t.p50_ms, 50, 2);
  EXPECT_EQ(t.max_ms, 5000);
}

double json_number(const std::string& doc, const std::string& key) {
  const std::string quoted = "\"" + key + "\":";
  const std::size_t at = doc.find(quoted);
  if (at == std::string::npos) return NAN;
  return std::strtod(doc.c_str() + at + quoted.size(), nullptr);
}

// The randoms estimates of the rates document (docs/randoms.md) are core/randoms.h on the
// interval's per-BDM singles and prompt rates, taken on the acquisition's clock: data
// replayed twice as fast (0.5 s of acquisition in a 1 s interval) have twice the rates.
TEST(RatesReporter, RandomsEstimatesOnTheAcquisitionClock) {
  Settings settings;
  Counters counters(settings.scanner.bdm_transaxial * settings.scanner.bdm_axial);
  std::vector<double> acq_rate(counters.bdm_count());
  for (std::uint32_t b = 0; b < counters.bdm_count(); ++b) {
    counters.add_bdm_singles(b, 100'000 + 1000 * b);
    acq_rate[b] = (100'000.0 + 1000.0 * b) / 0.5;
  }
  counters.add(Counter::coinc_prompts, 300'000);
  counters.add(Counter::coinc_delayed, 40'000);
  RatesReporter reporter(counters);
  RatesSnapshot snap;
  snap.interval_s = 1.0;
  snap.acquisition_s = 0.5;
  const RandomsSettings rs = RandomsSettings::from(settings);
  snap.randoms = &rs;
  std::string doc = reporter.build(snap);

  const RandomsEstimates e = estimate_randoms(rs, acq_rate, 600'000.0, 80'000.0);
  ASSERT_TRUE(e.singles_prompts.modelled);
  EXPECT_NE(doc.find("\"randoms_method\":\"singles_prompts\""), std::string::npos) << doc;
  EXPECT_NEAR(json_number(doc, "randoms_singles_rate"), 0.5 * e.singles_rate_per_s, 1e-3);
  EXPECT_NEAR(json_number(doc, "randoms_singles_prompts"), 0.5 * e.singles_prompts.randoms_per_s, 1e-3);
  EXPECT_NEAR(json_number(doc, "randoms"), 0.5 * e.singles_prompts.randoms_per_s, 1e-3);
  EXPECT_NEAR(json_number(doc, "trues"), 300'000.0 - 0.5 * e.singles_prompts.randoms_per_s, 1e-3);
  EXPECT_GT(json_number(doc, "randoms"), 1000.0);
  const std::size_t bdm0 = doc.find("\"singles_per_s\":[");
  ASSERT_NE(bdm0, std::string::npos);
  EXPECT_NEAR(std::strtod(doc.c_str() + bdm0 + 17, nullptr), 100'000.0, 1e-3) << "wall-clock rates";

  // A policy the model does not cover (a winner policy with a sector rule): the delayed
  // window, and no singles-prompts figure.
  Settings winner = settings;
  winner.coincidence.policy = Policy::take_winner_of_goods;
  winner.coincidence.min_sector_difference = 2;
  const RandomsSettings rw = RandomsSettings::from(winner);
  snap.randoms = &rw;
  counters.add(Counter::coinc_prompts, 300'000);
  counters.add(Counter::coinc_delayed, 40'000);
  doc = reporter.build(snap);
  EXPECT_NE(doc.find("\"randoms_method\":\"delayed\""), std::string::npos) << doc;
  EXPECT_NE(doc.find("\"randoms_singles_prompts\":null"), std::string::npos) << doc;
  EXPECT_NEAR(json_number(doc, "trues"), 260'000.0, 1e-3);
}

// The `rates` fields of DESIGN section 7, read from its table: path -> type.
std::map<std::string, std::string> rates_schema() {
  std::ifstream in(std::string(PETDAQ_SOURCE_DIR) + "/docs/DESIGN.md");
  std::map<std::string, std::string> fields;
  std::string line;
  bool in_table = false;
  while (std::getline(in, line)) {
    if (line.starts_with("`rates` document fields")) in_table = true;
    if (!in_table) continue;
    if (line.starts_with("| `")) {
      const auto name_end = line.find("` |", 3);
      const auto type_end = line.find(" |", name_end + 3);
      fields[line.substr(3, name_end - 3)] = line.substr(name_end + 4, type_end - name_end - 4);
    } else if (!fields.empty() && !line.starts_with("|")) {
      break;
    }
  }
  return fields;
}

bool has_type(const nlohmann::json& v, const std::string& type) {
  if (type == "integer") return v.is_number_integer();
  if (type == "boolean") return v.is_boolean();
  if (type == "array of boolean") {
    if (!v.is_array()) return false;
    for (const auto& e : v)
      if (!e.is_boolean()) return false;
    return true;
  }
  if (type == "number") return v.is_number();
  if (type == "number or null") return v.is_number() || v.is_null();
  if (type == "string") return v.is_string();
  if (type == "array of number" || type == "array of number or null") {
    if (!v.is_array()) return false;
    for (const auto& e : v)
      if (!e.is_number() && !(e.is_null() && type.ends_with("or null"))) return false;
    return true;
  }
  if (type == "object or null") return v.is_object() || v.is_null();
  if (type == "array of object") {
    if (!v.is_array()) return false;
    for (const auto& e : v)
      if (!e.is_object()) return false;
    return true;
  }
  if (type == "array of integer") {
    if (!v.is_array()) return false;
    for (const auto& e : v)
      if (!e.is_number_integer()) return false;
    return true;
  }
  return false;
}

// Checks every leaf of `doc` under `prefix` against the schema; the members of `counters` and
// `worker.phases` are written `<name>` there.
void check_leaves(const nlohmann::json& doc, const std::string& prefix,
                  const std::map<std::string, std::string>& schema, std::set<std::string>& seen) {
  const bool named = prefix == "counters." || prefix == "worker.phases.";
  for (const auto& [key, value] : doc.items()) {
    const std::string path = prefix + (named ? "<name>" : key);
    if (!schema.count(path) && value.is_object()) {
      check_leaves(value, path + ".", schema, seen);
      continue;
    }
    ASSERT_TRUE(schema.count(path)) << path << " is published but not in DESIGN section 7";
    EXPECT_TRUE(has_type(value, schema.at(path))) << path << " is not " << schema.at(path);
    seen.insert(path);
  }
}

TEST(RatesDocument, MatchesTheSchemaInTheDesign) {
  const auto schema = rates_schema();
  ASSERT_GT(schema.size(), 20u) << "the table in docs/DESIGN.md section 7 was not found";
  Counters counters(3);
  counters.add(Counter::rx_frames, 1000);
  counters.add(Counter::coinc_prompts, 40);
  counters.add(Counter::coinc_delayed, 10);
  RatesReporter reporter(counters);
  const double temperatures[3] = {31.5, NAN, 33.0};
  RatesSnapshot snap;
  snap.time_unix_ns = 1763768000000000000ull;
  snap.uptime_s = 2;
  snap.interval_s = 2;
  snap.bdm_transaxial = 3;
  snap.bdm_axial = 1;
  snap.temperature_degC = temperatures;
  snap.ring_chunks = 64;
  snap.ring_free = 60;
  snap.ring_used_max = 7;
  snap.sealed_max = 5;
  snap.staging_max = 2;
  // A worker that spent 3 ms waiting for a chunk, then 2 ms in a submit of which 1.5 ms was
  // a count wait.
  const PhaseTimer::Clock::time_point t0{};
  PhaseTimer phases(t0);
  phases.enter(Phase::wait_chunk, t0);
  phases.leave(t0 + 3ms);
  phases.enter(Phase::submit, t0 + 3ms);
  phases.enter(Phase::count_wait, t0 + 3250us);
  phases.leave(t0 + 4750us);
  phases.leave(t0 + 5ms);
  snap.phases = &phases;
  snap.worker_s = phases.wall_seconds(t0 + 6ms);
  snap.worker_cpu_s = 0.004;
  snap.worker_involuntary_switches = 3;
  counters.add(Counter::rx_ring_full, 2);
  AlarmMonitor alarms{AlarmSettings{}};
  snap.alarms = &alarms;
  const nlohmann::json doc = nlohmann::json::parse(reporter.build(snap));
  ASSERT_EQ(doc["alarms"].size(), 1u) << "the ring's drops raise data_loss";
  for (const auto& [key, value] : doc["alarms"][0].items())
    EXPECT_TRUE(schema.count("alarms[]." + key) &&
                has_type(value, schema.at("alarms[]." + key)))
        << "alarms[]." << key;

  // Every leaf of the document is in the table with its type, and nothing in the table is
  // missing from the document.
  std::set<std::string> seen;
  for (const auto& [key, value] : doc["alarms"][0].items()) seen.insert("alarms[]." + key);
  check_leaves(doc, "", schema, seen);
  for (const auto& [path, type] : schema) EXPECT_TRUE(seen.count(path)) << path << " is missing";
  ASSERT_EQ(doc["worker"]["phases"].size(), kPhaseCount);
  const auto& submit = doc["worker"]["phases"]["submit"];
  EXPECT_NEAR(submit["seconds"].get<double>(), 0.0005, 1e-12);
  EXPECT_EQ(submit["calls"], 1);
  EXPECT_NEAR(submit["max_ms"].get<double>(), 0.5, 1e-9);
  EXPECT_EQ(submit["log2_us"][9], 1);  // 500 µs in [256, 512)
  EXPECT_NEAR(doc["worker"]["phases"]["count_wait"]["seconds"].get<double>(), 0.0015, 1e-12);
  EXPECT_NEAR(doc["worker"]["phases"]["wait_chunk"]["max_ms_since_start"].get<double>(), 3.0, 1e-9);
  EXPECT_EQ(doc["worker"]["phases"]["loop"]["calls"], 0);
  EXPECT_DOUBLE_EQ(doc["worker"]["seconds"].get<double>(), 0.006);
  EXPECT_DOUBLE_EQ(doc["worker"]["cpu_seconds"].get<double>(), 0.004);
  EXPECT_EQ(doc["worker"]["involuntary_switches"], 3);
  EXPECT_EQ(doc["queues"]["ring_used_max"], 7);
  EXPECT_EQ(doc["queues"]["sealed_max"], 5);
  EXPECT_EQ(doc["queues"]["staging_max"], 2);

  // The values: every counter by name, rates over the interval, null for an unknown temperature.
  ASSERT_EQ(doc["counters"].size(), kCounterCount);
  for (std::size_t i = 0; i < kCounterCount; ++i)
    EXPECT_EQ(doc["counters"][std::string(counter_name(static_cast<Counter>(i)))],
              counters.get(static_cast<Counter>(i)));
  EXPECT_EQ(doc["version"], 1);
  EXPECT_EQ(doc["time_unix_ns"], 1763768000000000000ull);
  EXPECT_DOUBLE_EQ(doc["rates"]["frames"].get<double>(), 500.0);
  EXPECT_DOUBLE_EQ(doc["rates"]["trues"].get<double>(), 15.0);
  EXPECT_DOUBLE_EQ(doc["rates"]["randoms_fraction"].get<double>(), 0.25);
  EXPECT_EQ(doc["bdm"]["temperature_degC"][0], 31.5);
  EXPECT_TRUE(doc["bdm"]["temperature_degC"][1].is_null());
  EXPECT_EQ(doc["bdm"]["singles_per_s"].size(), 3u);
  EXPECT_EQ(doc["queues"]["ring_free"], 60);
}

// The live time of a calibrated dead-time model from the per-BDM singles rates; without a
// model every fraction is 1 and the model is named "none".
TEST(RatesDocument, LiveTimeFromTheDeadTimeModel) {
  Counters counters(2);
  counters.add(Counter::coinc_prompts, 200);
  counters.add_bdm_singles(0, 200'000);  // 100 000 /s over 2 s
  counters.add_bdm_singles(1, 400'000);  // 200 000 /s
  RatesSnapshot snap;
  snap.interval_s = 2;
  snap.bdm_transaxial = 2;
  snap.bdm_axial = 1;
  {
    RatesReporter reporter(counters);
    const nlohmann::json doc = nlohmann::json::parse(reporter.build(snap));
    EXPECT_EQ(doc["live_time_model"]["model"], "none");
    EXPECT_DOUBLE_EQ(doc["live_time_model"]["coincidence_live_fraction"].get<double>(), 1.0);
    EXPECT_DOUBLE_EQ(doc["live_time_model"]["trues_corrected"].get<double>(),
                     doc["rates"]["trues"].get<double>());
  }
  const DeadTimeModel model{DeadTimeKind::non_paralysable, {1e-6, 1e-6}};
  snap.dead_time = &model;
  RatesReporter reporter(counters);
  const nlohmann::json doc = nlohmann::json::parse(reporter.build(snap));
  const auto& live = doc["live_time_model"];
  EXPECT_EQ(live["model"], "non_paralysable");
  EXPECT_NEAR(live["bdm_live_fraction"][0].get<double>(), 0.9, 1e-12);  // 1 − m τ
  EXPECT_NEAR(live["bdm_live_fraction"][1].get<double>(), 0.8, 1e-12);
  const double singles = 3e5 / (1e5 / 0.9 + 2e5 / 0.8);
  EXPECT_NEAR(live["singles_live_fraction"].get<double>(), singles, 1e-12);
  EXPECT_NEAR(live["coincidence_live_fraction"].get<double>(), singles * singles, 1e-12);
  EXPECT_NEAR(live["trues_corrected"].get<double>(),
              doc["rates"]["trues"].get<double>() / (singles * singles), 1e-9);
  EXPECT_EQ(live["saturated_bdms"], 0);
}

TEST(Logging, StderrIsTheJournalOnlyWhenJournalStreamNamesIt) {
  char path[] = "/tmp/petdaq-journal-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  struct stat st {};
  ASSERT_EQ(fstat(fd, &st), 0);
  const int saved = dup(STDERR_FILENO);
  ASSERT_EQ(dup2(fd, STDERR_FILENO), STDERR_FILENO);
  const std::string ours = std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
  const std::string other = std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino + 1);
  unsetenv("JOURNAL_STREAM");
  const bool without = stderr_is_journal();
  setenv("JOURNAL_STREAM", ours.c_str(), 1);
  const bool with_ours = stderr_is_journal();
  setenv("JOURNAL_STREAM", other.c_str(), 1);
  const bool with_other = stderr_is_journal();
  setenv("JOURNAL_STREAM", "garbage", 1);
  const bool with_garbage = stderr_is_journal();
  unsetenv("JOURNAL_STREAM");
  dup2(saved, STDERR_FILENO);
  close(saved);
  close(fd);
  unlink(path);
  EXPECT_FALSE(without);
  EXPECT_TRUE(with_ours);
  EXPECT_FALSE(with_other);  // stderr was redirected away from the journal
  EXPECT_FALSE(with_garbage);
}

TEST(HostRing, ChunksCirculateAndRunOut) {
  LockedPageAllocator alloc;
  HostRing ring(1 << 16, 3, 1, alloc);
  auto token = ring.make_sealed_token();
  EXPECT_EQ(ring.take_used_high(), 0u);
  Chunk* a = ring.try_acquire();
  Chunk* b = ring.try_acquire();
  EXPECT_EQ(ring.take_used_high(), 2u);
  Chunk* c = ring.try_acquire();
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(ring.try_acquire(), nullptr);  // all taken: the receiver would drop
  a->frame_count = 1;
  ring.seal(a, *token);
  EXPECT_EQ(ring.try_sealed(), a);
  EXPECT_EQ(ring.try_sealed(), nullptr);
  ring.release(a);
  EXPECT_EQ(a->frame_count, 0u);
  // The high-water mark of the interval: the full ring, though one chunk is free again.
  EXPECT_EQ(ring.take_used_high(), 3u);
  EXPECT_EQ(ring.take_used_high(), 2u);  // a new interval starts at what is in use now
  EXPECT_EQ(ring.try_acquire(), a);
  EXPECT_EQ(a->summary.frames, 0u);
}

// The receiver on a loopback socket, its chunks read straight from the ring.
class ReceiverTest : public ::testing::Test {
 protected:
  void start(Framing framing, const char* allowed = "127.0.0.1/32", std::uint32_t threads = 1) {
    in.endpoints = {{0x7F000001u, 0}};  // 127.0.0.1, any free port
    in.receiver_threads = threads;
    in.framing = framing;
    in.allowed_sources = {parse_ipv4_network(allowed).value()};
    in.receive_buffer_bytes = 1 << 20;
    in.flush_ms = 1;
    in.ring_chunk_bytes = 1 << 16;
    in.ring_chunks = 4;
    ring = std::make_unique<HostRing>(in.ring_chunk_bytes, in.ring_chunks, threads, alloc);
    rx = std::make_unique<Receiver>(in, rule, kNoBound, *ring, counters);
    rx->start();
    fd = socket(AF_INET, SOCK_DGRAM, 0);
    to.sin_family = AF_INET;
    to.sin_port = htons(rx->bound().at(0).port);
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  }
  void TearDown() override {
    if (rx) rx->stop();
    if (fd >= 0) close(fd);
  }
  void send(const std::vector<std::uint8_t>& d) {
    ASSERT_EQ(sendto(fd, d.data(), d.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to),
              static_cast<ssize_t>(d.size()));
  }
  // Frames of every chunk sealed so far, in order.
  std::vector<RawFrame> frames_until(std::size_t n) {
    std::vector<RawFrame> out;
    const auto until = std::chrono::steady_clock::now() + 5s;
    while (out.size() < n && std::chrono::steady_clock::now() < until) {
      Chunk* c = ring->wait_sealed(10ms);
      if (!c) continue;
      out.insert(out.end(), c->frames(), c->frames() + c->frame_count);
      // The receiver's summary is the one made directly from the chunk's frames.
      ChunkSummary direct;
      direct.add(c->frames(), c->frame_count, 0, rule);
      EXPECT_EQ(c->summary.frames, c->frame_count);
      EXPECT_EQ(c->summary.sourceless, direct.sourceless);
      EXPECT_EQ(c->summary.present_count, direct.present_count);
      for (std::uint32_t i = 0; i < direct.present_count; ++i) {
        const std::uint8_t src = direct.present[i];
        EXPECT_EQ(c->summary.present[i], src);
        EXPECT_EQ(c->summary.sources[src].frames, direct.sources[src].frames);
        EXPECT_EQ(c->summary.sources[src].min_time, direct.sources[src].min_time);
        EXPECT_EQ(c->summary.sources[src].max_time, direct.sources[src].max_time);
        EXPECT_EQ(c->summary.sources[src].first_index, direct.sources[src].first_index);
      }
      ring->release(c);
    }
    return out;
  }
  static std::vector<std::uint8_t> frames_bytes(std::uint8_t first, std::size_t n) {
    std::vector<std::uint8_t> d(n * kFrameBytes);
    for (std::size_t i = 0; i < d.size(); ++i) d[i] = static_cast<std::uint8_t>(first + i / kFrameBytes);
    return d;
  }

  InputSettings in;
  // No marker check: the test's frames are numbered bytes; those whose BDM byte is below 4
  // have a source.
  SourceRule rule{false, 0xA, 0x5, 4};
  LockedPageAllocator alloc;
  Counters counters{4};
  std::unique_ptr<HostRing> ring;
  std::unique_ptr<Receiver> rx;
  int fd = -1;
  sockaddr_in to{};
};

TEST_F(ReceiverTest, RawFramesArriveInOrderAndBadDatagramsAreCounted) {
  start(Framing::raw);
  send(frames_bytes(1, 3));                       // 3 frames
  send({});                                       // empty
  std::vector<std::uint8_t> ragged = frames_bytes(10, 2);
  ragged.resize(ragged.size() + 5, 0xEE);         // 2 frames + 5 trailing bytes
  send(ragged);
  send(frames_bytes(20, 100));                    // a span of its own (>= 1 KiB)
  const auto frames = frames_until(105);
  ASSERT_EQ(frames.size(), 105u);
  EXPECT_EQ(frames[0].bytes[0], 1);
  EXPECT_EQ(frames[2].bytes[15], 3);
  EXPECT_EQ(frames[3].bytes[0], 10);
  EXPECT_EQ(frames[4].bytes[0], 11);
  EXPECT_EQ(frames[5].bytes[0], 20);
  EXPECT_EQ(frames[104].bytes[0], 119);
  rx->stop();
  EXPECT_EQ(counters.get(Counter::rx_datagrams), 4u);
  EXPECT_EQ(counters.get(Counter::rx_frames), 105u);
  EXPECT_EQ(counters.get(Counter::rx_empty), 1u);
  EXPECT_EQ(counters.get(Counter::rx_trailing_bytes), 5u);
  EXPECT_EQ(counters.get(Counter::rx_bytes), 3u * 16 + 0 + 37 + 1600);
}

TEST_F(ReceiverTest, SequencedHeadersAreCheckedAndDuplicatesDropped) {
  start(Framing::sequenced);
  auto datagram = [](std::uint16_t source, std::uint32_t seq, std::uint8_t first, std::uint32_t n,
                     std::uint32_t claimed) {
    std::vector<std::uint8_t> d(kSequencedHeaderBytes + n * kFrameBytes);
    SequencedHeader h;
    h.source_id = source;
    h.sequence = seq;
    h.frame_count = claimed;
    encode_sequenced_header(h, d.data());
    for (std::size_t i = 0; i < n * kFrameBytes; ++i)
      d[kSequencedHeaderBytes + i] = static_cast<std::uint8_t>(first + i / kFrameBytes);
    return d;
  };
  send(datagram(1, 0, 1, 2, 2));
  send(datagram(1, 0, 1, 2, 2));    // duplicate: dropped
  send(datagram(1, 2, 5, 1, 1));    // sequence 1 missing
  send(datagram(1, 3, 7, 2, 5));    // claims more frames than it holds: refused
  std::vector<std::uint8_t> bad_magic = datagram(2, 0, 9, 1, 1);
  bad_magic[0] ^= 0xFF;
  send(bad_magic);
  send(std::vector<std::uint8_t>(15, 0));  // shorter than a header
  const auto frames = frames_until(3);
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(frames[0].bytes[0], 1);
  EXPECT_EQ(frames[1].bytes[0], 2);
  EXPECT_EQ(frames[2].bytes[0], 5);
  rx->stop();
  EXPECT_EQ(counters.get(Counter::rx_seq_duplicate), 1u);
  EXPECT_EQ(counters.get(Counter::rx_seq_missing), 1u);
  EXPECT_EQ(counters.get(Counter::rx_bad_header), 3u);
  EXPECT_EQ(counters.get(Counter::rx_frames), 3u);
}

TEST_F(ReceiverTest, ForeignSourcesAreDropped) {
  start(Framing::raw, "10.0.0.0/8");
  send(frames_bytes(1, 4));
  EXPECT_TRUE(test::wait_until([&] { return counters.get(Counter::rx_foreign_source) >= 1; }));
  rx->stop();
  EXPECT_EQ(counters.get(Counter::rx_foreign_source), 1u);
  EXPECT_EQ(counters.get(Counter::rx_frames), 0u);
  EXPECT_EQ(ring->try_sealed(), nullptr);
}

TEST_F(ReceiverTest, NoFreeChunkDropsAndCountsWithoutBlocking) {
  start(Framing::raw);
  // Keep every chunk: the worker is "stuck".
  std::vector<Chunk*> held;
  for (int i = 0; i < 40; ++i) send(frames_bytes(0, 500));  // 8000 bytes each, 8 per chunk
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (held.size() < 4 && std::chrono::steady_clock::now() < until)
    if (Chunk* c = ring->wait_sealed(10ms)) held.push_back(c);
  ASSERT_EQ(held.size(), 4u);  // the ring's four chunks, full or flushed
  EXPECT_TRUE(test::wait_until([&] { return counters.get(Counter::rx_datagrams) >= 40; }));
  rx->stop();
  const std::uint64_t in_chunks = counters.get(Counter::rx_frames) / 500;
  EXPECT_EQ(counters.get(Counter::rx_datagrams), 40u);
  EXPECT_EQ(in_chunks + counters.get(Counter::rx_ring_full), 40u);
  EXPECT_GT(counters.get(Counter::rx_ring_full), 0u);
  for (Chunk* c : held) ring->release(c);
}

TEST_F(ReceiverTest, SeveralThreadsShareAPortWithReusePort) {
  start(Framing::raw, "127.0.0.1/32", 2);
  ASSERT_EQ(rx->bound().size(), 2u);
  EXPECT_EQ(rx->bound()[0].port, rx->bound()[1].port);
  // Many senders (source ports), so the kernel spreads them over both sockets.
  std::vector<int> senders;
  for (int s = 0; s < 16; ++s) senders.push_back(socket(AF_INET, SOCK_DGRAM, 0));
  for (int round = 0; round < 10; ++round)
    for (int s : senders) {
      const auto d = frames_bytes(static_cast<std::uint8_t>(round), 3);
      ASSERT_EQ(sendto(s, d.data(), d.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to),
                static_cast<ssize_t>(d.size()));
    }
  const auto frames = frames_until(16 * 10 * 3);
  EXPECT_EQ(frames.size(), 480u);
  rx->stop();
  EXPECT_EQ(counters.get(Counter::rx_datagrams), 160u);
  EXPECT_EQ(counters.get(Counter::rx_frames), 480u);
  for (int s : senders) close(s);
}

TEST_F(ReceiverTest, ThreadsSharingAPortTakeTheBoardsBetweenThem) {
  start(Framing::raw, "127.0.0.1/32", 2);
  // One sending socket: hashing by address would give every datagram to one thread. By
  // board, datagrams whose first frame has an even BDM go to one, odd to the other.
  for (int round = 0; round < 40; ++round) send(frames_bytes(static_cast<std::uint8_t>(round % 4), 3));
  std::size_t frames = 0;
  std::array<std::size_t, 2> chunks_of_parity{};
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (frames < 120 && std::chrono::steady_clock::now() < until) {
    Chunk* c = ring->wait_sealed(10ms);
    if (!c) continue;
    ASSERT_EQ(c->frame_count % 3, 0u);
    const int parity = c->frames()[0].bytes[frame_offset::bdm] % 2;
    for (std::size_t d = 0; d < c->frame_count; d += 3)
      EXPECT_EQ(c->frames()[d].bytes[frame_offset::bdm] % 2, parity)
          << "a chunk holds datagrams of both threads' boards";
    ++chunks_of_parity[static_cast<std::size_t>(parity)];
    frames += c->frame_count;
    ring->release(c);
  }
  EXPECT_EQ(frames, 120u);
  EXPECT_GT(chunks_of_parity[0], 0u);
  EXPECT_GT(chunks_of_parity[1], 0u);
}

TEST_F(ReceiverTest, OversizeDatagramsAreRefusedWhole) {
  start(Framing::raw);
  send(frames_bytes(0, (kDatagramSlotBytes + 64) / kFrameBytes));
  send(frames_bytes(1, 2));
  const auto frames = frames_until(2);
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0].bytes[0], 1);
  rx->stop();
  EXPECT_EQ(counters.get(Counter::rx_oversize), 1u);
  // rx.bytes counts what was sent, the oversize datagram's real length included.
  const std::size_t oversize = (kDatagramSlotBytes + 64) / kFrameBytes * kFrameBytes;
  EXPECT_EQ(counters.get(Counter::rx_bytes), oversize + 2 * kFrameBytes);
}

// The worker's timing wrapper answers the slicer's questions as the backend inside would:
// the CPU backend's slices are collected at once and cut to its cache-sized preference.
TEST(TimedBackend, ForwardsWhatTheSlicerAsksTheBackend) {
  test::TestScanner scanner;
  Settings s = scanner.settings;
  s.stream.max_slice_frames = 1u << 20;
  for (const unsigned threads : {1u, 3u}) {
    s.backend_threads = threads;
    CpuBackend cpu(s, scanner.calibration);
    PhaseTimer timer;
    TimedBackend timed(cpu, timer);
    EXPECT_STREQ(timed.name(), cpu.name());
    EXPECT_TRUE(timed.works_in_collect());
    EXPECT_EQ(timed.preferred_slice_frames(), cpu.preferred_slice_frames());
    EXPECT_EQ(cpu.preferred_slice_frames(), CpuBackend::kCacheSliceFrames * threads);
    EXPECT_LT(timed.preferred_slice_frames(), timed.max_slice_frames() / 2);
    EXPECT_EQ(timed.max_slice_frames(), cpu.max_slice_frames());
    EXPECT_EQ(timed.max_staged_frames(), cpu.max_staged_frames());
    EXPECT_EQ(timed.max_in_flight(), cpu.max_in_flight());
  }
}

}  // namespace
}  // namespace petdaq::daemon

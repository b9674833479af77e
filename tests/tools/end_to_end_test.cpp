// Replay -> petdaqd -> petdaq-record against petdaq-offline on the same frame file: the
// recorded coincidences must be exactly the offline ones. Runs when petdaqd, petdaq-offline
// and petdaq-sim are built; skips with a message otherwise.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include <algorithm>

#include "core/plm_file.h"
#include "proto/frame.h"
#include "proto/topics.h"
#include "tests/tools/tool_harness.h"

namespace petdaq {
namespace {

using namespace std::chrono_literals;
using test::bin_dir;
using test::ScratchDir;

// petdaqd's `rates` documents, read beside the tools: they say when every subscription has
// reached the daemon and when it has received every frame.
class RatesReader {
 public:
  explicit RatesReader(const std::string& endpoint) {
    sub_.set(zmq::sockopt::linger, 0);
    sub_.set(zmq::sockopt::subscribe, std::string(topic::rates));
    sub_.connect(endpoint);
  }
  // Waits until the latest document's counter `name` is at least `at_least`.
  bool wait_counter(const std::string& name, std::uint64_t at_least,
                    std::chrono::milliseconds limit) {
    return test::wait_until(
        [&] {
          take_waiting();
          return !last_.is_null() && last_["counters"].value(name, std::uint64_t{0}) >= at_least;
        },
        limit, 20ms);
  }
  std::string last() const { return last_.dump(); }

 private:
  void take_waiting() {
    for (;;) {
      std::vector<zmq::message_t> parts;
      if (!zmq::recv_multipart(sub_, std::back_inserter(parts), zmq::recv_flags::dontwait)) return;
      if (parts.size() == 3) last_ = nlohmann::json::parse(parts[2].to_string());
    }
  }
  zmq::context_t context_{1};
  zmq::socket_t sub_{context_, zmq::socket_type::sub};
  nlohmann::json last_;
};

// A counter of petdaqd's "final counters" log line ("name=value").
std::optional<std::uint64_t> final_counter(const std::string& log, const std::string& name) {
  const auto line = log.find("final counters:");
  if (line == std::string::npos) return std::nullopt;
  const auto at = log.find(" " + name + "=", line);
  if (at == std::string::npos) return std::nullopt;
  return std::stoull(log.substr(at + name.size() + 2));
}

// Messages petdaq-record has taken so far, from its latest progress line.
std::uint64_t recorded_messages(const std::string& rec_err) {
  const auto line = rec_err.rfind(" s  prompts ");
  if (line == std::string::npos) return 0;
  std::istringstream in(rec_err.substr(line + 12));
  std::uint64_t prompts = 0, delayed = 0, records = 0;
  std::string word;
  in >> prompts >> word >> records >> word >> word >> delayed;
  return prompts + delayed;
}

struct PlmContents {
  PlmHeader header;
  std::vector<MessageHeader> messages;
  std::vector<CoincRecord> records[2];  // prompts, delayed: concatenated in file order
};

PlmContents read_plm(const std::filesystem::path& file) {
  PlmContents c;
  PlmReader reader(file);
  c.header = reader.header();
  MessageHeader h;
  std::vector<CoincRecord> records;
  while (reader.next(h, records)) {
    c.messages.push_back(h);
    auto& out = c.records[h.kind == static_cast<std::uint16_t>(MessageKind::prompts) ? 0 : 1];
    out.insert(out.end(), records.begin(), records.end());
  }
  return c;
}

// Per kind: message ids consecutive from the first, batches tiling time.
void expect_complete_stream(const PlmContents& c, MessageKind kind, const char* what) {
  std::optional<MessageHeader> prev;
  for (const auto& h : c.messages) {
    if (h.kind != static_cast<std::uint16_t>(kind)) continue;
    if (prev && prev->run_id == h.run_id) {
      EXPECT_EQ(h.message_id, prev->message_id + 1) << what;
      EXPECT_EQ(h.t_begin, prev->t_end) << what;
    }
    prev = h;
  }
}

// The whole path for each backend: with the GPU backend petdaqd publishes bodies the device
// copied straight into its message arena (docs/daemon.md, "Copies").
class ToolsEndToEnd : public ::testing::TestWithParam<std::string> {};

TEST_P(ToolsEndToEnd, ReplayIntoPetdaqdRecordsWhatOfflineComputes) {
  const std::string backend = GetParam();
  for (const char* tool : {"petdaqd", "petdaq-offline", "petdaq-sim"}) {
    if (!std::filesystem::exists(bin_dir() / tool)) {
      GTEST_SKIP() << tool << " is not built in " << bin_dir() << "; this test needs it";
    }
  }
  ScratchDir dir;
  std::uint16_t udp_port = 0;
  {
    test::UdpReceiver probe;  // a free UDP port, released again
    udp_port = probe.port();
  }
  const std::string zmq_endpoint = dir.ipc("pub");
  {
    std::ofstream base(dir / "base.yaml");
    base << "calibration:\n"
            "  position_lut: position_lut.npy\n"
            "  energy_correction: energy_correction.npy\n"
            "input:\n"
            "  endpoints: [\"127.0.0.1:" << udp_port << "\"]\n"
            "  framing: raw\n"
            "  receive_buffer_bytes: 16777216\n"
            "output:\n"
            "  zmq:\n"
            "    endpoint: \"" << zmq_endpoint << "\"\n"
            "    send_hwm: 1000000\n"
            "backend: cpu\n"
            // A source counts toward the horizon from its first datagram on; one whose first
            // datagram is still filling must not find the horizon already past its frames.
            "stream:\n"
            "  max_disorder_ps: 5.0e9\n";
  }
  const auto acq = dir / "acq";
  ASSERT_EQ(test::run_command({(bin_dir() / "petdaq-sim").string(), "--config",
                               (dir / "base.yaml").string(), "--output-dir", acq.string(),
                               "--duration-s", "0.008", "--activity-MBq", "5"},
                              dir / "sim.out", dir / "sim.err", std::chrono::seconds(120)),
            0)
      << test::read_text(dir / "sim.err");
  const std::string config = (acq / "petdaq.yaml").string();
  const std::string frames = (acq / "frames.bin").string();

  const int offline_rc = test::run_command(
      {(bin_dir() / "petdaq-offline").string(), "--config", config, "--input", frames, "--output",
       (dir / "offline.plm").string(), "--backend", backend, "--quiet"},
      dir / "off.out", dir / "off.err", std::chrono::seconds(120));
  if (backend == "gpu" && offline_rc == 2 &&
      test::read_text(dir / "off.err").find("backend gpu unavailable") != std::string::npos)
    GTEST_SKIP() << test::read_text(dir / "off.err");
  ASSERT_EQ(offline_rc, 0) << test::read_text(dir / "off.err");

  test::Child daemon({(bin_dir() / "petdaqd").string(), "--config", config, "--backend", backend},
                     dir / "d.out", dir / "d.err");
  // Frames sent before petdaqd has bound its port would be lost: wait for "ready".
  test::wait_until([&] {
    return test::read_text(dir / "d.err").find(" ready") != std::string::npos || !daemon.running();
  }, 30s);
  ASSERT_NE(test::read_text(dir / "d.err").find(" ready"), std::string::npos)
      << test::read_text(dir / "d.err");
  RatesReader rates(zmq_endpoint);
  // Not --quiet: its progress lines say how many messages it has taken.
  test::Child recorder({(bin_dir() / "petdaq-record").string(), "--config", config, "--output",
                        (dir / "recorded.plm").string()},
                       dir / "rec.out", dir / "rec.err");
  // The Python example listens too, where a Python with pyzmq and NumPy is installed.
  std::optional<test::Child> example;
  if (std::system("/usr/bin/python3 -c 'import zmq, numpy' > /dev/null 2>&1") == 0) {
    example.emplace(std::vector<std::string>{"/usr/bin/python3",
                                             (test::source_dir() / "tools" / "examples" /
                                              "subscribe.py").string(),
                                             "--endpoint", zmq_endpoint},
                    dir / "py.out", dir / "py.err");
  }
  // Batches published before a subscription reaches petdaqd are not sent to it: wait for
  // every topic subscribed (rates here, the two coincidence topics per subscriber).
  const std::uint64_t subscriptions = 1 + 2 + (example ? 2 : 0);
  ASSERT_TRUE(rates.wait_counter("out.zmq_subscriptions", subscriptions, 30s)) << rates.last();

  const int replay_rc = test::run_command(
      {(bin_dir() / "petdaq-replay").string(), frames, "--to", "127.0.0.1:" + std::to_string(udp_port),
       "--config", config, "--rate", "1000000", "--quiet"},
      dir / "rep.out", dir / "rep.err", std::chrono::seconds(120));
  ASSERT_EQ(replay_rc, 0) << test::read_text(dir / "rep.err");
  // Every frame of the file received before the end of the acquisition.
  const std::uint64_t frame_count = std::filesystem::file_size(frames) / sizeof(RawFrame);
  ASSERT_TRUE(rates.wait_counter("rx.frames", frame_count, 30s)) << rates.last();
  // End of acquisition: petdaqd resolves what is pending, publishes it and exits.
  daemon.signal(SIGTERM);
  ASSERT_EQ(daemon.wait_for(std::chrono::seconds(60)), 0) << test::read_text(dir / "d.err");
  // The subscribers stop at once on a signal: first let them take every message sent, a
  // prompts and a delayed message per slice.
  const auto slices = final_counter(test::read_text(dir / "d.err"), "stream.slices");
  ASSERT_TRUE(slices.has_value()) << test::read_text(dir / "d.err");
  const std::uint64_t published = 2 * *slices;
  EXPECT_TRUE(test::wait_until(
      [&] { return recorded_messages(test::read_text(dir / "rec.err")) >= published; }, 20s))
      << published << " messages published; " << test::read_text(dir / "rec.err");
  if (example) {
    EXPECT_TRUE(test::wait_until(
        [&] {
          const std::string out = test::read_text(dir / "py.out");
          return static_cast<std::uint64_t>(std::count(out.begin(), out.end(), '\n')) >= published;
        },
        20s))
        << published << " messages published; " << test::read_text(dir / "py.out");
  }
  recorder.signal(SIGINT);
  ASSERT_EQ(recorder.wait_for(std::chrono::seconds(20)), 0) << test::read_text(dir / "rec.err");
  std::size_t example_prompts = 0, example_delayed = 0;
  if (example) {
    example->signal(SIGINT);
    EXPECT_EQ(example->wait_for(std::chrono::seconds(20)), 0) << test::read_text(dir / "py.err");
    std::istringstream lines(test::read_text(dir / "py.out"));
    std::string line;
    while (std::getline(lines, line)) {
      const auto at = line.find(" records=");
      if (at == std::string::npos) continue;
      const std::size_t n = std::stoul(line.substr(at + 9));
      (line.rfind("coinc.prompt ", 0) == 0 ? example_prompts : example_delayed) += n;
    }
  }

  const std::string daemon_log = test::read_text(dir / "d.err");
  const auto counters_at = daemon_log.find("final counters");
  SCOPED_TRACE("petdaqd " + (counters_at == std::string::npos ? daemon_log
                                                               : daemon_log.substr(counters_at)));
  const PlmContents offline = read_plm(dir / "offline.plm");
  const PlmContents recorded = read_plm(dir / "recorded.plm");
  EXPECT_EQ(recorded.header.tick_ps, offline.header.tick_ps);
  EXPECT_EQ(recorded.header.crystal_count, offline.header.crystal_count);
  EXPECT_EQ(recorded.header.crystals_per_ring, offline.header.crystals_per_ring);
  EXPECT_EQ(recorded.header.settings_hash, offline.header.settings_hash);
  ASSERT_FALSE(offline.records[0].empty()) << "the simulated acquisition has no prompts";
  // Slices are cut by wall time in the daemon and by acquisition time offline, so batch
  // boundaries differ; the coincidences, in order, may not.
  EXPECT_EQ(recorded.records[0].size(), offline.records[0].size());
  EXPECT_TRUE(recorded.records[0] == offline.records[0]) << "prompts differ";
  EXPECT_EQ(recorded.records[1].size(), offline.records[1].size());
  EXPECT_TRUE(recorded.records[1] == offline.records[1]) << "delayed differ";
  expect_complete_stream(recorded, MessageKind::prompts, "recorded prompts");
  expect_complete_stream(recorded, MessageKind::delayed, "recorded delayed");
  const std::string rec_err = test::read_text(dir / "rec.err");
  const auto final_line = rec_err.find("stopped by signal:");
  ASSERT_NE(final_line, std::string::npos) << rec_err;
  EXPECT_NE(rec_err.find("missed 0 prompts 0 delayed", final_line), std::string::npos) << rec_err;
  EXPECT_NE(rec_err.find("prompts  first message id 0,"), std::string::npos) << rec_err;
  if (example) {
    EXPECT_EQ(example_prompts, offline.records[0].size()) << "subscribe.py";
    EXPECT_EQ(example_delayed, offline.records[1].size()) << "subscribe.py";
    std::printf("end to end: subscribe.py decoded %zu prompts, %zu delayed\n", example_prompts,
                example_delayed);
  }
  std::printf("end to end: %zu prompts, %zu delayed in %zu recorded messages (offline: %zu "
              "messages)\n",
              recorded.records[0].size(), recorded.records[1].size(), recorded.messages.size(),
              offline.messages.size());
  // Every body went out from the message arena (the GPU backend's copies land there).
  EXPECT_EQ(final_counter(daemon_log, "out.message_copies"), std::optional<std::uint64_t>(0));
}

INSTANTIATE_TEST_SUITE_P(Backends, ToolsEndToEnd, ::testing::Values("cpu", "gpu"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace petdaq

// petdaq-top: its reading of the rates document, then the display itself under tmux against
// a test publisher, read back with capture-pane the way a person would read it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>

#include "tests/tools/tool_harness.h"
#include "tests/tools/test_messages.h"
#include "tools/top/rates.h"

namespace petdaq {
namespace {

using test::bin_dir;
using test::ScratchDir;

// ---------------- the rates document ----------------

TEST(TopRates, ReadsTheDocumentPetdaqdPublishes) {
  const top::Rates r = top::parse_rates(test::test_rates_json(4));
  EXPECT_EQ(r.version, 1);
  EXPECT_EQ(r.time_unix_ns, 1763768004000000000ull);
  EXPECT_EQ(r.uptime_s, 3723.0);
  EXPECT_EQ(r.backend, "cpu");
  EXPECT_EQ(r.run_id, test::kTestRunId);
  EXPECT_EQ(r.prompts, 123456.0);
  EXPECT_EQ(r.delayed, 12345.0);
  EXPECT_EQ(r.trues, 111111.0);
  EXPECT_EQ(r.randoms_fraction, 0.1);
  EXPECT_EQ(r.necr, 100000.0);
  EXPECT_EQ(r.randoms, 12345.0);
  EXPECT_EQ(r.randoms_method, "singles_prompts");
  EXPECT_EQ(r.randoms_singles_rate, 20500.0);
  EXPECT_EQ(r.randoms_singles_prompts, 12345.0);
  EXPECT_EQ(r.bdm_transaxial, 12u);
  EXPECT_EQ(r.bdm_axial, 2u);
  ASSERT_EQ(r.bdm_singles_per_s.size(), 24u);
  EXPECT_EQ(r.bdm_singles_per_s[23], 240000.0);
  ASSERT_EQ(r.bdm_temperature_degC.size(), 24u);
  EXPECT_FALSE(r.bdm_temperature_degC[5].has_value());
  EXPECT_EQ(*r.bdm_temperature_degC[6], 33.0);
  EXPECT_EQ(r.counter("rx.kernel_drops"), 7u);
  EXPECT_EQ(r.counter("no.such"), std::nullopt);
  EXPECT_EQ(*r.ring_free, 60u);
  EXPECT_EQ(*r.latency_p99_ms, 4.25);
  EXPECT_EQ(r.alarms, std::vector<std::string>{
                          "board_temperature (bdm 23): BDM 23 at 41.5 C, outside [-40.0, 40.0] C"});
}

// Lagging boards and dead time (DESIGN section 6): the flags per BDM and the live fraction.
TEST(TopRates, ReadsLaggingBoardsAndTheLiveFraction) {
  nlohmann::json doc = nlohmann::json::parse(test::test_rates_json(4));
  const std::size_t n = doc["bdm"]["singles_per_s"].size();
  doc["bdm"]["lagging"] = nlohmann::json::array();
  doc["bdm"]["late"] = nlohmann::json::array();
  doc["bdm"]["ring_full"] = nlohmann::json::array();
  doc["bdm"]["socket_kernel_drops"] = nlohmann::json::array();
  for (std::size_t b = 0; b < n; ++b) {
    doc["bdm"]["lagging"].push_back(b == 3);
    doc["bdm"]["late"].push_back(b == 3 ? 1234 : 0);
    doc["bdm"]["ring_full"].push_back(b == 1 ? 7 : 0);
    doc["bdm"]["socket_kernel_drops"].push_back(b % 2 == 1 ? 40 : 0);
  }
  doc["deadtime"] = {{"shedding", true}, {"dead_s_run", 0.5}, {"live_fraction_run", 0.9},
                     {"live_fraction_interval", 0.75}};
  const top::Rates r = top::parse_rates(doc.dump());
  ASSERT_EQ(r.bdm_lagging.size(), n);
  EXPECT_TRUE(r.bdm_lagging[3]);
  EXPECT_FALSE(r.bdm_lagging[2]);
  ASSERT_EQ(r.bdm_late.size(), n);
  EXPECT_EQ(r.bdm_late[3], 1234u);
  ASSERT_EQ(r.bdm_socket_losses.size(), n);
  EXPECT_EQ(r.bdm_socket_losses[1], 47u);
  EXPECT_EQ(r.bdm_socket_losses[3], 40u);
  EXPECT_EQ(r.bdm_socket_losses[2], 0u);
  EXPECT_EQ(r.live_fraction_run.value_or(0), 0.9);
  EXPECT_EQ(r.live_fraction_interval.value_or(0), 0.75);
  EXPECT_TRUE(r.shedding);
  const top::Rates old = top::parse_rates(test::test_rates_json(4));
  EXPECT_TRUE(old.bdm_lagging.empty());
  EXPECT_TRUE(old.bdm_socket_losses.empty());
  // A board is shown losing while its socket's losses grow, not for losses long past.
  EXPECT_EQ(top::boards_losing({}, r.bdm_socket_losses), std::vector<bool>(n, false));
  std::vector<std::uint64_t> later = r.bdm_socket_losses;
  later[3] += 5;
  std::vector<bool> want(n, false);
  want[3] = true;
  EXPECT_EQ(top::boards_losing(r.bdm_socket_losses, later), want);
  EXPECT_FALSE(old.live_fraction_run.has_value());
}

TEST(TopRates, RefusesOtherVersionsAndNonJson) {
  EXPECT_THROW(top::parse_rates("{\"version\": 2}"), top::RatesError);
  EXPECT_THROW(top::parse_rates("[1]"), top::RatesError);
  EXPECT_THROW(top::parse_rates("{\"rates\": {}}"), top::RatesError);
  EXPECT_THROW(top::parse_rates("{\"version\": 1, "), top::RatesError);
  // A minimal document: derived values fill in what is missing.
  const top::Rates r = top::parse_rates(R"({"version": 1, "rates": {"prompts": 100, "delayed": 20}})");
  EXPECT_EQ(r.trues, 80.0);
  EXPECT_DOUBLE_EQ(r.randoms_fraction, 0.2);
  EXPECT_DOUBLE_EQ(r.necr, 64.0);
  EXPECT_TRUE(r.bdm_singles_per_s.empty());
  EXPECT_FALSE(r.randoms.has_value());
  EXPECT_TRUE(r.randoms_method.empty());
}

TEST(TopRates, ProblemCountersAreTheDropsAndErrors) {
  for (const char* p : {"rx.kernel_drops", "rx.seq_missing", "frame.bad_marker", "stream.late",
                        "out.zmq_refused", "coinc.records_overflow", "some.new_counter",
                        "out.file_errors", "out.file_dropped_bytes", "out.zmq_subscriptions_refused",
                        "rx.seq_wild"}) {
    EXPECT_TRUE(top::is_problem_counter(p)) << p;
  }
  for (const char* p : {"rx.frames", "rx.datagrams", "coinc.prompts", "single.energy_rejected",
                        "out.zmq_connects", "out.zmq_disconnects", "out.zmq_subscriptions",
                        "stream.exact_blocks", "stream.source_idle"}) {
    EXPECT_FALSE(top::is_problem_counter(p)) << p;
  }
}

// ---------------- the tool ----------------

bool have_tmux() { return std::system("tmux -V > /dev/null 2>&1") == 0; }

// A private tmux server (its own socket name) running one command in a fixed-size pane.
class Tmux {
 public:
  explicit Tmux(const std::string& command) : name_("petdaq-top-test-" + std::to_string(::getpid())) {
    const std::string cmd = "tmux -L " + name_ + " -f /dev/null new-session -d -x 120 -y 45 -s top '" +
                            command + "'";
    ok_ = std::system(cmd.c_str()) == 0;
  }
  ~Tmux() { std::system(("tmux -L " + name_ + " kill-server > /dev/null 2>&1").c_str()); }
  bool ok() const { return ok_; }
  std::string capture() const {
    std::string out;
    FILE* p = ::popen(("tmux -L " + name_ + " capture-pane -p -t top 2>/dev/null").c_str(), "r");
    if (!p) return out;
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    ::pclose(p);
    return out;
  }
  void keys(const std::string& k) const {
    std::system(("tmux -L " + name_ + " send-keys -t top " + k).c_str());
  }
  bool alive() const {
    return std::system(("tmux -L " + name_ + " has-session -t top > /dev/null 2>&1").c_str()) == 0;
  }
  // Captures until `text` shows (true) or `limit` passes (false).
  bool wait_for(const std::string& text, std::chrono::milliseconds limit) const {
    return test::wait_until([&] { return capture().find(text) != std::string::npos; }, limit,
                            std::chrono::milliseconds(200));
  }

 private:
  std::string name_;
  bool ok_ = false;
};

TEST(TopTool, ShowsThePublishedRatesThenSaysWhenDataStops) {
  if (!have_tmux()) GTEST_SKIP() << "tmux is not installed";
  ScratchDir dir;
  const std::string endpoint = dir.ipc("rates");
  Tmux tmux((bin_dir() / "petdaq-top").string() + " --endpoint " + endpoint);
  ASSERT_TRUE(tmux.ok());
  test::Child publisher({(bin_dir() / "petdaq-test-publisher").string(), "--endpoint", endpoint,
                         "--wait-subscriptions", "1", "--rates", "--interval-ms", "200",
                         "--duration-s", "4", "--bad-first"},
                        dir / "pub.out", dir / "pub.err");
  ASSERT_TRUE(tmux.wait_for("prompts 123 k/s", std::chrono::seconds(15))) << tmux.capture();
  const std::string screen = tmux.capture();
  for (const char* expected :
       {"backend cpu", "run 3", "uptime 01:02:03", "prompts 123 k/s", "delayed 12.3 k/s",
        "trues 111 k/s", "randoms 10.0 % (singles_prompts)",
        "randoms 12.3 k/s by singles_prompts:  delayed 12.3 k/s  singles-rate 20.5 k/s  "
        "singles-prompts 12.3 k/s",
        "multiples 1.23 k/s", "NECR 100 k/s",
        "singles 2.35 M/s", "frames 2.50 M/s", "latency p50 1.5 ms", "max 9.8 ms",
        "ring 60/64 free", "pending 17", "rx.kernel_drops 7", "rx.seq_missing 3",
        "t00 a0 [", "10.0 k  30.0C", "t11 a1 [", "240 k  41.5C", "t05 a0 [", "60.0 k     -C",
        "t05 a1 [", "180 k  38.5C", endpoint.c_str()}) {
    EXPECT_NE(screen.find(expected), std::string::npos) << "missing '" << expected << "' in\n"
                                                        << screen;
  }
  // The broken document sent first is counted and its reason shown, not fatal.
  EXPECT_NE(screen.find("1 unreadable messages; last: rates document is not valid JSON"),
            std::string::npos)
      << screen;
  // Informational counters are not listed among the problems.
  EXPECT_EQ(screen.find("rx.frames"), std::string::npos) << screen;
  EXPECT_EQ(screen.find("no data from"), std::string::npos) << screen;
  // The BDM with the highest rate has the longest bar: t11 a1 is full, t00 a0 is short.
  const auto full_bar = screen.find("t11 a1 [#");
  EXPECT_NE(full_bar, std::string::npos);

  ASSERT_TRUE(publisher.wait_for(std::chrono::seconds(20)).has_value());
  ASSERT_TRUE(tmux.wait_for("no data from petdaqd at " + endpoint, std::chrono::seconds(8)))
      << tmux.capture();
  // The last numbers stay on screen, marked stale.
  EXPECT_NE(tmux.capture().find("prompts 123 k/s"), std::string::npos);

  tmux.keys("p");
  EXPECT_TRUE(tmux.wait_for("[paused", std::chrono::seconds(5))) << tmux.capture();
  tmux.keys("q");
  EXPECT_TRUE(test::wait_until([&] { return !tmux.alive(); }, std::chrono::seconds(5),
                               std::chrono::milliseconds(100)))
      << "q did not quit";
}

TEST(TopTool, NoPublisherAtAllSaysSoAfterThreeSeconds) {
  if (!have_tmux()) GTEST_SKIP() << "tmux is not installed";
  ScratchDir dir;
  const std::string endpoint = dir.ipc("nobody");
  Tmux tmux((bin_dir() / "petdaq-top").string() + " --endpoint " + endpoint);
  ASSERT_TRUE(tmux.ok());
  // Time passing is the test here: 1.5 s of silence is not yet "no data".
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_EQ(tmux.capture().find("no data from"), std::string::npos) << tmux.capture();
  EXPECT_TRUE(tmux.wait_for("no data from petdaqd at " + endpoint, std::chrono::seconds(6)))
      << tmux.capture();
}

// A publisher that goes and another that takes the endpoint (a restarted petdaqd, or another
// process): petdaq-top says that the publisher changed.
TEST(TopTool, SaysWhenAnotherPublisherServesTheEndpoint) {
  ScratchDir dir;
  const std::string endpoint = dir.ipc("rates");
  test::Child top({(bin_dir() / "petdaq-top").string(), "--endpoint", endpoint, "--plain"},
                  dir / "top.out", dir / "top.err");
  for (const char* id : {"1000", "2000"}) {
    ASSERT_EQ(test::run_command({(bin_dir() / "petdaq-test-publisher").string(), "--endpoint",
                                 endpoint, "--wait-subscriptions", "1", "--rates-count", "3",
                                 "--interval-ms", "100", "--publisher-id", id},
                                dir / "pub.out", dir / "pub.err", std::chrono::seconds(30)),
              0)
        << test::read_text(dir / "pub.err");
  }
  EXPECT_TRUE(test::wait_until([&] {
    return test::read_text(dir / "top.err").find(
               "another publisher (publisher_id 000007d0, was 000003e8)") != std::string::npos;
  })) << test::read_text(dir / "top.err");
  top.signal(SIGTERM);
  EXPECT_EQ(top.wait_for(std::chrono::seconds(5)), 0);
}

TEST(TopTool, PlainAndJsonModesPrintOneLinePerDocumentFromTheConfigsEndpoint) {
  ScratchDir dir;
  const std::string endpoint = dir.ipc("rates");
  // --plain finds the endpoint in the configuration, --json is given it.
  const auto config = dir / "petdaq.yaml";
  std::ofstream(config) << "calibration: {position_lut: p.npy, energy_correction: e.npy}\n"
                        << "output:\n  zmq:\n    endpoint: \"" << endpoint << "\"\n";
  test::Child plain({(bin_dir() / "petdaq-top").string(), "--config", config.string(), "--plain"},
                    dir / "plain.out", dir / "plain.err");
  test::Child json({(bin_dir() / "petdaq-top").string(), "--endpoint", endpoint, "--json"},
                   dir / "json.out", dir / "json.err");
  test::Child publisher({(bin_dir() / "petdaq-test-publisher").string(), "--endpoint", endpoint,
                         "--wait-subscriptions", "2", "--rates", "--interval-ms", "300",
                         "--duration-s", "1.5"},
                        dir / "pub.out", dir / "pub.err");
  ASSERT_TRUE(publisher.wait_for(std::chrono::seconds(20)).has_value());
  // Once the publisher has gone quiet, --plain says so (after 3 s of silence).
  EXPECT_TRUE(test::wait_until([&] {
    return test::read_text(dir / "plain.out").find("no data from petdaqd at " + endpoint) !=
           std::string::npos;
  }));
  plain.signal(SIGTERM);
  json.signal(SIGTERM);
  EXPECT_EQ(plain.wait_for(std::chrono::seconds(5)), 0);
  EXPECT_EQ(json.wait_for(std::chrono::seconds(5)), 0);

  const std::string p = test::read_text(dir / "plain.out");
  std::istringstream lines(p);
  std::string line;
  int rate_lines = 0;
  bool stale_line = false;
  while (std::getline(lines, line)) {
    if (line.find("prompts 123 k/s") != std::string::npos) {
      ++rate_lines;
      EXPECT_NE(line.find("problems: rx.kernel_drops=7 rx.seq_missing=3"), std::string::npos)
          << line;
      EXPECT_NE(line.find("singles 2.35 M/s"), std::string::npos) << line;
    }
    if (line.find("no data from petdaqd at " + endpoint) != std::string::npos) stale_line = true;
  }
  EXPECT_GE(rate_lines, 3) << p;
  EXPECT_TRUE(stale_line) << p;

  const std::string j = test::read_text(dir / "json.out");
  std::istringstream jl(j);
  int docs = 0;
  while (std::getline(jl, line)) {
    const top::Rates r = top::parse_rates(line);
    EXPECT_EQ(r.prompts, 123456.0);
    ++docs;
  }
  EXPECT_GE(docs, 3) << j;
}

}  // namespace
}  // namespace petdaq

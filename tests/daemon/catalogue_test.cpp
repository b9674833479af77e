// The run catalogue (docs/operations.md, "The run catalogue"): its writer in-process (rows, counters, live
// fraction, SHA-256 against sha256sum, one daemon per catalogue, refused files), and petdaqd
// end to end: killed with SIGKILL in the middle of an acquisition, restarted, and the rows it
// left open closed with "daemon died", its files measured and hashed; petdaq-runs reading
// the catalogue while the daemon writes it, and refusing a missing or corrupt one.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sqlite3.h>
#include <zmq.hpp>

#include "core/test_scanner.h"
#include "daemon/catalogue.h"
#include "daemon_harness.h"
#include "tests/support/files.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/wait.h"
#include "tools/runs/catalogue_reader.h"

namespace petdaq::test {
namespace {

using namespace std::chrono_literals;
using daemon::Catalogue;
using Json = nlohmann::json;
using runs::CatalogueReader;
namespace fs = std::filesystem;

// sha256sum's answer for a file (coreutils, not the code under test).
std::string sha256sum(const fs::path& p) {
  const std::string cmd = "sha256sum '" + p.string() + "'";
  std::FILE* f = ::popen(cmd.c_str(), "r");
  if (!f) return "";
  char buf[128] = {};
  const std::size_t n = std::fread(buf, 1, 64, f);
  ::pclose(f);
  return std::string(buf, n);
}

// petdaq-runs ARGS: exit code and stdout (stderr appended after a line "--stderr--").
std::pair<int, std::string> petdaq_runs(const std::vector<std::string>& args, const fs::path& dir,
                                        const std::string& tag = "runs") {
  std::vector<std::string> argv = {PETDAQ_RUNS_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  const fs::path out = dir / (tag + ".out"), err = dir / (tag + ".err");
  const int rc = run_command(argv, out, err, 30s);
  return {rc, test::read_text(out) + "--stderr--\n" + test::read_text(err)};
}

std::string stdout_of(const std::string& both) { return both.substr(0, both.find("--stderr--")); }

Catalogue::CounterValues counter_values(std::uint64_t prompts, std::uint64_t frames) {
  Catalogue::CounterValues v{};
  v[static_cast<std::size_t>(Counter::coinc_prompts)] = prompts;
  v[static_cast<std::size_t>(Counter::rx_frames)] = frames;
  return v;
}

TEST(CatalogueWriter, Sha256AndSizeAgreeWithSha256sum) {
  const test::ScratchDir scratch("catalogue-digest");
  const fs::path& dir = scratch.path();
  std::mt19937_64 rng(3);
  for (std::size_t size : {std::size_t{0}, std::size_t{1}, std::size_t{(1u << 20) + 17}}) {
    const fs::path f = dir / ("f" + std::to_string(size));
    std::string bytes(size, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    std::ofstream(f, std::ios::binary) << bytes;
    const daemon::FileDigest d = daemon::digest_file(f);
    EXPECT_EQ(d.size, size);
    EXPECT_EQ(d.sha256, sha256sum(f)) << size;
  }
  EXPECT_THROW(daemon::digest_file(dir / "missing"), std::runtime_error);
}

TEST(CatalogueWriter, EventsBecomeRowsWithCountersLiveFractionAndLinks) {
  const test::ScratchDir scratch("catalogue-rows");
  const fs::path& dir = scratch.path();
  const fs::path db = dir / "runs.sqlite";
  Counters counters(4);
  const fs::path plm = dir / "a.plm", pdh = dir / "a.pdh";
  {
    Catalogue c(db, counters, "test");
    EXPECT_EQ(c.next_acquisition_id(), 1u);
    // One daemon per catalogue.
    EXPECT_THROW(Catalogue(db, counters, "test"), std::runtime_error);
    daemon::AcquisitionControl acq(c.next_acquisition_id());
    acq.on_change([&](const daemon::Acquisition& a, const char* what) { c.acquisition_changed(a, what); });
    std::ofstream(plm, std::ios::binary) << "list-mode bytes";
    c.file_opened(plm, "plm");
    acq.start(Json{{"name", "phantom"}, {"isotope", "F-18"}, {"activity_MBq", 12.5}}, 1000);
    c.run_ended(7, "clock reset", counter_values(3, 100));  // a run without a slice: no row
    c.run_started(8);
    // Two intervals: live 0.9 for 1 s and 0.5 for 3 s -> 0.6 weighted by time.
    c.rates(R"({"run_id":8,"interval_s":1.0,"deadtime":{"live_fraction_interval":0.9},"counters":{"coinc.prompts":5}})");
    c.rates(R"({"run_id":8,"interval_s":3.0,"deadtime":{"live_fraction_interval":0.5},"counters":{"coinc.prompts":9}})");
    acq.annotate("moved the bed", 2000);
    std::ofstream(pdh, std::ios::binary) << "histograms";
    c.file_written(pdh, "pdh", 8);
    c.run_ended(8, "daemon stopped", counter_values(13, 150));
    std::ofstream(plm, std::ios::app | std::ios::binary) << " and more";
    c.file_closed(plm);
    acq.stop(3000);
    c.flush();
  }
  EXPECT_EQ(counters.get(Counter::out_catalogue_errors), 0u);
  EXPECT_EQ(counters.get(Counter::out_catalogue_dropped), 0u);
  CatalogueReader r(db);
  const Json doc = r.list();
  ASSERT_EQ(doc["acquisitions"].size(), 1u) << doc.dump(2);
  const Json& a = doc["acquisitions"][0];
  EXPECT_EQ(a["name"], "phantom");
  EXPECT_EQ(a["isotope"], "F-18");
  EXPECT_EQ(a["activity_MBq"], 12.5);
  EXPECT_EQ(a["started_unix_ns"], 1000);
  EXPECT_EQ(a["ended_unix_ns"], 3000);
  EXPECT_EQ(a["end_reason"], "stop");
  ASSERT_EQ(a["annotations"].size(), 1u);
  EXPECT_EQ(a["annotations"][0]["text"], "moved the bed");
  EXPECT_EQ(a["runs"], Json::array({8}));
  EXPECT_EQ(a["file_count"], 2) << "the .plm open at its start and the .pdh written in it";
  ASSERT_EQ(doc["runs"].size(), 1u);
  const Json& run = doc["runs"][0];
  EXPECT_EQ(run["run_id"], 8);
  EXPECT_EQ(run["end_reason"], "daemon stopped");
  // The run's own counts: at its end less at the previous run's end.
  EXPECT_EQ(run["counters"]["coinc.prompts"], 10);
  EXPECT_EQ(run["counters"]["rx.frames"], 50);
  EXPECT_NEAR(run["live_fraction"].get<double>(), 0.6, 1e-12);
  const auto files = r.files(8);
  ASSERT_TRUE(files.has_value());
  std::set<std::string> kinds;
  for (const Json& f : *files) {
    kinds.insert(f["kind"].get<std::string>());
    EXPECT_EQ(f["end_reason"], "closed");
    EXPECT_EQ(f["size_bytes"], fs::file_size(f["path"].get<std::string>()));
    EXPECT_EQ(f["sha256"], sha256sum(f["path"].get<std::string>()));
  }
  EXPECT_EQ(kinds, (std::set<std::string>{"plm", "pdh"}));
  EXPECT_FALSE(r.show(99).has_value());
  // A second start continues the acquisition ids.
  Catalogue again(db, counters, "test");
  EXPECT_EQ(again.next_acquisition_id(), 2u);
}

TEST(CatalogueWriter, AWriteThatFailsIsCountedAndTheWriterGoesOn) {
  const test::ScratchDir scratch("catalogue-errors");
  const fs::path& dir = scratch.path();
  Counters counters(4);
  {
    Catalogue c(dir / "runs.sqlite", counters, "test");
    c.file_closed(dir / "never-opened.plm");  // no row to close: refused
    c.rates("not json");                     // unreadable: refused
    c.run_started(5);                        // and the next event is written
    c.flush();
  }
  EXPECT_EQ(counters.get(Counter::out_catalogue_errors), 2u);
  EXPECT_EQ(counters.get(Counter::out_catalogue_dropped), 0u);
  EXPECT_EQ(CatalogueReader(dir / "runs.sqlite").list()["runs"].size(), 1u);
}

TEST(CatalogueWriter, RefusesAnotherProgramsDatabaseANewerSchemaAndGarbage) {
  const test::ScratchDir scratch("catalogue-refuse");
  const fs::path& dir = scratch.path();
  Counters counters(4);
  const fs::path foreign = dir / "foreign.sqlite";
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(foreign.c_str(), &db), SQLITE_OK);
    sqlite3_exec(db, "CREATE TABLE t(x)", nullptr, nullptr, nullptr);
    sqlite3_close(db);
  }
  const fs::path garbage = dir / "garbage.sqlite";
  std::ofstream(garbage) << std::string(4096, 'x');
  for (const fs::path& p : {foreign, garbage}) {
    try {
      Catalogue c(p, counters, "test");
      ADD_FAILURE() << p << " accepted";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("output.catalogue.path"), std::string::npos) << e.what();
    }
    EXPECT_THROW(CatalogueReader{p}, runs::CatalogueError);
  }
  const fs::path newer = dir / "newer.sqlite";
  { Catalogue c(newer, counters, "test"); }
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(newer.c_str(), &db), SQLITE_OK);
    sqlite3_exec(db, "PRAGMA user_version = 99", nullptr, nullptr, nullptr);
    sqlite3_close(db);
  }
  try {
    Catalogue c(newer, counters, "test");
    ADD_FAILURE() << "a newer schema accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("schema 99 is newer"), std::string::npos) << e.what();
  }
}

TEST(PetdaqRuns, MissingCorruptForeignAndUnknownAreExit2WithAReason) {
  const test::ScratchDir scratch("catalogue-cli");
  const fs::path& dir = scratch.path();
  const auto [rc1, out1] = petdaq_runs({"--catalogue", (dir / "none.sqlite").string(), "list"}, dir);
  EXPECT_EQ(rc1, 2);
  EXPECT_NE(out1.find("no such file"), std::string::npos) << out1;
  std::ofstream(dir / "corrupt.sqlite") << std::string(8192, 'z');
  const auto [rc2, out2] = petdaq_runs({"--catalogue", (dir / "corrupt.sqlite").string(), "list"}, dir);
  EXPECT_EQ(rc2, 2);
  EXPECT_NE(out2.find("not a database"), std::string::npos) << out2;
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((dir / "foreign.sqlite").c_str(), &db), SQLITE_OK);
    sqlite3_exec(db, "CREATE TABLE t(x)", nullptr, nullptr, nullptr);
    sqlite3_close(db);
  }
  const auto [rc3, out3] = petdaq_runs({"--catalogue", (dir / "foreign.sqlite").string(), "list"}, dir);
  EXPECT_EQ(rc3, 2);
  EXPECT_NE(out3.find("not a petdaq run catalogue"), std::string::npos) << out3;
  Counters counters(4);
  { Catalogue c(dir / "empty.sqlite", counters, "test"); }
  const auto [rc4, out4] =
      petdaq_runs({"--catalogue", (dir / "empty.sqlite").string(), "show", "5"}, dir);
  EXPECT_EQ(rc4, 2);
  EXPECT_NE(out4.find("no acquisition or run 5"), std::string::npos) << out4;
  const auto [rc5, out5] = petdaq_runs({"list"}, dir);
  EXPECT_EQ(rc5, 2) << "no catalogue named";
  EXPECT_NE(out5.find("--catalogue"), std::string::npos) << out5;
}

// ---- petdaqd end to end ----

std::string control(const std::string& endpoint, const Json& request) {
  zmq::context_t ctx(1);
  zmq::socket_t s(ctx, zmq::socket_type::req);
  s.set(zmq::sockopt::rcvtimeo, 10000);
  s.set(zmq::sockopt::linger, 0);
  s.connect(endpoint);
  s.send(zmq::buffer(request.dump()), zmq::send_flags::none);
  zmq::message_t reply;
  if (!s.recv(reply)) return "";
  return reply.to_string();
}

// Polls the catalogue (read-only, as petdaq-runs does) until pred holds or 30 s pass.
std::optional<Json> wait_catalogue(const fs::path& db, const std::function<bool(const Json&)>& pred) {
  std::optional<Json> last;
  const bool held = wait_until([&] {
    try {
      CatalogueReader r(db);
      last = r.list();
      return pred(*last);
    } catch (const runs::CatalogueError&) {
      return false;  // not created yet
    }
  }, 30s, 50ms);
  return held ? last : std::nullopt;
}

struct Scene {
  TestScanner scanner;
  DaemonConfig daemon;
  fs::path config, db, files, raw;
  std::string control_endpoint;
  std::vector<RawFrame> frames;

  Scene() {
    daemon.udp_port = free_udp_port();
    daemon.zmq_endpoint = "ipc://" + (scanner.dir / "pub.sock").string();
    files = scanner.dir / "plm";
    raw = scanner.dir / "raw";
    fs::create_directories(files);
    fs::create_directories(raw);
    daemon.file_directory = files;
    daemon.file_rotate_bytes = 1u << 20;  // the smallest allowed: several files
    db = scanner.dir / "runs.sqlite";
    control_endpoint = "ipc://" + (scanner.dir / "ctl.sock").string();
    daemon.output_extra = "  control:\n    endpoint: \"" + control_endpoint + "\"\n" +
                          "  catalogue:\n    path: \"" + db.string() + "\"\n" +
                          "  raw:\n    enabled: true\n    directory: \"" + raw.string() +
                          "\"\n    rotate_bytes: 1048576\n" +
                          "  histograms:\n    enabled: true\n";
    config = scanner.write_config();
    std::ofstream(config, std::ios::app) << daemon_yaml(daemon);
    std::mt19937_64 rng(11);
    AcquisitionOptions o;
    o.events = 100000;
    frames = random_acquisition(scanner, rng, o);
  }
  void send() {
    UdpSender tx;
    tx.send(make_datagrams(frames, Framing::raw, 50, 4), daemon.udp_port);
  }
};

// Every file row: closed, and its size and SHA-256 those of the file on disk now.
void expect_files_true(const fs::path& db, const Json& ids, std::size_t& checked) {
  CatalogueReader r(db);
  for (const Json& id : ids) {
    const auto files = r.files(id.get<std::uint64_t>());
    ASSERT_TRUE(files.has_value());
    for (const Json& f : *files) {
      const std::string path = f["path"].get<std::string>();
      EXPECT_FALSE(f["closed_unix_ns"].is_null()) << path;
      ASSERT_TRUE(fs::exists(path)) << path;
      EXPECT_EQ(f["size_bytes"], fs::file_size(path)) << path;
      EXPECT_EQ(f["sha256"], sha256sum(path)) << path;
      ++checked;
    }
  }
}

TEST(CatalogueDaemon, KilledMidAcquisitionTheRowsAreClosedAtRestartAsDaemonDied) {
  Scene s;
  Json acquisition_ids = Json::array();
  {
    DaemonProcess d(s.config, s.scanner.dir / "first.log");
    Subscriber sub(s.daemon.zmq_endpoint);
    ASSERT_TRUE(sub.wait_rates([](const std::string&) { return true; }, 20s)) << d.log();
    const Json started = Json::parse(control(s.control_endpoint,
                                             {{"command", "start"},
                                              {"name", "killed"},
                                              {"subject", "phantom"},
                                              {"isotope", "F-18"}}));
    ASSERT_TRUE(started["ok"].get<bool>()) << started.dump();
    s.send();
    // Wait until the catalogue holds the run, several files and counters of this data.
    const auto seen = wait_catalogue(s.db, [&](const Json& doc) {
      return !doc["runs"].empty() && doc["runs"][0]["counters"].value("coinc.prompts", 0) > 0 &&
             !doc["acquisitions"].empty() && doc["acquisitions"][0]["file_count"] >= 3;
    });
    ASSERT_TRUE(seen.has_value()) << d.log();
    ::kill(d.pid(), SIGKILL);
    ASSERT_EQ(d.wait_for(10s).value_or(-1), 128 + SIGKILL);
  }
  {
    // Right after the kill: everything still open, as the dead daemon left it.
    CatalogueReader r(s.db);
    const Json doc = r.list();
    EXPECT_TRUE(doc["acquisitions"][0]["ended_unix_ns"].is_null());
    EXPECT_TRUE(doc["runs"][0]["ended_unix_ns"].is_null());
  }
  DaemonProcess d2(s.config, s.scanner.dir / "second.log");
  Subscriber sub2(s.daemon.zmq_endpoint);
  ASSERT_TRUE(sub2.wait_rates([](const std::string&) { return true; }, 20s)) << d2.log();
  EXPECT_NE(d2.log().find("died"), std::string::npos) << d2.log();
  EXPECT_NE(d2.log().find("acquisition 1 'killed'"), std::string::npos) << d2.log();
  CatalogueReader r(s.db);
  const Json doc = r.list();
  ASSERT_EQ(doc["acquisitions"].size(), 1u);
  const Json& a = doc["acquisitions"][0];
  EXPECT_EQ(a["end_reason"], "daemon died");
  EXPECT_FALSE(a["ended_unix_ns"].is_null());
  EXPECT_GE(a["ended_unix_ns"].get<std::uint64_t>(), a["started_unix_ns"].get<std::uint64_t>());
  ASSERT_GE(doc["runs"].size(), 1u);
  const Json& run = doc["runs"][0];
  EXPECT_EQ(run["end_reason"], "daemon died");
  EXPECT_GT(run["counters"].value("coinc.prompts", 0), 0) << "the counters last written";
  std::size_t checked = 0;
  expect_files_true(s.db, Json::array({1}), checked);
  expect_files_true(s.db, Json::array({run["run_id"]}), checked);
  EXPECT_GE(checked, 6u);
  const auto files = r.files(1);
  std::set<std::string> kinds, reasons;
  for (const Json& f : *files) {
    kinds.insert(f["kind"].get<std::string>());
    reasons.insert(f["end_reason"].get<std::string>());
  }
  EXPECT_TRUE(kinds.count("plm") && kinds.count("frames")) << files->dump(2);
  EXPECT_TRUE(reasons.count("daemon died")) << "the files open at the kill";
  // The restarted daemon hands out the next acquisition id.
  const Json second = Json::parse(control(s.control_endpoint, {{"command", "start"}, {"name", "after"}}));
  ASSERT_TRUE(second["ok"].get<bool>()) << second.dump();
  EXPECT_EQ(second["acquisition"]["id"], 2);
  ASSERT_TRUE(wait_catalogue(s.db, [](const Json& doc) { return doc["acquisitions"].size() == 2; }));

  // Readers while the daemon writes: petdaq-runs again and again, each sees a whole
  // catalogue; meanwhile data, rotated files and annotations keep the writer busy.
  std::atomic<bool> done{false};
  std::thread writer([&] {
    for (int i = 0; i < 3 && !done; ++i) {
      s.send();
      control(s.control_endpoint, {{"command", "annotate"}, {"text", "pass " + std::to_string(i)}});
    }
  });
  int readers = 0;
  for (; readers < 15; ++readers) {
    const auto [rc, out] = petdaq_runs({"--catalogue", s.db.string(), "--json", "list"},
                                       s.scanner.dir, "reader");
    ASSERT_EQ(rc, 0) << out;
    const Json listed = Json::parse(stdout_of(out), nullptr, false);
    ASSERT_FALSE(listed.is_discarded()) << out;
    EXPECT_EQ(listed["acquisitions"].size(), 2u);
  }
  done = true;
  writer.join();
  const Json stopped = Json::parse(control(s.control_endpoint, {{"command", "stop"}}));
  ASSERT_TRUE(stopped["ok"].get<bool>()) << stopped.dump();
  d2.signal(SIGTERM);
  ASSERT_EQ(d2.wait_for(20s).value_or(-1), 0) << d2.log();

  // The clean stop: the run ended by it, every file closed and true.
  CatalogueReader after(s.db);
  const Json end = after.list();
  EXPECT_EQ(end["acquisitions"][0]["end_reason"], "stop");
  EXPECT_EQ(end["acquisitions"][0]["annotations"].size(), 3u);
  EXPECT_EQ(end["runs"][0]["end_reason"], "daemon stopped");
  checked = 0;
  expect_files_true(s.db, Json::array({2}), checked);
  EXPECT_GE(checked, 3u);

  // petdaq-runs as a person reads it.
  const auto [rc_list, list] = petdaq_runs({"-c", s.config.string(), "list"}, s.scanner.dir);
  EXPECT_EQ(rc_list, 0) << list;
  EXPECT_NE(list.find("killed"), std::string::npos) << list;
  EXPECT_NE(list.find("daemon died"), std::string::npos) << list;
  EXPECT_NE(list.find("daemon stopped"), std::string::npos) << list;
  const auto [rc_show, show] = petdaq_runs({"-c", s.config.string(), "show", "1"}, s.scanner.dir);
  EXPECT_EQ(rc_show, 0) << show;
  EXPECT_NE(show.find("acquisition 1: killed"), std::string::npos) << show;
  EXPECT_NE(show.find("F-18"), std::string::npos) << show;
  const std::string run_id = std::to_string(run["run_id"].get<std::uint64_t>());
  const auto [rc_run, shown_run] = petdaq_runs({"-c", s.config.string(), "show", run_id}, s.scanner.dir);
  EXPECT_EQ(rc_run, 0) << shown_run;
  EXPECT_NE(shown_run.find("coinc.prompts"), std::string::npos) << shown_run;
  const auto [rc_files, listed_files] =
      petdaq_runs({"-c", s.config.string(), "files", "1"}, s.scanner.dir);
  EXPECT_EQ(rc_files, 0) << listed_files;
  const Json first = r.files(1).value().at(0);
  EXPECT_NE(listed_files.find(first["sha256"].get<std::string>()), std::string::npos) << listed_files;
  const auto [rc_json, json_files] =
      petdaq_runs({"-c", s.config.string(), "--json", "files", "1"}, s.scanner.dir);
  EXPECT_EQ(rc_json, 0);
  EXPECT_EQ(Json::parse(stdout_of(json_files)), r.files(1).value());
  const auto [rc_qa, qa] = petdaq_runs(
      {"-c", s.config.string(), "set-qa", run_id, (s.scanner.dir / "qa").string()}, s.scanner.dir);
  EXPECT_EQ(rc_qa, 0) << qa;
  EXPECT_EQ(CatalogueReader(s.db).qa_report(run["run_id"].get<std::uint64_t>()),
            (s.scanner.dir / "qa").string());
  // PETDAQ_CATALOGUE_SAMPLE=FILE keeps a copy of the catalogue (the examples of
  // docs/operations.md, "The run catalogue").
  if (const char* keep = std::getenv("PETDAQ_CATALOGUE_SAMPLE")) {
    fs::remove(keep);
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open_v2(s.db.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
    const std::string sql = "VACUUM INTO '" + std::string(keep) + "'";
    EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    sqlite3_close(db);
  }
}

// A reload ends a run ("reload") and a new one starts; each run gets its histogram file, and
// the runs' own counters add up to the daemon's totals.
TEST(CatalogueDaemon, AReloadEndsARunEachRunHasItsHistogramFileAndTheCountsAddUp) {
  Scene s;
  DaemonProcess d(s.config, s.scanner.dir / "reload.log");
  Subscriber sub(s.daemon.zmq_endpoint);
  ASSERT_TRUE(sub.wait_rates([](const std::string&) { return true; }, 20s)) << d.log();
  s.send();
  ASSERT_TRUE(wait_catalogue(s.db, [](const Json& doc) {
    return doc["runs"].size() == 1 && doc["runs"][0]["counters"].value("coinc.prompts", 0) > 0;
  })) << d.log();
  s.scanner.settings.coincidence.window_ps = 3000;  // a window changes: a new run
  s.scanner.write_config();
  std::ofstream(s.config, std::ios::app) << daemon_yaml(s.daemon);
  d.signal(SIGHUP);
  ASSERT_TRUE(wait_catalogue(s.db, [](const Json& doc) {
    return !doc["runs"].empty() && doc["runs"].back()["end_reason"] == "reload";
  })) << d.log();
  s.send();
  ASSERT_TRUE(wait_catalogue(s.db, [](const Json& doc) { return doc["runs"].size() == 2; }))
      << d.log();
  d.signal(SIGTERM);
  ASSERT_EQ(d.wait_for(20s).value_or(-1), 0) << d.log();

  CatalogueReader r(s.db);
  const Json doc = r.list();
  ASSERT_EQ(doc["runs"].size(), 2u);
  EXPECT_EQ(doc["runs"][0]["end_reason"], "daemon stopped");
  EXPECT_EQ(doc["runs"][1]["end_reason"], "reload");
  std::uint64_t prompts = 0, frames = 0;
  for (const Json& run : doc["runs"]) {
    prompts += run["counters"]["coinc.prompts"].get<std::uint64_t>();
    frames += run["counters"]["rx.frames"].get<std::uint64_t>();
    const auto files = r.files(run["run_id"].get<std::uint64_t>());
    ASSERT_TRUE(files.has_value());
    int pdh = 0;
    for (const Json& f : *files) {
      if (f["kind"] != "pdh") continue;
      ++pdh;
      EXPECT_NE(f["path"].get<std::string>().find("run" + run["run_id"].dump()), std::string::npos);
      EXPECT_EQ(f["sha256"], sha256sum(f["path"].get<std::string>()));
    }
    EXPECT_EQ(pdh, 1) << files->dump(2);
  }
  // The daemon's totals at exit ("final counters: ... coinc.prompts=N ...").
  const std::string log = d.log();
  auto total = [&](const std::string& name) -> std::uint64_t {
    const auto at = log.find(" " + name + "=", log.find("final counters:"));
    return at == std::string::npos ? 0 : std::stoull(log.substr(at + name.size() + 2));
  };
  EXPECT_GT(prompts, 0u);
  EXPECT_EQ(prompts, total("coinc.prompts")) << log;
  EXPECT_EQ(frames, total("rx.frames")) << log;
  EXPECT_GT(frames, 0u);
}

}  // namespace
}  // namespace petdaq::test

// The run catalogue (output.catalogue.path; docs/operations.md, "The run catalogue", DESIGN section 7): an SQLite
// database of the named acquisitions, the scanner's runs and the files the daemon wrote
// (list-mode .plm, histogram .pdh, raw .frames), with each file's size and SHA-256, each
// run's counters and live fraction.
//
// The threads that report (the worker, the control thread) only put an event on a queue:
// a thread of the catalogue's own writes it, one transaction per event, in WAL mode with
// synchronous=FULL, and hashes the files. A crash loses at most the events still queued;
// whatever the dead daemon left open (an acquisition, a run, a file, its own start) is
// closed at the next start with end_reason "daemon died" and a warning in the log. A write
// the database refuses is logged and counted in out.catalogue_errors; an event the full
// queue cannot take is counted in out.catalogue_dropped.
#pragma once

#include <array>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <variant>

#include "core/counters.h"
#include "daemon/acquisition.h"

struct sqlite3;

namespace petdaq::daemon {

// The schema this build writes and reads (PRAGMA user_version); docs/operations.md, "The run catalogue".
inline constexpr int kCatalogueSchemaVersion = 1;
// PRAGMA application_id of a petdaq catalogue ("PETD").
inline constexpr std::int32_t kCatalogueApplicationId = 0x50455444;

// The SHA-256 of a file as 64 lowercase hex digits, and its size; throws std::runtime_error
// naming the file when it cannot be read.
struct FileDigest {
  std::uint64_t size = 0;
  std::string sha256;
};
FileDigest digest_file(const std::filesystem::path& path);

class Catalogue {
 public:
  using CounterValues = std::array<std::uint64_t, kCounterCount>;

  // Opens (or creates) the database, checks or creates its schema, closes what a daemon that
  // died left open and starts the writer thread. Throws std::runtime_error naming the path
  // (not a database, another program's, a newer schema, cannot be created).
  Catalogue(const std::filesystem::path& path, Counters& counters, std::string version);
  // Writes every queued event, then marks this daemon's start as ended.
  ~Catalogue();
  Catalogue(const Catalogue&) = delete;
  Catalogue& operator=(const Catalogue&) = delete;

  // The first acquisition id the daemon may hand out (one past the largest written).
  std::uint64_t next_acquisition_id() const { return next_acquisition_id_; }

  // ---- events: any thread; none waits on the disk ----
  // An acquisition started, was annotated or stopped (AcquisitionControl::on_change).
  void acquisition_changed(const Acquisition& a, const char* what);
  // The worker saw the first slice of a run.
  void run_started(std::uint64_t run_id);
  // The worker saw a run end: `counters` are the daemon's counters then (the run's own are
  // these less those at the previous run's end).
  void run_ended(std::uint64_t run_id, const char* reason, const CounterValues& counters);
  // Every `rates` document: the running run's counters and live fraction.
  void rates(const std::string& json);
  // A file was opened, closed (it is then hashed) or written whole (opened and closed).
  // kind: "plm", "pdh" or "frames". run_id 0: the running run.
  void file_opened(const std::filesystem::path& path, const char* kind);
  void file_closed(const std::filesystem::path& path);
  void file_written(const std::filesystem::path& path, const char* kind, std::uint64_t run_id);

  // Blocks until every event queued so far is written (tests).
  void flush();

 private:
  struct AcquisitionEvent {
    Acquisition acquisition;
    std::string what;
  };
  struct RunStart {
    std::uint64_t run_id;
  };
  struct RunStop {
    std::uint64_t run_id;
    std::string reason;
    CounterValues counters;
  };
  struct Rates {
    std::string json;
  };
  struct FileOpen {
    std::string path, kind;
  };
  struct FileClose {
    std::string path;
  };
  struct FileWhole {
    std::string path, kind;
    std::uint64_t run_id;
  };
  struct Flush {
    std::uint64_t ticket;
  };
  using Body = std::variant<AcquisitionEvent, RunStart, RunStop, Rates, FileOpen, FileClose,
                            FileWhole, Flush>;
  struct Event {
    std::uint64_t unix_ns;
    Body body;
  };

  void push(Body body);
  void run();
  void apply(const Event& e);
  // Per kind, inside a transaction.
  void write(std::uint64_t t, const AcquisitionEvent& e);
  void write(std::uint64_t t, const RunStart& e);
  void write(std::uint64_t t, const RunStop& e);
  void write(std::uint64_t t, const Rates& e);
  void write(std::uint64_t t, const FileOpen& e);
  void write(std::uint64_t t, const FileClose& e);
  void write(std::uint64_t t, const FileWhole& e);
  void write(std::uint64_t, const Flush&) {}
  void create_or_check_schema();
  void close_what_a_dead_daemon_left();
  void heartbeat(std::uint64_t t);
  void error(const std::string& what);

  static constexpr std::size_t kQueueLimit = 65536;

  std::filesystem::path path_;
  Counters& counters_;
  sqlite3* db_ = nullptr;
  int lock_fd_ = -1;  // <path>.lock, held while the daemon runs
  std::uint64_t next_acquisition_id_ = 1;
  std::int64_t start_row_ = 0;  // this daemon's row of daemon_starts

  // What the writer thread keeps between events (that thread only).
  struct Writer {
    std::uint64_t run_id = 0;                     // the running run (0: none)
    std::optional<std::uint64_t> acquisition_id;  // the open acquisition
    CounterValues run_base{};                     // the counters at the previous run's end
    double live_weighted = 0, live_seconds = 0;   // the running run's live fraction so far
    std::uint64_t last_counters_write = 0;
    std::uint64_t last_heartbeat = 0;
    std::uint64_t errors_logged = 0;
  } writer_;

  // The events queued for the writer thread (under `mutex`).
  struct Events {
    std::mutex mutex;
    std::condition_variable wake, done;
    std::deque<Event> items;
    std::uint64_t pushed_flushes = 0, done_flushes = 0;
    bool stop = false;
  } events_;
  std::thread thread_;
};

}  // namespace petdaq::daemon

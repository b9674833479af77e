// The run catalogue's writer (daemon/catalogue.h, docs/operations.md, "The run catalogue").
#include "daemon/catalogue.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <openssl/evp.h>
#include <spdlog/spdlog.h>
#include <sqlite3.h>

#include "core/iso_time.h"
#include "daemon/alarms.h"

namespace petdaq::daemon {

namespace {

std::uint64_t unix_ns_now() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

// The counters write and the heartbeat of the running daemon, at most this often.
constexpr std::uint64_t kUpdateEveryNs = 2'000'000'000;

// Schema version 1 (docs/operations.md, "The run catalogue"). Times are nanoseconds since 1970 (UTC).
constexpr const char* kSchema = R"sql(
CREATE TABLE daemon_starts(
  id INTEGER PRIMARY KEY,
  version TEXT NOT NULL,
  pid INTEGER NOT NULL,
  started_unix_ns INTEGER NOT NULL,
  alive_unix_ns INTEGER NOT NULL,
  ended_unix_ns INTEGER,
  end_reason TEXT);
CREATE TABLE acquisitions(
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  subject TEXT NOT NULL DEFAULT '',
  isotope TEXT NOT NULL DEFAULT '',
  activity_MBq REAL,
  operator TEXT NOT NULL DEFAULT '',
  notes TEXT NOT NULL DEFAULT '',
  started_unix_ns INTEGER NOT NULL,
  ended_unix_ns INTEGER,
  end_reason TEXT,
  annotations TEXT NOT NULL DEFAULT '[]',
  daemon_start INTEGER NOT NULL REFERENCES daemon_starts(id));
CREATE TABLE runs(
  run_id INTEGER PRIMARY KEY,
  started_unix_ns INTEGER NOT NULL,
  ended_unix_ns INTEGER,
  end_reason TEXT,
  counters TEXT NOT NULL DEFAULT '{}',
  live_fraction REAL,
  qa_report TEXT,
  daemon_start INTEGER NOT NULL REFERENCES daemon_starts(id));
CREATE TABLE files(
  id INTEGER PRIMARY KEY,
  path TEXT NOT NULL,
  kind TEXT NOT NULL,
  opened_unix_ns INTEGER NOT NULL,
  closed_unix_ns INTEGER,
  size_bytes INTEGER,
  sha256 TEXT,
  end_reason TEXT,
  daemon_start INTEGER NOT NULL REFERENCES daemon_starts(id));
CREATE INDEX files_by_path ON files(path);
CREATE TABLE run_files(
  run_id INTEGER NOT NULL, file_id INTEGER NOT NULL,
  PRIMARY KEY(run_id, file_id)) WITHOUT ROWID;
CREATE TABLE acquisition_files(
  acquisition_id INTEGER NOT NULL, file_id INTEGER NOT NULL,
  PRIMARY KEY(acquisition_id, file_id)) WITHOUT ROWID;
CREATE TABLE acquisition_runs(
  acquisition_id INTEGER NOT NULL, run_id INTEGER NOT NULL,
  PRIMARY KEY(acquisition_id, run_id)) WITHOUT ROWID;
)sql";

class SqlError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

void exec(sqlite3* db, const char* sql) {
  char* message = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &message) != SQLITE_OK) {
    std::string m = message ? message : sqlite3_errmsg(db);
    sqlite3_free(message);
    throw SqlError(m);
  }
}

// One prepared statement; bind by position from 1, step, read columns from 0.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql, -1, &s_, nullptr) != SQLITE_OK)
      throw SqlError(sqlite3_errmsg(db));
  }
  ~Stmt() { sqlite3_finalize(s_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& bind(int i, std::int64_t v) {
    check(sqlite3_bind_int64(s_, i, v));
    return *this;
  }
  Stmt& bind(int i, std::uint64_t v) { return bind(i, static_cast<std::int64_t>(v)); }
  Stmt& bind(int i, double v) {
    check(sqlite3_bind_double(s_, i, v));
    return *this;
  }
  Stmt& bind(int i, const std::string& v) {
    check(sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT));
    return *this;
  }
  Stmt& bind_null(int i) {
    check(sqlite3_bind_null(s_, i));
    return *this;
  }
  template <typename T>
  Stmt& bind(int i, const std::optional<T>& v) {
    return v ? bind(i, *v) : bind_null(i);
  }
  // True while there is a row.
  bool step() {
    const int rc = sqlite3_step(s_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    throw SqlError(sqlite3_errmsg(db_));
  }
  void run() {
    while (step()) {
    }
  }
  std::int64_t integer(int c) const { return sqlite3_column_int64(s_, c); }
  bool null(int c) const { return sqlite3_column_type(s_, c) == SQLITE_NULL; }
  std::string text(int c) const {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s_, c));
    return p ? std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(s_, c))) : "";
  }

 private:
  void check(int rc) {
    if (rc != SQLITE_OK) throw SqlError(sqlite3_errmsg(db_));
  }
  sqlite3* db_;
  sqlite3_stmt* s_ = nullptr;
};

// BEGIN IMMEDIATE ... COMMIT, rolled back when left by an exception.
class Transaction {
 public:
  explicit Transaction(sqlite3* db) : db_(db) { exec(db_, "BEGIN IMMEDIATE"); }
  ~Transaction() {
    if (db_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  void commit() {
    exec(db_, "COMMIT");
    db_ = nullptr;
  }

 private:
  sqlite3* db_;
};

std::int64_t single_integer(sqlite3* db, const char* sql) {
  Stmt s(db, sql);
  return s.step() ? s.integer(0) : 0;
}


// A lock file beside the database, held (flock) for the daemon's life: one daemon per
// catalogue, and a lock a killed daemon cannot leave behind.
int take_lock(const std::filesystem::path& db) {
  const std::string lock = db.string() + ".lock";
  const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    throw std::runtime_error("output.catalogue.path: cannot create " + lock + ": " +
                             std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    throw std::runtime_error("output.catalogue.path " + db.string() +
                             " is in use by another petdaqd (" + lock + " is locked)");
  }
  return fd;
}

}  // namespace

FileDigest digest_file(const std::filesystem::path& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw std::runtime_error(path.string() + ": " + std::strerror(errno));
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
    std::fclose(f);
    throw std::runtime_error("SHA-256: OpenSSL cannot start a digest");
  }
  std::vector<unsigned char> buffer(1u << 20);
  FileDigest d;
  for (;;) {
    const std::size_t n = std::fread(buffer.data(), 1, buffer.size(), f);
    if (n > 0) {
      EVP_DigestUpdate(ctx.get(), buffer.data(), n);
      d.size += n;
    }
    if (n < buffer.size()) break;
  }
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) throw std::runtime_error(path.string() + ": read error");
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx.get(), md, &len);
  static const char* hex = "0123456789abcdef";
  for (unsigned int i = 0; i < len; ++i) {
    d.sha256 += hex[md[i] >> 4];
    d.sha256 += hex[md[i] & 15];
  }
  return d;
}

Catalogue::Catalogue(const std::filesystem::path& path, Counters& counters, std::string version)
    : path_(path), counters_(counters) {
  lock_fd_ = take_lock(path);
  try {
    const int rc = sqlite3_open_v2(path.c_str(), &db_,
                                   SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                                       SQLITE_OPEN_NOMUTEX,
                                   nullptr);
    if (rc != SQLITE_OK)
      throw SqlError(db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc));
    sqlite3_busy_timeout(db_, 10000);  // a reader's checkpoint, a petdaq-runs set-qa
    // The -wal and -shm files stay after the daemon closes the database, so a reader that may
    // not create files beside it (petdaq-web's unit has a read-only /var) can still open it.
    int persist = 1;
    sqlite3_file_control(db_, "main", SQLITE_FCNTL_PERSIST_WAL, &persist);
    exec(db_, "PRAGMA journal_mode=WAL");
    exec(db_, "PRAGMA synchronous=FULL");
    create_or_check_schema();
    close_what_a_dead_daemon_left();
    next_acquisition_id_ =
        static_cast<std::uint64_t>(single_integer(db_, "SELECT max(id) FROM acquisitions")) + 1;
    const std::uint64_t now = unix_ns_now();
    Transaction tx(db_);
    Stmt(db_,
         "INSERT INTO daemon_starts(version, pid, started_unix_ns, alive_unix_ns) "
         "VALUES(?,?,?,?)")
        .bind(1, version)
        .bind(2, std::int64_t{::getpid()})
        .bind(3, now)
        .bind(4, now)
        .run();
    start_row_ = sqlite3_last_insert_rowid(db_);
    tx.commit();
  } catch (const std::exception& e) {
    if (db_) sqlite3_close_v2(db_);
    db_ = nullptr;
    ::close(lock_fd_);
    throw std::runtime_error("output.catalogue.path " + path.string() + ": " + e.what());
  }
  thread_ = std::thread([this] { run(); });
}

Catalogue::~Catalogue() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
  try {
    const std::uint64_t now = unix_ns_now();
    Transaction tx(db_);
    Stmt(db_,
         "UPDATE daemon_starts SET alive_unix_ns = ?1, ended_unix_ns = ?1, "
         "end_reason = 'stopped' WHERE id = ?2")
        .bind(1, now)
        .bind(2, start_row_)
        .run();
    tx.commit();
  } catch (const std::exception& e) {
    error(e.what());
  }
  sqlite3_close_v2(db_);
  ::close(lock_fd_);
}

void Catalogue::create_or_check_schema() {
  const std::int64_t version = single_integer(db_, "PRAGMA user_version");
  const std::int64_t app = single_integer(db_, "PRAGMA application_id");
  const std::int64_t tables = single_integer(db_, "SELECT count(*) FROM sqlite_schema");
  if (version == 0 && app == 0 && tables == 0) {
    Transaction tx(db_);
    exec(db_, kSchema);
    exec(db_, fmt::format("PRAGMA application_id = {}", kCatalogueApplicationId).c_str());
    exec(db_, fmt::format("PRAGMA user_version = {}", kCatalogueSchemaVersion).c_str());
    tx.commit();
    spdlog::info("run catalogue {} created (schema {})", path_.string(), kCatalogueSchemaVersion);
    return;
  }
  if (app != kCatalogueApplicationId)
    throw std::runtime_error("not a petdaq run catalogue (another program's SQLite database)");
  if (version > kCatalogueSchemaVersion)
    throw std::runtime_error(fmt::format("schema {} is newer than this petdaqd's ({}): use a "
                                         "newer petdaqd or another file",
                                         version, kCatalogueSchemaVersion));
  if (version < 1) throw std::runtime_error("no schema version (a damaged catalogue?)");
}

// A daemon killed (power, SIGKILL, a crash) leaves its start, an acquisition, a run and
// files open: they end when it was last seen alive, with end_reason "daemon died"; the
// files are measured and hashed as they are on disk now.
void Catalogue::close_what_a_dead_daemon_left() {
  struct Dead {
    std::int64_t id;
    std::uint64_t alive;
  };
  std::vector<Dead> dead;
  {
    Stmt s(db_, "SELECT id, alive_unix_ns FROM daemon_starts WHERE ended_unix_ns IS NULL");
    while (s.step()) dead.push_back({s.integer(0), static_cast<std::uint64_t>(s.integer(1))});
  }
  for (const Dead& d : dead) {
    struct OpenFile {
      std::int64_t id;
      std::string path;
    };
    std::vector<OpenFile> files;
    {
      Stmt s(db_, "SELECT id, path FROM files WHERE closed_unix_ns IS NULL AND daemon_start = ?");
      s.bind(1, d.id);
      while (s.step()) files.push_back({s.integer(0), s.text(1)});
    }
    std::vector<std::pair<std::int64_t, std::optional<FileDigest>>> digests;
    for (const OpenFile& f : files) {
      try {
        digests.emplace_back(f.id, digest_file(f.path));
      } catch (const std::exception& e) {
        spdlog::warn("run catalogue: {} (left open by a daemon that died): {}", f.path, e.what());
        digests.emplace_back(f.id, std::nullopt);
      }
    }
    Transaction tx(db_);
    const auto closed = [&](const char* table, const char* key, const char* what) {
      std::vector<std::string> names;
      Stmt s(db_, fmt::format("SELECT {}, {} FROM {} WHERE ended_unix_ns IS NULL AND "
                              "daemon_start = ?",
                              key, std::string(table) == "acquisitions" ? "name" : "''", table)
                      .c_str());
      s.bind(1, d.id);
      while (s.step()) names.push_back(fmt::format("{} {}{}", what, s.integer(0),
                                                   s.text(1).empty() ? "" : " '" + s.text(1) + "'"));
      Stmt(db_, fmt::format("UPDATE {} SET ended_unix_ns = max(started_unix_ns, ?1), "
                            "end_reason = 'daemon died' WHERE ended_unix_ns IS NULL AND "
                            "daemon_start = ?2",
                            table)
                    .c_str())
          .bind(1, d.alive)
          .bind(2, d.id)
          .run();
      return names;
    };
    std::vector<std::string> names = closed("acquisitions", "id", "acquisition");
    for (std::string& n : closed("runs", "run_id", "run")) names.push_back(std::move(n));
    for (const auto& [id, digest] : digests) {
      Stmt u(db_,
             "UPDATE files SET closed_unix_ns = max(opened_unix_ns, ?1), size_bytes = ?2, "
             "sha256 = ?3, end_reason = ?4 WHERE id = ?5");
      u.bind(1, d.alive);
      if (digest) {
        u.bind(2, digest->size).bind(3, digest->sha256).bind(4, std::string("daemon died"));
      } else {
        u.bind_null(2).bind_null(3).bind(4, std::string("daemon died; file missing"));
      }
      u.bind(5, id).run();
    }
    Stmt(db_,
         "UPDATE daemon_starts SET ended_unix_ns = alive_unix_ns, end_reason = 'daemon died' "
         "WHERE id = ?")
        .bind(1, d.id)
        .run();
    tx.commit();
    spdlog::warn("run catalogue: the petdaqd started {} died (last seen {}): {}{} {} file(s) "
                 "closed with end_reason \"daemon died\"",
                 iso_time(static_cast<std::uint64_t>(single_integer(
                     db_, fmt::format("SELECT started_unix_ns FROM daemon_starts WHERE id = {}",
                                      d.id)
                              .c_str()))),
                 iso_time(d.alive), names.empty() ? "nothing open" : fmt::format("{}", fmt::join(names, ", ")),
                 names.empty() ? "," : ";", files.size());
  }
}

// ---- the queue ----

void Catalogue::push(Body body) {
  {
    std::lock_guard lock(mutex_);
    if (queue_.size() >= kQueueLimit) {
      counters_.add(Counter::out_catalogue_dropped);
      return;
    }
    queue_.push_back({unix_ns_now(), std::move(body)});
  }
  wake_.notify_one();
}

void Catalogue::acquisition_changed(const Acquisition& a, const char* what) {
  push(AcquisitionEvent{a, what});
}
void Catalogue::run_started(std::uint64_t run_id) { push(RunStart{run_id}); }
void Catalogue::run_ended(std::uint64_t run_id, const char* reason, const CounterValues& c) {
  push(RunStop{run_id, reason, c});
}
void Catalogue::rates(const std::string& json) { push(Rates{json}); }
void Catalogue::file_opened(const std::filesystem::path& path, const char* kind) {
  push(FileOpen{path.string(), kind});
}
void Catalogue::file_closed(const std::filesystem::path& path) { push(FileClose{path.string()}); }
void Catalogue::file_written(const std::filesystem::path& path, const char* kind,
                             std::uint64_t run_id) {
  push(FileWhole{path.string(), kind, run_id});
}

void Catalogue::flush() {
  std::unique_lock lock(mutex_);
  const std::uint64_t ticket = ++pushed_flushes_;
  queue_.push_back({unix_ns_now(), Flush{ticket}});
  wake_.notify_one();
  done_.wait(lock, [&] { return done_flushes_ >= ticket; });
}

void Catalogue::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and everything written
    Event e = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    apply(e);
    lock.lock();
    if (const auto* f = std::get_if<Flush>(&e.body)) {
      done_flushes_ = f->ticket;
      done_.notify_all();
    }
  }
}

void Catalogue::error(const std::string& what) {
  counters_.add(Counter::out_catalogue_errors);
  // The first errors in full, then one in a thousand (a disk that stays full).
  if (errors_logged_++ < 10 || errors_logged_ % 1000 == 0)
    spdlog::error("run catalogue {}: {} (out.catalogue_errors)", path_.string(), what);
}

void Catalogue::apply(const Event& e) {
  try {
    std::visit([&](const auto& body) { write(e.unix_ns, body); }, e.body);
  } catch (const std::exception& x) {
    error(x.what());
  }
}

// ---- the writes ----

void Catalogue::heartbeat(std::uint64_t t) {
  Stmt(db_, "UPDATE daemon_starts SET alive_unix_ns = max(alive_unix_ns, ?1) WHERE id = ?2")
      .bind(1, t)
      .bind(2, start_row_)
      .run();
  last_heartbeat_ = t;
}

void Catalogue::write(std::uint64_t t, const AcquisitionEvent& e) {
  const Acquisition& a = e.acquisition;
  std::string annotations = a.to_json()["annotations"].dump();
  Transaction tx(db_);
  if (e.what == "start") {
    Stmt(db_,
         "INSERT INTO acquisitions(id, name, subject, isotope, activity_MBq, operator, notes, "
         "started_unix_ns, annotations, daemon_start) VALUES(?,?,?,?,?,?,?,?,?,?)")
        .bind(1, a.id)
        .bind(2, a.name)
        .bind(3, a.subject)
        .bind(4, a.isotope)
        .bind(5, a.activity_MBq)
        .bind(6, a.operator_name)
        .bind(7, a.notes)
        .bind(8, a.started_unix_ns)
        .bind(9, annotations)
        .bind(10, start_row_)
        .run();
    // What is open now belongs to it as well.
    Stmt(db_,
         "INSERT OR IGNORE INTO acquisition_files SELECT ?1, id FROM files "
         "WHERE closed_unix_ns IS NULL AND daemon_start = ?2")
        .bind(1, a.id)
        .bind(2, start_row_)
        .run();
    if (run_id_)
      Stmt(db_, "INSERT OR IGNORE INTO acquisition_runs VALUES(?, ?)").bind(1, a.id).bind(2, run_id_).run();
    acquisition_id_ = a.id;
  } else {
    Stmt u(db_,
           "UPDATE acquisitions SET annotations = ?1, ended_unix_ns = ?2, end_reason = ?3 "
           "WHERE id = ?4");
    u.bind(1, annotations);
    if (a.ended_unix_ns)
      u.bind(2, a.ended_unix_ns).bind(3, a.end_reason);
    else
      u.bind_null(2).bind_null(3);
    u.bind(4, a.id).run();
    if (e.what == "stop") acquisition_id_.reset();
  }
  heartbeat(t);
  tx.commit();
}

void Catalogue::write(std::uint64_t t, const RunStart& e) {
  Transaction tx(db_);
  Stmt(db_, "INSERT OR IGNORE INTO runs(run_id, started_unix_ns, daemon_start) VALUES(?,?,?)")
      .bind(1, e.run_id)
      .bind(2, t)
      .bind(3, start_row_)
      .run();
  Stmt(db_,
       "INSERT OR IGNORE INTO run_files SELECT ?1, id FROM files "
       "WHERE closed_unix_ns IS NULL AND daemon_start = ?2")
      .bind(1, e.run_id)
      .bind(2, start_row_)
      .run();
  if (acquisition_id_)
    Stmt(db_, "INSERT OR IGNORE INTO acquisition_runs VALUES(?, ?)")
        .bind(1, *acquisition_id_)
        .bind(2, e.run_id)
        .run();
  heartbeat(t);
  tx.commit();
  run_id_ = e.run_id;
  live_weighted_ = live_seconds_ = 0;
}

namespace {

std::string counters_json(const Catalogue::CounterValues& now, const Catalogue::CounterValues& base) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (std::size_t i = 0; i < kCounterCount; ++i)
    j[std::string(counter_name(static_cast<Counter>(i)))] =
        now[i] >= base[i] ? now[i] - base[i] : now[i];
  return j.dump();
}

}  // namespace

void Catalogue::write(std::uint64_t t, const RunStop& e) {
  const bool known = e.run_id == run_id_;
  if (known) {
    Transaction tx(db_);
    Stmt u(db_,
           "UPDATE runs SET ended_unix_ns = ?1, end_reason = ?2, counters = ?3, "
           "live_fraction = ?4 WHERE run_id = ?5");
    u.bind(1, t).bind(2, e.reason).bind(3, counters_json(e.counters, run_base_));
    if (live_seconds_ > 0)
      u.bind(4, live_weighted_ / live_seconds_);
    else
      u.bind_null(4);
    u.bind(5, e.run_id).run();
    heartbeat(t);
    tx.commit();
    run_id_ = 0;
  }
  // A run without a slice has no row; its counts still belong to no later run.
  run_base_ = e.counters;
}

void Catalogue::write(std::uint64_t t, const Rates& e) {
  const auto doc = nlohmann::ordered_json::parse(e.json, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) throw std::runtime_error("unreadable rates document");
  const auto run = doc.find("run_id");
  const bool ours = run_id_ && run != doc.end() && run->is_number_unsigned() &&
                    run->get<std::uint64_t>() == run_id_;
  if (ours) {
    const double dt = doc.value("interval_s", 0.0);
    if (const auto live = rates_live_fraction(doc); live && dt > 0) {
      live_weighted_ += *live * dt;
      live_seconds_ += dt;
    }
  }
  if (t - last_counters_write_ < kUpdateEveryNs) return;
  last_counters_write_ = t;
  Transaction tx(db_);
  if (ours) {
    CounterValues now{};
    if (const auto c = doc.find("counters"); c != doc.end() && c->is_object())
      for (std::size_t i = 0; i < kCounterCount; ++i) {
        const auto v = c->find(std::string(counter_name(static_cast<Counter>(i))));
        if (v != c->end() && v->is_number_unsigned()) now[i] = v->get<std::uint64_t>();
      }
    Stmt u(db_, "UPDATE runs SET counters = ?1, live_fraction = ?2 WHERE run_id = ?3");
    u.bind(1, counters_json(now, run_base_));
    if (live_seconds_ > 0)
      u.bind(2, live_weighted_ / live_seconds_);
    else
      u.bind_null(2);
    u.bind(3, run_id_).run();
  }
  heartbeat(t);
  tx.commit();
}

void Catalogue::write(std::uint64_t t, const FileOpen& e) {
  Transaction tx(db_);
  Stmt(db_,
       "INSERT INTO files(path, kind, opened_unix_ns, daemon_start) VALUES(?,?,?,?)")
      .bind(1, e.path)
      .bind(2, e.kind)
      .bind(3, t)
      .bind(4, start_row_)
      .run();
  const std::int64_t id = sqlite3_last_insert_rowid(db_);
  if (run_id_) Stmt(db_, "INSERT OR IGNORE INTO run_files VALUES(?, ?)").bind(1, run_id_).bind(2, id).run();
  if (acquisition_id_)
    Stmt(db_, "INSERT OR IGNORE INTO acquisition_files VALUES(?, ?)")
        .bind(1, *acquisition_id_)
        .bind(2, id)
        .run();
  heartbeat(t);
  tx.commit();
}

void Catalogue::write(std::uint64_t t, const FileClose& e) {
  std::optional<FileDigest> d;
  std::string reason = "closed";
  try {
    d = digest_file(e.path);
  } catch (const std::exception& x) {
    spdlog::warn("run catalogue: {}", x.what());
    reason = "missing at close";
  }
  Transaction tx(db_);
  Stmt u(db_,
         "UPDATE files SET closed_unix_ns = ?1, size_bytes = ?2, sha256 = ?3, end_reason = ?4 "
         "WHERE path = ?5 AND closed_unix_ns IS NULL AND daemon_start = ?6");
  u.bind(1, t);
  if (d)
    u.bind(2, d->size).bind(3, d->sha256);
  else
    u.bind_null(2).bind_null(3);
  u.bind(4, reason).bind(5, e.path).bind(6, start_row_).run();
  if (sqlite3_changes(db_) == 0) throw std::runtime_error("closed a file it never saw open: " + e.path);
  heartbeat(t);
  tx.commit();
}

void Catalogue::write(std::uint64_t t, const FileWhole& e) {
  std::optional<FileDigest> d;
  try {
    d = digest_file(e.path);
  } catch (const std::exception& x) {
    spdlog::warn("run catalogue: {}", x.what());
  }
  const std::uint64_t run = e.run_id ? e.run_id : run_id_;
  Transaction tx(db_);
  Stmt insert(db_,
              "INSERT INTO files(path, kind, opened_unix_ns, closed_unix_ns, size_bytes, sha256, "
              "end_reason, daemon_start) VALUES(?1, ?2, ?3, ?3, ?4, ?5, ?6, ?7)");
  insert.bind(1, e.path).bind(2, e.kind).bind(3, t);
  if (d)
    insert.bind(4, d->size).bind(5, d->sha256).bind(6, std::string("closed"));
  else
    insert.bind_null(4).bind_null(5).bind(6, std::string("missing at close"));
  insert.bind(7, start_row_).run();
  const std::int64_t id = sqlite3_last_insert_rowid(db_);
  if (run) Stmt(db_, "INSERT OR IGNORE INTO run_files VALUES(?, ?)").bind(1, run).bind(2, id).run();
  if (acquisition_id_)
    Stmt(db_, "INSERT OR IGNORE INTO acquisition_files VALUES(?, ?)")
        .bind(1, *acquisition_id_)
        .bind(2, id)
        .run();
  heartbeat(t);
  tx.commit();
}

}  // namespace petdaq::daemon

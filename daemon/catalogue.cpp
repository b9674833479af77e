// The run catalogue (daemon/catalogue.h, docs/operations.md, "The run catalogue"): opening
// it, its event queue and writer thread, and file digests. Its schema is
// catalogue_schema.cpp, its writes catalogue_writes.cpp.
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

#include <openssl/evp.h>
#include <spdlog/spdlog.h>
#include <sqlite3.h>

#include "daemon/sqlite.h"

namespace petdaq::daemon {

using sql::exec;
using sql::single_integer;
using sql::SqlError;
using sql::Stmt;
using sql::Transaction;

namespace {

std::uint64_t unix_ns_now() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
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
    std::lock_guard lock(events_.mutex);
    events_.stop = true;
  }
  events_.wake.notify_one();
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

// ---- the queue ----

void Catalogue::push(Body body) {
  {
    std::lock_guard lock(events_.mutex);
    if (events_.items.size() >= kQueueLimit) {
      counters_.add(Counter::out_catalogue_dropped);
      return;
    }
    events_.items.push_back({unix_ns_now(), std::move(body)});
  }
  events_.wake.notify_one();
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
  std::unique_lock lock(events_.mutex);
  const std::uint64_t ticket = ++events_.pushed_flushes;
  events_.items.push_back({unix_ns_now(), Flush{ticket}});
  events_.wake.notify_one();
  events_.done.wait(lock, [&] { return events_.done_flushes >= ticket; });
}

void Catalogue::run() {
  std::unique_lock lock(events_.mutex);
  for (;;) {
    events_.wake.wait(lock, [&] { return events_.stop || !events_.items.empty(); });
    if (events_.items.empty()) return;  // stopping, and everything written
    Event e = std::move(events_.items.front());
    events_.items.pop_front();
    lock.unlock();
    apply(e);
    lock.lock();
    if (const auto* f = std::get_if<Flush>(&e.body)) {
      events_.done_flushes = f->ticket;
      events_.done.notify_all();
    }
  }
}

void Catalogue::error(const std::string& what) {
  counters_.add(Counter::out_catalogue_errors);
  // The first errors in full, then one in a thousand (a disk that stays full).
  if (writer_.errors_logged++ < 10 || writer_.errors_logged % 1000 == 0)
    spdlog::error("run catalogue {}: {} (out.catalogue_errors)", path_.string(), what);
}

void Catalogue::apply(const Event& e) {
  try {
    std::visit([&](const auto& body) { write(e.unix_ns, body); }, e.body);
  } catch (const std::exception& x) {
    error(x.what());
  }
}

}  // namespace petdaq::daemon

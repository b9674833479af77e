// The run catalogue's schema (docs/operations.md, "The run catalogue"): created in an empty
// database, checked in an existing one, and what a daemon that died left open, closed.
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/iso_time.h"
#include "daemon/catalogue.h"
#include "daemon/sqlite.h"

namespace petdaq::daemon {

using sql::exec;
using sql::single_integer;
using sql::Stmt;
using sql::Transaction;

namespace {

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

}  // namespace

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

}  // namespace petdaq::daemon

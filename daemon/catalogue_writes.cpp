// The run catalogue's writes (daemon/catalogue.h): one transaction per event, on the
// catalogue's own thread.
#include <optional>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "daemon/alarms.h"
#include "daemon/catalogue.h"
#include "daemon/sqlite.h"
#include "proto/rates_schema.h"

namespace petdaq::daemon {

using sql::Stmt;
using sql::Transaction;

namespace {

// The counters write and the heartbeat of the running daemon, at most this often.
constexpr std::uint64_t kUpdateEveryNs = 2'000'000'000;

}  // namespace

void Catalogue::heartbeat(std::uint64_t t) {
  Stmt(db_, "UPDATE daemon_starts SET alive_unix_ns = max(alive_unix_ns, ?1) WHERE id = ?2")
      .bind(1, t)
      .bind(2, start_row_)
      .run();
  writer_.last_heartbeat = t;
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
    if (writer_.run_id)
      Stmt(db_, "INSERT OR IGNORE INTO acquisition_runs VALUES(?, ?)")
          .bind(1, a.id)
          .bind(2, writer_.run_id)
          .run();
    writer_.acquisition_id = a.id;
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
    if (e.what == "stop") writer_.acquisition_id.reset();
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
  if (writer_.acquisition_id)
    Stmt(db_, "INSERT OR IGNORE INTO acquisition_runs VALUES(?, ?)")
        .bind(1, *writer_.acquisition_id)
        .bind(2, e.run_id)
        .run();
  heartbeat(t);
  tx.commit();
  writer_.run_id = e.run_id;
  writer_.live_weighted = writer_.live_seconds = 0;
}

namespace {

std::string counters_json(const Catalogue::CounterValues& now, const Catalogue::CounterValues& base) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (std::size_t i = 0; i < kCounterCount; ++i)
    j[std::string(counter_name(static_cast<Counter>(i)))] =
        now[i] >= base[i] ? now[i] - base[i] : now[i];
  return j.dump();
}

// A file row joins its run (if any) and the open acquisition (if any).
void link_file(sqlite3* db, std::int64_t file_id, std::uint64_t run,
               const std::optional<std::uint64_t>& acquisition) {
  if (run) Stmt(db, "INSERT OR IGNORE INTO run_files VALUES(?, ?)").bind(1, run).bind(2, file_id).run();
  if (acquisition)
    Stmt(db, "INSERT OR IGNORE INTO acquisition_files VALUES(?, ?)").bind(1, *acquisition).bind(2, file_id).run();
}

}  // namespace

void Catalogue::write(std::uint64_t t, const RunStop& e) {
  const bool known = e.run_id == writer_.run_id;
  if (known) {
    Transaction tx(db_);
    Stmt u(db_,
           "UPDATE runs SET ended_unix_ns = ?1, end_reason = ?2, counters = ?3, "
           "live_fraction = ?4 WHERE run_id = ?5");
    u.bind(1, t).bind(2, e.reason).bind(3, counters_json(e.counters, writer_.run_base));
    if (writer_.live_seconds > 0)
      u.bind(4, writer_.live_weighted / writer_.live_seconds);
    else
      u.bind_null(4);
    u.bind(5, e.run_id).run();
    heartbeat(t);
    tx.commit();
    writer_.run_id = 0;
  }
  // A run without a slice has no row; its counts still belong to no later run.
  writer_.run_base = e.counters;
}

void Catalogue::write(std::uint64_t t, const Rates& e) {
  const auto doc = nlohmann::ordered_json::parse(e.json, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) throw std::runtime_error("unreadable rates document");
  const auto run = doc.find(rates_doc::doc::run_id);
  const bool ours = writer_.run_id && run != doc.end() && run->is_number_unsigned() &&
                    run->get<std::uint64_t>() == writer_.run_id;
  if (ours) {
    const double dt = doc.value(rates_doc::doc::interval_s, 0.0);
    if (const auto live = rates_live_fraction(doc); live && dt > 0) {
      writer_.live_weighted += *live * dt;
      writer_.live_seconds += dt;
    }
  }
  if (t - writer_.last_counters_write < kUpdateEveryNs) return;
  writer_.last_counters_write = t;
  Transaction tx(db_);
  if (ours) {
    CounterValues now{};
    if (const auto c = doc.find(rates_doc::doc::counters); c != doc.end() && c->is_object())
      for (std::size_t i = 0; i < kCounterCount; ++i) {
        const auto v = c->find(std::string(counter_name(static_cast<Counter>(i))));
        if (v != c->end() && v->is_number_unsigned()) now[i] = v->get<std::uint64_t>();
      }
    Stmt u(db_, "UPDATE runs SET counters = ?1, live_fraction = ?2 WHERE run_id = ?3");
    u.bind(1, counters_json(now, writer_.run_base));
    if (writer_.live_seconds > 0)
      u.bind(2, writer_.live_weighted / writer_.live_seconds);
    else
      u.bind_null(2);
    u.bind(3, writer_.run_id).run();
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
  link_file(db_, sqlite3_last_insert_rowid(db_), writer_.run_id, writer_.acquisition_id);
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
  const std::uint64_t run = e.run_id ? e.run_id : writer_.run_id;
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
  link_file(db_, sqlite3_last_insert_rowid(db_), run, writer_.acquisition_id);
  heartbeat(t);
  tx.commit();
}

}  // namespace petdaq::daemon

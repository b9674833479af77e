// The little of SQLite's C API the run catalogue uses (daemon/catalogue.h), with RAII and
// errors as exceptions: statements, transactions, one-value queries.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

#include <sqlite3.h>

namespace petdaq::daemon::sql {

class SqlError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline void exec(sqlite3* db, const char* sql) {
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

inline std::int64_t single_integer(sqlite3* db, const char* sql) {
  Stmt s(db, sql);
  return s.step() ? s.integer(0) : 0;
}

}  // namespace petdaq::daemon::sql

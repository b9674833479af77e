#include "tools/runs/catalogue_reader.h"

#include <sqlite3.h>

#include <ctime>
#include <vector>

namespace petdaq::runs {

namespace {

constexpr std::int32_t kApplicationId = 0x50455444;  // "PETD", as petdaqd writes it

class Query {
 public:
  Query(sqlite3* db, const char* sql, const std::filesystem::path& path) : db_(db), path_(path) {
    if (sqlite3_prepare_v2(db, sql, -1, &s_, nullptr) != SQLITE_OK) fail();
  }
  ~Query() { sqlite3_finalize(s_); }
  Query(const Query&) = delete;
  Query& operator=(const Query&) = delete;
  Query& bind(int i, std::uint64_t v) {
    sqlite3_bind_int64(s_, i, static_cast<std::int64_t>(v));
    return *this;
  }
  Query& bind(int i, const std::string& v) {
    sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  bool step() {
    const int rc = sqlite3_step(s_);
    if (rc == SQLITE_ROW) return true;
    if (rc != SQLITE_DONE) fail();
    return false;
  }
  // A column as JSON: null, integer, real or text.
  nlohmann::json value(int c) const {
    switch (sqlite3_column_type(s_, c)) {
      case SQLITE_NULL: return nullptr;
      case SQLITE_INTEGER: return sqlite3_column_int64(s_, c);
      case SQLITE_FLOAT: return sqlite3_column_double(s_, c);
      default: return text(c);
    }
  }
  std::string text(int c) const {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s_, c));
    return p ? std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(s_, c))) : "";
  }
  std::int64_t integer(int c) const { return sqlite3_column_int64(s_, c); }
  int columns() const { return sqlite3_column_count(s_); }
  const char* name(int c) const { return sqlite3_column_name(s_, c); }
  // The row as an object of its columns.
  nlohmann::json row() const {
    nlohmann::json j = nlohmann::json::object();
    for (int c = 0; c < columns(); ++c) j[name(c)] = value(c);
    return j;
  }

 private:
  [[noreturn]] void fail() const {
    throw CatalogueError(path_.string() + ": " + sqlite3_errmsg(db_));
  }
  sqlite3* db_;
  const std::filesystem::path& path_;
  sqlite3_stmt* s_ = nullptr;
};

// Times as ISO 8601 beside the nanoseconds; JSON text columns parsed.
void dress(nlohmann::json& j) {
  for (const char* key : {"started_unix_ns", "ended_unix_ns", "opened_unix_ns", "closed_unix_ns"}) {
    const auto it = j.find(key);
    if (it == j.end()) continue;
    std::string iso_key = std::string(key).substr(0, std::string(key).find("_unix_ns"));
    j[iso_key] = it->is_number() ? nlohmann::json(iso_time(it->get<std::uint64_t>())) : nullptr;
  }
  for (const char* key : {"annotations", "counters"}) {
    const auto it = j.find(key);
    if (it != j.end() && it->is_string())
      *it = nlohmann::json::parse(it->get<std::string>(), nullptr, false);
  }
}

}  // namespace


CatalogueReader::CatalogueReader(const std::filesystem::path& path, bool writable) : path_(path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    throw CatalogueError(path.string() + ": no such file (is output.catalogue.path set, and has "
                                         "petdaqd run with it?)");
  if (!std::filesystem::is_regular_file(path, ec))
    throw CatalogueError(path.string() + ": not a file");
  const int flags = writable ? SQLITE_OPEN_READWRITE : SQLITE_OPEN_READONLY;
  if (sqlite3_open_v2(path.c_str(), &db_, flags, nullptr) != SQLITE_OK) {
    const std::string why = db_ ? sqlite3_errmsg(db_) : "cannot open";
    sqlite3_close_v2(db_);
    db_ = nullptr;
    throw CatalogueError(path.string() + ": " + why);
  }
  sqlite3_busy_timeout(db_, 5000);
  try {
    Query app(db_, "PRAGMA application_id", path_);
    Query version(db_, "PRAGMA user_version", path_);
    const std::int64_t a = app.step() ? app.integer(0) : 0;
    const std::int64_t v = version.step() ? version.integer(0) : 0;
    if (a != kApplicationId)
      throw CatalogueError(path.string() + ": not a petdaq run catalogue");
    if (v > kReaderSchemaVersion || v < 1)
      throw CatalogueError(path.string() + ": catalogue schema " + std::to_string(v) +
                           ", this program reads schema " +
                           std::to_string(kReaderSchemaVersion));
  } catch (...) {
    sqlite3_close_v2(db_);
    db_ = nullptr;
    throw;
  }
}

CatalogueReader::~CatalogueReader() { sqlite3_close_v2(db_); }

namespace {

constexpr const char* kAcquisitionColumns =
    "SELECT a.id, a.name, a.subject, a.isotope, a.activity_MBq, a.operator, a.notes, "
    "a.started_unix_ns, a.ended_unix_ns, a.end_reason, a.annotations, "
    "(SELECT count(*) FROM acquisition_files x WHERE x.acquisition_id = a.id) AS file_count, "
    "(SELECT coalesce(sum(f.size_bytes), 0) FROM acquisition_files x JOIN files f ON f.id = "
    "x.file_id WHERE x.acquisition_id = a.id) AS file_bytes FROM acquisitions a ";
constexpr const char* kRunColumns =
    "SELECT r.run_id, r.started_unix_ns, r.ended_unix_ns, r.end_reason, r.live_fraction, "
    "r.qa_report, r.counters, "
    "(SELECT count(*) FROM run_files x WHERE x.run_id = r.run_id) AS file_count, "
    "(SELECT coalesce(sum(f.size_bytes), 0) FROM run_files x JOIN files f ON f.id = x.file_id "
    "WHERE x.run_id = r.run_id) AS file_bytes FROM runs r ";

}  // namespace

nlohmann::json CatalogueReader::list(std::size_t limit) {
  // One read transaction: a consistent picture while petdaqd writes.
  sqlite3_exec(db_, "BEGIN", nullptr, nullptr, nullptr);
  nlohmann::json out = {{"acquisitions", nlohmann::json::array()}, {"runs", nlohmann::json::array()}};
  const std::string lim = limit ? " LIMIT " + std::to_string(limit) : "";
  try {
    {
      Query q(db_, (std::string(kAcquisitionColumns) + "ORDER BY a.id DESC" + lim).c_str(), path_);
      while (q.step()) {
        nlohmann::json j = q.row();
        dress(j);
        Query r(db_, "SELECT run_id FROM acquisition_runs WHERE acquisition_id = ? ORDER BY run_id",
                path_);
        r.bind(1, j["id"].get<std::uint64_t>());
        j["runs"] = nlohmann::json::array();
        while (r.step()) j["runs"].push_back(r.integer(0));
        out["acquisitions"].push_back(std::move(j));
      }
    }
    Query q(db_, (std::string(kRunColumns) + "ORDER BY r.run_id DESC" + lim).c_str(), path_);
    while (q.step()) {
      nlohmann::json j = q.row();
      dress(j);
      Query a(db_, "SELECT acquisition_id FROM acquisition_runs WHERE run_id = ? ORDER BY 1",
              path_);
      a.bind(1, j["run_id"].get<std::uint64_t>());
      j["acquisitions"] = nlohmann::json::array();
      while (a.step()) j["acquisitions"].push_back(a.integer(0));
      out["runs"].push_back(std::move(j));
    }
  } catch (...) {
    sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr);
    throw;
  }
  sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr);
  return out;
}

nlohmann::json CatalogueReader::acquisition_row(std::uint64_t id) {
  Query q(db_, (std::string(kAcquisitionColumns) + "WHERE a.id = ?").c_str(), path_);
  q.bind(1, id);
  if (!q.step()) return nullptr;
  nlohmann::json j = q.row();
  dress(j);
  return j;
}

nlohmann::json CatalogueReader::run_row(std::uint64_t id) {
  Query q(db_, (std::string(kRunColumns) + "WHERE r.run_id = ?").c_str(), path_);
  q.bind(1, id);
  if (!q.step()) return nullptr;
  nlohmann::json j = q.row();
  dress(j);
  return j;
}

std::optional<nlohmann::json> CatalogueReader::show(std::uint64_t id) {
  sqlite3_exec(db_, "BEGIN", nullptr, nullptr, nullptr);
  std::optional<nlohmann::json> out;
  try {
    if (nlohmann::json a = acquisition_row(id); !a.is_null()) {
      a["kind"] = "acquisition";
      a["runs"] = nlohmann::json::array();
      Query r(db_, "SELECT run_id FROM acquisition_runs WHERE acquisition_id = ? ORDER BY 1", path_);
      r.bind(1, id);
      while (r.step()) a["runs"].push_back(run_row(static_cast<std::uint64_t>(r.integer(0))));
      out = std::move(a);
    } else if (nlohmann::json run = run_row(id); !run.is_null()) {
      run["kind"] = "run";
      run["acquisitions"] = nlohmann::json::array();
      Query r(db_, "SELECT acquisition_id FROM acquisition_runs WHERE run_id = ? ORDER BY 1", path_);
      r.bind(1, id);
      while (r.step())
        run["acquisitions"].push_back(acquisition_row(static_cast<std::uint64_t>(r.integer(0))));
      out = std::move(run);
    }
  } catch (...) {
    sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr);
    throw;
  }
  sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr);
  return out;
}

std::optional<nlohmann::json> CatalogueReader::files(std::uint64_t id) {
  const char* columns =
      "SELECT f.id, f.path, f.kind, f.opened_unix_ns, f.closed_unix_ns, f.size_bytes, f.sha256, "
      "f.end_reason FROM files f ";
  std::string sql;
  {
    Query a(db_, "SELECT 1 FROM acquisitions WHERE id = ?", path_);
    a.bind(1, id);
    Query r(db_, "SELECT 1 FROM runs WHERE run_id = ?", path_);
    r.bind(1, id);
    if (a.step())
      sql = std::string(columns) +
            "JOIN acquisition_files x ON x.file_id = f.id WHERE x.acquisition_id = ? ORDER BY f.id";
    else if (r.step())
      sql = std::string(columns) +
            "JOIN run_files x ON x.file_id = f.id WHERE x.run_id = ? ORDER BY f.id";
    else
      return std::nullopt;
  }
  Query q(db_, sql.c_str(), path_);
  q.bind(1, id);
  nlohmann::json out = nlohmann::json::array();
  while (q.step()) {
    nlohmann::json j = q.row();
    dress(j);
    out.push_back(std::move(j));
  }
  return out;
}

bool CatalogueReader::set_qa(std::uint64_t run_id, const std::string& path) {
  Query q(db_, "UPDATE runs SET qa_report = ? WHERE run_id = ?", path_);
  q.bind(1, path).bind(2, run_id);
  q.step();
  return sqlite3_changes(db_) > 0;
}

std::string CatalogueReader::qa_report(std::uint64_t run_id) {
  Query q(db_, "SELECT qa_report FROM runs WHERE run_id = ?", path_);
  q.bind(1, run_id);
  return q.step() ? q.text(0) : std::string();
}

}  // namespace petdaq::runs

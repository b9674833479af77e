// Reading the run catalogue (docs/operations.md, "The run catalogue") that petdaqd writes: read-only, beside the
// daemon that writes it (SQLite's WAL mode lets readers and the writer go on together).
// Shared by petdaq-runs and petdaq-web's Runs page.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "core/iso_time.h"

struct sqlite3;

namespace petdaq::runs {

// A catalogue that cannot be read: missing, not an SQLite database, another program's, or
// of a newer schema. The message names the file and says which.
class CatalogueError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The schema this reader understands (daemon/catalogue.h writes the same number).
inline constexpr int kReaderSchemaVersion = 1;

class CatalogueReader {
 public:
  // Opens read-only and checks the schema; throws CatalogueError. `writable`: for set_qa.
  explicit CatalogueReader(const std::filesystem::path& path, bool writable = false);
  ~CatalogueReader();
  CatalogueReader(const CatalogueReader&) = delete;
  CatalogueReader& operator=(const CatalogueReader&) = delete;

  // {"acquisitions": [...], "runs": [...]}, newest first, at most `limit` of each (0: all).
  // Each acquisition: its metadata, annotations, times (ns and ISO 8601), end_reason, the
  // ids of its runs, its file count and bytes. Each run: its times, end_reason, counters,
  // live_fraction, qa_report, the ids of its acquisitions, file count and bytes.
  nlohmann::json list(std::size_t limit = 0);
  // One acquisition or run by id (an acquisition's id first: run ids are microseconds
  // since 1970 and never that small), with "kind": "acquisition" or "run" and its runs or
  // acquisitions in full; nullopt when there is neither.
  std::optional<nlohmann::json> show(std::uint64_t id);
  // The files of that acquisition or run (path, kind, times, size_bytes, sha256,
  // end_reason), oldest first; nullopt when there is neither.
  std::optional<nlohmann::json> files(std::uint64_t id);
  // Sets a run's QA report path; false when there is no such run.
  bool set_qa(std::uint64_t run_id, const std::string& path);
  // A run's QA report path ("" when none or no such run).
  std::string qa_report(std::uint64_t run_id);

 private:
  nlohmann::json acquisition_row(std::uint64_t id);
  nlohmann::json run_row(std::uint64_t id);
  std::filesystem::path path_;
  sqlite3* db_ = nullptr;
};

// Times as the catalogue prints them (core/iso_time.h).
using petdaq::iso_time;

}  // namespace petdaq::runs

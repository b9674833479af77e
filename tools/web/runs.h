// petdaq-web's Runs page (docs/tools.md): the run catalogue petdaqd writes
// (output.catalogue.path, docs/operations.md, "The run catalogue"), read-only, at /runs.json, and each run's QA
// report (petdaq-qa's folder, recorded with petdaq-runs set-qa) under /qa/RUN_ID/.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace petdaq::web {

struct HttpAnswer {
  int status = 200;
  std::string content_type;
  std::string body;
};

class RunsPage {
 public:
  // An empty path: no catalogue (/runs.json answers 404 saying how to name one).
  explicit RunsPage(std::filesystem::path catalogue, std::size_t limit = 200)
      : catalogue_(std::move(catalogue)), limit_(limit) {}

  // The answer to a GET of `target` (its path, no query), or nullopt when it is not the Runs
  // page's: /runs.json, /qa/RUN_ID/ and /qa/RUN_ID/FILE.
  std::optional<HttpAnswer> answer(const std::string& target) const;

 private:
  HttpAnswer runs_json() const;
  HttpAnswer qa_file(const std::string& rest) const;

  std::filesystem::path catalogue_;
  std::size_t limit_;
};

}  // namespace petdaq::web

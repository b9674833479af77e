#include "tools/web/runs.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tools/runs/catalogue_reader.h"

namespace petdaq::web {

namespace {

HttpAnswer text(int status, std::string body) {
  return {status, "text/plain; charset=utf-8", std::move(body)};
}

std::string content_type_of(const std::filesystem::path& p) {
  const std::string ext = p.extension().string();
  if (ext == ".html" || ext == ".htm") return "text/html; charset=utf-8";
  if (ext == ".png") return "image/png";
  if (ext == ".svg") return "image/svg+xml";
  if (ext == ".json") return "application/json";
  if (ext == ".css") return "text/css; charset=utf-8";
  if (ext == ".csv" || ext == ".txt") return "text/plain; charset=utf-8";
  return "application/octet-stream";
}

}  // namespace

std::optional<HttpAnswer> RunsPage::answer(const std::string& target) const {
  if (target == "/runs.json") return runs_json();
  if (target.rfind("/qa/", 0) == 0) return qa_file(target.substr(4));
  return std::nullopt;
}

HttpAnswer RunsPage::runs_json() const {
  if (catalogue_.empty())
    return text(404, "no run catalogue: start petdaq-web with --catalogue FILE, or with a "
                     "--config whose output.catalogue.path is set\n");
  try {
    runs::CatalogueReader reader(catalogue_);
    nlohmann::json doc = reader.list(limit_);
    doc["catalogue"] = catalogue_.string();
    return {200, "application/json", doc.dump()};
  } catch (const std::exception& e) {
    return {503, "application/json", nlohmann::json{{"error", e.what()}}.dump()};
  }
}

// /qa/RUN_ID/ or /qa/RUN_ID/NAME: a file of the folder of the run's QA report, by a plain
// name (no folders, nothing hidden): nothing else on the machine can be reached this way.
HttpAnswer RunsPage::qa_file(const std::string& rest) const {
  const auto slash = rest.find('/');
  if (catalogue_.empty() || slash == std::string::npos || slash == 0) return text(404, "not found\n");
  std::uint64_t run_id = 0;
  try {
    std::size_t used = 0;
    run_id = std::stoull(rest.substr(0, slash), &used);
    if (used != slash) return text(404, "not found\n");
  } catch (const std::exception&) {
    return text(404, "not found\n");
  }
  std::string name = rest.substr(slash + 1);
  if (name.empty()) name = "index.html";
  if (name.find('/') != std::string::npos || name.find('\\') != std::string::npos ||
      name.front() == '.')
    return text(404, "not found\n");
  std::string report;
  try {
    runs::CatalogueReader reader(catalogue_);
    report = reader.qa_report(run_id);
  } catch (const std::exception& e) {
    return text(503, std::string(e.what()) + "\n");
  }
  if (report.empty()) return text(404, "run " + std::to_string(run_id) + " has no QA report\n");
  std::error_code ec;
  std::filesystem::path folder = report;
  if (!std::filesystem::is_directory(folder, ec)) folder = folder.parent_path();
  const std::filesystem::path file = folder / name;
  std::ifstream in(file, std::ios::binary);
  if (!std::filesystem::is_regular_file(file, ec) || !in)
    return text(404, file.string() + ": not found\n");
  std::ostringstream body;
  body << in.rdbuf();
  return {200, content_type_of(file), body.str()};
}

}  // namespace petdaq::web

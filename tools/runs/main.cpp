// petdaq-runs: the run catalogue petdaqd writes (output.catalogue.path), read while it runs.
//
//   petdaq-runs -c petdaq.yaml list             acquisitions and runs, newest first
//   petdaq-runs -c petdaq.yaml show ID          one acquisition or run in full
//   petdaq-runs -c petdaq.yaml files ID         its files: size, SHA-256
//   petdaq-runs -c petdaq.yaml set-qa RUN PATH  record a run's QA report
//
// --json prints the same as JSON. Exit 0; 2 for a usage error, a missing or unreadable
// catalogue or an unknown ID. docs/operations.md, "The run catalogue".
#include <cstdio>
#include <filesystem>
#include <string>

#include <fmt/format.h>

#include "common/cli.h"
#include "tools/runs/catalogue_reader.h"

namespace {

using petdaq::runs::CatalogueReader;
using Json = nlohmann::json;

std::string text_or(const Json& j, const char* key, const char* fallback = "-") {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (it->is_string()) return it->get<std::string>().empty() ? fallback : it->get<std::string>();
  return it->dump();
}

std::string bytes_text(const Json& v) {
  if (!v.is_number()) return "-";
  const double b = v.get<double>();
  if (b >= 1e9) return fmt::format("{:.2f} GB", b / 1e9);
  if (b >= 1e6) return fmt::format("{:.2f} MB", b / 1e6);
  if (b >= 1e3) return fmt::format("{:.1f} kB", b / 1e3);
  return fmt::format("{} B", v.get<std::uint64_t>());
}

std::string counter(const Json& run, const char* name) {
  const auto c = run.find("counters");
  if (c == run.end() || !c->is_object() || !c->contains(name)) return "-";
  return (*c)[name].dump();
}

std::string live_text(const Json& run) {
  const auto v = run.find("live_fraction");
  return v != run.end() && v->is_number() ? fmt::format("{:.4f}", v->get<double>()) : "-";
}

void print_acquisition_line(const Json& a) {
  fmt::print("{:<6} {:<24.24} {:<20} {:<20} {:<14} {:>5} {:>10}\n", a["id"].dump(),
             text_or(a, "name"), text_or(a, "started"), text_or(a, "ended", "(open)"),
             text_or(a, "end_reason"), a["file_count"].dump(), bytes_text(a["file_bytes"]));
}

void print_run_line(const Json& r) {
  fmt::print("{:<17} {:<20} {:<20} {:<14} {:>12} {:>12} {:>8} {:>5} {}\n", r["run_id"].dump(),
             text_or(r, "started"), text_or(r, "ended", "(open)"), text_or(r, "end_reason"),
             counter(r, "coinc.prompts"), counter(r, "coinc.delayed"), live_text(r),
             r["file_count"].dump(), text_or(r, "qa_report"));
}

void print_list(const Json& doc) {
  fmt::print("Acquisitions\n{:<6} {:<24} {:<20} {:<20} {:<14} {:>5} {:>10}\n", "ID", "NAME",
             "STARTED (UTC)", "ENDED (UTC)", "END REASON", "FILES", "BYTES");
  for (const Json& a : doc["acquisitions"]) print_acquisition_line(a);
  fmt::print("\nRuns\n{:<17} {:<20} {:<20} {:<14} {:>12} {:>12} {:>8} {:>5} {}\n", "RUN ID",
             "STARTED (UTC)", "ENDED (UTC)", "END REASON", "PROMPTS", "DELAYED", "LIVE",
             "FILES", "QA REPORT");
  for (const Json& r : doc["runs"]) print_run_line(r);
}

void print_counters(const Json& run) {
  const auto c = run.find("counters");
  if (c == run.end() || !c->is_object()) return;
  fmt::print("  counters over the run (non-zero):\n");
  for (const auto& [name, value] : c->items())
    if (!value.is_number() || value.get<std::uint64_t>() != 0)
      fmt::print("    {:<32} {}\n", name, value.dump());
}

void print_show(const Json& j) {
  if (j["kind"] == "acquisition") {
    fmt::print("acquisition {}: {}\n", j["id"].dump(), text_or(j, "name"));
    for (const char* key : {"subject", "isotope", "activity_MBq", "operator", "notes", "started",
                            "ended", "end_reason"})
      fmt::print("  {:<14} {}\n", key, text_or(j, key));
    fmt::print("  {:<14} {} ({})\n", "files", j["file_count"].dump(), bytes_text(j["file_bytes"]));
    if (j["annotations"].is_array())
      for (const Json& n : j["annotations"])
        fmt::print("  note {}  {}\n",
                   n.contains("time_unix_ns") && n["time_unix_ns"].is_number()
                       ? petdaq::runs::iso_time(n["time_unix_ns"].get<std::uint64_t>())
                       : "-",
                   text_or(n, "text"));
    for (const Json& r : j["runs"]) {
      fmt::print("  run {}: {} .. {} ({}), prompts {}, live {}\n", r["run_id"].dump(),
                 text_or(r, "started"), text_or(r, "ended", "(open)"), text_or(r, "end_reason"),
                 counter(r, "coinc.prompts"), live_text(r));
    }
    return;
  }
  fmt::print("run {}\n", j["run_id"].dump());
  for (const char* key : {"started", "ended", "end_reason", "qa_report"})
    fmt::print("  {:<14} {}\n", key, text_or(j, key));
  fmt::print("  {:<14} {}\n", "live_fraction", live_text(j));
  fmt::print("  {:<14} {} ({})\n", "files", j["file_count"].dump(), bytes_text(j["file_bytes"]));
  for (const Json& a : j["acquisitions"])
    fmt::print("  acquisition {}: {} ({} .. {})\n", a["id"].dump(), text_or(a, "name"),
               text_or(a, "started"), text_or(a, "ended", "(open)"));
  print_counters(j);
}

void print_files(const Json& files) {
  fmt::print("{:<6} {:<64} {:>14} {:<20} {}\n", "KIND", "SHA-256", "BYTES", "CLOSED (UTC)",
             "PATH (END REASON)");
  for (const Json& f : files)
    fmt::print("{:<6} {:<64} {:>14} {:<20} {} ({})\n", text_or(f, "kind"), text_or(f, "sha256"),
               text_or(f, "size_bytes"), text_or(f, "closed", "(open)"), text_or(f, "path"),
               text_or(f, "end_reason", "open"));
}

}  // namespace

int main(int argc, char** argv) {
  petdaq::cli::App app("petdaq-runs",
                       "petdaq-runs: the run catalogue of petdaqd (acquisitions, runs, files with "
                       "SHA-256, counters), read while the daemon writes it. See "
                       "docs/operations.md, \"The run catalogue\".");
  std::filesystem::path config, catalogue;
  bool json = false;
  std::size_t limit = 0;
  std::uint64_t id = 0;
  std::string qa_path;
  petdaq::cli::add_config(app, config, "petdaqd's configuration: the catalogue is its "
                                       "output.catalogue.path");
  app.add_option("--catalogue", catalogue, "the catalogue file (overrides --config)")
      ->type_name("FILE");
  app.add_flag("--json", json, "print JSON instead of text");
  app.fallthrough();
  app.require_subcommand(1, 1);
  CLI::App* list = app.add_subcommand("list", "acquisitions and runs, newest first");
  list->add_option("--limit", limit, "at most N of each (0: all)")->type_name("N");
  CLI::App* show = app.add_subcommand("show", "one acquisition or run (by its id) in full");
  show->add_option("id", id, "an acquisition's id or a run's run_id")->required();
  CLI::App* files = app.add_subcommand("files", "the files of an acquisition or a run");
  files->add_option("id", id, "an acquisition's id or a run's run_id")->required();
  CLI::App* set_qa = app.add_subcommand("set-qa", "record the QA report (petdaq-qa's index.html "
                                                  "or its folder) of a run");
  set_qa->add_option("run_id", id, "the run")->required();
  set_qa->add_option("path", qa_path, "the report")->required();
  if (const auto rc = app.parse_or_exit(argc, argv)) return *rc;

  if (catalogue.empty() && !config.empty()) {
    try {
      catalogue = petdaq::load_settings(config).output.catalogue.path;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "petdaq-runs: %s\n", e.what());
      return 2;
    }
    if (catalogue.empty())
      return app.usage_error(config.string() + " has no output.catalogue.path");
  }
  if (catalogue.empty()) return app.usage_error("name the catalogue: --catalogue FILE or --config FILE");

  try {
    if (set_qa->parsed()) {
      std::error_code ec;
      const std::filesystem::path abs = std::filesystem::absolute(qa_path, ec);
      CatalogueReader reader(catalogue, true);
      if (!reader.set_qa(id, abs.string())) {
        std::fprintf(stderr, "petdaq-runs: no run %llu in %s\n",
                     static_cast<unsigned long long>(id), catalogue.c_str());
        return 2;
      }
      return 0;
    }
    CatalogueReader reader(catalogue);
    if (list->parsed()) {
      const Json doc = reader.list(limit);
      if (json)
        fmt::print("{}\n", doc.dump(2));
      else
        print_list(doc);
      return 0;
    }
    const std::optional<Json> found = show->parsed() ? reader.show(id) : reader.files(id);
    if (!found) {
      std::fprintf(stderr, "petdaq-runs: no acquisition or run %llu in %s\n",
                   static_cast<unsigned long long>(id), catalogue.c_str());
      return 2;
    }
    if (json)
      fmt::print("{}\n", found->dump(2));
    else if (show->parsed())
      print_show(*found);
    else
      print_files(*found);
    return 0;
  } catch (const petdaq::runs::CatalogueError& e) {
    std::fprintf(stderr, "petdaq-runs: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "petdaq-runs: %s\n", e.what());
    return 1;
  }
}

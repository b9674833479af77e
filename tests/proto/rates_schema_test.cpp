// The `rates` document's names, written once in proto/rates_schema.h, against the other
// places they appear as text: the table of DESIGN section 7 (every field, its type) and the
// live page (tools/web/page), which reads the members petdaq-web passes on under the
// document's names.
#include "proto/rates_schema.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

namespace petdaq {
namespace {

namespace rd = rates_doc;

std::string read_source(const std::string& relative) {
  std::ifstream in(std::string(PETDAQ_SOURCE_DIR) + "/" + relative);
  EXPECT_TRUE(in) << relative;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Where each object's members sit, as DESIGN section 7 writes their paths.
std::string path_of(const rd::Field& f) {
  if (f.object == "doc") return std::string(f.name);
  if (f.object == "phase")
    return std::string(rd::doc::worker) + "." + rd::worker::phases + ".<name>." +
           std::string(f.name);
  if (f.object == "alarm") return std::string(rd::doc::alarms) + "[]." + std::string(f.name);
  return std::string(f.object) + "." + std::string(f.name);
}

// The rows of the table "`rates` document fields": path -> (type, meaning).
std::map<std::string, std::pair<std::string, std::string>> design_table() {
  const std::string design = read_source("docs/DESIGN.md");
  const auto start = design.find("`rates` document fields");
  EXPECT_NE(start, std::string::npos) << "the table is not in docs/DESIGN.md";
  std::map<std::string, std::pair<std::string, std::string>> rows;
  if (start == std::string::npos) return rows;
  std::istringstream lines(design.substr(start));
  const std::regex row(R"(^\| `([^`]+)` \| ([^|]+?) \| (.*) \|$)");
  std::string line;
  bool in_table = false;
  while (std::getline(lines, line)) {
    std::smatch m;
    if (std::regex_match(line, m, row)) {
      rows[m[1]] = {m[2], m[3]};
      in_table = true;
    } else if (in_table && line.rfind("|", 0) != 0) {
      break;
    }
  }
  return rows;
}

TEST(RatesSchema, NamesAreUniqueWithinTheirObject) {
  std::set<std::pair<std::string_view, std::string_view>> seen;
  for (const rd::Field& f : rd::kFields)
    EXPECT_TRUE(seen.insert({f.object, f.name}).second) << f.object << "." << f.name;
}

TEST(RatesSchema, EveryObjectIsAMemberOfTheDocument) {
  std::set<std::string_view> objects;
  for (const rd::Field& f : rd::kFields)
    if (f.type == rd::Type::object || f.type == rd::Type::object_or_null) objects.insert(f.name);
  for (const rd::Field& f : rd::kFields) {
    if (f.object == "doc" || f.object == "phase" || f.object == "alarm") continue;
    EXPECT_TRUE(objects.count(f.object)) << f.object << " holds " << f.name << " but is no object";
  }
}

// Every row of the table is a field of the schema with the same type, and every field of
// the schema a row (the objects are rows through their members; `acquisition`'s members
// are named in its row's meaning).
TEST(RatesSchema, MatchesTheTableOfDesignSection7) {
  const auto table = design_table();
  ASSERT_GT(table.size(), 40u) << "the table in docs/DESIGN.md section 7 was not found";
  std::set<std::string> listed;
  for (const rd::Field& f : rd::kFields) {
    const std::string path = path_of(f);
    if (f.object == "acquisition") {
      const auto row = table.find(rd::doc::acquisition);
      ASSERT_NE(row, table.end());
      EXPECT_NE(row->second.second.find("`" + std::string(f.name) + "`"), std::string::npos)
          << path << " is not named in the row of " << rd::doc::acquisition;
      continue;
    }
    if (f.type == rd::Type::object) continue;
    listed.insert(path);
    const auto row = table.find(path);
    if (row == table.end()) {
      ADD_FAILURE() << path << " is in proto/rates_schema.h but not in DESIGN section 7";
      continue;
    }
    EXPECT_EQ(row->second.first, rd::type_name(f.type)) << path;
  }
  // Every counter by its dotted name: the members of `counters` are core/counters.h's names.
  const std::string counters = std::string(rd::doc::counters) + ".<name>";
  ASSERT_TRUE(table.count(counters)) << counters;
  EXPECT_EQ(table.at(counters).first, rd::type_name(rd::Type::integer));
  listed.insert(counters);
  for (const auto& [path, row] : table)
    EXPECT_TRUE(listed.count(path))
        << path << " is in DESIGN section 7 but not in proto/rates_schema.h";
}

std::set<std::string> names_of(std::string_view object) {
  std::set<std::string> names;
  for (const rd::Field& f : rd::kFields)
    if (f.object == object) names.insert(std::string(f.name));
  return names;
}

// The body of `function name(...) { ... }` in a script: up to the first line that is "}".
std::string function_body(const std::string& script, const std::string& name) {
  const auto start = script.find("function " + name + "(");
  EXPECT_NE(start, std::string::npos) << name << " is not in the page's script";
  if (start == std::string::npos) return {};
  const auto end = script.find("\n}\n", start);
  return script.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

// The members the page reads from petdaq-web's `rates` message are the document's names:
// m (the message: the document's top level and petdaq-web's own `type`, `problems` and
// `randoms_method`), m.rates, m.bdm, m.queues (q), m.deadtime (d), m.latency_ms (l),
// m.alarms (a), and the element ids the page fills from m.rates and m.latency_ms.
TEST(RatesSchema, TheLivePageReadsTheDocumentsNames) {
  const std::string script = read_source("tools/web/page/app.js");
  const std::string page = read_source("tools/web/page/index.html");
  std::map<std::string, std::set<std::string>> known = {
      {"m", names_of("doc")},           {"m.rates", names_of("rates")},
      {"bdm", names_of("bdm")},         {"q", names_of("queues")},
      {"d", names_of("deadtime")},      {"l", names_of("latency_ms")},
      {"a", names_of("alarm")}};
  for (const char* own : {"type", "problems", "randoms_method"}) known["m"].insert(own);
  known["bdm"].insert("dropping");  // petdaq-web's own (tools/web/messages.cpp)

  const std::string on_rates = function_body(script, "onRates");
  const std::string show_bdm = function_body(script, "showBdm");
  std::size_t reads = 0;
  // A variable of the list, not a member of something else (charts.bdm.data).
  const std::regex access(R"((^|[^.\w])(m\.rates|m|bdm|q|d|a)\.([A-Za-z_]\w*))");
  for (const std::string* body : {&on_rates, &show_bdm}) {
    for (std::sregex_iterator it(body->begin(), body->end(), access), end; it != end; ++it) {
      const std::string object = (*it)[2], name = (*it)[3];
      EXPECT_TRUE(known[object].count(name)) << "app.js reads " << object << "." << name;
      ++reads;
    }
  }
  // The latency members by name: for (const k of ["p50", ...]) l[k].
  const std::regex latency_keys(
      R"(const l = m\.latency_ms[^\n]*\n\s*for \(const k of \[([^\]]*)\]\))");
  std::smatch keys;
  ASSERT_TRUE(std::regex_search(on_rates, keys, latency_keys))
      << "onRates reads latency_ms otherwise";
  const std::string key_list = keys[1];
  const std::regex quoted("\"(\\w+)\"");
  for (std::sregex_iterator it(key_list.begin(), key_list.end(), quoted), end; it != end; ++it) {
    EXPECT_TRUE(known["l"].count((*it)[1])) << "app.js reads latency_ms." << (*it)[1];
    ++reads;
  }
  for (const auto& [prefix, object] : {std::pair{"rate-", "m.rates"}, std::pair{"latency-", "l"}}) {
    const std::regex id(std::string("id=\"") + prefix + "(\\w+)\"");
    for (std::sregex_iterator it(page.begin(), page.end(), id), end; it != end; ++it) {
      EXPECT_TRUE(known[object].count((*it)[1])) << "index.html shows " << prefix << (*it)[1];
      ++reads;
    }
  }
  EXPECT_GT(reads, 40u) << "the page's reads were not found: the test no longer sees them";
}

}  // namespace
}  // namespace petdaq

#include "core/settings_reader.h"

#include <algorithm>
#include <cmath>

namespace petdaq::settings_yaml {

const char* node_kind(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: return "a map";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Null: return "nothing";
    case YAML::NodeType::Scalar: return "a scalar";
    default: return "an undefined value";
  }
}

void Reader::fail(const std::string& path, const std::string& reason) {
  errors.push_back(path + ": " + reason);
}

YAML::Node Reader::section(const YAML::Node& parent, const std::string& path, const char* key,
                           const std::vector<const char*>& known) {
  const std::string p = join(path, key);
  YAML::Node n = parent[key];
  if (!n || n.IsNull()) return YAML::Node(YAML::NodeType::Map);
  if (!n.IsMap()) {
    fail(p, std::string("must be a map, got ") + node_kind(n));
    return YAML::Node(YAML::NodeType::Map);
  }
  check_keys(n, p, known);
  return n;
}

void Reader::check_keys(const YAML::Node& map, const std::string& path,
                        const std::vector<const char*>& known) {
  // yaml-cpp keeps duplicate keys and lookups see only the first: refuse them, or an edit
  // to the second copy would be silently ignored.
  std::vector<std::string> seen;
  for (const auto& kv : map) {
    if (!kv.first.IsScalar()) {
      fail(path.empty() ? "(top level)" : path,
           std::string("keys must be names, got ") + node_kind(kv.first) + " as a key");
      continue;
    }
    const std::string k = kv.first.Scalar();
    if (std::find(seen.begin(), seen.end(), k) != seen.end()) {
      fail(join(path, k.c_str()), "appears more than once");
      continue;
    }
    seen.push_back(k);
    bool ok = false;
    for (const char* name : known) ok = ok || k == name;
    if (!ok) {
      std::string list;
      for (const char* name : known) list += (list.empty() ? "" : ", ") + std::string(name);
      fail(join(path, k.c_str()), "unknown key (known here: " + list + ")");
    }
  }
}

bool Reader::scalar(const YAML::Node& parent, const std::string& path, const char* key,
                    std::string& text) {
  YAML::Node n = parent[key];
  if (!n) return false;
  if (!n.IsScalar()) {
    fail(join(path, key), std::string("must be a single value, got ") + node_kind(n));
    return false;
  }
  text = n.Scalar();
  return true;
}

void Reader::real(const YAML::Node& parent, const std::string& path, const char* key,
                  double& out) {
  std::string s;
  if (!scalar(parent, path, key, s)) return;
  double v = 0;
  const char* b = s.data();
  if (!s.empty() && s[0] == '+') ++b;
  auto [ptr, ec] = std::from_chars(b, s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || s.empty() || !std::isfinite(v)) {
    fail(join(path, key), "must be a finite number, got '" + s + "'");
    return;
  }
  out = v;
}

void Reader::boolean(const YAML::Node& parent, const std::string& path, const char* key,
                     bool& out) {
  std::string s;
  if (!scalar(parent, path, key, s)) return;
  if (s == "true" || s == "yes" || s == "on") {
    out = true;
  } else if (s == "false" || s == "no" || s == "off") {
    out = false;
  } else {
    fail(join(path, key), "must be true or false, got '" + s + "'");
  }
}

void Reader::string(const YAML::Node& parent, const std::string& path, const char* key,
                    std::string& out) {
  std::string s;
  if (scalar(parent, path, key, s)) out = s;
}

bool Reader::strings(const YAML::Node& parent, const std::string& path, const char* key,
                     std::vector<std::string>& out) {
  YAML::Node n = parent[key];
  if (!n) return false;
  if (!n.IsSequence()) {
    fail(join(path, key), std::string("must be a list, got ") + node_kind(n));
    return false;
  }
  std::vector<std::string> v;
  for (std::size_t i = 0; i < n.size(); ++i) {
    if (!n[i].IsScalar()) {
      fail(join(path, key) + "[" + std::to_string(i) + "]",
           std::string("must be a string, got ") + node_kind(n[i]));
      return false;
    }
    v.push_back(n[i].Scalar());
  }
  out = std::move(v);
  return true;
}

}  // namespace petdaq::settings_yaml

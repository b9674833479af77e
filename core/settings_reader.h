// The YAML side of load_settings() (core/settings.h), private to core/: a reader that
// converts and checks one key at a time and collects every problem with the key's path, so
// that one run of --check-config lists them all.
#pragma once

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <initializer_list>
#include <limits>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace petdaq::settings_yaml {

// "a map", "a list", ... for messages.
const char* node_kind(const YAML::Node& n);

class Reader {
 public:
  std::vector<std::string> errors;

  void fail(const std::string& path, const std::string& reason);

  // A section: must be a map (or absent); every key must be one of `known`.
  YAML::Node section(const YAML::Node& parent, const std::string& path, const char* key,
                     std::initializer_list<const char*> known);
  // Refuses keys that are not names, appear twice, or are not one of `known`.
  void check_keys(const YAML::Node& map, const std::string& path,
                  std::initializer_list<const char*> known);

  static std::string join(const std::string& path, const char* key) {
    return path.empty() ? std::string(key) : path + "." + key;
  }

  // The key's text when it is present and a single value.
  bool scalar(const YAML::Node& parent, const std::string& path, const char* key,
              std::string& text);

  // Decimal or 0x hex, in [min, max].
  template <class Int>
  void integer(const YAML::Node& parent, const std::string& path, const char* key, Int& out,
               long double min, long double max) {
    std::string s;
    if (!scalar(parent, path, key, s)) return;
    long long v = 0;
    const char* b = s.data();
    const char* e = s.data() + s.size();
    int base = 10;
    bool negative = false;
    if (b != e && (*b == '-' || *b == '+')) {
      negative = *b == '-';
      ++b;
    }
    if (e - b > 2 && b[0] == '0' && (b[1] == 'x' || b[1] == 'X')) {
      base = 16;
      b += 2;
    }
    unsigned long long mag = 0;
    auto [ptr, ec] = std::from_chars(b, e, mag, base);
    if (ec == std::errc::result_out_of_range && ptr == e) {
      fail(join(path, key), "out of range, got " + s);
      return;
    }
    if (ec != std::errc() || ptr != e || b == e) {
      fail(join(path, key), "must be an integer, got '" + s + "'");
      return;
    }
    if (mag > static_cast<unsigned long long>(std::numeric_limits<long long>::max())) {
      fail(join(path, key), "out of range, got " + s);
      return;
    }
    v = negative ? -static_cast<long long>(mag) : static_cast<long long>(mag);
    if (v < min || v > max) {
      std::ostringstream r;
      r << "must be in [" << static_cast<long long>(min) << ", "
        << static_cast<unsigned long long>(max) << "], got " << s;
      fail(join(path, key), r.str());
      return;
    }
    out = static_cast<Int>(v);
  }

  void real(const YAML::Node& parent, const std::string& path, const char* key, double& out);
  void boolean(const YAML::Node& parent, const std::string& path, const char* key, bool& out);
  void string(const YAML::Node& parent, const std::string& path, const char* key,
              std::string& out);

  // One of the names in `options`, a range of (name, value) pairs (core/settings.h).
  template <typename E, typename Options>
  void choose(const YAML::Node& parent, const std::string& path, const char* key, E& out,
              const Options& options) {
    std::string s;
    if (!scalar(parent, path, key, s)) return;
    std::string list;
    for (const auto& [name, value] : options) {
      if (s == name) {
        out = value;
        return;
      }
      list += (list.empty() ? "" : ", ") + std::string(name);
    }
    fail(join(path, key), "must be one of " + list + ", got '" + s + "'");
  }

  // A list of strings; true when the key was there and read.
  bool strings(const YAML::Node& parent, const std::string& path, const char* key,
               std::vector<std::string>& out);

  // Checks a condition on an already-read value.
  template <class T>
  void require(bool ok, const std::string& key_path, const char* rule, const T& got) {
    if (ok) return;
    std::ostringstream r;
    r << rule << ", got " << got;
    fail(key_path, r.str());
  }
};

}  // namespace petdaq::settings_yaml

// The YAML side of load_settings() (core/settings.h), private to core/: a reader that
// converts and checks one key at a time and collects every problem with the key's path, so
// that one run of --check-config lists them all; and the tables of keys a section is read
// with (Key, section(), core/settings_parse.cpp).
#pragma once

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <filesystem>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <type_traits>
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
                     const std::vector<const char*>& known);
  // Refuses keys that are not names, appear twice, or are not one of `known`.
  void check_keys(const YAML::Node& map, const std::string& path,
                  const std::vector<const char*>& known);

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

// Relative paths are relative to the configuration file's folder.
inline std::filesystem::path resolve(const std::string& p, const std::filesystem::path& base) {
  if (p.empty()) return {};
  std::filesystem::path path(p);
  return path.is_absolute() ? path : base / path;
}

// One key of a section whose settings are an S: its name, and how it is read from the
// section's map (at `path`) into S and checked.
template <class S>
struct Key {
  const char* name;
  std::function<void(Reader& r, const YAML::Node& map, const std::string& path, const char* key,
                     S& s)>
      read;
};

template <class S>
using Keys = std::vector<Key<S>>;

template <class S>
std::vector<const char*> names(const Keys<S>& keys) {
  std::vector<const char*> out;
  for (const Key<S>& k : keys) out.push_back(k.name);
  return out;
}

template <class S>
void read_keys(Reader& r, const YAML::Node& map, const std::string& path, const Keys<S>& keys,
               S& s) {
  for (const Key<S>& k : keys) k.read(r, map, path, k.name, s);
}

// The section `key` of `parent` (at `parent_path`): refuses keys not in the table, reads
// the table's; returns the section's path.
template <class S>
std::string read_section(Reader& r, const YAML::Node& parent, const std::string& parent_path,
                         const char* key, const Keys<S>& keys, S& s) {
  const YAML::Node map = r.section(parent, parent_path, key, names(keys));
  const std::string path = Reader::join(parent_path, key);
  read_keys(r, map, path, keys, s);
  return path;
}

// A rule on a number already read: its text ("must be > 0") and its test.
struct Rule {
  const char* text = nullptr;
  bool (*ok)(double) = nullptr;
};
inline constexpr Rule kPositive{"must be > 0", [](double v) { return v > 0; }};
inline constexpr Rule kNonNegative{"must be >= 0", [](double v) { return v >= 0; }};
inline constexpr Rule kAtLeast10{"must be >= 10", [](double v) { return v >= 10; }};
inline constexpr Rule kAtLeastMicro{"must be >= 0.001", [](double v) { return v >= 0.001; }};
inline constexpr Rule kFraction{"must be in [0, 1]", [](double v) { return v >= 0 && v <= 1; }};

template <class S, class Int>
Key<S> integer(const char* name, Int S::*member, long double min, long double max) {
  return {name, [=](Reader& r, const YAML::Node& n, const std::string& p, const char* k, S& s) {
            r.integer(n, p, k, s.*member, min, max);
          }};
}

template <class S>
Key<S> real(const char* name, double S::*member, Rule rule = {}) {
  return {name, [=](Reader& r, const YAML::Node& n, const std::string& p, const char* k, S& s) {
            r.real(n, p, k, s.*member);
            if (rule.ok) r.require(rule.ok(s.*member), Reader::join(p, k), rule.text, s.*member);
          }};
}

template <class S>
Key<S> boolean(const char* name, bool S::*member) {
  return {name, [=](Reader& r, const YAML::Node& n, const std::string& p, const char* k, S& s) {
            r.boolean(n, p, k, s.*member);
          }};
}

template <class S>
Key<S> text(const char* name, std::string S::*member) {
  return {name, [=](Reader& r, const YAML::Node& n, const std::string& p, const char* k, S& s) {
            r.string(n, p, k, s.*member);
          }};
}

template <class S, class E, class Options>
Key<S> choice(const char* name, E S::*member, const Options& options) {
  return {name, [=, &options](Reader& r, const YAML::Node& n, const std::string& p,
                              const char* k, S& s) { r.choose(n, p, k, s.*member, options); }};
}

// A file or folder, relative to the configuration's folder; set only when given and not
// empty. `as_written`, when given, receives the text.
template <class S>
Key<S> path(const char* name, std::filesystem::path S::*member,
            const std::filesystem::path& base_dir, std::string* as_written = nullptr) {
  return {name, [=](Reader& r, const YAML::Node& n, const std::string& p, const char* k, S& s) {
            std::string written;
            r.string(n, p, k, written);
            if (!written.empty()) s.*member = resolve(written, base_dir);
            if (as_written) *as_written = written;
          }};
}

// A section inside this one; `after` checks rules across its keys once they are read.
template <class S, class Sub>
Key<S> section(const char* name, Sub S::*member, Keys<Sub> keys,
               std::type_identity_t<std::function<void(Reader&, const std::string& path,
                                                       const Sub&, const S&)>>
                   after = {}) {
  return {name, [=, keys = std::move(keys)](Reader& r, const YAML::Node& n, const std::string& p,
                                            const char* k, S& s) {
            const std::string path = read_section(r, n, p, k, keys, s.*member);
            if (after) after(r, path, s.*member, s);
          }};
}

template <class S>
Key<S> custom(const char* name,
              std::function<void(Reader&, const YAML::Node&, const std::string&, const char*, S&)>
                  read) {
  return {name, std::move(read)};
}

}  // namespace petdaq::settings_yaml

// Loading, hashing and naming the settings. The YAML walk behind parse_settings() is
// core/settings_parse.cpp, its reader core/settings_reader.h.
#include "core/settings.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

namespace petdaq {

std::string not_a_regular_file(const std::filesystem::path& file) {
  std::error_code ec;
  const auto type = std::filesystem::status(file, ec).type();
  if (ec || type == std::filesystem::file_type::regular) return "";
  if (type == std::filesystem::file_type::directory) return "is a directory, not a file";
  return "is a device, pipe or socket, not a regular file";
}

Settings load_settings(const std::filesystem::path& file) {
  if (const std::string why = not_a_regular_file(file); !why.empty())
    throw SettingsError(file.string() + ": " + why);
  std::ifstream in(file, std::ios::binary);
  if (!in) throw SettingsError(file.string() + ": cannot open: " + std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  try {
    Settings s = parse_settings(text.str(), file.parent_path());
    s.source_file = file;
    return s;
  } catch (const SettingsError& e) {
    throw SettingsError(file.string() + ":\n" + e.what());
  }
}

std::uint64_t ps_to_ticks(double ps, double tick_ps) {
  if (!(ps > 0) || !(tick_ps > 0)) return 0;
  return static_cast<std::uint64_t>(std::llround(ps / tick_ps));
}

std::uint64_t max_future_ticks(const Settings& s) {
  return ps_to_ticks(s.stream.max_future_ps, s.scanner.tick_ps);
}

namespace {
struct Fnv1a {
  std::uint64_t h = 0xcbf29ce484222325ull;
  template <class T>
  Fnv1a& add(const T& v) {
    unsigned char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    for (unsigned char c : b) h = (h ^ c) * 0x100000001b3ull;
    return *this;
  }
};
}  // namespace

std::uint64_t output_settings_hash(const Settings& s) {
  Fnv1a f;
  const auto& sc = s.scanner;
  f.add(sc.bdm_transaxial).add(sc.bdm_axial).add(sc.du_transaxial).add(sc.du_axial);
  f.add(sc.crystal_transaxial).add(sc.crystal_axial).add(sc.position_size).add(sc.tick_ps);
  f.add(s.calibration.energy_bin_width);
  f.add(s.frame.check_markers).add(s.frame.head_marker).add(s.frame.tail_marker);
  f.add(s.energy_window.low_keV).add(s.energy_window.high_keV);
  const auto& c = s.coincidence;
  f.add(c.window_ps).add(c.window_edge).add(c.window_mode).add(c.policy);
  f.add(c.min_sector_difference).add(c.delayed.enabled).add(c.delayed.offset_ps);
  return f.h;
}

namespace {
template <class E, std::size_t N>
const char* name_of(const EnumNames<E, N>& names, E value) {
  for (const auto& [name, v] : names) {
    if (v == value) return name.data();  // the tables' names are string literals
  }
  return "?";
}
}  // namespace

const char* to_string(WindowEdge e) { return name_of(kWindowEdgeNames, e); }
const char* to_string(WindowMode m) { return name_of(kWindowModeNames, m); }
const char* to_string(Policy p) { return name_of(kPolicyNames, p); }
const char* to_string(BackendKind b) { return name_of(kBackendNames, b); }
const char* to_string(Framing f) { return name_of(kFramingNames, f); }

std::optional<BackendKind> parse_backend(std::string_view name) {
  for (const auto& [n, kind] : kBackendNames) {
    if (n == name) return kind;
  }
  return std::nullopt;
}

}  // namespace petdaq

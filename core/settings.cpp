#include "core/settings.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

// The YAML walk (parse_settings) is core/settings_parse.cpp.

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

const char* to_string(WindowEdge e) { return e == WindowEdge::closed ? "closed" : "half_open"; }
const char* to_string(WindowMode m) {
  return m == WindowMode::first_open ? "first_open" : "every_single";
}
const char* to_string(Policy p) {
  switch (p) {
    case Policy::kill_multiples: return "kill_multiples";
    case Policy::take_all_goods: return "take_all_goods";
    case Policy::take_winner_of_goods: return "take_winner_of_goods";
    case Policy::take_winner_if_good: return "take_winner_if_good";
    case Policy::take_winner_if_all_good: return "take_winner_if_all_good";
    case Policy::kill_all_if_multiple_goods: return "kill_all_if_multiple_goods";
  }
  return "?";
}
std::optional<BackendKind> parse_backend(std::string_view name) {
  for (const auto& [n, kind] : kBackendNames) {
    if (n == name) return kind;
  }
  return std::nullopt;
}

const char* to_string(BackendKind b) {
  for (const auto& [name, kind] : kBackendNames) {
    if (kind == b) return name.data();  // the table's names are string literals
  }
  return "?";
}
const char* to_string(Framing f) { return f == Framing::raw ? "raw" : "sequenced"; }

}  // namespace petdaq

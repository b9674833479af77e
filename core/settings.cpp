#include "core/settings.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <utility>

namespace petdaq {
namespace {

const char* node_kind(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: return "a map";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Null: return "nothing";
    case YAML::NodeType::Scalar: return "a scalar";
    default: return "an undefined value";
  }
}

// Walks the YAML tree, converting and validating each key; collects every problem so that
// one run of --check-config lists them all.
class Reader {
 public:
  std::vector<std::string> errors;

  void fail(const std::string& path, const std::string& reason) {
    errors.push_back(path + ": " + reason);
  }

  // A section: must be a map (or absent); every key must be one of `known`.
  YAML::Node section(const YAML::Node& parent, const std::string& path, const char* key,
                     std::initializer_list<const char*> known) {
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

  void check_keys(const YAML::Node& map, const std::string& path,
                  std::initializer_list<const char*> known) {
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

  static std::string join(const std::string& path, const char* key) {
    return path.empty() ? std::string(key) : path + "." + key;
  }

  bool scalar(const YAML::Node& parent, const std::string& path, const char* key,
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

  void real(const YAML::Node& parent, const std::string& path, const char* key, double& out) {
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

  void boolean(const YAML::Node& parent, const std::string& path, const char* key, bool& out) {
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

  void string(const YAML::Node& parent, const std::string& path, const char* key,
              std::string& out) {
    std::string s;
    if (scalar(parent, path, key, s)) out = s;
  }

  template <class E>
  void choice(const YAML::Node& parent, const std::string& path, const char* key, E& out,
              std::initializer_list<std::pair<const char*, E>> options) {
    choose(parent, path, key, out, options);
  }

  // The same from any range of (name, value) pairs.
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

  void strings(const YAML::Node& parent, const std::string& path, const char* key,
               std::vector<std::string>& out) {
    YAML::Node n = parent[key];
    if (!n) return;
    if (!n.IsSequence()) {
      fail(join(path, key), std::string("must be a list, got ") + node_kind(n));
      return;
    }
    std::vector<std::string> v;
    for (std::size_t i = 0; i < n.size(); ++i) {
      if (!n[i].IsScalar()) {
        fail(join(path, key) + "[" + std::to_string(i) + "]",
             std::string("must be a string, got ") + node_kind(n[i]));
        return;
      }
      v.push_back(n[i].Scalar());
    }
    out = std::move(v);
  }

  // Checks a condition on an already-read value.
  template <class T>
  void require(bool ok, const std::string& key_path, const char* rule, const T& got) {
    if (ok) return;
    std::ostringstream r;
    r << rule << ", got " << got;
    fail(key_path, r.str());
  }
};

bool valid_endpoint(const std::string& s) {
  const auto colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  unsigned port = 0;
  const char* b = s.data() + colon + 1;
  const char* e = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(b, e, port);
  return ec == std::errc() && ptr == e && b != e && port >= 1 && port <= 65535;
}

bool valid_ipv4(const std::string& s) {
  int parts = 0;
  std::size_t pos = 0;
  while (pos <= s.size()) {
    const auto dot = s.find('.', pos);
    const std::string part = s.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    unsigned v = 0;
    auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (part.empty() || ec != std::errc() || ptr != part.data() + part.size() || v > 255)
      return false;
    ++parts;
    if (dot == std::string::npos) break;
    pos = dot + 1;
  }
  return parts == 4;
}

bool valid_cidr(const std::string& s) {
  const auto slash = s.find('/');
  if (slash == std::string::npos) return valid_ipv4(s);
  unsigned bits = 0;
  const char* b = s.data() + slash + 1;
  const char* e = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(b, e, bits);
  return valid_ipv4(s.substr(0, slash)) && ec == std::errc() && ptr == e && b != e && bits <= 32;
}

std::filesystem::path resolve(const std::string& p, const std::filesystem::path& base) {
  if (p.empty()) return {};
  std::filesystem::path path(p);
  return path.is_absolute() ? path : base / path;
}

Settings parse_node(const YAML::Node& root, const std::filesystem::path& base_dir) {
  Reader r;
  Settings s;
  if (root && !root.IsNull() && !root.IsMap())
    throw SettingsError(std::string("the configuration must be a map of sections, got ") +
                        node_kind(root));
  const YAML::Node top = root && root.IsMap() ? root : YAML::Node(YAML::NodeType::Map);
  r.check_keys(top, "", {"scanner", "calibration", "frame", "energy_window", "coincidence",
                         "stream", "input", "output", "backend", "backend_threads", "log"});
  constexpr long double u64max = static_cast<long double>(std::numeric_limits<long long>::max());

  {  // scanner
    const std::string P = "scanner";
    auto n = r.section(top, "", "scanner",
                       {"bdm_transaxial", "bdm_axial", "du_transaxial", "du_axial",
                        "crystal_transaxial", "crystal_axial", "position_size", "tick_ps",
                        "ring_radius_mm", "crystal_pitch_transaxial_mm", "crystal_pitch_axial_mm",
                        "crystal_depth_mm", "du_gap_mm", "bdm_gap_mm"});
    auto& sc = s.scanner;
    r.integer(n, P, "bdm_transaxial", sc.bdm_transaxial, 1, 256);
    r.integer(n, P, "bdm_axial", sc.bdm_axial, 1, 256);
    r.integer(n, P, "du_transaxial", sc.du_transaxial, 1, 16);
    r.integer(n, P, "du_axial", sc.du_axial, 1, 16);
    r.integer(n, P, "crystal_transaxial", sc.crystal_transaxial, 1, 255);
    r.integer(n, P, "crystal_axial", sc.crystal_axial, 1, 255);
    r.integer(n, P, "position_size", sc.position_size, 1, 256);
    r.real(n, P, "tick_ps", sc.tick_ps);
    r.real(n, P, "ring_radius_mm", sc.ring_radius_mm);
    r.real(n, P, "crystal_pitch_transaxial_mm", sc.crystal_pitch_transaxial_mm);
    r.real(n, P, "crystal_pitch_axial_mm", sc.crystal_pitch_axial_mm);
    r.real(n, P, "crystal_depth_mm", sc.crystal_depth_mm);
    r.real(n, P, "du_gap_mm", sc.du_gap_mm);
    r.real(n, P, "bdm_gap_mm", sc.bdm_gap_mm);
    r.require(sc.bdm_transaxial * sc.bdm_axial <= 256, "scanner.bdm_axial",
              "bdm_transaxial * bdm_axial must be <= 256 (the frame's BDM byte)",
              sc.bdm_transaxial * sc.bdm_axial);
    r.require(sc.du_transaxial * sc.du_axial <= 16, "scanner.du_axial",
              "du_transaxial * du_axial must be <= 16 (the frame's DU nibble)",
              sc.du_transaxial * sc.du_axial);
    r.require(sc.crystal_transaxial * sc.crystal_axial <= 255, "scanner.crystal_axial",
              "crystal_transaxial * crystal_axial must be <= 255 (flood-map labels are bytes, 255 = none)",
              sc.crystal_transaxial * sc.crystal_axial);
    r.require(sc.tick_ps > 0, "scanner.tick_ps", "must be > 0", sc.tick_ps);
    r.require(sc.ring_radius_mm > 0, "scanner.ring_radius_mm", "must be > 0", sc.ring_radius_mm);
    r.require(sc.crystal_pitch_transaxial_mm > 0, "scanner.crystal_pitch_transaxial_mm",
              "must be > 0", sc.crystal_pitch_transaxial_mm);
    r.require(sc.crystal_pitch_axial_mm > 0, "scanner.crystal_pitch_axial_mm", "must be > 0",
              sc.crystal_pitch_axial_mm);
    r.require(sc.crystal_depth_mm > 0, "scanner.crystal_depth_mm", "must be > 0",
              sc.crystal_depth_mm);
    r.require(sc.du_gap_mm >= 0, "scanner.du_gap_mm", "must be >= 0", sc.du_gap_mm);
    r.require(sc.bdm_gap_mm >= 0, "scanner.bdm_gap_mm", "must be >= 0", sc.bdm_gap_mm);
  }
  {  // calibration
    const std::string P = "calibration";
    auto n = r.section(top, "", "calibration",
                       {"position_lut", "energy_correction", "energy_bin_width", "time_offsets"});
    std::string lut, energy, offsets;
    r.string(n, P, "position_lut", lut);
    r.string(n, P, "energy_correction", energy);
    r.string(n, P, "time_offsets", offsets);
    s.calibration.position_lut = resolve(lut, base_dir);
    s.calibration.energy_correction = resolve(energy, base_dir);
    s.calibration.time_offsets = resolve(offsets, base_dir);
    r.integer(n, P, "energy_bin_width", s.calibration.energy_bin_width, 1, 65535);
  }
  {  // frame
    const std::string P = "frame";
    auto n = r.section(top, "", "frame", {"check_markers", "head_marker", "tail_marker"});
    r.boolean(n, P, "check_markers", s.frame.check_markers);
    r.integer(n, P, "head_marker", s.frame.head_marker, 0, 15);
    r.integer(n, P, "tail_marker", s.frame.tail_marker, 0, 15);
  }
  {  // energy_window
    const std::string P = "energy_window";
    auto n = r.section(top, "", "energy_window", {"low_keV", "high_keV"});
    r.real(n, P, "low_keV", s.energy_window.low_keV);
    r.real(n, P, "high_keV", s.energy_window.high_keV);
    r.require(s.energy_window.low_keV <= s.energy_window.high_keV, "energy_window.high_keV",
              "must be >= low_keV", s.energy_window.high_keV);
  }
  {  // coincidence
    const std::string P = "coincidence";
    auto n = r.section(top, "", "coincidence",
                       {"window_ps", "window_edge", "window_mode", "policy",
                        "min_sector_difference", "delayed", "time_resolution_ps"});
    auto& c = s.coincidence;
    r.real(n, P, "window_ps", c.window_ps);
    r.choice(n, P, "window_edge", c.window_edge,
             {{"closed", WindowEdge::closed}, {"half_open", WindowEdge::half_open}});
    r.choice(n, P, "window_mode", c.window_mode,
             {{"first_open", WindowMode::first_open}, {"every_single", WindowMode::every_single}});
    r.choice(n, P, "policy", c.policy,
             {{"kill_multiples", Policy::kill_multiples},
              {"take_all_goods", Policy::take_all_goods},
              {"take_winner_of_goods", Policy::take_winner_of_goods},
              {"take_winner_if_good", Policy::take_winner_if_good},
              {"take_winner_if_all_good", Policy::take_winner_if_all_good},
              {"kill_all_if_multiple_goods", Policy::kill_all_if_multiple_goods}});
    r.integer(n, P, "min_sector_difference", c.min_sector_difference, 0, 128);
    auto d = r.section(n, P, "delayed", {"enabled", "offset_ps"});
    r.boolean(d, P + ".delayed", "enabled", c.delayed.enabled);
    r.real(d, P + ".delayed", "offset_ps", c.delayed.offset_ps);
    r.real(n, P, "time_resolution_ps", c.time_resolution_ps);
    r.require(c.time_resolution_ps >= 0, "coincidence.time_resolution_ps", "must be >= 0",
              c.time_resolution_ps);
    r.require(c.window_ps > 0, "coincidence.window_ps", "must be > 0", c.window_ps);
    if (c.window_ps > 0 && s.scanner.tick_ps > 0) {
      const double w_ticks = std::round(c.window_ps / s.scanner.tick_ps);
      r.require(w_ticks >= 1, "coincidence.window_ps", "must be at least one tick (scanner.tick_ps)",
                c.window_ps);
      const double reach = std::round((c.delayed.offset_ps + c.window_ps) / s.scanner.tick_ps);
      r.require(reach < 2147483647.0, "coincidence.delayed.offset_ps",
                "offset + window must fit a 32-bit tick difference", c.delayed.offset_ps);
    }
    r.require(c.delayed.offset_ps > c.window_ps, "coincidence.delayed.offset_ps",
              "must exceed coincidence.window_ps", c.delayed.offset_ps);
    r.require(c.min_sector_difference <= s.scanner.bdm_transaxial / 2,
              "coincidence.min_sector_difference", "must be <= scanner.bdm_transaxial / 2",
              c.min_sector_difference);
  }
  {  // stream
    const std::string P = "stream";
    auto n = r.section(top, "", "stream",
                       {"max_disorder_ps", "source_idle_ms", "max_future_ps", "max_slice_ms",
                        "reset_confirm_ms", "max_slice_frames", "max_pending_frames",
                        "max_carry_singles", "max_records_per_single"});
    auto& st = s.stream;
    r.real(n, P, "max_disorder_ps", st.max_disorder_ps);
    r.real(n, P, "source_idle_ms", st.source_idle_ms);
    r.real(n, P, "max_future_ps", st.max_future_ps);
    r.real(n, P, "max_slice_ms", st.max_slice_ms);
    r.real(n, P, "reset_confirm_ms", st.reset_confirm_ms);
    r.integer(n, P, "max_slice_frames", st.max_slice_frames, 1, 1ull << 30);
    r.integer(n, P, "max_pending_frames", st.max_pending_frames, 1, 1ull << 32);
    r.integer(n, P, "max_carry_singles", st.max_carry_singles, 1, 1ull << 30);
    r.integer(n, P, "max_records_per_single", st.max_records_per_single, 1, 64);
    r.require(st.max_disorder_ps >= 0, "stream.max_disorder_ps", "must be >= 0", st.max_disorder_ps);
    r.require(st.source_idle_ms > 0, "stream.source_idle_ms", "must be > 0", st.source_idle_ms);
    r.require(st.max_future_ps > 0, "stream.max_future_ps", "must be > 0", st.max_future_ps);
    r.require(st.max_slice_ms > 0, "stream.max_slice_ms", "must be > 0", st.max_slice_ms);
    r.require(st.reset_confirm_ms >= 0, "stream.reset_confirm_ms", "must be >= 0",
              st.reset_confirm_ms);
    r.require(st.max_pending_frames >= st.max_slice_frames, "stream.max_pending_frames",
              "must be >= stream.max_slice_frames", st.max_pending_frames);
  }
  {  // input
    const std::string P = "input";
    auto n = r.section(top, "", "input",
                       {"endpoints", "framing", "allowed_sources", "receive_buffer_bytes",
                        "flush_ms", "receiver_threads", "ring_chunk_bytes", "ring_chunks"});
    auto& in = s.input;
    r.strings(n, P, "endpoints", in.endpoints);
    r.choice(n, P, "framing", in.framing, {{"raw", Framing::raw}, {"sequenced", Framing::sequenced}});
    r.strings(n, P, "allowed_sources", in.allowed_sources);
    r.integer(n, P, "receive_buffer_bytes", in.receive_buffer_bytes, 4096, u64max);
    r.real(n, P, "flush_ms", in.flush_ms);
    r.integer(n, P, "receiver_threads", in.receiver_threads, 1, 64);
    r.integer(n, P, "ring_chunk_bytes", in.ring_chunk_bytes, 65536, 1ull << 32);
    r.integer(n, P, "ring_chunks", in.ring_chunks, 2, 1u << 20);
    r.require(!in.endpoints.empty(), "input.endpoints", "must name at least one address:port",
              "an empty list");
    for (std::size_t i = 0; i < in.endpoints.size(); ++i)
      r.require(valid_endpoint(in.endpoints[i]), "input.endpoints[" + std::to_string(i) + "]",
                "must be address:port with a port in 1..65535", "'" + in.endpoints[i] + "'");
    for (std::size_t i = 0; i < in.allowed_sources.size(); ++i)
      r.require(valid_cidr(in.allowed_sources[i]),
                "input.allowed_sources[" + std::to_string(i) + "]",
                "must be an IPv4 network a.b.c.d/bits", "'" + in.allowed_sources[i] + "'");
    r.require(in.flush_ms > 0, "input.flush_ms", "must be > 0", in.flush_ms);
  }
  {  // output
    const std::string P = "output";
    auto n = r.section(top, "", "output",
                       {"zmq", "file", "rates_interval_ms", "histograms", "singles", "raw"});
    auto z = r.section(n, P, "zmq",
                       {"endpoint", "send_hwm", "curve_secret_key_file", "curve_client_keys_file"});
    r.string(z, P + ".zmq", "endpoint", s.output.zmq.endpoint);
    r.integer(z, P + ".zmq", "send_hwm", s.output.zmq.send_hwm, 0, 1 << 30);
    r.require(!s.output.zmq.endpoint.empty(), "output.zmq.endpoint", "must not be empty", "''");
    std::string secret, clients;
    r.string(z, P + ".zmq", "curve_secret_key_file", secret);
    r.string(z, P + ".zmq", "curve_client_keys_file", clients);
    if (!secret.empty()) s.output.zmq.curve_secret_key_file = resolve(secret, base_dir);
    if (!clients.empty()) s.output.zmq.curve_client_keys_file = resolve(clients, base_dir);
    r.require(secret.empty() == clients.empty(), "output.zmq.curve_client_keys_file",
              "must be set together with output.zmq.curve_secret_key_file",
              "'" + clients + "'");
    auto f = r.section(n, P, "file", {"enabled", "directory", "rotate_bytes"});
    r.boolean(f, P + ".file", "enabled", s.output.file.enabled);
    std::string dir;
    r.string(f, P + ".file", "directory", dir);
    if (!dir.empty()) s.output.file.directory = resolve(dir, base_dir);
    r.integer(f, P + ".file", "rotate_bytes", s.output.file.rotate_bytes, 1 << 20, u64max);
    r.real(n, P, "rates_interval_ms", s.output.rates_interval_ms);
    r.require(s.output.rates_interval_ms >= 10, "output.rates_interval_ms", "must be >= 10",
              s.output.rates_interval_ms);
    HistogramSettings& hs = s.output.histograms;
    const std::string H = P + ".histograms";
    auto h = r.section(n, P, "histograms",
                       {"enabled", "interval_ms", "energy_bins", "energy_max_keV", "raw_bins",
                        "raw_bin_adc", "rate_bins", "rate_bin_ms"});
    r.boolean(h, H, "enabled", hs.enabled);
    r.real(h, H, "interval_ms", hs.interval_ms);
    r.require(hs.interval_ms >= 10, H + ".interval_ms", "must be >= 10", hs.interval_ms);
    r.integer(h, H, "energy_bins", hs.energy_bins, 1, 65536);
    r.real(h, H, "energy_max_keV", hs.energy_max_keV);
    r.require(hs.energy_max_keV > 0, H + ".energy_max_keV", "must be > 0", hs.energy_max_keV);
    r.integer(h, H, "raw_bins", hs.raw_bins, 1, 65536);
    r.integer(h, H, "raw_bin_adc", hs.raw_bin_adc, 1, 65536);
    r.integer(h, H, "rate_bins", hs.rate_bins, 1, 1 << 20);
    r.real(h, H, "rate_bin_ms", hs.rate_bin_ms);
    r.require(hs.rate_bin_ms >= 0.001, H + ".rate_bin_ms", "must be >= 0.001", hs.rate_bin_ms);
    auto sg = r.section(n, P, "singles", {"enabled"});
    r.boolean(sg, P + ".singles", "enabled", s.output.singles.enabled);
    auto rw = r.section(n, P, "raw", {"enabled", "directory", "rotate_bytes"});
    r.boolean(rw, P + ".raw", "enabled", s.output.raw.enabled);
    std::string raw_dir;
    r.string(rw, P + ".raw", "directory", raw_dir);
    if (!raw_dir.empty()) s.output.raw.directory = resolve(raw_dir, base_dir);
    r.integer(rw, P + ".raw", "rotate_bytes", s.output.raw.rotate_bytes, 1 << 20, u64max);
  }
  r.choose(top, "", "backend", s.backend, kBackendNames);
  r.integer(top, "", "backend_threads", s.backend_threads, 0, kMaxBackendThreads);
  {
    auto n = r.section(top, "", "log", {"level"});
    r.string(n, "log", "level", s.log.level);
    const char* levels[] = {"trace", "debug", "info", "warn", "error", "critical", "off"};
    bool ok = false;
    for (const char* l : levels) ok = ok || s.log.level == l;
    r.require(ok, "log.level", "must be one of trace, debug, info, warn, error, critical, off",
              "'" + s.log.level + "'");
  }

  if (!r.errors.empty()) {
    std::string all;
    for (const auto& e : r.errors) all += (all.empty() ? "" : "\n") + e;
    throw SettingsError(all);
  }
  return s;
}

}  // namespace

Settings parse_settings(const std::string& yaml_text, const std::filesystem::path& base_dir) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw SettingsError("not valid YAML: line " + std::to_string(e.mark.line + 1) + ", column " +
                        std::to_string(e.mark.column + 1) + ": " + e.msg);
  }
  return parse_node(root, base_dir);
}

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

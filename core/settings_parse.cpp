// The walk over the YAML tree behind parse_settings() and load_settings() (core/settings.h):
// one function per section, called in the order of DESIGN section 9 so that the problems
// come out in that order.
#include <yaml-cpp/yaml.h>

#include <charconv>
#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "core/settings.h"
#include "core/settings_reader.h"

namespace petdaq {
namespace {

using settings_yaml::node_kind;
using settings_yaml::Reader;

constexpr long double kU64Max = static_cast<long double>(std::numeric_limits<long long>::max());

// Relative paths are relative to the configuration file's folder.
std::filesystem::path resolve(const std::string& p, const std::filesystem::path& base) {
  if (p.empty()) return {};
  std::filesystem::path path(p);
  return path.is_absolute() ? path : base / path;
}

void parse_scanner(Reader& r, const YAML::Node& top, ScannerSettings& sc) {
  const std::string P = "scanner";
  auto n = r.section(top, "", "scanner",
                     {"bdm_transaxial", "bdm_axial", "du_transaxial", "du_axial",
                      "crystal_transaxial", "crystal_axial", "position_size", "tick_ps",
                      "ring_radius_mm", "crystal_pitch_transaxial_mm", "crystal_pitch_axial_mm",
                      "crystal_depth_mm", "du_gap_mm", "bdm_gap_mm"});
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

void parse_calibration(Reader& r, const YAML::Node& top, const std::filesystem::path& base_dir,
                       CalibrationSettings& cal) {
  const std::string P = "calibration";
  auto n = r.section(top, "", "calibration",
                     {"position_lut", "energy_correction", "energy_bin_width", "time_offsets",
                      "dead_time"});
  std::string lut, energy, offsets, dead_time;
  r.string(n, P, "position_lut", lut);
  r.string(n, P, "energy_correction", energy);
  r.string(n, P, "time_offsets", offsets);
  cal.position_lut = resolve(lut, base_dir);
  cal.energy_correction = resolve(energy, base_dir);
  cal.time_offsets = resolve(offsets, base_dir);
  r.string(n, P, "dead_time", dead_time);
  cal.dead_time = resolve(dead_time, base_dir);
  r.integer(n, P, "energy_bin_width", cal.energy_bin_width, 1, 65535);
}

void parse_frame(Reader& r, const YAML::Node& top, FrameSettings& f) {
  const std::string P = "frame";
  auto n = r.section(top, "", "frame", {"check_markers", "head_marker", "tail_marker"});
  r.boolean(n, P, "check_markers", f.check_markers);
  r.integer(n, P, "head_marker", f.head_marker, 0, 15);
  r.integer(n, P, "tail_marker", f.tail_marker, 0, 15);
}

void parse_energy_window(Reader& r, const YAML::Node& top, EnergyWindowSettings& e) {
  const std::string P = "energy_window";
  auto n = r.section(top, "", "energy_window", {"low_keV", "high_keV"});
  r.real(n, P, "low_keV", e.low_keV);
  r.real(n, P, "high_keV", e.high_keV);
  r.require(e.low_keV <= e.high_keV, "energy_window.high_keV",
            "must be >= low_keV", e.high_keV);
}

// The window is checked in ticks of the scanner already read.
void parse_coincidence(Reader& r, const YAML::Node& top, const ScannerSettings& scanner,
                       CoincidenceSettings& c) {
  const std::string P = "coincidence";
  auto n = r.section(top, "", "coincidence",
                     {"window_ps", "window_edge", "window_mode", "policy",
                      "min_sector_difference", "delayed", "time_resolution_ps"});
  r.real(n, P, "window_ps", c.window_ps);
  r.choose(n, P, "window_edge", c.window_edge, kWindowEdgeNames);
  r.choose(n, P, "window_mode", c.window_mode, kWindowModeNames);
  r.choose(n, P, "policy", c.policy, kPolicyNames);
  r.integer(n, P, "min_sector_difference", c.min_sector_difference, 0, 128);
  auto d = r.section(n, P, "delayed", {"enabled", "offset_ps"});
  r.boolean(d, P + ".delayed", "enabled", c.delayed.enabled);
  r.real(d, P + ".delayed", "offset_ps", c.delayed.offset_ps);
  r.real(n, P, "time_resolution_ps", c.time_resolution_ps);
  r.require(c.time_resolution_ps >= 0, "coincidence.time_resolution_ps", "must be >= 0",
            c.time_resolution_ps);
  r.require(c.window_ps > 0, "coincidence.window_ps", "must be > 0", c.window_ps);
  if (c.window_ps > 0 && scanner.tick_ps > 0) {
    const double w_ticks = std::round(c.window_ps / scanner.tick_ps);
    r.require(w_ticks >= 1, "coincidence.window_ps", "must be at least one tick (scanner.tick_ps)",
              c.window_ps);
    const double reach = std::round((c.delayed.offset_ps + c.window_ps) / scanner.tick_ps);
    r.require(reach < 2147483647.0, "coincidence.delayed.offset_ps",
              "offset + window must fit a 32-bit tick difference", c.delayed.offset_ps);
  }
  r.require(c.delayed.offset_ps > c.window_ps, "coincidence.delayed.offset_ps",
            "must exceed coincidence.window_ps", c.delayed.offset_ps);
  r.require(c.min_sector_difference <= scanner.bdm_transaxial / 2,
            "coincidence.min_sector_difference", "must be <= scanner.bdm_transaxial / 2",
            c.min_sector_difference);
}

void parse_stream(Reader& r, const YAML::Node& top, StreamSettings& st) {
  const std::string P = "stream";
  auto n = r.section(top, "", "stream",
                     {"max_disorder_ps", "source_idle_ms", "max_future_ps", "max_slice_ms",
                      "reset_confirm_ms", "max_slice_frames", "max_pending_frames",
                      "max_carry_singles", "max_records_per_single", "max_lag_ms",
                      "lag_stage_fraction"});
  r.real(n, P, "max_disorder_ps", st.max_disorder_ps);
  r.real(n, P, "source_idle_ms", st.source_idle_ms);
  r.real(n, P, "max_future_ps", st.max_future_ps);
  r.real(n, P, "max_slice_ms", st.max_slice_ms);
  r.real(n, P, "reset_confirm_ms", st.reset_confirm_ms);
  r.integer(n, P, "max_slice_frames", st.max_slice_frames, 1, 1ull << 30);
  r.integer(n, P, "max_pending_frames", st.max_pending_frames, 1, 1ull << 32);
  r.integer(n, P, "max_carry_singles", st.max_carry_singles, 1, 1ull << 30);
  r.integer(n, P, "max_records_per_single", st.max_records_per_single, 1, 64);
  r.real(n, P, "max_lag_ms", st.max_lag_ms);
  r.real(n, P, "lag_stage_fraction", st.lag_stage_fraction);
  r.require(st.max_lag_ms >= 0, "stream.max_lag_ms", "must be >= 0 (0: off)", st.max_lag_ms);
  r.require(st.lag_stage_fraction >= 0 && st.lag_stage_fraction <= 1, "stream.lag_stage_fraction",
            "must be in [0, 1] (0: off)", st.lag_stage_fraction);
  r.require(st.max_disorder_ps >= 0, "stream.max_disorder_ps", "must be >= 0", st.max_disorder_ps);
  r.require(st.source_idle_ms > 0, "stream.source_idle_ms", "must be > 0", st.source_idle_ms);
  r.require(st.max_future_ps > 0, "stream.max_future_ps", "must be > 0", st.max_future_ps);
  r.require(st.max_slice_ms > 0, "stream.max_slice_ms", "must be > 0", st.max_slice_ms);
  r.require(st.reset_confirm_ms >= 0, "stream.reset_confirm_ms", "must be >= 0",
            st.reset_confirm_ms);
  r.require(st.max_pending_frames >= st.max_slice_frames, "stream.max_pending_frames",
            "must be >= stream.max_slice_frames", st.max_pending_frames);
}

void parse_input(Reader& r, const YAML::Node& top, InputSettings& in) {
  const std::string P = "input";
  auto n = r.section(top, "", "input",
                     {"endpoints", "framing", "allowed_sources", "receive_buffer_bytes",
                      "flush_ms", "receiver_threads", "ring_chunk_bytes", "ring_chunks",
                      "shed_high_fraction", "shed_low_fraction"});
  std::vector<std::string> endpoints, networks;
  const bool have_endpoints = r.strings(n, P, "endpoints", endpoints);
  r.choose(n, P, "framing", in.framing, kFramingNames);
  const bool have_networks = r.strings(n, P, "allowed_sources", networks);
  r.integer(n, P, "receive_buffer_bytes", in.receive_buffer_bytes, 4096, kU64Max);
  r.real(n, P, "flush_ms", in.flush_ms);
  r.integer(n, P, "receiver_threads", in.receiver_threads, 1, 64);
  r.integer(n, P, "ring_chunk_bytes", in.ring_chunk_bytes, 65536, 1ull << 32);
  r.integer(n, P, "ring_chunks", in.ring_chunks, 2, 1u << 20);
  r.real(n, P, "shed_high_fraction", in.shed_high_fraction);
  r.real(n, P, "shed_low_fraction", in.shed_low_fraction);
  r.require(in.shed_high_fraction > 0 && in.shed_high_fraction <= 1, "input.shed_high_fraction",
            "must be in (0, 1] (1: shed only when the ring is full)", in.shed_high_fraction);
  r.require(in.shed_low_fraction >= 0 && in.shed_low_fraction < in.shed_high_fraction,
            "input.shed_low_fraction", "must be >= 0 and below input.shed_high_fraction",
            in.shed_low_fraction);
  if (have_endpoints) {
    r.require(!endpoints.empty(), "input.endpoints", "must name at least one address:port",
              "an empty list");
    in.endpoints.clear();
    for (std::size_t i = 0; i < endpoints.size(); ++i) {
      std::string why;
      if (const auto e = parse_udp_endpoint(endpoints[i], &why))
        in.endpoints.push_back(*e);
      else
        r.fail("input.endpoints[" + std::to_string(i) + "]", why + ", got '" + endpoints[i] + "'");
    }
  }
  if (have_networks) {
    in.allowed_sources.clear();
    for (std::size_t i = 0; i < networks.size(); ++i) {
      if (const auto net = parse_ipv4_network(networks[i]))
        in.allowed_sources.push_back(*net);
      else
        r.fail("input.allowed_sources[" + std::to_string(i) + "]",
               "must be an IPv4 network a.b.c.d/bits, got '" + networks[i] + "'");
    }
  }
  r.require(in.flush_ms > 0, "input.flush_ms", "must be > 0", in.flush_ms);
}

void parse_zmq(Reader& r, const YAML::Node& output, const std::filesystem::path& base_dir,
               ZmqSettings& z) {
  const std::string P = "output.zmq";
  auto n = r.section(output, "output", "zmq",
                     {"endpoint", "send_hwm", "message_buffer_bytes", "curve_secret_key_file",
                      "curve_client_keys_file", "held_bytes_max"});
  r.string(n, P, "endpoint", z.endpoint);
  r.integer(n, P, "send_hwm", z.send_hwm, 0, 1 << 30);
  r.integer(n, P, "message_buffer_bytes", z.message_buffer_bytes, 0, 1LL << 40);
  r.integer(n, P, "held_bytes_max", z.held_bytes_max, 0, 1LL << 40);
  r.require(!z.endpoint.empty(), "output.zmq.endpoint", "must not be empty", "''");
  std::string secret, clients;
  r.string(n, P, "curve_secret_key_file", secret);
  r.string(n, P, "curve_client_keys_file", clients);
  if (!secret.empty()) z.curve_secret_key_file = resolve(secret, base_dir);
  if (!clients.empty()) z.curve_client_keys_file = resolve(clients, base_dir);
  r.require(secret.empty() == clients.empty(), "output.zmq.curve_client_keys_file",
            "must be set together with output.zmq.curve_secret_key_file",
            "'" + clients + "'");
}

// output.file and output.raw: files in a directory, rotated by size.
template <class RotatedFiles>
void parse_rotated_files(Reader& r, const YAML::Node& output, const char* key,
                         const std::filesystem::path& base_dir, RotatedFiles& out) {
  const std::string P = std::string("output.") + key;
  constexpr bool kHasSingles = requires { out.singles; };  // output.file only
  auto n = kHasSingles
               ? r.section(output, "output", key, {"enabled", "directory", "rotate_bytes", "singles"})
               : r.section(output, "output", key, {"enabled", "directory", "rotate_bytes"});
  r.boolean(n, P, "enabled", out.enabled);
  if constexpr (kHasSingles) r.boolean(n, P, "singles", out.singles);
  std::string dir;
  r.string(n, P, "directory", dir);
  if (!dir.empty()) out.directory = resolve(dir, base_dir);
  r.integer(n, P, "rotate_bytes", out.rotate_bytes, 1 << 20, kU64Max);
}

void parse_histograms(Reader& r, const YAML::Node& output, HistogramSettings& hs) {
  const std::string H = "output.histograms";
  auto h = r.section(output, "output", "histograms",
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
}

void parse_image(Reader& r, const YAML::Node& output, ImageSettings& is) {
  const std::string I = "output.image";
  auto n = r.section(output, "output", "image",
                     {"enabled", "interval_ms", "voxel_mm", "dim_x", "dim_y", "dim_z", "window_s",
                      "subtract_delayed", "trace_bin_ms", "trace_bins", "depth_fraction"});
  r.boolean(n, I, "enabled", is.enabled);
  r.real(n, I, "interval_ms", is.interval_ms);
  r.require(is.interval_ms >= 10, I + ".interval_ms", "must be >= 10", is.interval_ms);
  r.real(n, I, "voxel_mm", is.voxel_mm);
  r.require(is.voxel_mm >= 0.1 && is.voxel_mm <= 100, I + ".voxel_mm",
            "must be in [0.1, 100]", is.voxel_mm);
  r.integer(n, I, "dim_x", is.dim_x, 1, 1024);
  r.integer(n, I, "dim_y", is.dim_y, 1, 1024);
  r.integer(n, I, "dim_z", is.dim_z, 1, 1024);
  r.require(std::uint64_t{is.dim_x} * is.dim_y * is.dim_z <= (1u << 24),
            I + ".dim_x * dim_y * dim_z", "must be <= 16777216 voxels",
            std::uint64_t{is.dim_x} * is.dim_y * is.dim_z);
  r.real(n, I, "window_s", is.window_s);
  r.require(is.window_s > 0, I + ".window_s", "must be > 0", is.window_s);
  r.boolean(n, I, "subtract_delayed", is.subtract_delayed);
  r.real(n, I, "trace_bin_ms", is.trace_bin_ms);
  r.require(is.trace_bin_ms >= 0.001, I + ".trace_bin_ms", "must be >= 0.001", is.trace_bin_ms);
  r.integer(n, I, "trace_bins", is.trace_bins, 1, 1 << 22);
  r.real(n, I, "depth_fraction", is.depth_fraction);
  r.require(is.depth_fraction >= 0 && is.depth_fraction <= 1, I + ".depth_fraction",
            "must be in [0, 1]", is.depth_fraction);
}

void parse_control_and_catalogue(Reader& r, const YAML::Node& output,
                                 const std::filesystem::path& base_dir, OutputSettings& o) {
  auto c = r.section(output, "output", "control", {"endpoint"});
  r.string(c, "output.control", "endpoint", o.control.endpoint);
  const std::string& ep = o.control.endpoint;
  r.require(ep.empty() || ep.starts_with("ipc://") || ep.starts_with("tcp://"),
            "output.control.endpoint", "must be empty (off), ipc://PATH or tcp://ADDRESS:PORT",
            "'" + ep + "'");
  r.require(ep.empty() || ep != o.zmq.endpoint, "output.control.endpoint",
            "must differ from output.zmq.endpoint", "'" + ep + "'");
  auto k = r.section(output, "output", "catalogue", {"path"});
  std::string path;
  r.string(k, "output.catalogue", "path", path);
  if (!path.empty()) o.catalogue.path = resolve(path, base_dir);
}

void parse_output(Reader& r, const YAML::Node& top, const std::filesystem::path& base_dir,
                  OutputSettings& o) {
  const std::string P = "output";
  auto n = r.section(top, "", "output",
                     {"zmq", "file", "rates_interval_ms", "histograms", "image", "singles", "raw",
                      "metrics", "control", "catalogue"});
  parse_zmq(r, n, base_dir, o.zmq);
  parse_rotated_files(r, n, "file", base_dir, o.file);
  r.real(n, P, "rates_interval_ms", o.rates_interval_ms);
  r.require(o.rates_interval_ms >= 10, "output.rates_interval_ms", "must be >= 10",
            o.rates_interval_ms);
  parse_histograms(r, n, o.histograms);
  parse_image(r, n, o.image);
  auto sg = r.section(n, P, "singles", {"enabled"});
  r.boolean(sg, P + ".singles", "enabled", o.singles.enabled);
  parse_rotated_files(r, n, "raw", base_dir, o.raw);
  parse_control_and_catalogue(r, n, base_dir, o);
  auto m = r.section(n, P, "metrics", {"listen"});
  r.string(m, P + ".metrics", "listen", o.metrics.listen);
  if (!o.metrics.listen.empty()) {
    const auto colon = o.metrics.listen.rfind(':');
    unsigned port = 0;
    const char* b = o.metrics.listen.data() + (colon == std::string::npos ? 0 : colon + 1);
    const char* e = o.metrics.listen.data() + o.metrics.listen.size();
    const auto [ptr, ec] = std::from_chars(b, e, port);
    r.require(colon != std::string::npos && colon > 0 && ec == std::errc() && ptr == e &&
                  port >= 1 && port <= 65535,
              P + ".metrics.listen", "must be host:port (e.g. 127.0.0.1:9105) or empty",
              "'" + o.metrics.listen + "'");
  }
}

// alarms: thresholds on the rates document (docs/operations.md, "Alarms").
void parse_alarms(Reader& r, const YAML::Node& top, AlarmSettings& a) {
  const std::string P = "alarms";
  auto n = r.section(top, "", "alarms",
                     {"max_losses_per_s", "min_live_fraction", "board_min_singles_per_s",
                      "board_max_singles_per_s", "board_min_temperature_degC",
                      "board_max_temperature_degC", "max_hot_crystals", "max_dead_crystals",
                      "hot_crystal_factor", "lagging_board"});
  r.real(n, P, "max_losses_per_s", a.max_losses_per_s);
  r.require(a.max_losses_per_s >= 0, P + ".max_losses_per_s", "must be >= 0",
            a.max_losses_per_s);
  r.real(n, P, "min_live_fraction", a.min_live_fraction);
  r.require(a.min_live_fraction >= 0 && a.min_live_fraction <= 1, P + ".min_live_fraction",
            "must be in [0, 1]", a.min_live_fraction);
  r.real(n, P, "board_min_singles_per_s", a.board_min_singles_per_s);
  r.require(a.board_min_singles_per_s >= 0, P + ".board_min_singles_per_s", "must be >= 0",
            a.board_min_singles_per_s);
  r.real(n, P, "board_max_singles_per_s", a.board_max_singles_per_s);
  r.require(a.board_max_singles_per_s >= 0, P + ".board_max_singles_per_s", "must be >= 0",
            a.board_max_singles_per_s);
  r.require(a.board_max_singles_per_s == 0 ||
                a.board_max_singles_per_s > a.board_min_singles_per_s,
            P + ".board_max_singles_per_s", "must be 0 (off) or > board_min_singles_per_s",
            a.board_max_singles_per_s);
  r.real(n, P, "board_min_temperature_degC", a.board_min_temperature_degC);
  r.real(n, P, "board_max_temperature_degC", a.board_max_temperature_degC);
  r.require(a.board_max_temperature_degC > a.board_min_temperature_degC,
            P + ".board_max_temperature_degC", "must be > board_min_temperature_degC",
            a.board_max_temperature_degC);
  r.integer(n, P, "max_hot_crystals", a.max_hot_crystals, 0, 1u << 30);
  r.integer(n, P, "max_dead_crystals", a.max_dead_crystals, 0, 1u << 30);
  r.real(n, P, "hot_crystal_factor", a.hot_crystal_factor);
  r.require(a.hot_crystal_factor > 1, P + ".hot_crystal_factor", "must be > 1",
            a.hot_crystal_factor);
  r.boolean(n, P, "lagging_board", a.lagging_board);
}

void parse_log(Reader& r, const YAML::Node& top, LogSettings& lg) {
  auto n = r.section(top, "", "log", {"level"});
  r.string(n, "log", "level", lg.level);
  const char* levels[] = {"trace", "debug", "info", "warn", "error", "critical", "off"};
  bool ok = false;
  for (const char* l : levels) ok = ok || lg.level == l;
  r.require(ok, "log.level", "must be one of trace, debug, info, warn, error, critical, off",
            "'" + lg.level + "'");
}

Settings parse_node(const YAML::Node& root, const std::filesystem::path& base_dir) {
  Reader r;
  Settings s;
  if (root && !root.IsNull() && !root.IsMap())
    throw SettingsError(std::string("the configuration must be a map of sections, got ") +
                        node_kind(root));
  const YAML::Node top = root && root.IsMap() ? root : YAML::Node(YAML::NodeType::Map);
  r.check_keys(top, "", {"scanner", "calibration", "frame", "energy_window", "coincidence",
                         "stream", "input", "output", "alarms", "backend", "backend_threads",
                         "log"});
  parse_scanner(r, top, s.scanner);
  parse_calibration(r, top, base_dir, s.calibration);
  parse_frame(r, top, s.frame);
  parse_energy_window(r, top, s.energy_window);
  parse_coincidence(r, top, s.scanner, s.coincidence);
  parse_stream(r, top, s.stream);
  parse_input(r, top, s.input);
  parse_output(r, top, base_dir, s.output);
  parse_alarms(r, top, s.alarms);
  r.choose(top, "", "backend", s.backend, kBackendNames);
  r.integer(top, "", "backend_threads", s.backend_threads, 0, kMaxBackendThreads);
  parse_log(r, top, s.log);

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

}  // namespace petdaq

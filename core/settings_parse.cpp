// The walk over the YAML tree behind parse_settings() and load_settings() (core/settings.h).
// Each section is a table of its keys, each key written once with how it is read and the
// rule its value must keep: the table gives the keys the section knows (any other is
// refused), and the order they are read and checked in. Rules that relate several keys
// follow the table. Sections come in the order of DESIGN section 9 so that the problems
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
#include "core/thread_placement.h"

namespace petdaq {
namespace {

using namespace settings_yaml;  // Reader and the key tables

constexpr long double kU64Max = static_cast<long double>(std::numeric_limits<long long>::max());

Key<Settings> scanner_section() {
  using S = ScannerSettings;
  return section<Settings>(
      "scanner", &Settings::scanner,
      Keys<S>{integer("bdm_transaxial", &S::bdm_transaxial, 1, 256),
              integer("bdm_axial", &S::bdm_axial, 1, 256),
              integer("du_transaxial", &S::du_transaxial, 1, 16),
              integer("du_axial", &S::du_axial, 1, 16),
              integer("crystal_transaxial", &S::crystal_transaxial, 1, 255),
              integer("crystal_axial", &S::crystal_axial, 1, 255),
              integer("position_size", &S::position_size, 1, 256),
              real("tick_ps", &S::tick_ps, kPositive),
              real("ring_radius_mm", &S::ring_radius_mm, kPositive),
              real("crystal_pitch_transaxial_mm", &S::crystal_pitch_transaxial_mm, kPositive),
              real("crystal_pitch_axial_mm", &S::crystal_pitch_axial_mm, kPositive),
              real("crystal_depth_mm", &S::crystal_depth_mm, kPositive),
              real("du_gap_mm", &S::du_gap_mm, kNonNegative),
              real("bdm_gap_mm", &S::bdm_gap_mm, kNonNegative)},
      [](Reader& r, const std::string& p, const S& sc, const Settings&) {
        r.require(sc.bdm_transaxial * sc.bdm_axial <= 256, Reader::join(p, "bdm_axial"),
                  "bdm_transaxial * bdm_axial must be <= 256 (the frame's BDM byte)",
                  sc.bdm_transaxial * sc.bdm_axial);
        r.require(sc.du_transaxial * sc.du_axial <= 16, Reader::join(p, "du_axial"),
                  "du_transaxial * du_axial must be <= 16 (the frame's DU nibble)",
                  sc.du_transaxial * sc.du_axial);
        r.require(sc.crystal_transaxial * sc.crystal_axial <= 255, Reader::join(p, "crystal_axial"),
                  "crystal_transaxial * crystal_axial must be <= 255 (flood-map labels are bytes, "
                  "255 = none)",
                  sc.crystal_transaxial * sc.crystal_axial);
      });
}

Key<Settings> calibration_section(const std::filesystem::path& base_dir) {
  using S = CalibrationSettings;
  return section<Settings>("calibration", &Settings::calibration,
                           Keys<S>{path("position_lut", &S::position_lut, base_dir),
                                   path("energy_correction", &S::energy_correction, base_dir),
                                   integer("energy_bin_width", &S::energy_bin_width, 1, 65535),
                                   path("time_offsets", &S::time_offsets, base_dir),
                                   path("dead_time", &S::dead_time, base_dir)});
}

Key<Settings> frame_section() {
  using S = FrameSettings;
  return section<Settings>("frame", &Settings::frame,
                           Keys<S>{boolean("check_markers", &S::check_markers),
                                   integer("head_marker", &S::head_marker, 0, 15),
                                   integer("tail_marker", &S::tail_marker, 0, 15)});
}

Key<Settings> energy_window_section() {
  using S = EnergyWindowSettings;
  return section<Settings>(
      "energy_window", &Settings::energy_window,
      Keys<S>{real("low_keV", &S::low_keV), real("high_keV", &S::high_keV)},
      [](Reader& r, const std::string& p, const S& e, const Settings&) {
        r.require(e.low_keV <= e.high_keV, Reader::join(p, "high_keV"), "must be >= low_keV",
                  e.high_keV);
      });
}

// The window is checked in ticks of the scanner already read.
Key<Settings> coincidence_section() {
  using S = CoincidenceSettings;
  using D = DelayedSettings;
  return section<Settings>(
      "coincidence", &Settings::coincidence,
      Keys<S>{real("window_ps", &S::window_ps, kPositive),
              choice("window_edge", &S::window_edge, kWindowEdgeNames),
              choice("window_mode", &S::window_mode, kWindowModeNames),
              choice("policy", &S::policy, kPolicyNames),
              integer("min_sector_difference", &S::min_sector_difference, 0, 128),
              section("delayed", &S::delayed,
                      Keys<D>{boolean("enabled", &D::enabled), real("offset_ps", &D::offset_ps)}),
              real("time_resolution_ps", &S::time_resolution_ps, kNonNegative)},
      [](Reader& r, const std::string& p, const S& c, const Settings& s) {
        const ScannerSettings& scanner = s.scanner;
        const std::string offset_key = Reader::join(p, "delayed.offset_ps");
        if (c.window_ps > 0 && scanner.tick_ps > 0) {
          const double w_ticks = std::round(c.window_ps / scanner.tick_ps);
          r.require(w_ticks >= 1, Reader::join(p, "window_ps"),
                    "must be at least one tick (scanner.tick_ps)", c.window_ps);
          const double reach = std::round((c.delayed.offset_ps + c.window_ps) / scanner.tick_ps);
          r.require(reach < 2147483647.0, offset_key,
                    "offset + window must fit a 32-bit tick difference", c.delayed.offset_ps);
        }
        r.require(c.delayed.offset_ps > c.window_ps, offset_key,
                  "must exceed coincidence.window_ps", c.delayed.offset_ps);
        r.require(c.min_sector_difference <= scanner.bdm_transaxial / 2,
                  Reader::join(p, "min_sector_difference"),
                  "must be <= scanner.bdm_transaxial / 2", c.min_sector_difference);
      });
}

Key<Settings> stream_section() {
  using S = StreamSettings;
  return section<Settings>(
      "stream", &Settings::stream,
      Keys<S>{real("max_disorder_ps", &S::max_disorder_ps, kNonNegative),
              real("source_idle_ms", &S::source_idle_ms, kPositive),
              real("max_future_ps", &S::max_future_ps, kPositive),
              real("max_slice_ms", &S::max_slice_ms, kPositive),
              real("reset_confirm_ms", &S::reset_confirm_ms, kNonNegative),
              integer("max_slice_frames", &S::max_slice_frames, 1, 1ull << 30),
              integer("max_pending_frames", &S::max_pending_frames, 1, 1ull << 32),
              integer("max_carry_singles", &S::max_carry_singles, 1, 1ull << 30),
              integer("max_records_per_single", &S::max_records_per_single, 1, 64),
              real("max_lag_ms", &S::max_lag_ms,
                   {"must be >= 0 (0: off)", [](double v) { return v >= 0; }}),
              real("lag_stage_fraction", &S::lag_stage_fraction,
                   {"must be in [0, 1] (0: off)", [](double v) { return v >= 0 && v <= 1; }})},
      [](Reader& r, const std::string& p, const S& st, const Settings&) {
        r.require(st.max_pending_frames >= st.max_slice_frames,
                  Reader::join(p, "max_pending_frames"), "must be >= stream.max_slice_frames",
                  st.max_pending_frames);
      });
}

// input.endpoints: a list of address:port, each parsed.
void read_endpoints(Reader& r, const YAML::Node& n, const std::string& p, const char* k,
                    InputSettings& in) {
  std::vector<std::string> endpoints;
  if (!r.strings(n, p, k, endpoints)) return;
  const std::string key = Reader::join(p, k);
  r.require(!endpoints.empty(), key, "must name at least one address:port", "an empty list");
  in.endpoints.clear();
  for (std::size_t i = 0; i < endpoints.size(); ++i) {
    std::string why;
    if (const auto e = parse_udp_endpoint(endpoints[i], &why))
      in.endpoints.push_back(*e);
    else
      r.fail(key + "[" + std::to_string(i) + "]", why + ", got '" + endpoints[i] + "'");
  }
}

// input.allowed_sources: a list of IPv4 networks.
void read_networks(Reader& r, const YAML::Node& n, const std::string& p, const char* k,
                   InputSettings& in) {
  std::vector<std::string> networks;
  if (!r.strings(n, p, k, networks)) return;
  const std::string key = Reader::join(p, k);
  in.allowed_sources.clear();
  for (std::size_t i = 0; i < networks.size(); ++i) {
    if (const auto net = parse_ipv4_network(networks[i]))
      in.allowed_sources.push_back(*net);
    else
      r.fail(key + "[" + std::to_string(i) + "]",
             "must be an IPv4 network a.b.c.d/bits, got '" + networks[i] + "'");
  }
}

Key<Settings> input_section() {
  using S = InputSettings;
  return section<Settings>(
      "input", &Settings::input,
      Keys<S>{custom<S>("endpoints", read_endpoints),
              choice("framing", &S::framing, kFramingNames),
              custom<S>("allowed_sources", read_networks),
              integer("receive_buffer_bytes", &S::receive_buffer_bytes, 4096, kU64Max),
              real("flush_ms", &S::flush_ms, kPositive),
              integer("receiver_threads", &S::receiver_threads, 1, 64),
              integer("ring_chunk_bytes", &S::ring_chunk_bytes, 65536, 1ull << 32),
              integer("ring_chunks", &S::ring_chunks, 2, 1u << 20),
              real("shed_high_fraction", &S::shed_high_fraction,
                   {"must be in (0, 1] (1: shed only when the ring is full)",
                    [](double v) { return v > 0 && v <= 1; }}),
              real("shed_low_fraction", &S::shed_low_fraction),
              real("loss_dead_fraction", &S::loss_dead_fraction,
                   {"must be in [0, 1] (0: a socket's losses stay its boards')",
                    [](double v) { return v >= 0 && v <= 1; }})},
      [](Reader& r, const std::string& p, const S& in, const Settings&) {
        r.require(in.shed_low_fraction >= 0 && in.shed_low_fraction < in.shed_high_fraction,
                  Reader::join(p, "shed_low_fraction"),
                  "must be >= 0 and below input.shed_high_fraction", in.shed_low_fraction);
      });
}

Key<OutputSettings> zmq_section(const std::filesystem::path& base_dir) {
  using S = ZmqSettings;
  return custom<OutputSettings>(
      "zmq", [base_dir](Reader& r, const YAML::Node& n, const std::string& op, const char* k,
                        OutputSettings& o) {
        std::string secret, clients;  // as written: both or neither
        const std::string p = read_section(
            r, n, op, k,
            Keys<S>{text("endpoint", &S::endpoint), integer("send_hwm", &S::send_hwm, 0, 1 << 30),
                    integer("message_buffer_bytes", &S::message_buffer_bytes, 0, 1LL << 40),
                    path("curve_secret_key_file", &S::curve_secret_key_file, base_dir, &secret),
                    path("curve_client_keys_file", &S::curve_client_keys_file, base_dir, &clients),
                    integer("held_bytes_max", &S::held_bytes_max, 0, 1LL << 40)},
            o.zmq);
        r.require(!o.zmq.endpoint.empty(), Reader::join(p, "endpoint"), "must not be empty", "''");
        r.require(secret.empty() == clients.empty(), Reader::join(p, "curve_client_keys_file"),
                  "must be set together with output.zmq.curve_secret_key_file",
                  "'" + clients + "'");
      });
}

// output.file and output.raw: files in a directory, rotated by size.
template <class RotatedFiles>
Key<OutputSettings> rotated_files_section(const char* name, RotatedFiles OutputSettings::*member,
                                          const std::filesystem::path& base_dir) {
  using S = RotatedFiles;
  Keys<S> keys{boolean("enabled", &S::enabled), path("directory", &S::directory, base_dir),
               integer("rotate_bytes", &S::rotate_bytes, 1 << 20, kU64Max)};
  if constexpr (requires { &S::singles; })  // output.file only
    keys.push_back(boolean("singles", &S::singles));
  return section(name, member, std::move(keys));
}

Key<OutputSettings> histograms_section() {
  using S = HistogramSettings;
  return section("histograms", &OutputSettings::histograms,
                 Keys<S>{boolean("enabled", &S::enabled),
                         real("interval_ms", &S::interval_ms, kAtLeast10),
                         integer("energy_bins", &S::energy_bins, 1, 65536),
                         real("energy_max_keV", &S::energy_max_keV, kPositive),
                         integer("raw_bins", &S::raw_bins, 1, 65536),
                         integer("raw_bin_adc", &S::raw_bin_adc, 1, 65536),
                         integer("rate_bins", &S::rate_bins, 1, 1 << 20),
                         real("rate_bin_ms", &S::rate_bin_ms, kAtLeastMicro)});
}

Key<OutputSettings> image_section() {
  using S = ImageSettings;
  return section(
      "image", &OutputSettings::image,
      Keys<S>{boolean("enabled", &S::enabled), real("interval_ms", &S::interval_ms, kAtLeast10),
              real("voxel_mm", &S::voxel_mm,
                   {"must be in [0.1, 100]", [](double v) { return v >= 0.1 && v <= 100; }}),
              integer("dim_x", &S::dim_x, 1, 1024), integer("dim_y", &S::dim_y, 1, 1024),
              integer("dim_z", &S::dim_z, 1, 1024), real("window_s", &S::window_s, kPositive),
              boolean("subtract_delayed", &S::subtract_delayed),
              real("trace_bin_ms", &S::trace_bin_ms, kAtLeastMicro),
              integer("trace_bins", &S::trace_bins, 1, 1 << 22),
              real("depth_fraction", &S::depth_fraction, kFraction)},
      [](Reader& r, const std::string& p, const S& is, const OutputSettings&) {
        r.require(std::uint64_t{is.dim_x} * is.dim_y * is.dim_z <= (1u << 24),
                  p + ".dim_x * dim_y * dim_z", "must be <= 16777216 voxels",
                  std::uint64_t{is.dim_x} * is.dim_y * is.dim_z);
      });
}

Key<OutputSettings> metrics_section() {
  using S = MetricsSettings;
  return section("metrics", &OutputSettings::metrics, Keys<S>{text("listen", &S::listen)},
                 [](Reader& r, const std::string& p, const S& m, const OutputSettings&) {
                   if (m.listen.empty()) return;
                   const auto colon = m.listen.rfind(':');
                   unsigned port = 0;
                   const char* b = m.listen.data() + (colon == std::string::npos ? 0 : colon + 1);
                   const char* e = m.listen.data() + m.listen.size();
                   const auto [ptr, ec] = std::from_chars(b, e, port);
                   r.require(colon != std::string::npos && colon > 0 && ec == std::errc() &&
                                 ptr == e && port >= 1 && port <= 65535,
                             Reader::join(p, "listen"),
                             "must be host:port (e.g. 127.0.0.1:9105) or empty",
                             "'" + m.listen + "'");
                 });
}

Key<OutputSettings> control_section() {
  using S = ControlSettings;
  return section("control", &OutputSettings::control, Keys<S>{text("endpoint", &S::endpoint)},
                 [](Reader& r, const std::string& p, const S& c, const OutputSettings& o) {
                   const std::string& ep = c.endpoint;
                   const std::string key = Reader::join(p, "endpoint");
                   r.require(ep.empty() || ep.starts_with("ipc://") || ep.starts_with("tcp://"),
                             key, "must be empty (off), ipc://PATH or tcp://ADDRESS:PORT",
                             "'" + ep + "'");
                   r.require(ep.empty() || ep != o.zmq.endpoint, key,
                             "must differ from output.zmq.endpoint", "'" + ep + "'");
                 });
}

Key<Settings> output_section(const std::filesystem::path& base_dir) {
  using S = OutputSettings;
  return section<Settings>(
      "output", &Settings::output,
      Keys<S>{zmq_section(base_dir), rotated_files_section("file", &S::file, base_dir),
              real("rates_interval_ms", &S::rates_interval_ms, kAtLeast10), histograms_section(),
              image_section(),
              section("singles", &S::singles,
                      Keys<SinglesOutputSettings>{
                          boolean("enabled", &SinglesOutputSettings::enabled)}),
              rotated_files_section("raw", &S::raw, base_dir), metrics_section(),
              control_section(),
              section("catalogue", &S::catalogue,
                      Keys<CatalogueSettings>{
                          path("path", &CatalogueSettings::path, base_dir)})});
}

// alarms: thresholds on the rates document (docs/operations.md, "Alarms").
Key<Settings> alarms_section() {
  using S = AlarmSettings;
  return section<Settings>(
      "alarms", &Settings::alarms,
      Keys<S>{real("max_losses_per_s", &S::max_losses_per_s, kNonNegative),
              real("min_live_fraction", &S::min_live_fraction, kFraction),
              real("board_min_singles_per_s", &S::board_min_singles_per_s, kNonNegative),
              real("board_max_singles_per_s", &S::board_max_singles_per_s, kNonNegative),
              real("board_min_temperature_degC", &S::board_min_temperature_degC),
              real("board_max_temperature_degC", &S::board_max_temperature_degC),
              integer("max_hot_crystals", &S::max_hot_crystals, 0, 1u << 30),
              integer("max_dead_crystals", &S::max_dead_crystals, 0, 1u << 30),
              real("hot_crystal_factor", &S::hot_crystal_factor,
                   {"must be > 1", [](double v) { return v > 1; }}),
              boolean("lagging_board", &S::lagging_board)},
      [](Reader& r, const std::string& p, const S& a, const Settings&) {
        r.require(a.board_max_singles_per_s == 0 ||
                      a.board_max_singles_per_s > a.board_min_singles_per_s,
                  Reader::join(p, "board_max_singles_per_s"),
                  "must be 0 (off) or > board_min_singles_per_s", a.board_max_singles_per_s);
        r.require(a.board_max_temperature_degC > a.board_min_temperature_degC,
                  Reader::join(p, "board_max_temperature_degC"),
                  "must be > board_min_temperature_degC", a.board_max_temperature_degC);
      });
}

Key<Settings> log_section() {
  using S = LogSettings;
  return section<Settings>(
      "log", &Settings::log, Keys<S>{text("level", &S::level)},
      [](Reader& r, const std::string& p, const S& lg, const Settings&) {
        const char* levels[] = {"trace", "debug", "info", "warn", "error", "critical", "off"};
        bool ok = false;
        for (const char* l : levels) ok = ok || lg.level == l;
        r.require(ok, Reader::join(p, "level"),
                  "must be one of trace, debug, info, warn, error, critical, off",
                  "'" + lg.level + "'");
      });
}

Key<Settings> cpus_section() {
  using S = CpuSettings;
  return section<Settings>(
      "cpus", &Settings::cpus,
      Keys<S>{text("receivers", &S::receivers), text("worker", &S::worker),
              text("backend", &S::backend)},
      [](Reader& r, const std::string& p, const S& c, const Settings&) {
        std::vector<int> cpus;
        for (const auto& [key, list] : {std::pair("receivers", &c.receivers),
                                        std::pair("worker", &c.worker),
                                        std::pair("backend", &c.backend)})
          r.require(parse_cpu_list(*list, cpus), Reader::join(p, key),
                    "must be a CPU list such as 8-11,14 (empty: anywhere)", "'" + *list + "'");
      });
}

Settings parse_node(const YAML::Node& root, const std::filesystem::path& base_dir) {
  Reader r;
  Settings s;
  if (root && !root.IsNull() && !root.IsMap())
    throw SettingsError(std::string("the configuration must be a map of sections, got ") +
                        node_kind(root));
  const YAML::Node top = root && root.IsMap() ? root : YAML::Node(YAML::NodeType::Map);
  const Keys<Settings> keys{
      scanner_section(),
      calibration_section(base_dir),
      frame_section(),
      energy_window_section(),
      coincidence_section(),
      stream_section(),
      input_section(),
      output_section(base_dir),
      alarms_section(),
      choice("backend", &Settings::backend, kBackendNames),
      integer("backend_threads", &Settings::backend_threads, 0, kMaxBackendThreads),
      cpus_section(),
      log_section()};
  r.check_keys(top, "", names(keys));
  read_keys(r, top, "", keys, s);

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

// The typed settings of DESIGN section 9: one struct, units in the names, a default for every
// key but the calibration paths. Loaded from YAML by load_settings(); every refusal names the
// key's path and the reason.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/coincidence_modes.h"
#include "core/net_address.h"
#include "proto/datagram.h"

namespace petdaq {

// A refused configuration: what() is "<key.path>: <reason>" (or several such lines).
class SettingsError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ScannerSettings {
  std::uint32_t bdm_transaxial = 12;
  std::uint32_t bdm_axial = 2;
  std::uint32_t du_transaxial = 2;
  std::uint32_t du_axial = 2;
  std::uint32_t crystal_transaxial = 13;
  std::uint32_t crystal_axial = 13;
  std::uint32_t position_size = 256;
  double tick_ps = 15.625;
  // Physical dimensions (used by the simulator and for documentation).
  double ring_radius_mm = 80.0;
  double crystal_pitch_transaxial_mm = 1.6;
  double crystal_pitch_axial_mm = 1.6;
  double crystal_depth_mm = 10.0;
  double du_gap_mm = 0.4;   // between neighbouring DUs on a board
  double bdm_gap_mm = 1.0;  // between neighbouring boards (axially)

  bool operator==(const ScannerSettings&) const = default;
};

struct CalibrationSettings {
  std::filesystem::path position_lut;       // required
  std::filesystem::path energy_correction;  // required
  std::uint32_t energy_bin_width = 10;      // ADC units per table bin
  std::filesystem::path time_offsets;       // optional; empty = none
  std::filesystem::path dead_time;          // optional dead-time table (YAML); empty = none

  bool operator==(const CalibrationSettings&) const = default;
};

struct FrameSettings {
  bool check_markers = true;
  std::uint8_t head_marker = 0xA;
  std::uint8_t tail_marker = 0x5;

  bool operator==(const FrameSettings&) const = default;
};

struct EnergyWindowSettings {
  double low_keV = 350.0;
  double high_keV = 650.0;

  bool operator==(const EnergyWindowSettings&) const = default;
};

// The names the configuration gives each value (and to_string() returns), written once.
template <class E, std::size_t N>
using EnumNames = std::array<std::pair<std::string_view, E>, N>;
inline constexpr EnumNames<WindowEdge, 2> kWindowEdgeNames = {{
    {"closed", WindowEdge::closed},
    {"half_open", WindowEdge::half_open},
}};
inline constexpr EnumNames<WindowMode, 2> kWindowModeNames = {{
    {"first_open", WindowMode::first_open},
    {"every_single", WindowMode::every_single},
}};
inline constexpr EnumNames<Policy, 6> kPolicyNames = {{
    {"kill_multiples", Policy::kill_multiples},
    {"take_all_goods", Policy::take_all_goods},
    {"take_winner_of_goods", Policy::take_winner_of_goods},
    {"take_winner_if_good", Policy::take_winner_if_good},
    {"take_winner_if_all_good", Policy::take_winner_if_all_good},
    {"kill_all_if_multiple_goods", Policy::kill_all_if_multiple_goods},
}};
inline constexpr EnumNames<Framing, 2> kFramingNames = {{
    {"raw", Framing::raw},
    {"sequenced", Framing::sequenced},
}};

struct DelayedSettings {
  bool enabled = true;
  double offset_ps = 100'000.0;

  bool operator==(const DelayedSettings&) const = default;
};

struct CoincidenceSettings {
  double window_ps = 4'000.0;
  WindowEdge window_edge = WindowEdge::closed;
  WindowMode window_mode = WindowMode::first_open;
  Policy policy = Policy::kill_multiples;
  std::uint32_t min_sector_difference = 0;
  DelayedSettings delayed;
  double time_resolution_ps = 500.0;  // coincidence time resolution, FWHM (randoms estimates)

  bool operator==(const CoincidenceSettings&) const = default;
};

struct StreamSettings {
  double max_disorder_ps = 2'000'000.0;     // 2 µs of per-source disorder
  double source_idle_ms = 200.0;            // wall clock
  double max_future_ps = 10'000'000'000.0;  // 10 ms ahead of the horizon is a time jump
  double max_slice_ms = 5.0;                // wall clock: a slice at least this often
  double reset_confirm_ms = 20.0;           // wall clock a clock reset must last (core/slicer.h)
  std::uint64_t max_slice_frames = 4u << 20;     // new frames in one slice
  std::uint64_t max_pending_frames = 16u << 20;  // frames waiting for the horizon
  std::uint64_t max_carry_singles = 1u << 20;    // carry-over a backend keeps between slices
  std::uint32_t max_records_per_single = 2;      // sizes the record buffers of a slice
  // A lagging source (DESIGN section 6): one whose latest time is this far behind the
  // leading live sources' (data time; 0: never by time), or the source holding the horizon
  // while the frames waiting for it fill this share of max_pending_frames (0: never by room).
  double max_lag_ms = 100.0;
  double lag_stage_fraction = 0.5;

  bool operator==(const StreamSettings&) const = default;
};

struct InputSettings {
  std::vector<UdpEndpoint> endpoints = {{0x7F000001u, 5600}};  // 127.0.0.1:5600
  Framing framing = Framing::raw;
  std::vector<Ipv4Network> allowed_sources = {{0x7F000000u, 0xFF000000u}};  // 127.0.0.0/8
  std::uint64_t receive_buffer_bytes = 64u << 20;
  double flush_ms = 2.0;
  std::uint32_t receiver_threads = 1;
  std::uint64_t ring_chunk_bytes = 1u << 20;
  std::uint32_t ring_chunks = 256;
  // Overload (DESIGN section 6): above shed_high_fraction of the ring's chunks in use the
  // worker sheds whole intervals of acquisition time, until below shed_low_fraction.
  double shed_high_fraction = 0.5;
  double shed_low_fraction = 0.25;
  // Losses at a socket (DESIGN section 6): datagrams a receiver lost make that stretch of
  // time dead for every board while such dead time stays within this share of the
  // acquisition time (a budget of up to one second's share); past it, and with 0, a loss
  // stays its socket's boards' (stream.loss_unconverted).
  double loss_dead_fraction = 0.01;

  bool operator==(const InputSettings&) const = default;
};

struct ZmqSettings {
  std::string endpoint = "tcp://127.0.0.1:5556";
  std::int32_t send_hwm = 1000;
  // Memory for the bodies of published messages, taken at start-up (core/message_arena.h):
  // bodies are sent without a copy inside libzmq and without an allocation. 0: off.
  std::uint64_t message_buffer_bytes = 128u << 20;
  // Bodies outside that memory (histograms; batches when it is full) that libzmq may hold
  // for subscribers, all together; a message that would pass it is refused (counted).
  std::uint64_t held_bytes_max = 512u << 20;
  // CURVE authentication and encryption (both set, or neither): the server's secret key
  // (Z85, 40 characters) and the public keys of the clients allowed to subscribe (Z85, one
  // per line; a line that starts with '#' is a comment).
  std::filesystem::path curve_secret_key_file;
  std::filesystem::path curve_client_keys_file;

  bool operator==(const ZmqSettings&) const = default;
};

struct FileSinkSettings {
  bool enabled = false;
  std::filesystem::path directory = "/var/lib/petdaq";
  std::uint64_t rotate_bytes = 1ull << 30;
  bool singles = false;  // the slices' singles too, as kind-3 messages (DESIGN section 7)

  bool operator==(const FileSinkSettings&) const = default;
};

// Live histograms (DESIGN section 7, "Histograms"), accumulated by the backend.
struct HistogramSettings {
  bool enabled = false;
  double interval_ms = 2000.0;      // the `histograms` message is published this often
  std::uint32_t energy_bins = 200;  // per-crystal corrected-energy spectrum
  double energy_max_keV = 1000.0;   // upper edge of the last bin (which also holds above)
  std::uint32_t raw_bins = 256;     // per-crystal raw-ADC spectrum
  std::uint32_t raw_bin_adc = 64;   // ADC units per raw bin
  std::uint32_t rate_bins = 36000;  // count-rate curves over the run (an hour)
  double rate_bin_ms = 100.0;       // acquisition time per rate bin

  bool operator==(const HistogramSettings&) const = default;
};

// Raw capture: the frames as received, in frame files (DESIGN section 2) rotated by size.
struct RawCaptureSettings {
  bool enabled = false;
  std::filesystem::path directory = "/var/lib/petdaq";
  std::uint64_t rotate_bytes = 1ull << 30;

  bool operator==(const RawCaptureSettings&) const = default;
};

struct SinglesOutputSettings {
  bool enabled = false;  // the opt-in `singles` topic (kind 3)

  bool operator==(const SinglesOutputSettings&) const = default;
};

// Live TOF back-positioned image (DESIGN section 7, "Image"), accumulated by the backend.
struct ImageSettings {
  bool enabled = false;
  double interval_ms = 1000.0;      // the `image` message is published this often
  double voxel_mm = 2.0;            // cubic voxels
  std::uint32_t dim_x = 64;         // voxels across the field of view, centred on the axis
  std::uint32_t dim_y = 64;
  std::uint32_t dim_z = 64;
  double window_s = 10.0;           // the sliding-window image: the last window_s of acquisition
  bool subtract_delayed = false;    // delayed-window records add with weight -1
  double trace_bin_ms = 50.0;       // centroid trace: one sample per this much acquisition time
  std::uint32_t trace_bins = 72000; // trace samples over the run (an hour at 50 ms)
  // Where on each crystal a line of response ends, as a fraction of the crystal's depth from
  // its front face: 0.5 is its centre (the exports' crystal position).
  double depth_fraction = 0.5;

  bool operator==(const ImageSettings&) const = default;
};

// Prometheus metrics (docs/operations.md): served over HTTP at `listen` (host:port), off
// when empty.
struct MetricsSettings {
  std::string listen;

  bool operator==(const MetricsSettings&) const = default;
};

// Acquisition control (docs/operations.md): a ZeroMQ REP socket petdaq-ctl talks to, with
// the PUB socket's CURVE keys where those are set; off when empty.
struct ControlSettings {
  std::string endpoint;

  bool operator==(const ControlSettings&) const = default;
};

// The run catalogue (docs/operations.md): an SQLite database of acquisitions, runs and
// files; off when empty.
struct CatalogueSettings {
  std::filesystem::path path;

  bool operator==(const CatalogueSettings&) const = default;
};

struct OutputSettings {
  // The backend hands out each slice's singles: for the `singles` topic or the file sink.
  bool wants_singles() const { return singles.enabled || (file.enabled && file.singles); }

  ZmqSettings zmq;
  FileSinkSettings file;
  double rates_interval_ms = 1000.0;
  HistogramSettings histograms;
  ImageSettings image;
  SinglesOutputSettings singles;
  RawCaptureSettings raw;
  MetricsSettings metrics;
  ControlSettings control;
  CatalogueSettings catalogue;

  bool operator==(const OutputSettings&) const = default;
};

enum class BackendKind : std::uint8_t { auto_select, cpu, gpu };

// The backend names of the `backend` key and of --backend, written once.
inline constexpr EnumNames<BackendKind, 3> kBackendNames = {{
    {"auto", BackendKind::auto_select},
    {"cpu", BackendKind::cpu},
    {"gpu", BackendKind::gpu},
}};

// The most threads backend_threads (and petdaq-offline --threads) may ask for.
inline constexpr std::uint32_t kMaxBackendThreads = 256;

// The backend of that name (kBackendNames), or none.
std::optional<BackendKind> parse_backend(std::string_view name);

// Alarm thresholds (docs/operations.md, "Alarms"), evaluated on every `rates` document.
struct AlarmSettings {
  double max_losses_per_s = 0;          // data lost (the loss counters) per s above this
  double min_live_fraction = 0.99;      // scanner live fraction of the interval below this
  double board_min_singles_per_s = 0;   // a board's singles rate below this (0: off)
  double board_max_singles_per_s = 0;   // a board's singles rate above this (0: off)
  double board_min_temperature_degC = -40;  // a board's temperature outside
  double board_max_temperature_degC = 50;   //   [min, max] (boards that report one)
  std::uint32_t max_hot_crystals = 0;   // hot crystals (histograms on) above this
  std::uint32_t max_dead_crystals = 0;  // dead crystals (histograms on) above this
  double hot_crystal_factor = 3.0;      // hot: above this x its DU's median; dead: below 1/this
  bool lagging_board = true;            // a board declared lagging

  bool operator==(const AlarmSettings&) const = default;
};

// Where petdaqd's busy threads run (DESIGN section 9, `cpus`), in taskset's syntax ("8-11,14");
// empty: wherever the kernel puts them. Receiver thread k runs on the k-th CPU of
// `receivers`, the worker on `worker`'s CPUs, the CPU backend's pool thread k (the worker is
// its first thread) on the k-th CPU of `backend`; a list shorter than its threads wraps.
// petdaq-offline ignores the section.
struct CpuSettings {
  std::string receivers;
  std::string worker;
  std::string backend;

  bool operator==(const CpuSettings&) const = default;
};

struct LogSettings {
  std::string level = "info";  // trace, debug, info, warn, error

  bool operator==(const LogSettings&) const = default;
};

struct Settings {
  ScannerSettings scanner;
  CalibrationSettings calibration;
  FrameSettings frame;
  EnergyWindowSettings energy_window;
  CoincidenceSettings coincidence;
  StreamSettings stream;
  InputSettings input;
  OutputSettings output;
  AlarmSettings alarms;
  BackendKind backend = BackendKind::auto_select;
  // Threads of the CPU backend, the calling one included (core/parallel_engine.h); 0 =
  // the cores left after the receivers and the worker. The GPU backend ignores it.
  std::uint32_t backend_threads = 0;
  CpuSettings cpus;
  LogSettings log;
  std::filesystem::path source_file;  // the file these settings came from (if any)

  bool operator==(const Settings&) const = default;
};

// Empty when `file` is a regular file or does not exist (opening it then says why);
// otherwise why it cannot be read as one ("is a directory", "is a device or pipe").
std::string not_a_regular_file(const std::filesystem::path& file);

// Reads and validates a YAML file. Relative calibration paths are made relative to the file.
Settings load_settings(const std::filesystem::path& file);
// The same from YAML text; relative paths are relative to `base_dir`.
Settings parse_settings(const std::string& yaml_text, const std::filesystem::path& base_dir);

// Duration in ps to ticks, rounded to the nearest tick (DESIGN section 5).
std::uint64_t ps_to_ticks(double ps, double tick_ps);

// stream.max_future_ps in ticks: a frame this far from the horizon is a time jump (the
// slicer, the worker's warning), and a chunk spans at most half of it (core/chunk_summary.h).
std::uint64_t max_future_ticks(const Settings& s);

// A stable hash of the settings that shape the coincidence output (for the .plm header).
std::uint64_t output_settings_hash(const Settings& s);

const char* to_string(WindowEdge);
const char* to_string(WindowMode);
const char* to_string(Policy);
const char* to_string(BackendKind);
const char* to_string(Framing);

}  // namespace petdaq

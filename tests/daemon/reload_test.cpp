// plan_reload (daemon/reload.cpp) and the settings hash (core/settings.cpp) against every
// settings field.
#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>

#include "core/settings.h"
#include "daemon/reload.h"

namespace petdaq::daemon {
namespace {

TEST(ReloadPlan, WindowsAndPolicyAreLiveTheRestNeedsARestart) {
  Settings running;
  Settings reread = running;
  reread.coincidence.window_ps = 3000;
  reread.coincidence.policy = Policy::take_all_goods;
  reread.energy_window.low_keV = 400;
  reread.input.ring_chunks = 8;
  reread.stream.max_slice_ms = running.stream.max_slice_ms + 2;
  const ReloadPlan p = plan_reload(running, reread);
  EXPECT_EQ(p.live, (std::vector<std::string>{"energy_window", "coincidence"}));
  EXPECT_EQ(p.restart, (std::vector<std::string>{"stream", "input"}));
  EXPECT_EQ(p.applied.coincidence.window_ps, 3000);
  EXPECT_EQ(p.applied.energy_window.low_keV, 400);
  EXPECT_EQ(p.applied.input.ring_chunks, running.input.ring_chunks);
  EXPECT_EQ(p.applied.stream.max_slice_ms, running.stream.max_slice_ms);
  EXPECT_TRUE(plan_reload(running, running).live.empty());
  EXPECT_TRUE(plan_reload(running, running).restart.empty());
}

// ---- every field is covered ----
//
// A field added to a settings struct must be noticed by plan_reload (through the structs'
// defaulted operator==) and must be decided on for output_settings_hash (a hand-written list,
// because only the fields that shape the coincidence output belong in it). kFields below
// names every member of every settings struct with what changing it must do; the test counts
// each struct's members (the number of initialisers its aggregate initialisation takes) and
// fails when that differs from the rows kFields has for it. So a new field fails this test
// until it gets a row, and its row then checks that changing the field reaches plan_reload's
// section and changes the hash exactly when the row says the field shapes the output.

// Converts to any member type; declared only, it is used in unevaluated operands.
struct AnyMember {
  template <class T>
  operator T() const;
};

template <class T, class... A>
concept brace_initialisable = requires(A... a) { T{a...}; };

// The members of aggregate T. AnyMember initialises a member of any type directly (no brace
// elision into a nested struct), so nested structs count as one member each.
template <class T, class... A>
constexpr std::size_t member_count() {
  if constexpr (brace_initialisable<T, A..., AnyMember>) {
    return member_count<T, A..., AnyMember>();
  } else {
    return sizeof...(A);
  }
}

// A different value of any settings field type.
template <class T>
void change(T& v) {
  if constexpr (std::is_same_v<T, bool>) {
    v = !v;
  } else if constexpr (std::is_enum_v<T>) {
    v = static_cast<T>(static_cast<std::underlying_type_t<T>>(v) ^ 1);
  } else if constexpr (std::is_arithmetic_v<T>) {
    v = static_cast<T>(v + 1);
  } else if constexpr (std::is_same_v<T, std::vector<UdpEndpoint>>) {
    v.push_back({0x0A000001u, 1});  // 10.0.0.1:1
  } else if constexpr (std::is_same_v<T, std::vector<Ipv4Network>>) {
    v.push_back({0x0A000000u, 0xFF000000u});  // 10.0.0.0/8
  } else {
    v = std::filesystem::path(v).string() + "x";  // std::string, std::filesystem::path
  }
}

struct Field {
  std::string_view owner;    // the struct that declares the member
  std::string_view path;     // what is changed (for a nested struct: one field inside it)
  void (*mutate)(Settings&);
  std::string_view section;  // plan_reload's section that must report it ("": none)
  bool hashed;               // part of output_settings_hash
};

#define PETDAQ_FIELD(owner, path, section, hashed) \
  Field { #owner, #path, [](Settings& s) { change(s.path); }, section, hashed }

const Field kFields[] = {
    PETDAQ_FIELD(Settings, scanner.bdm_axial, "scanner", true),
    PETDAQ_FIELD(Settings, calibration.energy_bin_width, "calibration", true),
    PETDAQ_FIELD(Settings, frame.check_markers, "frame", true),
    PETDAQ_FIELD(Settings, energy_window.low_keV, "energy_window", true),
    PETDAQ_FIELD(Settings, coincidence.window_ps, "coincidence", true),
    PETDAQ_FIELD(Settings, stream.max_slice_ms, "stream", false),
    PETDAQ_FIELD(Settings, input.flush_ms, "input", false),
    PETDAQ_FIELD(Settings, output.rates_interval_ms, "output", false),
    PETDAQ_FIELD(Settings, alarms.max_losses_per_s, "alarms", false),
    PETDAQ_FIELD(Settings, backend, "backend", false),
    PETDAQ_FIELD(Settings, backend_threads, "backend_threads", false),
    PETDAQ_FIELD(Settings, cpus.worker, "cpus", false),
    PETDAQ_FIELD(Settings, log.level, "log", false),
    PETDAQ_FIELD(Settings, source_file, "", false),  // where they came from, not a setting

    PETDAQ_FIELD(ScannerSettings, scanner.bdm_transaxial, "scanner", true),
    PETDAQ_FIELD(ScannerSettings, scanner.bdm_axial, "scanner", true),
    PETDAQ_FIELD(ScannerSettings, scanner.du_transaxial, "scanner", true),
    PETDAQ_FIELD(ScannerSettings, scanner.du_axial, "scanner", true),
    PETDAQ_FIELD(ScannerSettings, scanner.crystal_transaxial, "scanner", true),
    PETDAQ_FIELD(ScannerSettings, scanner.crystal_axial, "scanner", true),
    PETDAQ_FIELD(ScannerSettings, scanner.position_size, "scanner", true),
    PETDAQ_FIELD(ScannerSettings, scanner.tick_ps, "scanner", true),
    PETDAQ_FIELD(ScannerSettings, scanner.ring_radius_mm, "scanner", false),
    PETDAQ_FIELD(ScannerSettings, scanner.crystal_pitch_transaxial_mm, "scanner", false),
    PETDAQ_FIELD(ScannerSettings, scanner.crystal_pitch_axial_mm, "scanner", false),
    PETDAQ_FIELD(ScannerSettings, scanner.crystal_depth_mm, "scanner", false),
    PETDAQ_FIELD(ScannerSettings, scanner.du_gap_mm, "scanner", false),
    PETDAQ_FIELD(ScannerSettings, scanner.bdm_gap_mm, "scanner", false),

    PETDAQ_FIELD(CalibrationSettings, calibration.position_lut, "calibration", false),
    PETDAQ_FIELD(CalibrationSettings, calibration.energy_correction, "calibration", false),
    PETDAQ_FIELD(CalibrationSettings, calibration.energy_bin_width, "calibration", true),
    PETDAQ_FIELD(CalibrationSettings, calibration.time_offsets, "calibration", false),
    PETDAQ_FIELD(CalibrationSettings, calibration.dead_time, "calibration", false),

    PETDAQ_FIELD(CpuSettings, cpus.receivers, "cpus", false),
    PETDAQ_FIELD(CpuSettings, cpus.worker, "cpus", false),
    PETDAQ_FIELD(CpuSettings, cpus.backend, "cpus", false),

    PETDAQ_FIELD(FrameSettings, frame.check_markers, "frame", true),
    PETDAQ_FIELD(FrameSettings, frame.head_marker, "frame", true),
    PETDAQ_FIELD(FrameSettings, frame.tail_marker, "frame", true),

    PETDAQ_FIELD(EnergyWindowSettings, energy_window.low_keV, "energy_window", true),
    PETDAQ_FIELD(EnergyWindowSettings, energy_window.high_keV, "energy_window", true),

    PETDAQ_FIELD(CoincidenceSettings, coincidence.window_ps, "coincidence", true),
    PETDAQ_FIELD(CoincidenceSettings, coincidence.window_edge, "coincidence", true),
    PETDAQ_FIELD(CoincidenceSettings, coincidence.window_mode, "coincidence", true),
    PETDAQ_FIELD(CoincidenceSettings, coincidence.policy, "coincidence", true),
    PETDAQ_FIELD(CoincidenceSettings, coincidence.min_sector_difference, "coincidence", true),
    PETDAQ_FIELD(CoincidenceSettings, coincidence.delayed.enabled, "coincidence", true),
    PETDAQ_FIELD(CoincidenceSettings, coincidence.time_resolution_ps, "coincidence", false),

    PETDAQ_FIELD(DelayedSettings, coincidence.delayed.enabled, "coincidence", true),
    PETDAQ_FIELD(DelayedSettings, coincidence.delayed.offset_ps, "coincidence", true),

    PETDAQ_FIELD(StreamSettings, stream.max_disorder_ps, "stream", false),
    PETDAQ_FIELD(StreamSettings, stream.source_idle_ms, "stream", false),
    PETDAQ_FIELD(StreamSettings, stream.max_future_ps, "stream", false),
    PETDAQ_FIELD(StreamSettings, stream.max_slice_ms, "stream", false),
    PETDAQ_FIELD(StreamSettings, stream.reset_confirm_ms, "stream", false),
    PETDAQ_FIELD(StreamSettings, stream.max_slice_frames, "stream", false),
    PETDAQ_FIELD(StreamSettings, stream.max_pending_frames, "stream", false),
    PETDAQ_FIELD(StreamSettings, stream.max_carry_singles, "stream", false),
    PETDAQ_FIELD(StreamSettings, stream.max_records_per_single, "stream", false),
    PETDAQ_FIELD(StreamSettings, stream.max_lag_ms, "stream", false),
    PETDAQ_FIELD(StreamSettings, stream.lag_stage_fraction, "stream", false),

    PETDAQ_FIELD(InputSettings, input.endpoints, "input", false),
    PETDAQ_FIELD(InputSettings, input.framing, "input", false),
    PETDAQ_FIELD(InputSettings, input.allowed_sources, "input", false),
    PETDAQ_FIELD(InputSettings, input.receive_buffer_bytes, "input", false),
    PETDAQ_FIELD(InputSettings, input.flush_ms, "input", false),
    PETDAQ_FIELD(InputSettings, input.receiver_threads, "input", false),
    PETDAQ_FIELD(InputSettings, input.ring_chunk_bytes, "input", false),
    PETDAQ_FIELD(InputSettings, input.ring_chunks, "input", false),
    PETDAQ_FIELD(InputSettings, input.shed_high_fraction, "input", false),
    PETDAQ_FIELD(InputSettings, input.shed_low_fraction, "input", false),
    PETDAQ_FIELD(InputSettings, input.loss_dead_fraction, "input", false),

    PETDAQ_FIELD(OutputSettings, output.zmq.send_hwm, "output", false),
    PETDAQ_FIELD(OutputSettings, output.file.enabled, "output", false),
    PETDAQ_FIELD(OutputSettings, output.rates_interval_ms, "output", false),
    PETDAQ_FIELD(OutputSettings, output.histograms.enabled, "output", false),
    PETDAQ_FIELD(OutputSettings, output.image.enabled, "output", false),
    PETDAQ_FIELD(OutputSettings, output.singles.enabled, "output", false),
    PETDAQ_FIELD(OutputSettings, output.raw.enabled, "output", false),
    PETDAQ_FIELD(OutputSettings, output.metrics.listen, "output", false),
    PETDAQ_FIELD(OutputSettings, output.control.endpoint, "output", false),
    PETDAQ_FIELD(OutputSettings, output.catalogue.path, "output", false),

    PETDAQ_FIELD(ZmqSettings, output.zmq.endpoint, "output", false),
    PETDAQ_FIELD(ZmqSettings, output.zmq.send_hwm, "output", false),
    PETDAQ_FIELD(ZmqSettings, output.zmq.message_buffer_bytes, "output", false),
    PETDAQ_FIELD(ZmqSettings, output.zmq.held_bytes_max, "output", false),
    PETDAQ_FIELD(ZmqSettings, output.zmq.curve_secret_key_file, "output", false),
    PETDAQ_FIELD(ZmqSettings, output.zmq.curve_client_keys_file, "output", false),

    PETDAQ_FIELD(FileSinkSettings, output.file.enabled, "output", false),
    PETDAQ_FIELD(FileSinkSettings, output.file.directory, "output", false),
    PETDAQ_FIELD(FileSinkSettings, output.file.rotate_bytes, "output", false),
    PETDAQ_FIELD(FileSinkSettings, output.file.singles, "output", false),

    PETDAQ_FIELD(HistogramSettings, output.histograms.enabled, "output", false),
    PETDAQ_FIELD(HistogramSettings, output.histograms.interval_ms, "output", false),
    PETDAQ_FIELD(HistogramSettings, output.histograms.energy_bins, "output", false),
    PETDAQ_FIELD(HistogramSettings, output.histograms.energy_max_keV, "output", false),
    PETDAQ_FIELD(HistogramSettings, output.histograms.raw_bins, "output", false),
    PETDAQ_FIELD(HistogramSettings, output.histograms.raw_bin_adc, "output", false),
    PETDAQ_FIELD(HistogramSettings, output.histograms.rate_bins, "output", false),
    PETDAQ_FIELD(HistogramSettings, output.histograms.rate_bin_ms, "output", false),

    PETDAQ_FIELD(ImageSettings, output.image.enabled, "output", false),
    PETDAQ_FIELD(ImageSettings, output.image.interval_ms, "output", false),
    PETDAQ_FIELD(ImageSettings, output.image.voxel_mm, "output", false),
    PETDAQ_FIELD(ImageSettings, output.image.dim_x, "output", false),
    PETDAQ_FIELD(ImageSettings, output.image.dim_y, "output", false),
    PETDAQ_FIELD(ImageSettings, output.image.dim_z, "output", false),
    PETDAQ_FIELD(ImageSettings, output.image.window_s, "output", false),
    PETDAQ_FIELD(ImageSettings, output.image.subtract_delayed, "output", false),
    PETDAQ_FIELD(ImageSettings, output.image.trace_bin_ms, "output", false),
    PETDAQ_FIELD(ImageSettings, output.image.trace_bins, "output", false),
    PETDAQ_FIELD(ImageSettings, output.image.depth_fraction, "output", false),

    PETDAQ_FIELD(SinglesOutputSettings, output.singles.enabled, "output", false),

    PETDAQ_FIELD(RawCaptureSettings, output.raw.enabled, "output", false),
    PETDAQ_FIELD(RawCaptureSettings, output.raw.directory, "output", false),
    PETDAQ_FIELD(RawCaptureSettings, output.raw.rotate_bytes, "output", false),

    PETDAQ_FIELD(MetricsSettings, output.metrics.listen, "output", false),
    PETDAQ_FIELD(ControlSettings, output.control.endpoint, "output", false),
    PETDAQ_FIELD(CatalogueSettings, output.catalogue.path, "output", false),

    PETDAQ_FIELD(AlarmSettings, alarms.max_losses_per_s, "alarms", false),
    PETDAQ_FIELD(AlarmSettings, alarms.min_live_fraction, "alarms", false),
    PETDAQ_FIELD(AlarmSettings, alarms.board_min_singles_per_s, "alarms", false),
    PETDAQ_FIELD(AlarmSettings, alarms.board_max_singles_per_s, "alarms", false),
    PETDAQ_FIELD(AlarmSettings, alarms.board_min_temperature_degC, "alarms", false),
    PETDAQ_FIELD(AlarmSettings, alarms.board_max_temperature_degC, "alarms", false),
    PETDAQ_FIELD(AlarmSettings, alarms.max_hot_crystals, "alarms", false),
    PETDAQ_FIELD(AlarmSettings, alarms.max_dead_crystals, "alarms", false),
    PETDAQ_FIELD(AlarmSettings, alarms.hot_crystal_factor, "alarms", false),
    PETDAQ_FIELD(AlarmSettings, alarms.lagging_board, "alarms", false),

    PETDAQ_FIELD(LogSettings, log.level, "log", false),
};

#undef PETDAQ_FIELD

std::size_t rows_for(std::string_view owner) {
  std::size_t n = 0;
  for (const Field& f : kFields) n += f.owner == owner;
  return n;
}

TEST(ReloadPlan, EverySettingsStructHasARowPerMember) {
#define PETDAQ_COUNT(T) EXPECT_EQ(rows_for(#T), member_count<T>()) << #T " needs a row per member in kFields"
  PETDAQ_COUNT(Settings);
  PETDAQ_COUNT(ScannerSettings);
  PETDAQ_COUNT(CalibrationSettings);
  PETDAQ_COUNT(FrameSettings);
  PETDAQ_COUNT(EnergyWindowSettings);
  PETDAQ_COUNT(CoincidenceSettings);
  PETDAQ_COUNT(DelayedSettings);
  PETDAQ_COUNT(StreamSettings);
  PETDAQ_COUNT(InputSettings);
  PETDAQ_COUNT(OutputSettings);
  PETDAQ_COUNT(ZmqSettings);
  PETDAQ_COUNT(FileSinkSettings);
  PETDAQ_COUNT(HistogramSettings);
  PETDAQ_COUNT(ImageSettings);
  PETDAQ_COUNT(SinglesOutputSettings);
  PETDAQ_COUNT(RawCaptureSettings);
  PETDAQ_COUNT(MetricsSettings);
  PETDAQ_COUNT(ControlSettings);
  PETDAQ_COUNT(CatalogueSettings);
  PETDAQ_COUNT(AlarmSettings);
  PETDAQ_COUNT(CpuSettings);
  PETDAQ_COUNT(LogSettings);
#undef PETDAQ_COUNT
}

TEST(ReloadPlan, EveryFieldReachesItsSectionAndTheHashWhereItShapesTheOutput) {
  const Settings running;
  const std::uint64_t running_hash = output_settings_hash(running);
  for (const Field& f : kFields) {
    SCOPED_TRACE(std::string(f.owner) + ": " + std::string(f.path));
    Settings reread = running;
    f.mutate(reread);
    EXPECT_NE(reread, running);
    const ReloadPlan p = plan_reload(running, reread);
    const bool live = f.section == "energy_window" || f.section == "coincidence";
    const bool instant = f.section == "alarms";  // applied at once, the run going on
    const std::vector<std::string> want{std::string(f.section)};
    const std::vector<std::string> none;
    EXPECT_EQ(p.live, live ? want : none);
    EXPECT_EQ(p.instant, instant ? want : none);
    EXPECT_EQ(p.restart, live || instant || f.section.empty() ? none : want);
    EXPECT_EQ(p.applied, live || instant ? reread : running);  // only live sections are applied
    EXPECT_EQ(output_settings_hash(reread) != running_hash, f.hashed);
  }
}

}  // namespace
}  // namespace petdaq::daemon

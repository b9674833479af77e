// Settings from YAML (DESIGN section 9): the default file, every kind of refusal with its
// message, path resolution, ps -> ticks.
#include "core/settings.h"
#include "core/thread_placement.h"
#include "tests/support/scratch_dir.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>
#include <unistd.h>

namespace petdaq {
namespace {

namespace fs = std::filesystem;

// The message parse_settings refuses `yaml` with ("" when it is accepted).
std::string refusal(const std::string& yaml) {
  try {
    parse_settings(yaml, "/etc/petdaq");
  } catch (const SettingsError& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(Settings, DefaultFileEqualsTheStructDefaults) {
  const fs::path file = fs::path(PETDAQ_SOURCE_DIR) / "config" / "petdaq.yaml";
  const Settings s = load_settings(file);
  const Settings d;
  EXPECT_EQ(s.source_file, file);

  EXPECT_EQ(s.scanner.bdm_transaxial, d.scanner.bdm_transaxial);
  EXPECT_EQ(s.scanner.bdm_axial, d.scanner.bdm_axial);
  EXPECT_EQ(s.scanner.du_transaxial, d.scanner.du_transaxial);
  EXPECT_EQ(s.scanner.du_axial, d.scanner.du_axial);
  EXPECT_EQ(s.scanner.crystal_transaxial, d.scanner.crystal_transaxial);
  EXPECT_EQ(s.scanner.crystal_axial, d.scanner.crystal_axial);
  EXPECT_EQ(s.scanner.position_size, d.scanner.position_size);
  EXPECT_EQ(s.scanner.tick_ps, d.scanner.tick_ps);
  EXPECT_EQ(s.scanner.ring_radius_mm, d.scanner.ring_radius_mm);
  EXPECT_EQ(s.scanner.crystal_pitch_transaxial_mm, d.scanner.crystal_pitch_transaxial_mm);
  EXPECT_EQ(s.scanner.crystal_pitch_axial_mm, d.scanner.crystal_pitch_axial_mm);
  EXPECT_EQ(s.scanner.crystal_depth_mm, d.scanner.crystal_depth_mm);
  EXPECT_EQ(s.scanner.du_gap_mm, d.scanner.du_gap_mm);
  EXPECT_EQ(s.scanner.bdm_gap_mm, d.scanner.bdm_gap_mm);

  // The calibration paths have no default; the file names the usual place.
  EXPECT_FALSE(s.calibration.position_lut.empty());
  EXPECT_FALSE(s.calibration.energy_correction.empty());
  EXPECT_TRUE(s.calibration.position_lut.is_absolute());
  EXPECT_EQ(s.calibration.energy_bin_width, d.calibration.energy_bin_width);
  EXPECT_EQ(s.calibration.time_offsets, d.calibration.time_offsets);

  EXPECT_EQ(s.frame.check_markers, d.frame.check_markers);
  EXPECT_EQ(s.frame.head_marker, d.frame.head_marker);
  EXPECT_EQ(s.frame.tail_marker, d.frame.tail_marker);
  EXPECT_EQ(s.energy_window.low_keV, d.energy_window.low_keV);
  EXPECT_EQ(s.energy_window.high_keV, d.energy_window.high_keV);

  EXPECT_EQ(s.coincidence.window_ps, d.coincidence.window_ps);
  EXPECT_EQ(s.coincidence.window_edge, d.coincidence.window_edge);
  EXPECT_EQ(s.coincidence.window_mode, d.coincidence.window_mode);
  EXPECT_EQ(s.coincidence.policy, d.coincidence.policy);
  EXPECT_EQ(s.coincidence.min_sector_difference, d.coincidence.min_sector_difference);
  EXPECT_EQ(s.coincidence.delayed.enabled, d.coincidence.delayed.enabled);
  EXPECT_EQ(s.coincidence.delayed.offset_ps, d.coincidence.delayed.offset_ps);
  EXPECT_EQ(s.coincidence.time_resolution_ps, d.coincidence.time_resolution_ps);

  EXPECT_EQ(s.stream.max_disorder_ps, d.stream.max_disorder_ps);
  EXPECT_EQ(s.stream.source_idle_ms, d.stream.source_idle_ms);
  EXPECT_EQ(s.stream.max_future_ps, d.stream.max_future_ps);
  EXPECT_EQ(s.stream.max_slice_ms, d.stream.max_slice_ms);
  EXPECT_EQ(s.stream.max_slice_frames, d.stream.max_slice_frames);
  EXPECT_EQ(s.stream.max_pending_frames, d.stream.max_pending_frames);
  EXPECT_EQ(s.stream.max_carry_singles, d.stream.max_carry_singles);
  EXPECT_EQ(s.stream.max_records_per_single, d.stream.max_records_per_single);

  EXPECT_EQ(s.input.endpoints, d.input.endpoints);
  EXPECT_EQ(s.input.framing, d.input.framing);
  EXPECT_EQ(s.input.allowed_sources, d.input.allowed_sources);
  EXPECT_EQ(s.input.receive_buffer_bytes, d.input.receive_buffer_bytes);
  EXPECT_EQ(s.input.flush_ms, d.input.flush_ms);
  EXPECT_EQ(s.input.receiver_threads, d.input.receiver_threads);
  EXPECT_EQ(s.input.ring_chunk_bytes, d.input.ring_chunk_bytes);
  EXPECT_EQ(s.input.ring_chunks, d.input.ring_chunks);

  EXPECT_EQ(s.output.zmq.endpoint, d.output.zmq.endpoint);
  EXPECT_EQ(s.output.zmq.send_hwm, d.output.zmq.send_hwm);
  EXPECT_EQ(s.output.file.enabled, d.output.file.enabled);
  EXPECT_EQ(s.output.file.directory, d.output.file.directory);
  EXPECT_EQ(s.output.file.rotate_bytes, d.output.file.rotate_bytes);
  EXPECT_EQ(s.output.file.singles, d.output.file.singles);
  EXPECT_EQ(s.output.rates_interval_ms, d.output.rates_interval_ms);
  const auto& h = s.output.histograms;
  const auto& dh = d.output.histograms;
  EXPECT_EQ(std::tie(h.enabled, h.interval_ms, h.energy_bins, h.energy_max_keV, h.raw_bins,
                     h.raw_bin_adc, h.rate_bins, h.rate_bin_ms),
            std::tie(dh.enabled, dh.interval_ms, dh.energy_bins, dh.energy_max_keV, dh.raw_bins,
                     dh.raw_bin_adc, dh.rate_bins, dh.rate_bin_ms));
  EXPECT_EQ(s.output.singles.enabled, d.output.singles.enabled);
  EXPECT_EQ(s.output.raw.enabled, d.output.raw.enabled);
  EXPECT_EQ(s.output.raw.directory, d.output.raw.directory);
  EXPECT_EQ(s.output.raw.rotate_bytes, d.output.raw.rotate_bytes);
  EXPECT_EQ(s.backend, d.backend);
  EXPECT_EQ(s.backend_threads, d.backend_threads);
  EXPECT_EQ(s.log.level, d.log.level);

  // Every key the file sets is the default, so the output-shaping hash agrees too.
  EXPECT_EQ(output_settings_hash(s), output_settings_hash(d));
}

// --config given a directory says so, instead of reading it as an empty document.
TEST(Settings, ADirectoryIsRefusedAsSuch) {
  test::ScratchDir scratch;
  const std::filesystem::path& dir = scratch.path();
  try {
    load_settings(dir);
    ADD_FAILURE() << "a directory was loaded";
  } catch (const SettingsError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("is a directory"), std::string::npos) << what;
    EXPECT_EQ(what.find("position_lut"), std::string::npos) << what;
  }
}

TEST(Settings, EmptyDocumentGivesTheDefaults) {
  const Settings s = parse_settings("", "/etc/petdaq");
  EXPECT_EQ(s.coincidence.window_ps, 4000.0);
  EXPECT_TRUE(s.calibration.position_lut.empty());
  EXPECT_EQ(output_settings_hash(s), output_settings_hash(Settings{}));
}

TEST(Settings, ValuesAreRead) {
  const Settings s = parse_settings(R"(
scanner: {bdm_transaxial: 4, crystal_axial: 7, tick_ps: 1}
frame: {check_markers: false, head_marker: 0x3, tail_marker: 12}
energy_window: {low_keV: 400.5, high_keV: 600}
coincidence:
  window_ps: 3000
  window_edge: half_open
  window_mode: every_single
  policy: take_winner_of_goods
  min_sector_difference: 2
  delayed: {enabled: false, offset_ps: 50000}
input: {endpoints: ["0.0.0.0:6000", "10.1.2.3:6001"], framing: sequenced, allowed_sources: ["10.0.0.0/8", "192.168.1.7"]}
backend: cpu
backend_threads: 6
log: {level: debug}
)",
                                    "/etc/petdaq");
  EXPECT_EQ(s.scanner.bdm_transaxial, 4u);
  EXPECT_EQ(s.scanner.crystal_axial, 7u);
  EXPECT_EQ(s.scanner.tick_ps, 1.0);
  EXPECT_FALSE(s.frame.check_markers);
  EXPECT_EQ(s.frame.head_marker, 3);
  EXPECT_EQ(s.frame.tail_marker, 12);
  EXPECT_EQ(s.energy_window.low_keV, 400.5);
  EXPECT_EQ(s.coincidence.window_ps, 3000.0);
  EXPECT_EQ(s.coincidence.window_edge, WindowEdge::half_open);
  EXPECT_EQ(s.coincidence.window_mode, WindowMode::every_single);
  EXPECT_EQ(s.coincidence.policy, Policy::take_winner_of_goods);
  EXPECT_EQ(s.coincidence.min_sector_difference, 2u);
  EXPECT_FALSE(s.coincidence.delayed.enabled);
  EXPECT_EQ(s.coincidence.delayed.offset_ps, 50000.0);
  EXPECT_EQ(s.input.endpoints.size(), 2u);
  EXPECT_EQ(s.input.endpoints[1].to_string(), "10.1.2.3:6001");
  EXPECT_EQ(s.input.endpoints[1], (UdpEndpoint{0x0A010203u, 6001}));
  EXPECT_EQ(s.input.framing, Framing::sequenced);
  EXPECT_EQ(s.input.allowed_sources[0].to_string(), "10.0.0.0/8");
  EXPECT_EQ(s.input.allowed_sources[1], (Ipv4Network{0xC0A80107u, 0xFFFFFFFFu}));
  EXPECT_EQ(s.backend, BackendKind::cpu);
  EXPECT_EQ(s.backend_threads, 6u);
  EXPECT_EQ(s.log.level, "debug");
  EXPECT_NE(output_settings_hash(s), output_settings_hash(Settings{}));
}

TEST(Settings, CpuListsAreTasksetLists) {
  std::vector<int> cpus;
  ASSERT_TRUE(parse_cpu_list("8-11,14,2", cpus));
  EXPECT_EQ(cpus, (std::vector<int>{8, 9, 10, 11, 14, 2}));
  ASSERT_TRUE(parse_cpu_list("", cpus));
  EXPECT_TRUE(cpus.empty());
  for (const char* bad : {"8-", "-3", "3-1", "a", "1,,2", "1,", "1 2", "99999999", "1-2-3"})
    EXPECT_FALSE(parse_cpu_list(bad, cpus)) << bad;
  const Settings s = parse_settings("cpus:\n  receivers: 8-11\n  worker: \"12\"\n  backend: 13-15\n", ".");
  EXPECT_EQ(s.cpus.receivers, "8-11");
  EXPECT_EQ(s.cpus.worker, "12");
  EXPECT_EQ(cpu_list(s.cpus.backend), (std::vector<int>{13, 14, 15}));
  EXPECT_EQ(refusal("cpus:\n  backend: 13-\n"),
            "cpus.backend: must be a CPU list such as 8-11,14 (empty: anywhere), got '13-'");
  EXPECT_EQ(refusal("cpus:\n  workers: 1\n").substr(0, 28), "cpus.workers: unknown key (k");
}

TEST(Settings, UnknownKeyTopLevel) {
  const std::string e = refusal("scanner: {}\ncoincidense: {window_ps: 3000}\n");
  EXPECT_TRUE(contains(e, "coincidense: unknown key (known here: scanner, calibration")) << e;
}

TEST(Settings, UnknownKeyNested) {
  std::string e = refusal("coincidence:\n  window_pss: 3000\n");
  EXPECT_TRUE(contains(e, "coincidence.window_pss: unknown key (known here: window_ps,")) << e;
  e = refusal("coincidence:\n  delayed:\n    offset: 3000\n");
  EXPECT_TRUE(contains(e, "coincidence.delayed.offset: unknown key (known here: enabled, offset_ps)"))
      << e;
  e = refusal("output:\n  zmq:\n    hwm: 5\n");
  EXPECT_TRUE(contains(e, "output.zmq.hwm: unknown key")) << e;
}

TEST(Settings, WrongTypes) {
  EXPECT_EQ(refusal("scanner:\n  bdm_axial: {a: 1}\n"),
            "scanner.bdm_axial: must be a single value, got a map");
  EXPECT_EQ(refusal("coincidence:\n  window_ps: {ps: 1}\n"),
            "coincidence.window_ps: must be a single value, got a map");
  EXPECT_EQ(refusal("scanner:\n  bdm_axial: two\n"),
            "scanner.bdm_axial: must be an integer, got 'two'");
  EXPECT_EQ(refusal("scanner:\n  bdm_axial: 2.5\n"),
            "scanner.bdm_axial: must be an integer, got '2.5'");
  EXPECT_EQ(refusal("coincidence:\n  window_ps: wide\n"),
            "coincidence.window_ps: must be a finite number, got 'wide'");
  EXPECT_EQ(refusal("coincidence:\n  window_ps: .nan\n"),
            "coincidence.window_ps: must be a finite number, got '.nan'");
  EXPECT_EQ(refusal("backend: [cpu, gpu]\n"), "backend: must be a single value, got a list");
  EXPECT_EQ(refusal("energy_window:\n  low_keV: [1, 2]\n"),
            "energy_window.low_keV: must be a single value, got a list");
  EXPECT_EQ(refusal("frame:\n  check_markers: maybe\n"),
            "frame.check_markers: must be true or false, got 'maybe'");
  EXPECT_EQ(refusal("scanner: 5\n"), "scanner: must be a map, got a scalar");
  EXPECT_EQ(refusal("input:\n  endpoints: 127.0.0.1:5600\n"),
            "input.endpoints: must be a list, got a scalar");
  EXPECT_EQ(refusal("input:\n  endpoints: [[a]]\n"),
            "input.endpoints[0]: must be a string, got a list");
  EXPECT_TRUE(contains(refusal("- a\n- b\n"), "must be a map of sections, got a list"));
}

TEST(Settings, OutOfRange) {
  EXPECT_EQ(refusal("coincidence:\n  window_ps: -5\n"), "coincidence.window_ps: must be > 0, got -5");
  EXPECT_EQ(refusal("scanner:\n  bdm_axial: 0\n"), "scanner.bdm_axial: must be in [1, 256], got 0");
  EXPECT_EQ(refusal("scanner:\n  position_size: 257\n"),
            "scanner.position_size: must be in [1, 256], got 257");
  EXPECT_EQ(refusal("frame:\n  head_marker: 0x10\n"),
            "frame.head_marker: must be in [0, 15], got 0x10");
  EXPECT_EQ(refusal("scanner:\n  bdm_axial: -1\n"), "scanner.bdm_axial: must be in [1, 256], got -1");
  // Past 64 bits and past the signed 64-bit range: both are integers, too large.
  EXPECT_EQ(refusal("scanner:\n  bdm_axial: 99999999999999999999\n"),
            "scanner.bdm_axial: out of range, got 99999999999999999999");
  EXPECT_EQ(refusal("scanner:\n  bdm_axial: 9223372036854775808\n"),
            "scanner.bdm_axial: out of range, got 9223372036854775808");
  EXPECT_TRUE(contains(refusal("scanner: {crystal_transaxial: 16, crystal_axial: 16}\n"),
                       "scanner.crystal_axial: crystal_transaxial * crystal_axial must be <= 255"));
  EXPECT_TRUE(contains(refusal("scanner: {du_transaxial: 4, du_axial: 5}\n"),
                       "scanner.du_axial: du_transaxial * du_axial must be <= 16"));
  EXPECT_EQ(refusal("energy_window: {low_keV: 600, high_keV: 500}\n"),
            "energy_window.high_keV: must be >= low_keV, got 500");
  EXPECT_EQ(refusal("coincidence: {min_sector_difference: 7}\n"),
            "coincidence.min_sector_difference: must be <= scanner.bdm_transaxial / 2, got 7");
  EXPECT_EQ(refusal("coincidence: {time_resolution_ps: -1}\n"),
            "coincidence.time_resolution_ps: must be >= 0, got -1");
  EXPECT_EQ(refusal("backend_threads: 257\n"), "backend_threads: must be in [0, 256], got 257");
  EXPECT_EQ(refusal("backend_threads: -1\n"), "backend_threads: must be in [0, 256], got -1");
  EXPECT_EQ(refusal("backend_threads: many\n"), "backend_threads: must be an integer, got 'many'");
}

TEST(Settings, HistogramAndSinglesKeys) {
  const Settings s = parse_settings(
      "output:\n  histograms: {enabled: true, interval_ms: 500, energy_bins: 128,"
      " energy_max_keV: 800, raw_bins: 512, raw_bin_adc: 16, rate_bins: 60, rate_bin_ms: 250}\n"
      "  singles: {enabled: true}\n",
      ".");
  EXPECT_TRUE(s.output.histograms.enabled);
  EXPECT_EQ(s.output.histograms.interval_ms, 500);
  EXPECT_EQ(s.output.histograms.energy_bins, 128u);
  EXPECT_EQ(s.output.histograms.energy_max_keV, 800);
  EXPECT_EQ(s.output.histograms.raw_bins, 512u);
  EXPECT_EQ(s.output.histograms.raw_bin_adc, 16u);
  EXPECT_EQ(s.output.histograms.rate_bins, 60u);
  EXPECT_EQ(s.output.histograms.rate_bin_ms, 250);
  EXPECT_TRUE(s.output.singles.enabled);
  EXPECT_EQ(refusal("output:\n  histograms: {energy_bins: 0}\n"),
            "output.histograms.energy_bins: must be in [1, 65536], got 0");
  EXPECT_EQ(refusal("output:\n  histograms: {interval_ms: 5}\n"),
            "output.histograms.interval_ms: must be >= 10, got 5");
  EXPECT_EQ(refusal("output:\n  histograms: {energy_max_keV: 0}\n"),
            "output.histograms.energy_max_keV: must be > 0, got 0");
  EXPECT_TRUE(contains(refusal("output:\n  histograms: {bins: 3}\n"),
                       "output.histograms.bins: unknown key"));
  EXPECT_EQ(refusal("output:\n  singles: {enabled: maybe}\n"),
            "output.singles.enabled: must be true or false, got 'maybe'");
  EXPECT_EQ(refusal("output:\n  raw: {rotate_bytes: 1000}\n"),
            "output.raw.rotate_bytes: must be in [1048576, 9223372036854775807], got 1000");
  EXPECT_EQ(parse_settings("output:\n  raw: {enabled: true, directory: cap}\n", "/data").output.raw.directory,
            std::filesystem::path("/data/cap"));
  // output.file.singles: the file sink's singles (and the backend hands them out); the raw
  // capture has no such key.
  const Settings fs = parse_settings("output:\n  file: {enabled: true, singles: true}\n", "/data");
  EXPECT_TRUE(fs.output.file.singles);
  EXPECT_FALSE(fs.output.singles.enabled);
  EXPECT_TRUE(fs.output.wants_singles());
  EXPECT_FALSE(parse_settings("output:\n  file: {enabled: false, singles: true}\n", "/data")
                   .output.wants_singles());
  EXPECT_TRUE(contains(refusal("output:\n  raw: {singles: true}\n"), "output.raw.singles: unknown key"));
}

TEST(Settings, KeysMustBeNames) {
  // A list used as a key is a malformed file, refused like any other, not a crash.
  EXPECT_EQ(refusal("? [a, b]\n: 1\n"), "(top level): keys must be names, got a list as a key");
  EXPECT_EQ(refusal("scanner:\n  ? {x: 1}\n  : 2\n"),
            "scanner: keys must be names, got a map as a key");
}

TEST(Settings, DuplicateKeysAreRefused) {
  EXPECT_EQ(refusal("coincidence:\n  window_ps: 3000\n  window_ps: 5000\n"),
            "coincidence.window_ps: appears more than once");
  EXPECT_EQ(refusal("coincidence: {window_ps: 3000}\ncoincidence: {window_ps: 5000}\n"),
            "coincidence: appears more than once");
}

TEST(Settings, BadEnumValue) {
  EXPECT_EQ(refusal("coincidence:\n  policy: kill_some\n"),
            "coincidence.policy: must be one of kill_multiples, take_all_goods, "
            "take_winner_of_goods, take_winner_if_good, take_winner_if_all_good, "
            "kill_all_if_multiple_goods, got 'kill_some'");
  EXPECT_EQ(refusal("coincidence:\n  window_edge: open\n"),
            "coincidence.window_edge: must be one of closed, half_open, got 'open'");
  EXPECT_EQ(refusal("backend: fpga\n"), "backend: must be one of auto, cpu, gpu, got 'fpga'");
  EXPECT_EQ(refusal("input:\n  framing: framed\n"),
            "input.framing: must be one of raw, sequenced, got 'framed'");
  EXPECT_TRUE(contains(refusal("log: {level: loud}\n"), "log.level: must be one of trace,"));
}

TEST(Settings, BadEndpoint) {
  const char* bad[] = {"127.0.0.1", "127.0.0.1:", "127.0.0.1:0", "127.0.0.1:70000",
                       ":5600", "host:56x0"};
  for (const char* ep : bad) {
    EXPECT_EQ(refusal(std::string("input:\n  endpoints: [\"") + ep + "\"]\n"),
              std::string("input.endpoints[0]: must be address:port with a port in 1..65535, got '") +
                  ep + "'")
        << ep;
  }
  EXPECT_EQ(refusal("input:\n  endpoints: [\"127.0.0.1:5600\", \"x:0\"]\n"),
            "input.endpoints[1]: must be address:port with a port in 1..65535, got 'x:0'");
  EXPECT_EQ(refusal("input:\n  endpoints: []\n"),
            "input.endpoints: must name at least one address:port, got an empty list");
  EXPECT_EQ(refusal("input:\n  endpoints: [\"127.0.0.1:65535\"]\n"), "");
  // The address is an IPv4 literal: no names (a start never waits on DNS), no IPv6.
  const char* bad_address[] = {"x:5600", "no-such-host.invalid:5600", "256.1.1.1:5600",
                               "127.0.0.01:5600", "[::1]:5600", "::1:5600"};
  for (const char* ep : bad_address) {
    EXPECT_EQ(refusal(std::string("input:\n  endpoints: [\"") + ep + "\"]\n"),
              std::string("input.endpoints[0]: must be address:port with an IPv4 address a.b.c.d "
                          "(names are not resolved), got '") + ep + "'")
        << ep;
  }
}

TEST(Settings, BadCidr) {
  const char* bad[] = {"10.0.0.0/33", "10.0.0/8", "256.0.0.0/8", "10.0.0.0/", "ten/8",
                       "10.0.0.0.0/8"};
  for (const char* net : bad) {
    EXPECT_EQ(refusal(std::string("input:\n  allowed_sources: [\"") + net + "\"]\n"),
              std::string("input.allowed_sources[0]: must be an IPv4 network a.b.c.d/bits, got '") +
                  net + "'")
        << net;
  }
  EXPECT_EQ(refusal("input:\n  allowed_sources: [\"0.0.0.0/0\", \"10.0.0.1/32\", \"1.2.3.4\"]\n"), "");
}

TEST(Settings, DelayedOffsetMustExceedTheWindow) {
  EXPECT_EQ(refusal("coincidence: {window_ps: 4000, delayed: {offset_ps: 4000}}\n"),
            "coincidence.delayed.offset_ps: must exceed coincidence.window_ps, got 4000");
  EXPECT_EQ(refusal("coincidence: {window_ps: 4000, delayed: {offset_ps: 3000}}\n"),
            "coincidence.delayed.offset_ps: must exceed coincidence.window_ps, got 3000");
  EXPECT_EQ(refusal("coincidence: {window_ps: 4000, delayed: {offset_ps: 4001}}\n"), "");
}

TEST(Settings, InvalidYamlNamesTheLine) {
  const std::string e = refusal("scanner:\n  bdm_axial: 2\n  tick_ps: [1, 2\nframe: {}\n");
  EXPECT_TRUE(contains(e, "not valid YAML: line ")) << e;
  // yaml-cpp reports the unclosed list where it notices it: line 3 or 4, never line 1.
  EXPECT_TRUE(contains(e, "line 3,") || contains(e, "line 4,")) << e;
  const std::string tab = refusal("scanner:\n\tbdm_axial: 2\n");
  EXPECT_TRUE(contains(tab, "not valid YAML: line 2")) << tab;
}

TEST(Settings, MissingFile) {
  test::ScratchDir dir;
  const fs::path missing = dir.path() / "nope.yaml";
  try {
    load_settings(missing);
    FAIL() << "no exception";
  } catch (const SettingsError& e) {
    const std::string m = e.what();
    EXPECT_TRUE(contains(m, missing.string() + ": cannot open")) << m;
    EXPECT_TRUE(contains(m, "No such file")) << m;
  }
}

TEST(Settings, SeveralErrorsReportedTogether) {
  const std::string e = refusal(R"(
scanner: {bdm_axial: 0, colour: red}
coincidence: {window_ps: -5, policy: none}
backend: fpga
)");
  EXPECT_TRUE(contains(e, "scanner.colour: unknown key")) << e;
  EXPECT_TRUE(contains(e, "scanner.bdm_axial: must be in [1, 256], got 0")) << e;
  EXPECT_TRUE(contains(e, "coincidence.window_ps: must be > 0, got -5")) << e;
  EXPECT_TRUE(contains(e, "coincidence.policy: must be one of")) << e;
  EXPECT_TRUE(contains(e, "backend: must be one of auto, cpu, gpu, got 'fpga'")) << e;
  // One problem per line.
  std::size_t lines = 1;
  for (char c : e) lines += c == '\n';
  EXPECT_EQ(lines, 5u) << e;
}

TEST(Settings, FileErrorsNameTheFile) {
  test::ScratchDir dir;
  const fs::path file = dir.write("bad.yaml", "coincidence: {window_ps: -5}\n");
  try {
    load_settings(file);
    FAIL() << "no exception";
  } catch (const SettingsError& e) {
    EXPECT_EQ(std::string(e.what()), file.string() + ":\ncoincidence.window_ps: must be > 0, got -5");
  }
}

TEST(Settings, RelativeCalibrationPathsAreRelativeToTheFile) {
  test::ScratchDir dir;
  fs::create_directories(dir.path() / "conf");
  const fs::path file = dir.write("conf/petdaq.yaml", R"(
calibration:
  position_lut: tables/lut.npy
  energy_correction: /abs/energy.npy
  time_offsets: ../offsets.npy
)");
  const Settings s = load_settings(file);
  EXPECT_EQ(s.calibration.position_lut, dir.path() / "conf" / "tables" / "lut.npy");
  EXPECT_EQ(s.calibration.energy_correction, fs::path("/abs/energy.npy"));
  EXPECT_EQ(s.calibration.time_offsets, dir.path() / "conf" / ".." / "offsets.npy");

  const Settings t = parse_settings("calibration: {position_lut: lut.npy}\n", "/srv/cal");
  EXPECT_EQ(t.calibration.position_lut, fs::path("/srv/cal/lut.npy"));
  EXPECT_TRUE(t.calibration.time_offsets.empty());
}

TEST(Settings, PsToTicksRoundsToTheNearestTick) {
  const double tick = 15.625;
  EXPECT_EQ(ps_to_ticks(4000, tick), 256u);
  EXPECT_EQ(ps_to_ticks(100000, tick), 6400u);
  EXPECT_EQ(ps_to_ticks(15.625, tick), 1u);
  EXPECT_EQ(ps_to_ticks(7.8, tick), 0u);       // 0.4992 tick
  EXPECT_EQ(ps_to_ticks(7.8125, tick), 1u);    // exactly half a tick rounds up
  EXPECT_EQ(ps_to_ticks(23.43, tick), 1u);     // 1.4995 ticks
  EXPECT_EQ(ps_to_ticks(23.4375, tick), 2u);   // 1.5 ticks
  EXPECT_EQ(ps_to_ticks(4007.8, tick), 256u);  // 256.4992 ticks
  EXPECT_EQ(ps_to_ticks(4007.9, tick), 257u);  // 256.5056 ticks
  EXPECT_EQ(ps_to_ticks(0, tick), 0u);
  EXPECT_EQ(ps_to_ticks(1e13, tick), 640'000'000'000u);
}

TEST(Settings, EnumNames) {
  EXPECT_STREQ(to_string(WindowEdge::half_open), "half_open");
  EXPECT_STREQ(to_string(WindowMode::every_single), "every_single");
  EXPECT_STREQ(to_string(Policy::kill_all_if_multiple_goods), "kill_all_if_multiple_goods");
  EXPECT_STREQ(to_string(BackendKind::auto_select), "auto");
  EXPECT_STREQ(to_string(Framing::sequenced), "sequenced");
}

}  // namespace
}  // namespace petdaq

// A small scanner for tests: 4x1 BDMs, 2x2 DUs per BDM, 4x4 crystals per DU, a 16x16 flood
// map. Writes its calibration tables (.npy) into a fresh temporary folder, loads them the
// way the daemon does, and encodes frames for given (bdm, du, crystal, time, energy). Also
// the batch definition of DESIGN section 5 (convert all, sort, resolve once) that streaming
// output must equal.
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/calibration.h"
#include "core/coincidence.h"
#include "core/convert.h"
#include "core/geometry.h"
#include "core/order.h"
#include "core/settings.h"
#include "proto/frame.h"
#include "proto/records.h"
#include "tests/support/scratch_dir.h"

namespace petdaq::test {

class TestScanner {
 public:
  static constexpr std::uint32_t kPixelsPerCrystal = 4;  // 16 pixels / 4 crystals per side
  static constexpr std::uint32_t kEnergyBins = 100;      // 10 ADC units each: raw 0 .. 999

  // `time_offsets`: also write a per-crystal time offset table (-4 .. +4 ticks).
  explicit TestScanner(bool time_offsets = true) : dir(scratch_.path()) {
    auto& sc = settings.scanner;
    sc.bdm_transaxial = 4;
    sc.bdm_axial = 1;
    sc.du_transaxial = 2;
    sc.du_axial = 2;
    sc.crystal_transaxial = 4;
    sc.crystal_axial = 4;
    sc.position_size = 16;
    sc.tick_ps = 15.625;
    const Geometry g = geometry();

    // Each crystal's label owns a 4x4 block of the flood map; one pixel per DU maps to no
    // crystal (255) so frame.no_crystal can be exercised.
    std::vector<std::uint8_t> lut(std::size_t{g.bdm_count()} * g.du_per_bdm() * 16 * 16);
    for (std::uint32_t bd = 0; bd < g.bdm_count() * g.du_per_bdm(); ++bd)
      for (std::uint32_t y = 0; y < 16; ++y)
        for (std::uint32_t x = 0; x < 16; ++x)
          lut[(std::size_t{bd} * 16 + y) * 16 + x] = static_cast<std::uint8_t>(
              (x == 15 && y == 15) ? 255 : (y / kPixelsPerCrystal) * 4 + x / kPixelsPerCrystal);
    write_npy(dir / "position_lut.npy", {g.bdm_count(), g.du_per_bdm(), 16, 16}, lut);

    // Gains close to 1 that differ by crystal and slightly by bin.
    std::vector<float> gains(std::size_t{g.bdm_count()} * g.du_per_bdm() * g.crystals_per_du() *
                             kEnergyBins);
    for (std::size_t i = 0; i < gains.size(); ++i) {
      const std::size_t crystal = i / kEnergyBins;
      const std::size_t bin = i % kEnergyBins;
      gains[i] = 0.95f + 0.01f * static_cast<float>(crystal % 11) + 0.0001f * static_cast<float>(bin);
    }
    write_npy(dir / "energy_correction.npy",
              {g.bdm_count(), g.du_per_bdm(), g.crystals_per_du(), kEnergyBins}, gains);

    settings.calibration.position_lut = dir / "position_lut.npy";
    settings.calibration.energy_correction = dir / "energy_correction.npy";
    settings.calibration.energy_bin_width = 10;
    if (time_offsets) {
      std::vector<std::int32_t> offsets(g.crystal_count());
      for (std::uint32_t c = 0; c < g.crystal_count(); ++c)
        offsets[c] = static_cast<std::int32_t>(c % 9) - 4;
      write_npy(dir / "time_offsets.npy", {g.crystal_count()}, offsets);
      settings.calibration.time_offsets = dir / "time_offsets.npy";
    }
    settings.energy_window.low_keV = 350.0;
    settings.energy_window.high_keV = 650.0;
    reload();
  }

  TestScanner(const TestScanner&) = delete;
  TestScanner& operator=(const TestScanner&) = delete;

  // Reloads the calibration after the settings' calibration paths changed.
  void reload() { calibration = load_calibration(settings); }

  Geometry geometry() const { return Geometry::from(settings.scanner); }
  std::uint64_t ticks(double ps) const { return ps_to_ticks(ps, settings.scanner.tick_ps); }

  // A good frame of local crystal `crystal` (c = c_trans * crystal_axial + c_axial).
  RawFrame frame(std::uint32_t bdm, std::uint32_t du, std::uint32_t crystal,
                 std::uint64_t time_ticks, std::uint16_t energy_raw) const {
    const Geometry g = geometry();
    const std::uint32_t label = g.label_of_local_crystal(crystal);
    FrameFields f{};
    f.head_marker = settings.frame.head_marker;
    f.tail_marker = settings.frame.tail_marker;
    f.du = static_cast<std::uint8_t>(du);
    f.bdm = static_cast<std::uint8_t>(bdm);
    f.time_ticks = time_ticks;
    f.x = static_cast<std::uint8_t>((label % 4) * kPixelsPerCrystal + 1);
    f.y = static_cast<std::uint8_t>((label / 4) * kPixelsPerCrystal + 2);
    f.energy_raw = energy_raw;
    f.temp_int_degC = 31;
    f.temp_frac_16ths = 4;
    RawFrame out;
    encode_frame(f, out.bytes);
    return out;
  }
  // A frame by global crystal id.
  RawFrame frame_of_crystal(std::uint32_t crystal, std::uint64_t time_ticks,
                            std::uint16_t energy_raw) const {
    const CrystalAddress a = geometry().address_of(crystal);
    return frame(a.bdm, a.du, a.crystal, time_ticks, energy_raw);
  }

  // Writes the settings a YAML config file would hold for this scanner (the keys this
  // fixture sets, plus coincidence and stream), for tools that read a config file.
  std::filesystem::path write_config(const std::string& name = "petdaq.yaml") const {
    const auto& s = settings;
    const std::filesystem::path file = dir / name;
    std::ofstream out(file);
    out.precision(17);
    out << "scanner:\n"
        << "  bdm_transaxial: " << s.scanner.bdm_transaxial << "\n"
        << "  bdm_axial: " << s.scanner.bdm_axial << "\n"
        << "  du_transaxial: " << s.scanner.du_transaxial << "\n"
        << "  du_axial: " << s.scanner.du_axial << "\n"
        << "  crystal_transaxial: " << s.scanner.crystal_transaxial << "\n"
        << "  crystal_axial: " << s.scanner.crystal_axial << "\n"
        << "  position_size: " << s.scanner.position_size << "\n"
        << "  tick_ps: " << s.scanner.tick_ps << "\n"
        << "calibration:\n"
        << "  position_lut: " << s.calibration.position_lut.string() << "\n"
        << "  energy_correction: " << s.calibration.energy_correction.string() << "\n"
        << "  energy_bin_width: " << s.calibration.energy_bin_width << "\n"
        << "  time_offsets: \"" << s.calibration.time_offsets.string() << "\"\n"
        << "energy_window:\n"
        << "  low_keV: " << s.energy_window.low_keV << "\n"
        << "  high_keV: " << s.energy_window.high_keV << "\n"
        << "coincidence:\n"
        << "  window_ps: " << s.coincidence.window_ps << "\n"
        << "  window_edge: " << to_string(s.coincidence.window_edge) << "\n"
        << "  window_mode: " << to_string(s.coincidence.window_mode) << "\n"
        << "  policy: " << to_string(s.coincidence.policy) << "\n"
        << "  min_sector_difference: " << s.coincidence.min_sector_difference << "\n"
        << "  delayed:\n"
        << "    enabled: " << (s.coincidence.delayed.enabled ? "true" : "false") << "\n"
        << "    offset_ps: " << s.coincidence.delayed.offset_ps << "\n"
        << "stream:\n"
        << "  max_disorder_ps: " << s.stream.max_disorder_ps << "\n"
        << "  source_idle_ms: " << s.stream.source_idle_ms << "\n"
        << "  max_future_ps: " << s.stream.max_future_ps << "\n"
        << "  max_slice_ms: " << s.stream.max_slice_ms << "\n"
        << "  max_slice_frames: " << s.stream.max_slice_frames << "\n"
        << "  max_pending_frames: " << s.stream.max_pending_frames << "\n"
        << "  max_carry_singles: " << s.stream.max_carry_singles << "\n"
        << "  max_records_per_single: " << s.stream.max_records_per_single << "\n"
        << "  max_lag_ms: " << s.stream.max_lag_ms << "\n"
        << "  lag_stage_fraction: " << s.stream.lag_stage_fraction << "\n";
    return file;
  }

 private:
  ScratchDir scratch_{"scanner"};  // before `dir`, which names it

 public:
  // The scanner's own scratch folder (tables, configuration files), removed with it.
  const std::filesystem::path dir;
  Settings settings;
  Calibration calibration;
};

// The batch result of DESIGN section 5 over a whole acquisition.
struct BatchResult {
  std::vector<Single> singles;  // sorted
  std::vector<CoincRecord> prompts;
  std::vector<CoincRecord> delayed;
  CoincidenceCounts counts;
  CounterDelta counters;  // frame.* and single.* of the conversion
  std::vector<std::uint64_t> bdm_singles;
  std::vector<std::uint64_t> bdm_energy_rejected;
  std::uint64_t records_overflow = 0;
};

// A scanner of the given shape: BDMs, DUs per BDM and crystals per DU (transaxial, axial)
// and the flood map's size.
inline ScannerSettings scanner_shape(std::uint32_t bdm_t, std::uint32_t bdm_a, std::uint32_t du_t,
                                     std::uint32_t du_a, std::uint32_t c_t, std::uint32_t c_a,
                                     std::uint32_t position_size) {
  ScannerSettings s;
  s.bdm_transaxial = bdm_t;
  s.bdm_axial = bdm_a;
  s.du_transaxial = du_t;
  s.du_axial = du_a;
  s.crystal_transaxial = c_t;
  s.crystal_axial = c_a;
  s.position_size = position_size;
  return s;
}

inline BatchResult batch_process(const Settings& settings, const Calibration& calibration,
                                 const std::vector<RawFrame>& frames) {
  BatchResult r;
  const ConvertTables tables = make_convert_tables(settings, calibration);
  const std::uint32_t bdm_count = tables.geometry.bdm_count();
  r.bdm_singles.assign(bdm_count, 0);
  r.bdm_energy_rejected.assign(bdm_count, 0);
  r.singles.resize(frames.size());
  const std::size_t n = convert_frames(frames.data(), frames.size(), tables, r.singles.data(),
                                       r.counters, r.bdm_singles.data(),
                                       r.bdm_energy_rejected.data());
  r.singles.resize(n);
  std::vector<Single> scratch(n);
  sort_singles(r.singles.data(), n, scratch.data());

  const CoincidenceParams params = CoincidenceParams::from(settings);
  std::vector<CoincRecord> prompt_storage(n * 16 + 16), delayed_storage(n * 16 + 16);
  RecordBuffer prompts{prompt_storage.data(), prompt_storage.size()};
  RecordBuffer delayed{delayed_storage.data(), delayed_storage.size()};
  find_coincidences(r.singles.data(), n, params, 0, true, prompts, delayed, r.counts);
  r.prompts.assign(prompts.data, prompts.data + prompts.size);
  r.delayed.assign(delayed.data, delayed.data + delayed.size);
  r.records_overflow = prompts.overflow + delayed.overflow;
  return r;
}

inline BatchResult batch_process(const TestScanner& scanner, const std::vector<RawFrame>& frames) {
  return batch_process(scanner.settings, scanner.calibration, frames);
}

// A random acquisition: events (one photon, a pair, or three photons close in time) on
// random crystals, some equal times, energies around the photopeak, and a sprinkling of bad
// frames of every kind. Frames in raw-time order.
struct AcquisitionOptions {
  std::size_t events = 2000;
  std::uint64_t start_ticks = 1000;
  std::uint64_t mean_gap_ticks = 300;
  double pair_fraction = 0.6;
  double triple_fraction = 0.05;
  double bad_fraction = 0.02;
  std::uint32_t only_bdms_mask = 0xFFFFFFFF;  // BDMs allowed to send
};

inline std::vector<RawFrame> random_acquisition(const TestScanner& scanner, std::mt19937_64& rng,
                                                const AcquisitionOptions& o = {}) {
  const Geometry g = scanner.geometry();
  std::vector<RawFrame> frames;
  std::uniform_int_distribution<std::uint32_t> any_crystal(0, g.crystal_count() - 1);
  std::exponential_distribution<double> gap(1.0 / static_cast<double>(o.mean_gap_ticks));
  std::normal_distribution<double> energy(510.0, 70.0);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::uniform_int_distribution<std::uint64_t> spread(0, 200);
  std::uint64_t t = o.start_ticks;
  auto pick_crystal = [&] {
    for (;;) {
      const std::uint32_t c = any_crystal(rng);
      if ((o.only_bdms_mask >> g.address_of(c).bdm) & 1u) return c;
    }
  };
  auto pick_energy = [&] {
    return static_cast<std::uint16_t>(std::clamp(energy(rng), 0.0, 1200.0));
  };
  for (std::size_t e = 0; e < o.events; ++e) {
    // One event in eight shares the previous one's time exactly.
    if (u(rng) >= 0.125) t += static_cast<std::uint64_t>(gap(rng));
    const double kind = u(rng);
    const int photons = kind < o.triple_fraction ? 3 : kind < o.triple_fraction + o.pair_fraction ? 2 : 1;
    for (int p = 0; p < photons; ++p) {
      const std::uint64_t time = t + (p == 0 ? 0 : spread(rng));
      RawFrame f = scanner.frame_of_crystal(pick_crystal(), time, pick_energy());
      if (u(rng) < o.bad_fraction) {
        switch (static_cast<int>(u(rng) * 5)) {
          case 0: f.bytes[frame_offset::head_du] = static_cast<std::uint8_t>(0x30 | (f.bytes[0] & 0x0F)); break;
          case 1: f.bytes[frame_offset::head_du] = static_cast<std::uint8_t>((f.bytes[0] & 0xF0) | 0x0C); break;
          case 2: f.bytes[frame_offset::x] = 200; break;
          case 3: f.bytes[frame_offset::x] = 15; f.bytes[frame_offset::y] = 15; break;
          default: f.bytes[frame_offset::bdm] = 77; break;
        }
      }
      frames.push_back(f);
    }
  }
  std::stable_sort(frames.begin(), frames.end(), [](const RawFrame& a, const RawFrame& b) {
    return frame_time(a.bytes) < frame_time(b.bytes);
  });
  return frames;
}

// The order frames might arrive in: each frame delayed by a random amount below
// `max_disorder_ticks`, so any frame arrives after every frame more than that much older.
inline std::vector<RawFrame> arrival_order(const std::vector<RawFrame>& frames,
                                           std::uint64_t max_disorder_ticks, std::mt19937_64& rng) {
  std::uniform_int_distribution<std::uint64_t> delay(0, max_disorder_ticks > 0 ? max_disorder_ticks - 1 : 0);
  std::vector<std::pair<std::uint64_t, std::size_t>> keys(frames.size());
  for (std::size_t i = 0; i < frames.size(); ++i)
    keys[i] = {frame_time(frames[i].bytes) + delay(rng), i};
  std::sort(keys.begin(), keys.end());
  std::vector<RawFrame> out(frames.size());
  for (std::size_t i = 0; i < frames.size(); ++i) out[i] = frames[keys[i].second];
  return out;
}

}  // namespace petdaq::test

// petdaq-sim: simulated acquisitions of a PET scanner, with the truth of every frame.
// The physics model and the output files are described in docs/simulator.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "core/geometry.h"
#include "core/settings.h"

namespace petdaq::sim {

// line: a thin cylinder parallel to the axis (the NEMA NU 4 line source).
enum class SourceShape : std::uint8_t { point, cylinder, line };
// polyethylene_cylinder: the NEMA NU 4-2008 count-rate phantoms (high-density polyethylene).
enum class PhantomKind : std::uint8_t { automatic, none, water_cylinder, polyethylene_cylinder };

struct SimSummary;

struct SimOptions {
  std::uint64_t seed = 1;
  // Seeds the detector itself (gains, delays, flood-map peaks): acquisitions with different
  // `seed` but the same `detector_seed` share one set of calibration tables.
  std::uint64_t detector_seed = 1;
  double duration_s = 0.01;
  std::uint64_t frames = 0;  // > 0: stop at the first block boundary with at least this many
  double activity_MBq = 1.0;          // at the start of the acquisition
  double half_life_s = 0.0;            // > 0: the source decays (18F: 6586 s); 0: constant
  SourceShape source = SourceShape::cylinder;
  // Where a point source sits, or the centre of a line source (which runs along z), in mm.
  double source_position_mm[3] = {0, 0, 0};
  double source_length_mm = 50.0;  // of a line source (= line_length_mm once the options are read)
  // A moving point or line source: position + amplitude · sin(2π t / period) along the axis
  // (0 = x, 1 = y, 2 = z), t from the acquisition's start (time_origin_s). Amplitude 0: still.
  double motion_amplitude_mm = 0;
  double motion_period_s = 4.0;
  unsigned motion_axis = 2;
  PhantomKind phantom = PhantomKind::automatic;  // automatic: water cylinder for a cylinder source
  double phantom_radius_mm = 15.0;  // mouse-sized
  double phantom_length_mm = 70.0;
  // The line source (SourceShape::line): radius, active length, and its distance from the
  // axis along +x, added to source_position_mm. --phantom nema-mouse|nema-rat sets the
  // standard's values; otherwise the offset is 0 and the length --source-length-mm.
  double line_radius_mm = 1.6;
  double line_length_mm = 60.0;
  double line_offset_mm = 0.0;
  bool background = true;
  double background_Bq_per_cc = 280.0;  // intrinsic 176Lu activity of LYSO

  double acollinearity_fwhm_deg = 0.5;
  double energy_resolution_fwhm = 0.12;  // fraction, at 511 keV
  double time_resolution_fwhm_ps = 350.0;  // per single
  double position_blur = 0.2;            // sigma of the light centroid / peak spacing, at 511 keV
  double photofraction_511 = 0.65;       // of the DU block (Anger logic sums inter-crystal scatter)
  double detector_efficiency = 1.0;      // extra factor on the interaction probability
  // Sigma of the per-crystal relative detection efficiency e_c = 1 + sigma * g (g a standard
  // Gaussian clipped at 3): a photon interacting in crystal c is kept with probability
  // e_c / (1 + 3 sigma). The truth is crystal_efficiency.npy (docs/simulator.md). 0: none.
  double crystal_efficiency_spread = 0.0;
  double trigger_threshold_keV = 50.0;   // the BDM sends no frame below this
  double adc_per_keV = 6.6;              // nominal gain before saturation
  double gain_spread = 0.12;             // sigma of the per-crystal log gain
  double saturation_keV = 4000.0;        // raw = k E / (1 + E / saturation)
  double delay_spread_ps = 150.0;        // sigma of the per-crystal delay
  // The boards' front end (docs/simulator.md, "Dead time and pile-up"); 0 = off.
  double dead_time_ns = 0.0;             // after a pulse starts, its unit takes no other
  bool dead_time_paralysable = false;    // true: every photon while dead restarts the dead time
  bool dead_time_per_board = false;      // the unit: false a DU, true a whole BDM
  double pile_up_ns = 0.0;               // shaping time: later photons in the DU add to the pulse

  // Arrival order (DESIGN sections 2 and 6).
  double disorder_ps = -1;        // per-BDM disorder bound; < 0: stream.max_disorder_ps / 10
  std::uint32_t packet_frames = 560;  // frames per datagram (8 972 bytes hold 560)
  double packet_flush_us = 100.0;     // a BDM sends a partly filled packet after this long
  double link_jitter_us = 20.0;       // extra random delay of a packet on its way
  double time_origin_s = 0.001;       // first tick of the acquisition (keeps times positive)

  std::uint32_t energy_bins = 1000;
  unsigned threads = 0;      // 0: all hardware threads
  bool write_files = true;   // false: generate and order only (benchmarks)
  // Called after each generated block with the fraction done (negative when --frames sets
  // the end) and the summary so far; for progress lines.
  std::function<void(double fraction, const SimSummary& so_far)> progress;
};

// What a perfect sorter could see, and how the acquisition was made (also in truth.json).
struct SimSummary {
  double duration_s = 0;
  std::uint64_t blocks = 0;
  std::uint64_t decays = 0;
  std::uint64_t background_events = 0;
  std::uint64_t frames = 0;
  std::uint64_t frames_annihilation = 0;
  std::uint64_t frames_scattered = 0;
  std::uint64_t frames_background = 0;
  std::uint64_t frames_mispositioned = 0;
  std::uint64_t frames_no_crystal = 0;
  std::uint64_t frames_in_window = 0;   // measured energy inside the energy window, in a crystal
  std::uint64_t pairs = 0;              // decays with both photons detected
  std::uint64_t pairs_scattered = 0;
  std::uint64_t pairs_in_window = 0;    // both in a crystal, inside the window, crystals differ
  std::uint64_t pairs_in_window_scattered = 0;
  std::uint64_t packets = 0;
  // The front end (dead time and pile-up): `frames` above counts the frames sent, the other
  // frame counts the photons detected before the front end.
  std::uint64_t photons_detected = 0;
  std::uint64_t lost_dead_time = 0;
  std::uint64_t lost_dead_time_by_kind[3] = {};  // annihilation, scattered, background
  std::uint64_t merged_pile_up = 0;
  std::uint64_t merged_pile_up_by_kind[3] = {};
  std::uint64_t frames_piled_up = 0;
  std::uint64_t piled_out_of_window = 0;
  std::uint64_t time_origin_ticks = 0;
  std::uint64_t disorder_ticks = 0;
  double generate_seconds = 0;          // wall clock of the generation and ordering
};

// Runs one acquisition. Reads the scanner from `config` (the daemon's YAML); writes
// frames.bin, truth.bin, truth.json, the calibration tables and petdaq.yaml into
// `output_dir` (created if needed) unless options.write_files is false.
SimSummary simulate(const std::filesystem::path& config, const std::filesystem::path& output_dir,
                    const SimOptions& options);

// The settings the simulation uses: `config` with the calibration paths pointing at the
// tables in `output_dir` (the files need not exist yet). Also the text of petdaq.yaml.
Settings settings_for_output(const std::filesystem::path& config,
                             const std::filesystem::path& output_dir, std::string* yaml_text);

}  // namespace petdaq::sim

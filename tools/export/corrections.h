// What the exports attach to each coincidence for a quantitative reconstruction
// (docs/export.md, "Corrections"): the normalisation table's efficiency of its line of
// response (DESIGN section 3, "Normalisation table"), the singles-rate randoms rate of its
// crystal pair, and the acquisition's live-time fraction from the .plm's dead intervals.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/geometry.h"
#include "core/randoms.h"
#include "core/settings.h"
#include "proto/records.h"

namespace petdaq::exporter {

// A record the export refuses (a crystal id outside the scanner): what() names the message,
// the record and the id. Nothing of it is written.
class BadRecord : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws BadRecord unless both crystal ids are below crystal_count.
void check_crystals(const CoincRecord& r, std::uint32_t crystal_count, const MessageHeader& m,
                    std::size_t index);

// The component-based normalisation of DESIGN section 3: the relative efficiency of the line
// of response (i, j) is
//   ε_i · ε_j · b[r_i][t_i] · b[r_j][t_j] · g[(p_j − p_i) mod P][t_i][t_j] · a[r_i][r_j]
// with r the ring, p the BDM panel around the ring (P of them) and t the crystal's position
// across its panel. The files are petdaq-calibrate normalization's output.
class NormalizationTable {
 public:
  static constexpr const char* kCrystalFile = "norm_crystal_efficiency.npy";
  static constexpr const char* kBlockFile = "norm_block_profile.npy";
  static constexpr const char* kGeometricFile = "norm_geometric.npy";
  static constexpr const char* kAxialFile = "norm_axial.npy";

  // Reads the four tables from `dir` and checks their shapes against the scanner and their
  // values (finite, > 0); throws CalibrationError naming the file.
  NormalizationTable(const std::filesystem::path& dir, const Geometry& geometry);
  double efficiency(std::uint32_t crystal_i, std::uint32_t crystal_j) const;

 private:
  std::uint32_t per_ring_, per_panel_, panels_, rings_;
  std::vector<float> crystal_, block_, geometric_, axial_;
};

// Live time from the .plm's scanner-wide dead intervals (messages of kind `deadtime`,
// DESIGN section 6), read without the records: acquisition = the sum over runs of the span
// from the first message's t_begin to the last message's t_end; live fraction
// = 1 − dead / acquisition (1 with no dead interval). Also counts the prompts.
struct LiveTime {
  double acquisition_s = 0;
  double dead_s = 0;
  std::uint64_t dead_intervals = 0;
  std::uint64_t prompts = 0;
  double live_fraction() const {
    return acquisition_s > 0 ? 1.0 - dead_s / acquisition_s : 1.0;
  }
  double live_s() const { return acquisition_s - dead_s; }
};
// Throws std::runtime_error naming the file and the byte where it is malformed; a message
// cut short at the end (a file still being written) ends the scan.
LiveTime scan_live_time(const std::filesystem::path& plm, double tick_ps);

// Randoms per crystal pair: the singles-rate estimate 2τ·s_i·s_j (docs/randoms.md) from the
// crystals' singles over the live time, optionally scaled to the singles-prompts model's
// total (the policy-corrected estimate) where the model covers the settings.
class PairRandoms {
 public:
  enum class Model { singles_rate, singles_prompts };
  // crystal_singles: singles counted per crystal over the acquisition (the `crystal_singles`
  // histogram); live: the acquisition's live time and prompt count.
  PairRandoms(const Settings& settings, const Geometry& geometry,
              const std::vector<double>& crystal_singles, const LiveTime& live, Model model);
  // Expected randoms per second of acquisition (live fraction included) on the pair.
  double per_s(std::uint32_t crystal_i, std::uint32_t crystal_j) const {
    return scale_ * singles_per_live_s_[crystal_i] * singles_per_live_s_[crystal_j];
  }
  Model model() const { return model_; }
  double total_per_s() const { return total_per_s_; }  // over every good pair
  double singles_prompts_ratio() const { return ratio_; }

 private:
  std::vector<double> singles_per_live_s_;
  double scale_ = 0;
  double ratio_ = 1;
  double total_per_s_ = 0;
  Model model_;
};

// The `crystal_singles` histogram of a histogram file's bytes (DESIGN section 7) as doubles;
// throws std::runtime_error if it is missing or not one count per crystal.
std::vector<double> crystal_singles_of(const std::vector<std::uint8_t>& histogram_file,
                                       std::uint32_t crystal_count);

// Everything the writers attach, each part optional.
struct Corrections {
  std::optional<NormalizationTable> normalization;
  std::optional<PairRandoms> randoms;
  LiveTime live;
  bool live_known = false;  // the .plm was scanned (a live export has no dead intervals)
};

}  // namespace petdaq::exporter

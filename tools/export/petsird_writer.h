// PETSIRD output (docs/export.md, "PETSIRD"): the ETSI's raw-data model, release 0.9.1, in
// yardl's compact binary encoding (tools/export/yardl_binary.h) with the release's schema
// string (tools/export/petsird_schema.h).
//
// The scanner is one module type: a module is a BDM (bdm_transaxial × bdm_axial of them, module
// index b_axial · bdm_transaxial + b_transaxial), its detecting elements are its crystals (index
// row-in-BDM · crystals-across-the-panel + column), each a box of pitch × pitch × depth placed by
// the module's and the element's rigid transforms at DESIGN section 3's crystal centre. One
// energy bin (the energy window), so a detection bin is element + module · elements-per-module.
// A coincidence's first detection bin is its lower crystal id, so PETSIRD's (t1 − t2) is
// petdaq's signed Δt (proto/signed_tof.h); TOF bins are whole ticks (--tof-bin-ticks of them).
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/settings.h"
#include "proto/records.h"
#include "tools/export/yardl_binary.h"

namespace petdaq::exporter {

struct PetsirdOptions {
  std::uint32_t time_block_ms = 1;  // duration of each event time block (PETSIRD's unit is ms)
  std::uint32_t tof_bin_ticks = 1;  // width of a TOF bin in ticks (1: Δt kept exactly)
  // Singles histograms will be given (add_singles): the header says so (level `all`, the
  // energy window as the one singles energy bin).
  bool singles_histograms = false;
};

// Where petdaq's crystals are in the PETSIRD geometry written (one module type).
class PetsirdLayout {
 public:
  explicit PetsirdLayout(const ScannerSettings& s);
  std::uint32_t modules() const { return modules_; }
  std::uint32_t elements_per_module() const { return elements_; }
  std::uint32_t detection_bins() const { return modules_ * elements_; }
  std::uint32_t module_of(std::uint32_t crystal) const;
  std::uint32_t element_of(std::uint32_t crystal) const;
  // Detection bin of a crystal (crystal < crystal count).
  std::uint32_t detection_bin(std::uint32_t crystal) const {
    return element_of(crystal) + module_of(crystal) * elements_;
  }
  // Row-major 3 × 4 rigid transforms: module to gantry, element to module.
  std::array<float, 12> module_transform(std::uint32_t module) const;
  std::array<float, 12> element_transform(std::uint32_t element) const;

 private:
  ScannerSettings s_;
  std::uint32_t modules_ = 0, elements_ = 0, per_panel_ = 0, rows_per_bdm_ = 0;
  std::uint32_t crystals_per_ring_ = 0;
};

// The TOF binning: bin k holds the signed Δt of ticks [lower(k), lower(k) + width) where
// lower(k) = (k + first) · width − width / 2 (integer division), over ±window.
class PetsirdTofBins {
 public:
  PetsirdTofBins(std::int64_t window_ticks, std::uint32_t width_ticks);
  std::uint32_t count() const { return static_cast<std::uint32_t>(last_ - first_ + 1); }
  // Bin index of a signed Δt in ticks; false when outside the window.
  bool index(std::int64_t signed_dt, std::uint32_t& bin) const;
  // The count() + 1 edges in ticks (half-integers: an integer Δt is never on an edge).
  std::vector<double> edges_ticks() const;

 private:
  std::int64_t width_, half_, first_, last_;
};

class PetsirdWriter {
 public:
  PetsirdWriter(const std::filesystem::path& file, const Settings& settings, double tick_ps,
                PetsirdOptions options = {});
  ~PetsirdWriter();
  PetsirdWriter(const PetsirdWriter&) = delete;
  PetsirdWriter& operator=(const PetsirdWriter&) = delete;

  // A prompts (kind 1) or delayed (kind 2) message. Messages of one run come in publication
  // order; a new run continues the time line after the last time block of the one before.
  void add(const MessageHeader& m, const CoincRecord* records, std::size_t n);
  // A deadtime message (kind 5): scanner-wide dead intervals, written as dead-time blocks.
  void add_dead(const MessageHeader& m, const DeadInterval* intervals, std::size_t n);
  // A run's accepted singles per crystal (the histogram file's `crystal_singles`, in the
  // energy window), written as one singles-histogram block over the run's time blocks.
  // Needs options.singles_histograms; `per_crystal` has one count per crystal.
  void add_singles(std::uint64_t run_id, std::vector<std::uint64_t> per_crystal);
  // Writes the remaining time blocks, the dead-time blocks and the end of the stream; closes.
  void finish();

  std::uint64_t prompts() const { return written_[0]; }
  std::uint64_t delayed() const { return written_[1]; }
  std::uint64_t event_blocks() const { return event_blocks_; }
  std::uint64_t dead_time_blocks() const { return dead_blocks_; }
  // Records not written: a crystal id outside the scanner, or a Δt outside the TOF bins.
  std::uint64_t refused_crystal() const { return refused_crystal_; }
  std::uint64_t refused_tof() const { return refused_tof_; }
  // Dead intervals of a run that had no coincidence message (no place on the time line).
  std::uint64_t dead_intervals_unplaced() const { return dead_unplaced_; }
  std::uint64_t singles_blocks() const { return singles_blocks_; }
  // Singles histograms of a run that had no coincidence message.
  std::uint64_t singles_unplaced() const { return singles_unplaced_; }
  std::uint64_t bytes_written() const { return out_.bytes_written(); }
  // What was written ("N prompts, N delayed in N event time blocks, ..."), and a line for
  // each kind of record or block refused or left out (none: empty).
  std::string summary() const;
  std::vector<std::string> losses() const;

 private:
  struct Event {
    std::uint32_t bin0, bin1, tof;
  };
  struct Block {
    std::vector<Event> events[2];  // prompts, delayed
  };
  struct Run {
    std::uint64_t start_ticks = 0;
    double offset_ms = 0;
  };
  struct DeadSpan {
    std::uint64_t run;
    std::uint64_t t_begin, t_end;
  };

  void write_header();
  double run_ms(const Run& run, std::uint64_t ticks) const;
  void begin_run(std::uint64_t run_id, std::uint64_t t_begin);
  void flush_through(std::uint64_t end_block);  // writes blocks [next_block_, end_block)
  void write_event_block(std::uint64_t k, const Block* b);
  void write_dead_block(std::uint64_t first, std::uint64_t end, float alive);
  void write_time_interval(std::uint64_t first_block, std::uint64_t end_block);

  YardlWriter out_;
  const Settings& settings_;
  double tick_ps_;
  PetsirdOptions options_;
  PetsirdLayout layout_;
  PetsirdTofBins tof_;
  std::int64_t delay_ticks_;
  bool delayed_stored_;
  bool finished_ = false;

  std::map<std::uint64_t, Run> runs_;
  std::uint64_t current_run_ = 0;
  bool have_run_ = false;
  double watermark_ms_[2] = {0, 0};  // end of the last message of each kind, on the time line
  double end_ms_ = 0;                // end of the last message of any kind
  std::map<std::uint64_t, Block> pending_;
  std::uint64_t next_block_ = 0;     // first block not yet written

  bool dead_seen_ = false;
  std::vector<DeadSpan> dead_;
  std::map<std::uint64_t, std::vector<std::uint64_t>> singles_;  // by run

  std::uint64_t written_[2] = {0, 0};
  std::uint64_t event_blocks_ = 0, dead_blocks_ = 0;
  std::uint64_t refused_crystal_ = 0, refused_tof_ = 0, dead_unplaced_ = 0;
  std::uint64_t singles_blocks_ = 0, singles_unplaced_ = 0;
};

// A histogram file's accepted singles per crystal (`crystal_singles`) and its run.
struct RunSingles {
  std::uint64_t run_id = 0;
  std::vector<std::uint64_t> counts;
};
// From a histogram file's bytes (already checked by parse_histogram_file); throws
// std::invalid_argument when it has no `crystal_singles` of `crystals` crystals.
RunSingles crystal_singles(const std::vector<std::uint8_t>& histogram_file, std::uint32_t crystals);

// What petsird_from_plm() read.
struct PetsirdFileCounts {
  std::uint64_t messages = 0;          // prompts and delayed messages
  std::uint64_t records = 0;           // their records
  std::uint64_t dead_messages = 0;     // deadtime messages
  std::uint64_t skipped_messages = 0;  // messages of other kinds
  std::uint64_t partial_tail_bytes = 0;
};

// Every message of the list-mode file `plm` into `w` (not finished): prompts and delayed,
// the deadtime messages' intervals; other kinds are skipped and counted. `progress` gets
// the fraction of the file read and the counts so far. Throws PlmError on a bad message.
PetsirdFileCounts petsird_from_plm(
    const std::filesystem::path& plm, PetsirdWriter& w,
    const std::function<void(double fraction, const PetsirdFileCounts&)>& progress);

}  // namespace petdaq::exporter

// CASToR list-mode output (docs/export.md): a .cdh header, .cdf events (little-endian:
// uint32 time in ms, then the float32 randoms rate and normalisation factor where known, the
// float32 TOF difference in ps, uint32 crystal 1, uint32 crystal 2) and the scanner as a
// user-defined LUT (.hscan header + .lut of 6 float32 per crystal, indexed by petdaq's
// crystal id). Crystal 1 is the lower id, so CASToR's Δt = t(crystal 1) − t(crystal 2) is
// petdaq's signed Δt (proto/signed_tof.h). With a normalisation table, also CASToR's
// normalisation data file (base_norm.cdh/.cdf: f32 factor, u32 crystal 1, u32 crystal 2 for
// every line of response), which its list-mode sensitivity image needs. In histogram mode
// the .cdf instead holds one event per line the sorter can form (u32 time 0, the optional
// factors, f32 prompt count, u32 crystal 1, u32 crystal 2), without TOF.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "core/geometry.h"
#include "core/settings.h"
#include "proto/records.h"
#include "tools/export/corrections.h"

namespace petdaq::exporter {

enum class CastorMode : std::uint8_t { list, histogram };

class CastorWriter {
 public:
  // `base` is the output path without extension: base.cdh, base.cdf, base.hscan, base.lut.
  // `corrections` (kept by reference) gives the optional per-event randoms and normalisation.
  CastorWriter(const std::filesystem::path& base, const Settings& settings, double tick_ps,
               const Corrections& corrections, CastorMode mode = CastorMode::list);
  ~CastorWriter();
  CastorWriter(const CastorWriter&) = delete;
  CastorWriter& operator=(const CastorWriter&) = delete;

  // Prompts only (CASToR's list-mode is the prompts); a new run continues the time line.
  // Throws BadRecord (nothing of the record written) for a crystal id out of range.
  void add(const MessageHeader& m, const CoincRecord* records, std::size_t n);
  // Writes the headers and closes; with a normalisation table also the CASToR normalisation
  // data file base_norm.cdh/.cdf (every line the sorter can form, for the sensitivity image);
  // throws on a write error.
  void finish();
  std::uint64_t normalization_lines() const { return norm_lines_; }
  std::uint64_t events() const { return events_; }  // prompts taken
  std::uint64_t histogram_lines() const { return histogram_lines_; }
  bool writes_randoms() const { return corrections_.randoms.has_value(); }
  bool writes_normalization() const {
    return corrections_.normalization.has_value() || corrections_.live.live_fraction() < 1.0;
  }
  std::size_t event_bytes() const { return 16 + 4 * (writes_randoms() + writes_normalization()); }
  // Calls fn(i, j) for every line of response the sorter can form, i < j in order.
  template <class Fn>
  void for_each_line(Fn fn) const;

 private:
  void write_normalization_file(const std::string& scanner);
  void write_histogram();
  std::uint64_t line_index(std::uint32_t i, std::uint32_t j) const {  // i < j
    return std::uint64_t{i} * (2ull * crystal_count_ - i - 1) / 2 + (j - i - 1);
  }

  std::filesystem::path base_;
  const Settings& settings_;
  double tick_ps_;
  const Corrections& corrections_;
  std::uint32_t crystal_count_;
  Geometry geometry_;
  CastorMode mode_;
  std::vector<std::uint32_t> counts_;  // histogram mode: prompts per line, by line_index
  std::uint64_t histogram_lines_ = 0;
  std::FILE* cdf_ = nullptr;
  std::uint64_t events_ = 0;
  std::uint64_t norm_lines_ = 0;
  bool have_run_ = false;
  std::uint64_t run_ = 0;
  std::uint64_t run_start_ticks_ = 0;
  double run_offset_ms_ = 0;  // the earlier runs' durations
  double run_end_ms_ = 0;     // end of the current run on the time line
};

}  // namespace petdaq::exporter

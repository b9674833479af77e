// CASToR list-mode output (docs/export.md): a .cdh header, .cdf records (uint32 time in ms,
// uint32 crystal 1, uint32 crystal 2, little-endian) and the scanner as a user-defined LUT
// (.hscan header + .lut of 6 float32 per crystal, indexed by petdaq's crystal id).
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include "core/settings.h"
#include "proto/records.h"

namespace petdaq::exporter {

class CastorWriter {
 public:
  // `base` is the output path without extension: base.cdh, base.cdf, base.hscan, base.lut.
  CastorWriter(const std::filesystem::path& base, const Settings& settings, double tick_ps);
  ~CastorWriter();
  CastorWriter(const CastorWriter&) = delete;
  CastorWriter& operator=(const CastorWriter&) = delete;

  // Prompts only (CASToR's list-mode is the prompts); a new run continues the time line.
  void add(const MessageHeader& m, const CoincRecord* records, std::size_t n);
  // Writes the headers and closes; throws on a write error.
  void finish();
  std::uint64_t events() const { return events_; }
  // Prompts left out because a crystal id lies outside the scanner (a corrupt record).
  std::uint64_t skipped() const { return skipped_; }

 private:
  std::filesystem::path base_;
  const Settings& settings_;
  double tick_ps_;
  std::FILE* cdf_ = nullptr;
  std::uint64_t events_ = 0;
  std::uint64_t skipped_ = 0;
  bool have_run_ = false;
  std::uint64_t run_ = 0;
  std::uint64_t run_start_ticks_ = 0;
  double run_offset_ms_ = 0;  // the earlier runs' durations
  double run_end_ms_ = 0;     // end of the current run on the time line
};

}  // namespace petdaq::exporter

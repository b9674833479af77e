// HDF5 output (docs/export.md): prompts and delayed as chunked, compressed compound datasets
// (the 32-byte record of DESIGN section 5), singles where the input records them (the
// 16-byte single of DESIGN section 4), the message headers, the file header and settings
// as attributes, counts from the file, and the scanner geometry (crystal id -> ring, sector,
// position in mm), and histogram files or `histograms` messages (DESIGN section 7) as one
// dataset per histogram with its unit and bin edges as attributes; per record the signed Δt
// (proto/signed_tof.h) and, for prompts, the normalisation factor and randoms rate of its
// crystal pair where known, with the live time (tools/export/corrections.h).
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/settings.h"
#include "proto/records.h"
#include "tools/export/corrections.h"

namespace petdaq::exporter {

// One HDF5 identifier, closed by its own H5*close function.
class H5Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  H5Handle() = default;
  H5Handle(hid_t id, Closer close, const char* what);
  ~H5Handle() { reset(); }
  H5Handle(H5Handle&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = -1; }
  H5Handle& operator=(H5Handle&& o) noexcept;
  H5Handle(const H5Handle&) = delete;
  H5Handle& operator=(const H5Handle&) = delete;
  hid_t get() const { return id_; }
  void reset();

 private:
  hid_t id_ = -1;
  Closer close_ = nullptr;
};

class Hdf5Writer {
 public:
  Hdf5Writer(const std::filesystem::path& file, const PlmHeader& header, const Settings& settings,
             const std::string& config_text, int compression_level,
             const Corrections& corrections);
  // Throws BadRecord (nothing of the message written) for a crystal id out of range.
  void add(const MessageHeader& m, const CoincRecord* records, std::size_t n);
  // A singles message (kind 3): its singles go to the `singles` dataset, made at the first.
  void add_singles(const MessageHeader& m, const Single* singles, std::size_t n);
  // A histogram file's bytes (or a `histograms` message body); the latest per run is written
  // by finish(). Throws HistogramFileError (what() says why) and keeps nothing if refused.
  void add_histograms(std::vector<std::uint8_t> bytes);
  std::size_t histogram_runs() const { return histograms_.size(); }
  // Writes what is buffered, the messages, counts and geometry; closes the file.
  void finish(const std::string& source);

 private:
  struct Stream {
    H5Handle dataset;
    std::vector<CoincRecord> buffer;
    std::uint64_t written = 0;
  };
  // A float32 dataset with one value per record of a stream, written with it.
  struct Column {
    H5Handle dataset;
    std::vector<float> buffer;
    std::uint64_t written = 0;
  };
  void flush(Stream& s);
  void flush(Column& c);
  Column make_column(hid_t on, const char* name);
  void flush_singles();

  std::filesystem::path path_;
  Settings settings_;
  H5Handle file_;
  H5Handle record_mem_type_, record_file_type_;
  Stream prompts_, delayed_;
  const Corrections& corrections_;
  std::uint32_t crystal_count_;
  double tick_ps_;
  H5Handle corrections_group_;
  Column prompts_dt_, delayed_dt_, prompts_norm_, prompts_randoms_;
  H5Handle singles_dataset_, single_mem_type_, single_file_type_;
  std::vector<Single> singles_buffer_;
  std::uint64_t singles_written_ = 0, single_messages_ = 0;
  std::vector<MessageHeader> messages_;
  std::uint64_t from_multiple_[2] = {};
  std::map<std::uint64_t, std::vector<std::uint8_t>> histograms_;  // by run_id
  std::uint64_t last_histogram_run_ = 0;
  int compression_level_;
};

}  // namespace petdaq::exporter

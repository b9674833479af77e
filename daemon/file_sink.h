// The optional list-mode file sink (output.file): the coincidence messages exactly as
// published, in .plm files rotated at output.file.rotate_bytes. It writes on the worker's
// thread and never skips a message; if the disk refuses, the error is logged and the sink
// stops (the ZeroMQ output goes on).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>

#include "core/output.h"
#include "core/settings.h"

namespace petdaq::daemon {

class FileSink {
 public:
  // Checks that the directory exists and is writable (throws std::runtime_error).
  FileSink(const Settings& settings, Counters& counters);
  ~FileSink();

  void write(const MessageHeader& header, const void* records, std::size_t bytes);
  void close();

 private:
  void open_next();

  PlmHeader plm_header_;
  std::filesystem::path directory_;
  std::uint64_t rotate_bytes_;
  Counters& counters_;
  std::unique_ptr<PlmWriter> writer_;
  std::uint64_t file_index_ = 0;
  bool failed_ = false;
};

}  // namespace petdaq::daemon

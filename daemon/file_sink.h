// The optional list-mode file sink (output.file): the coincidence messages exactly as
// published (and with output.file.singles each slice's singles message), in .plm files
// rotated at output.file.rotate_bytes. It writes on the worker's thread, one whole message
// at a time, each flushed to the file at once: a file is complete at every message. When
// the disk refuses a write (full, quota, I/O error) the file is cut back to its last whole
// message and closed, the error is counted in
// out.file_errors, and from then on messages are dropped and counted in
// out.file_dropped_bytes while a new file is tried every `retry_after`; the ZeroMQ output
// goes on meanwhile.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "core/plm_file.h"
#include "core/settings.h"

namespace petdaq::daemon {

class FileSink {
 public:
  using Clock = std::chrono::steady_clock;

  // The write buffer of the open file (PlmWriter's, core/plm_file.cpp), output.file on.
  static constexpr std::size_t kWriterBufferBytes = 4u << 20;
  static std::size_t memory_bytes(const Settings& s) {
    return s.output.file.enabled ? kWriterBufferBytes : 0;
  }

  // Checks that the directory exists and is writable (throws std::runtime_error).
  FileSink(const Settings& settings, Counters& counters,
           Clock::duration retry_after = std::chrono::seconds(2));
  ~FileSink();

  void write(const MessageHeader& header, const void* records, std::size_t bytes);
  // A message every new file starts with (the open acquisition), written now into the
  // current file too; an empty body: none.
  void set_preamble(const MessageHeader& header, const std::string& body);
  void close();
  // The file being written (empty while there is none): names a run's .pdh after it.
  std::filesystem::path current_file() const {
    return writer_ ? writer_->path() : std::filesystem::path();
  }
  // Told of every file opened (opened = true) and closed, on the writing thread (the run
  // catalogue). Set it before the first message: the file open now is told at once.
  void set_file_observer(std::function<void(const std::filesystem::path&, bool opened)> f);

 private:
  void open_next();
  // After a failed write: cut the file back to `boundary` bytes and close it.
  void abandon(std::uint64_t boundary, const char* what);
  bool writable(Clock::time_point now);

  PlmHeader plm_header_;
  std::filesystem::path directory_;
  std::uint64_t rotate_bytes_;
  Counters& counters_;
  Clock::duration retry_after_;
  std::unique_ptr<PlmWriter> writer_;
  std::function<void(const std::filesystem::path&, bool)> observer_;
  MessageHeader preamble_header_{};
  std::string preamble_;
  std::uint64_t file_index_ = 0;
  std::optional<Clock::time_point> retry_at_;  // set while there is no file to write to
};

}  // namespace petdaq::daemon

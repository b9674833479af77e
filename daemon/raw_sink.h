// Raw capture (output.raw): the frames exactly as received, in frame files (16-byte frames
// back to back, DESIGN section 2) that petdaq-offline and petdaq-replay read, rotated at
// output.raw.rotate_bytes (whole frames). It writes on the worker's thread, before the
// frames reach the slicer, and never skips a frame: a disk that cannot keep up slows the
// worker, and the receivers count what the full ring refuses (rx.ring_full). If the disk
// refuses a write, the error is logged, the sink stops and every frame it no longer writes
// is counted in out.raw_lost_frames (the coincidence output goes on). What it buffered
// reaches the file within kFlushInterval (flush_if_due, from the worker's loop), so a file
// holds every frame received up to a fraction of a second ago, whole frames, even if the
// daemon dies.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>

#include "core/counters.h"
#include "core/settings.h"
#include "proto/frame.h"

namespace petdaq::daemon {

class RawSink {
 public:
  // Checks that the directory exists and is writable and opens the first file (throws
  // std::runtime_error naming output.raw.directory).
  RawSink(const RawCaptureSettings& settings, Counters& counters);
  ~RawSink();
  RawSink(const RawSink&) = delete;
  RawSink& operator=(const RawSink&) = delete;

  using Clock = std::chrono::steady_clock;
  static constexpr Clock::duration kFlushInterval = std::chrono::milliseconds(200);

  void write(const RawFrame* frames, std::size_t count);
  // Hands the buffered frames to the file when the last flush is kFlushInterval old.
  void flush_if_due(Clock::time_point now);
  // Flushes and closes the current file; a later write() opens the next one.
  void close();
  const std::filesystem::path& current_file() const { return path_; }
  // Told of every file opened (opened = true) and closed, on the writing thread (the run
  // catalogue); the file open now is told at once.
  void set_file_observer(std::function<void(const std::filesystem::path&, bool opened)> f);

 private:
  void open_next();
  void fail(const char* what);

  std::filesystem::path directory_;
  std::uint64_t rotate_frames_;
  Counters& counters_;
  std::FILE* file_ = nullptr;
  std::unique_ptr<char[]> buffer_;
  std::filesystem::path path_;
  std::uint64_t frames_in_file_ = 0;
  std::uint64_t file_index_ = 0;
  bool failed_ = false;
  bool unflushed_ = false;  // frames written to the buffer since the last flush
  Clock::time_point last_flush_{};
  std::function<void(const std::filesystem::path&, bool)> observer_;
};

}  // namespace petdaq::daemon

// Raw capture (output.raw): the frames exactly as received, in frame files (16-byte frames
// back to back, DESIGN section 2) that petdaq-offline and petdaq-replay read, rotated at
// output.raw.rotate_bytes (whole frames). It writes on the worker's thread, before the
// frames reach the slicer, and never skips a frame: a disk that cannot keep up slows the
// worker, and the receivers count what the full ring refuses (rx.ring_full).
// out.raw_bytes counts only bytes the kernel took, in whole frames. If the disk refuses a
// write (full, quota, I/O error), the file is cut back to its last whole frame and closed,
// the error is logged, every frame that did not reach the disk (those still in the buffer,
// and all later ones until a new file can be written) is counted in out.raw_lost_frames, and
// a new file is tried every `retry_after` (the coincidence output goes on meanwhile). So
// out.raw_bytes / 16 + out.raw_lost_frames is every frame the sink was given. What it
// buffered reaches the file within kFlushInterval (flush_if_due, from the worker's loop), so
// a file holds every frame received up to a fraction of a second ago, even if the daemon dies.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>

#include "core/counters.h"
#include "core/settings.h"
#include "proto/frame.h"

namespace petdaq::daemon {

class RawSink {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::size_t kBufferBytes = 4u << 20;  // large sequential writes
  static constexpr Clock::duration kFlushInterval = std::chrono::milliseconds(200);
  // Its write buffer, output.raw on.
  static std::size_t memory_bytes(const Settings& s) {
    return s.output.raw.enabled ? kBufferBytes : 0;
  }

  // Checks that the directory exists and is writable and opens the first file (throws
  // std::runtime_error naming output.raw.directory).
  RawSink(const RawCaptureSettings& settings, Counters& counters,
          Clock::duration retry_after = std::chrono::seconds(2));
  ~RawSink();
  RawSink(const RawSink&) = delete;
  RawSink& operator=(const RawSink&) = delete;

  void write(const RawFrame* frames, std::size_t count);
  // Writes the buffered frames out when the last write-out is kFlushInterval old.
  void flush_if_due(Clock::time_point now);
  // Writes what is buffered and closes the current file; a later write() opens the next one.
  void close();
  // Told of every file opened (opened = true) and closed, on the writing thread (the run
  // catalogue); the file open now is told at once.
  void set_file_observer(std::function<void(const std::filesystem::path&, bool opened)> f);

 private:
  bool open_next();
  // Writes the buffer out; false (and the file abandoned) when the disk refused it.
  bool flush();
  void abandon(const char* what, int error);
  bool writable(Clock::time_point now);

  std::filesystem::path directory_;
  std::uint64_t rotate_frames_;
  Counters& counters_;
  Clock::duration retry_after_;
  std::optional<Clock::time_point> retry_at_;
  int fd_ = -1;
  std::unique_ptr<unsigned char[]> buffer_;
  std::size_t buffered_ = 0;  // bytes, whole frames
  std::filesystem::path path_;
  std::uint64_t frames_in_file_ = 0;  // written and buffered
  std::uint64_t bytes_on_disk_ = 0;   // of the current file
  std::uint64_t file_index_ = 0;
  Clock::time_point last_flush_{};
  std::function<void(const std::filesystem::path&, bool)> observer_;
};

}  // namespace petdaq::daemon

#include "daemon/raw_sink.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "daemon/file_names.h"

namespace petdaq::daemon {

static_assert(RawSink::kBufferBytes % kFrameBytes == 0);

RawSink::RawSink(const RawCaptureSettings& settings, Counters& counters,
                 Clock::duration retry_after)
    : directory_(settings.directory),
      rotate_frames_(std::max<std::uint64_t>(1, settings.rotate_bytes / kFrameBytes)),
      counters_(counters),
      retry_after_(retry_after),
      buffer_(std::make_unique<unsigned char[]>(kBufferBytes)) {
  std::error_code ec;
  if (!std::filesystem::is_directory(directory_, ec))
    throw std::runtime_error("output.raw.directory " + directory_.string() + ": not a directory");
  if (access(directory_.c_str(), W_OK) != 0)
    throw std::runtime_error("output.raw.directory " + directory_.string() + ": not writable");
  if (!open_next()) throw std::runtime_error("output.raw: cannot create " + path_.string());
}

RawSink::~RawSink() { close(); }

bool RawSink::open_next() {
  path_ = stamped_file(directory_, fmt::format("{:04}.frames", file_index_++));
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  frames_in_file_ = 0;
  bytes_on_disk_ = 0;
  buffered_ = 0;
  if (fd_ < 0) {
    spdlog::error("raw capture: cannot create {}: {}", path_.string(), std::strerror(errno));
    return false;
  }
  spdlog::info("raw capture file {}", path_.string());
  if (observer_) observer_(path_, true);
  return true;
}

void RawSink::set_file_observer(std::function<void(const std::filesystem::path&, bool)> f) {
  observer_ = std::move(f);
  if (observer_ && fd_ >= 0) observer_(path_, true);
}

void RawSink::flush_if_due(Clock::time_point now) {
  if (fd_ < 0 || buffered_ == 0 || now - last_flush_ < kFlushInterval) return;
  last_flush_ = now;
  if (!flush()) retry_at_ = now + retry_after_;
}

void RawSink::abandon(const char* what, int error) {
  // The file keeps its whole frames: a frame cut short would shift every later one.
  const std::uint64_t lost = buffered_ / kFrameBytes;
  counters_.add(Counter::out_raw_lost_frames, lost);
  const int truncated = ::ftruncate(fd_, static_cast<off_t>(bytes_on_disk_));
  ::close(fd_);
  fd_ = -1;
  buffered_ = 0;
  if (observer_) observer_(path_, false);
  if (bytes_on_disk_ == 0) {
    // No frame in it: no empty file per retry while the disk is full.
    std::error_code ec;
    std::filesystem::remove(path_, ec);
    spdlog::error("raw capture: {}: {}: {}; removed (no whole frame in it); {} buffered frames "
                  "lost, and frames are counted lost (out.raw_lost_frames) until a new file can "
                  "be written",
                  path_.string(), what, std::strerror(error), lost);
    return;
  }
  spdlog::error("raw capture: {}: {}: {}; {} at its last whole frame ({} bytes); {} buffered "
                "frames lost, and frames are counted lost (out.raw_lost_frames) until a new file "
                "can be written",
                path_.string(), what, std::strerror(error),
                truncated == 0 ? "cut" : "could not cut", bytes_on_disk_, lost);
}

bool RawSink::flush() {
  std::size_t done = 0;
  while (done < buffered_) {
    const ssize_t n = ::write(fd_, buffer_.get() + done, buffered_ - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = n < 0 ? errno : ENOSPC;
      // Whole frames the kernel took stay in the file and are counted; the rest is lost.
      const std::size_t whole = done / kFrameBytes * kFrameBytes;
      counters_.add(Counter::out_raw_bytes, whole);
      bytes_on_disk_ += whole;
      buffered_ -= whole;
      abandon("write failed", error);
      return false;
    }
    done += static_cast<std::size_t>(n);
  }
  counters_.add(Counter::out_raw_bytes, buffered_);
  bytes_on_disk_ += buffered_;
  buffered_ = 0;
  return true;
}

bool RawSink::writable(Clock::time_point now) {
  if (fd_ >= 0) return true;
  if (retry_at_ && now < *retry_at_) return false;
  if (open_next()) {
    if (retry_at_) spdlog::info("raw capture: writing again");
    retry_at_.reset();
    return true;
  }
  retry_at_ = now + retry_after_;
  return false;
}

void RawSink::write(const RawFrame* frames, std::size_t count) {
  while (count > 0) {
    if (!writable(Clock::now())) break;
    std::size_t n = static_cast<std::size_t>(
        std::min<std::uint64_t>(count, rotate_frames_ - frames_in_file_));
    n = std::min(n, (kBufferBytes - buffered_) / kFrameBytes);
    std::memcpy(buffer_.get() + buffered_, frames, n * kFrameBytes);
    buffered_ += n * kFrameBytes;
    frames_in_file_ += n;
    frames += n;
    count -= n;
    if (buffered_ == kBufferBytes && !flush()) {
      retry_at_ = Clock::now() + retry_after_;
      continue;
    }
    if (frames_in_file_ == rotate_frames_) close();
  }
  if (count > 0) counters_.add(Counter::out_raw_lost_frames, count);
}

void RawSink::close() {
  if (fd_ < 0) return;
  if (!flush()) {
    retry_at_ = Clock::now() + retry_after_;
    return;
  }
  if (::close(fd_) != 0) {
    // The data were taken by write(); a failing close is an I/O error reported late.
    spdlog::error("raw capture: {}: close failed: {}", path_.string(), std::strerror(errno));
  }
  fd_ = -1;
  if (observer_) observer_(path_, false);
}

}  // namespace petdaq::daemon

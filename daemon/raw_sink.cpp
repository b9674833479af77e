#include "daemon/raw_sink.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <stdexcept>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "daemon/file_names.h"

namespace petdaq::daemon {

namespace {
constexpr std::size_t kBufferBytes = 4u << 20;  // large sequential writes
}

RawSink::RawSink(const RawCaptureSettings& settings, Counters& counters)
    : directory_(settings.directory),
      rotate_frames_(std::max<std::uint64_t>(1, settings.rotate_bytes / kFrameBytes)),
      counters_(counters),
      buffer_(std::make_unique<char[]>(kBufferBytes)) {
  std::error_code ec;
  if (!std::filesystem::is_directory(directory_, ec))
    throw std::runtime_error("output.raw.directory " + directory_.string() + ": not a directory");
  if (access(directory_.c_str(), W_OK) != 0)
    throw std::runtime_error("output.raw.directory " + directory_.string() + ": not writable");
  open_next();
  if (failed_) throw std::runtime_error("output.raw: cannot create " + path_.string());
}

RawSink::~RawSink() { close(); }

void RawSink::open_next() {
  path_ = stamped_file(directory_, fmt::format("{:04}.frames", file_index_++));
  file_ = std::fopen(path_.c_str(), "wb");
  frames_in_file_ = 0;
  if (!file_) return fail("cannot create");
  std::setvbuf(file_, buffer_.get(), _IOFBF, kBufferBytes);
  spdlog::info("raw capture file {}", path_.string());
  if (observer_) observer_(path_, true);
}

void RawSink::set_file_observer(std::function<void(const std::filesystem::path&, bool)> f) {
  observer_ = std::move(f);
  if (observer_ && file_) observer_(path_, true);
}

void RawSink::fail(const char* what) {
  spdlog::error("raw capture stopped: {}: {}: {}", path_.string(), what, std::strerror(errno));
  if (file_) {
    std::fclose(file_);
    if (observer_) observer_(path_, false);
  }
  file_ = nullptr;
  failed_ = true;
}

void RawSink::write(const RawFrame* frames, std::size_t count) {
  while (count > 0 && !failed_) {
    if (!file_) open_next();
    if (failed_) break;
    const std::size_t n = static_cast<std::size_t>(
        std::min<std::uint64_t>(count, rotate_frames_ - frames_in_file_));
    const std::size_t written = std::fwrite(frames, kFrameBytes, n, file_);
    counters_.add(Counter::out_raw_bytes, written * kFrameBytes);
    frames_in_file_ += written;
    unflushed_ = unflushed_ || written > 0;
    frames += written;
    count -= written;
    if (written != n) {
      fail("write failed");
      break;
    }
    if (frames_in_file_ == rotate_frames_) close();
  }
  if (count > 0) counters_.add(Counter::out_raw_lost_frames, count);
}

void RawSink::flush_if_due(Clock::time_point now) {
  if (!unflushed_ || !file_ || now - last_flush_ < kFlushInterval) return;
  last_flush_ = now;
  unflushed_ = false;
  // Whole frames: the buffer only ever holds whole 16-byte frames past the last flush.
  if (std::fflush(file_) != 0) fail("write failed");
}

void RawSink::close() {
  if (!file_) return;
  std::FILE* f = file_;
  file_ = nullptr;
  if (std::fclose(f) != 0) fail("close failed");
  if (observer_) observer_(path_, false);
}

}  // namespace petdaq::daemon

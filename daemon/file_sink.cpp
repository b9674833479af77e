#include "daemon/file_sink.h"

#include <unistd.h>

#include <chrono>
#include <ctime>
#include <stdexcept>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace petdaq::daemon {

FileSink::FileSink(const Settings& settings, Counters& counters)
    : plm_header_(make_plm_header(settings)),
      directory_(settings.output.file.directory),
      rotate_bytes_(settings.output.file.rotate_bytes),
      counters_(counters) {
  std::error_code ec;
  if (!std::filesystem::is_directory(directory_, ec))
    throw std::runtime_error("output.file.directory " + directory_.string() +
                             ": not a directory");
  if (access(directory_.c_str(), W_OK) != 0)
    throw std::runtime_error("output.file.directory " + directory_.string() + ": not writable");
  open_next();
}

FileSink::~FileSink() {
  try {
    close();
  } catch (const std::exception& e) {
    spdlog::error("list-mode file: {}", e.what());
  }
}

void FileSink::open_next() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &utc);
  const auto path = directory_ / fmt::format("petdaq-{}-{:04}.plm", stamp, file_index_++);
  writer_ = std::make_unique<PlmWriter>(path, plm_header_);
  spdlog::info("list-mode file {}", path.string());
}

void FileSink::write(const MessageHeader& header, const void* records, std::size_t bytes) {
  if (failed_) return;
  try {
    const std::uint64_t before = writer_->bytes_written();
    writer_->write_message(header, records, bytes);
    counters_.add(Counter::out_file_bytes, writer_->bytes_written() - before);
    if (writer_->bytes_written() >= rotate_bytes_) {
      writer_->close();
      open_next();
    }
  } catch (const std::exception& e) {
    failed_ = true;
    spdlog::error("list-mode file sink stopped: {}", e.what());
  }
}

void FileSink::close() {
  if (writer_) {
    auto w = std::move(writer_);
    w->close();
  }
}

}  // namespace petdaq::daemon

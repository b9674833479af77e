#include "daemon/file_sink.h"

#include <unistd.h>

#include <ctime>
#include <stdexcept>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "daemon/file_names.h"

namespace petdaq::daemon {

FileSink::FileSink(const Settings& settings, Counters& counters, Clock::duration retry_after)
    : plm_header_(make_plm_header(settings)),
      directory_(settings.output.file.directory),
      rotate_bytes_(settings.output.file.rotate_bytes),
      counters_(counters),
      retry_after_(retry_after) {
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
  const auto path = stamped_file(directory_, fmt::format("{:04}.plm", file_index_++));
  auto writer = std::make_unique<PlmWriter>(path, plm_header_);
  try {
    if (!preamble_.empty()) writer->write_message(preamble_header_, preamble_.data(), preamble_.size());
    writer->flush();
  } catch (...) {
    writer.reset();
    std::error_code ec;
    std::filesystem::remove(path, ec);
    throw;
  }
  writer_ = std::move(writer);
  spdlog::info("list-mode file {}", path.string());
  if (observer_) observer_(path, true);
}

void FileSink::set_file_observer(std::function<void(const std::filesystem::path&, bool)> f) {
  observer_ = std::move(f);
  if (observer_ && writer_) observer_(writer_->path(), true);
}

void FileSink::set_preamble(const MessageHeader& header, const std::string& body) {
  preamble_header_ = header;
  preamble_ = body;
  if (!body.empty()) write(header, body.data(), body.size());
}

void FileSink::abandon(std::uint64_t boundary, const char* what) {
  counters_.add(Counter::out_file_errors);
  const auto path = writer_->path();
  writer_.reset();  // its last buffered bytes may or may not reach the file
  std::error_code ec;
  // Told after the cut below (or the removal: the catalogue then finds no file).
  struct Tell {
    const FileSink* sink;
    const std::filesystem::path& path;
    ~Tell() {
      if (sink->observer_) sink->observer_(path, false);
    }
  } tell{this, path};
  if (boundary <= kPlmHeaderBytes) {
    std::filesystem::remove(path, ec);  // it holds no message
    spdlog::error("list-mode file sink: {}; {} removed (no whole message in it); messages are "
                  "dropped (out.file_dropped_bytes) until a new file can be written",
                  what, path.string());
    return;
  }
  std::filesystem::resize_file(path, boundary, ec);
  spdlog::error("list-mode file sink: {}; {} {} at its last whole message ({} bytes); "
                "messages are dropped (out.file_dropped_bytes) until a new file can be written",
                what, ec ? "could not cut" : "cut", path.string(), boundary);
}

bool FileSink::writable(Clock::time_point now) {
  if (writer_) return true;
  if (!retry_at_ || now < *retry_at_) return false;
  try {
    open_next();
    retry_at_.reset();
    spdlog::info("list-mode file sink: writing again");
    return true;
  } catch (const std::exception&) {
    counters_.add(Counter::out_file_errors);
    retry_at_ = now + retry_after_;
    return false;
  }
}

void FileSink::write(const MessageHeader& header, const void* records, std::size_t bytes) {
  const auto now = Clock::now();
  if (!writable(now)) {
    counters_.add(Counter::out_file_dropped_bytes, kMessageHeaderBytes + bytes);
    return;
  }
  const std::uint64_t before = writer_->bytes_written();
  try {
    writer_->write_message(header, records, bytes);
    writer_->flush();
  } catch (const std::exception& e) {
    abandon(before, e.what());
    counters_.add(Counter::out_file_dropped_bytes, kMessageHeaderBytes + bytes);
    retry_at_ = now + retry_after_;
    return;
  }
  counters_.add(Counter::out_file_bytes, writer_->bytes_written() - before);
  if (writer_->bytes_written() < rotate_bytes_) return;
  try {
    writer_->close();
    if (observer_) observer_(writer_->path(), false);
    writer_.reset();
    open_next();
  } catch (const std::exception& e) {
    if (writer_) {
      abandon(writer_->bytes_written(), e.what());
    } else {
      counters_.add(Counter::out_file_errors);
      spdlog::error("list-mode file sink: {}; retrying", e.what());
    }
    retry_at_ = now + retry_after_;
  }
}

void FileSink::close() {
  if (writer_) {
    auto w = std::move(writer_);
    w->close();
    if (observer_) observer_(w->path(), false);
  }
}

}  // namespace petdaq::daemon

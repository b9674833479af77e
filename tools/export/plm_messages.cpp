#include "tools/export/plm_messages.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "core/plm_file.h"

namespace petdaq::exporter {

PlmMessageReader::PlmMessageReader(const std::filesystem::path& file) : path_(file) {
  file_ = std::fopen(file.c_str(), "rb");
  if (!file_) throw PlmError(path_.string() + ": cannot open: " + std::strerror(errno));
  std::error_code ec;
  file_bytes_ = std::filesystem::file_size(file, ec);
  if (ec) file_bytes_ = UINT64_MAX;
  std::uint8_t header[kPlmHeaderBytes];
  if (read_some(header, sizeof header) != sizeof header)
    throw PlmError(path_.string() + ": truncated file header");
}

PlmMessageReader::~PlmMessageReader() {
  if (file_) std::fclose(file_);
}

std::size_t PlmMessageReader::read_some(void* data, std::size_t bytes) {
  const std::size_t got = std::fread(data, 1, bytes, file_);
  if (got != bytes && std::ferror(file_))
    throw PlmError(path_.string() + ": read failed: " + std::strerror(errno));
  offset_ += got;
  return got;
}

bool PlmMessageReader::next(MessageHeader& header, std::vector<std::uint8_t>& body) {
  const std::uint64_t at = offset_;
  std::uint8_t bytes[kMessageHeaderBytes];
  const std::size_t got = read_some(bytes, sizeof bytes);
  if (got == 0) return false;
  if (got != sizeof bytes) {
    partial_tail_bytes_ = got;
    return false;
  }
  const std::string where = path_.string() + ": message at byte " + std::to_string(at);
  header = decode_message_header(bytes);
  if (header.magic != kMessageMagic) throw PlmError(where + ": bad message magic");
  if (header.version == 0 || header.version > kMessageVersion)
    throw PlmError(where + ": message version " + std::to_string(header.version) +
                   " is not supported");
  const std::uint64_t want = std::uint64_t{header.record_count} * header.record_size;
  if (want > file_bytes_ - std::min(file_bytes_, offset_)) {
    // A file being written may have grown since it was opened.
    std::error_code ec;
    const std::uint64_t now = std::filesystem::file_size(path_, ec);
    if (!ec) file_bytes_ = std::max(file_bytes_, now);
  }
  // A corrupt count must not make us allocate more than the file holds.
  const std::uint64_t left = file_bytes_ - std::min(file_bytes_, offset_);
  if (want > left) {
    partial_tail_bytes_ = kMessageHeaderBytes + left;
    return false;
  }
  body.resize(want);
  const std::size_t read = read_some(body.data(), want);
  if (read != want) {
    partial_tail_bytes_ = kMessageHeaderBytes + read;
    return false;
  }
  return true;
}

}  // namespace petdaq::exporter

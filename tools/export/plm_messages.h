// Every message of a list-mode file (.plm, DESIGN section 7), whatever its kind: the PETSIRD
// export takes the coincidences (kinds 1, 2) and the scanner-wide dead intervals (kind 5) and
// skips, counting them, kinds it does not know. The file header is PlmReader's to check.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <vector>

#include "proto/records.h"

namespace petdaq::exporter {

class PlmMessageReader {
 public:
  // Opens the file and goes past its 64-byte header; throws PlmError naming the file.
  explicit PlmMessageReader(const std::filesystem::path& file);
  ~PlmMessageReader();
  PlmMessageReader(const PlmMessageReader&) = delete;
  PlmMessageReader& operator=(const PlmMessageReader&) = delete;

  // The next complete message and its body (record_count · record_size bytes). False at the
  // end of the file or at a message cut short by it (partial_tail_bytes() says how much of
  // it there was: a file still being written). A bad magic or version throws PlmError.
  bool next(MessageHeader& header, std::vector<std::uint8_t>& body);
  std::uint64_t partial_tail_bytes() const { return partial_tail_bytes_; }
  std::uint64_t offset() const { return offset_; }

 private:
  std::size_t read_some(void* data, std::size_t bytes);

  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
  std::uint64_t offset_ = 0;
  std::uint64_t file_bytes_ = 0;
  std::uint64_t partial_tail_bytes_ = 0;
};

}  // namespace petdaq::exporter

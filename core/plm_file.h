// The list-mode file (DESIGN section 7): the .plm writer and reader (the threaded writer and
// the ResultSink that writes a .plm: core/plm_sink.h). Its messages are the published ones
// (core/message_builder.h): the daemon's publisher and file sink, petdaq-offline and
// petdaq-record all go through these, so a file and a subscription hold the same bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <stdexcept>
#include <vector>

#include "core/message_builder.h"
#include "proto/records.h"

namespace petdaq {

struct Settings;

// A refused or unreadable .plm file; what() names the file and the problem.
class PlmError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The list-mode file header for these settings (settings_hash from output_settings_hash,
// created_unix_ns = now).
PlmHeader make_plm_header(const Settings& settings);

// Writes a .plm file: the file header, then messages exactly as published. Buffered; every
// error throws PlmError naming the file.
class PlmWriter {
 public:
  PlmWriter(const std::filesystem::path& file, const PlmHeader& header);
  ~PlmWriter();
  PlmWriter(const PlmWriter&) = delete;
  PlmWriter& operator=(const PlmWriter&) = delete;

  // `bytes` must equal header.record_count * header.record_size.
  void write_message(const MessageHeader& header, const void* records, std::size_t bytes);
  // Hands what is buffered to the file now; throws if it did not get there.
  void flush();
  // Flushes and closes; throws if the data did not reach the file. The destructor closes
  // too but cannot report an error.
  void close();
  std::uint64_t bytes_written() const { return bytes_written_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  void write(const void* data, std::size_t bytes);

  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
  std::unique_ptr<char[]> buffer_;
  std::uint64_t bytes_written_ = 0;
};

// Reads and validates a .plm file sequentially, one message at a time (files may be GBs).
// Its state is one cursor over one file (the open file, its header, the position and the
// partial tail, what the messages so far skipped or held), so it stays in one class.
class PlmReader {
 public:
  // Opens the file and checks its header: magic, version, header size.
  explicit PlmReader(const std::filesystem::path& file);
  ~PlmReader();
  PlmReader(const PlmReader&) = delete;
  PlmReader& operator=(const PlmReader&) = delete;

  const PlmHeader& header() const { return header_; }
  // Reads the next coincidence message (prompts or delayed) into `header` and `records`
  // (resized to its record count), or the next deadtime message (DESIGN section 6,
  // "Overload"), which leaves `records` empty and its intervals in dead_intervals().
  // Messages of other kinds (singles, or kinds this build does not know) are skipped and
  // counted in skipped(). Returns false at a clean end of file; throws PlmError on a
  // truncated message, a bad magic or version, or a record size other than its kind's (32
  // for coincidences, 16 for singles, 24 for deadtime).
  bool next(MessageHeader& header, std::vector<CoincRecord>& records);
  // Like next(), but a message cut short by the end of the file (a file still being
  // written) ends the reading instead of throwing; partial_tail_bytes() then says how many
  // bytes of it there were. Anything else wrong still throws.
  bool next_complete(MessageHeader& header, std::vector<CoincRecord>& records);
  // The next message of any kind, its body as bytes (record_count × record_size); with
  // `tolerate_tail` as next_complete(), else as next().
  bool next_message(MessageHeader& header, std::vector<std::uint8_t>& body, bool tolerate_tail);
  // Messages next()/next_complete() skipped, by kind, and in all.
  const std::map<std::uint16_t, std::uint64_t>& skipped() const { return skipped_; }
  std::uint64_t skipped_messages() const;
  std::uint64_t partial_tail_bytes() const { return partial_tail_bytes_; }
  std::uint64_t partial_tail_offset() const { return partial_tail_offset_; }
  std::uint64_t offset() const { return offset_; }
  // The intervals of the last message read, when it was a deadtime message.
  const std::vector<DeadInterval>& dead_intervals() const { return dead_; }

 private:
  void open_file_header();  // the file header and the buffer; throws PlmError
  std::size_t read_some(void* data, std::size_t bytes);
  bool read_coincidences(MessageHeader& header, std::vector<CoincRecord>& records,
                         bool tolerate_tail);
  // A message's header, checked; `want` is its body's size. False at the end or at a
  // partial tail (tolerate_tail).
  bool read_header(MessageHeader& header, std::size_t& want, bool tolerate_tail);
  bool read_body(void* data, std::size_t bytes, bool tolerate_tail);

  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
  std::unique_ptr<char[]> buffer_;
  PlmHeader header_;
  std::uint64_t offset_ = 0;
  std::uint64_t file_bytes_ = 0;
  std::uint64_t partial_tail_bytes_ = 0;
  std::uint64_t partial_tail_offset_ = 0;
  std::uint64_t message_bytes_ = 0;  // of the message being read
  std::map<std::uint16_t, std::uint64_t> skipped_;
  std::vector<DeadInterval> dead_;
};

// Throws PlmError naming `file` unless `bytes` is what `header` says its records take
// (record_count * record_size): a message's records are what its header says.
void check_message_bytes(const std::filesystem::path& file, const MessageHeader& header,
                         std::size_t bytes);

// The record size of a message kind a .plm file holds (32 for coincidences, 16 for
// singles); 0 for a kind the readers do not decode (skipped, whatever its record size).
std::size_t plm_record_size(std::uint16_t kind);

}  // namespace petdaq

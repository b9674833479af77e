// The list-mode file written by threads of their own (DESIGN section 7): PlmThreadWriter,
// which lends its memory to a backend and writes each message at its place in the file, and
// PlmSink, the ResultSink petdaq-offline writes its .plm through. The file is core/plm_file.h's.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <sys/uio.h>

#include "core/backend.h"
#include "core/host_allocator.h"
#include "core/message_arena.h"
#include "core/message_builder.h"
#include "core/plm_file.h"
#include "proto/records.h"

namespace petdaq {

struct Settings;

// How PlmThreadWriter writes.
struct PlmWriterOptions {
  // Threads that write messages to the file, each at the message's place in it (pwritev):
  // the kernel's copies into the page cache run side by side. A file that cannot seek (a
  // pipe) gets one thread, writing in order.
  unsigned threads = 1;
  // The bytes messages wait in until written (a MessageArena): the records a backend wrote
  // into memory the writer lent it (lend()), or a copy of them.
  std::size_t memory_bytes = 16u << 20;
  // Where that memory comes from (null: ordinary memory): page-locked for the GPU backend,
  // so that it copies records straight into it (Backend::make_stage_allocator()).
  std::unique_ptr<HostAllocator> allocator;
};

// PlmWriter's file, written by threads of their own, so that the caller's thread at most
// copies: write_message() gives each message its place in the file, holds its records in
// the writer's memory (where a backend wrote them, when they lie there, or a copy) and
// returns; the threads write the messages and let go of them. With the memory full the
// caller waits for a thread. Nothing allocates after construction. A write error is
// rethrown, as the PlmError PlmWriter gives, by the next write_message(), flush() or close().
// The file is whole once flush() or close() returns; before that, with several threads, a
// later message may be in it before an earlier one.
// Its state stays in one class: the queue of messages, its indices and the stop/error flags
// are the hand-over between the caller's thread and the writer threads, all guarded by
// mutex_.
class PlmThreadWriter final : public ResultMemory {
 public:
  PlmThreadWriter(const std::filesystem::path& file, const PlmHeader& header,
                  PlmWriterOptions options = {});
  // Writes what was given (errors cannot be reported here: close() first).
  ~PlmThreadWriter() override;
  PlmThreadWriter(const PlmThreadWriter&) = delete;
  PlmThreadWriter& operator=(const PlmThreadWriter&) = delete;

  void write_message(const MessageHeader& header, const void* records, std::size_t bytes);
  // ResultMemory: a piece of the writer's memory for a slice's output, or null when full.
  // The caller (the thread that calls write_message) lets go of each piece once the slice
  // is delivered: let_go_lent().
  void* lend(std::size_t bytes) override;
  void let_go_lent(const SliceResult& result);
  // Waits until everything given so far is in the file.
  void flush();
  void close();
  std::uint64_t bytes_written() const { return bytes_given_; }
  const std::filesystem::path& path() const { return path_; }
  unsigned threads() const { return static_cast<unsigned>(threads_.size()); }

  // What the writing took, for the offline summary.
  struct Stats {
    std::uint64_t messages = 0;
    std::uint64_t messages_in_place = 0;  // written from where the backend put the records
    std::uint64_t bytes_copied = 0;       // records copied into the writer's memory
    std::uint64_t parts_by_caller = 0;    // written on the caller's thread: no room came
    double caller_wait_s = 0;             // the caller waited for room or for the threads
    double write_s = 0;                   // the threads' time in the write calls, summed
  };
  Stats stats() const;

 private:
  // One message, or a part of one, at its place in the file.
  struct Item {
    std::uint64_t offset = 0;
    std::uint8_t header[kMessageHeaderBytes];
    std::size_t header_bytes = 0;  // 0 for a later part of a message
    const void* data = nullptr;
    std::size_t bytes = 0;
    void* hint = nullptr;  // the arena piece the data holds (let go of once written)
  };
  static constexpr std::size_t kMaxItems = MessageArena::kMaxPieces;

  void queue(const std::uint8_t* header, std::size_t header_bytes, const void* data,
             std::size_t bytes, void* hint);
  void* room_for(const void* data, std::size_t bytes, void*& hint);
  void write_here(const std::uint8_t* header, std::size_t header_bytes, const void* data,
                  std::size_t bytes);
  void write_at(std::uint64_t offset, const iovec* parts, int count);
  void wait_idle(std::unique_lock<std::mutex>& lock);
  void rethrow_locked();
  void run();

  std::filesystem::path path_;
  int fd_ = -1;
  bool seekable_ = true;
  std::unique_ptr<HostAllocator> allocator_;
  MessageArena arena_;
  std::vector<Item> items_;
  std::vector<char> done_;
  // Items [completed_, queued_) are in the queue: [completed_, picked_) taken by a thread (or
  // done, done_ set), [picked_, queued_) waiting; indices modulo kMaxItems.
  std::uint64_t queued_ = 0;
  std::uint64_t picked_ = 0;
  std::uint64_t completed_ = 0;
  std::uint64_t bytes_given_ = 0;  // the file's size once everything given is written
  Stats stats_;
  bool stop_ = false;
  bool closed_ = false;
  std::exception_ptr error_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::thread> threads_;  // last: started once the members above exist
};

// A ResultSink that writes each slice as one prompts message and, when delayed windows are
// enabled, one delayed message (empty slices included, so batches tile time), on writer
// threads (PlmThreadWriter): on_slice() costs the slicer's thread a copy of the records at
// most, none where the backend wrote them into the writer's memory (memory()).
class PlmSink final : public ResultSink {
 public:
  PlmSink(const Settings& settings, const std::filesystem::path& file,
          PlmWriterOptions options = {});
  // Lets go of what the backend wrote into the writer's memory once the slice is written.
  void on_slice(std::uint64_t run_id, const SliceResult& result) override;
  void close() { writer_.close(); }
  std::uint64_t messages() const { return messages_; }
  std::uint64_t bytes_written() const { return writer_.bytes_written(); }
  // For Backend::set_result_memory(): the backend's records then go to the file from where
  // it wrote them.
  ResultMemory& memory() { return writer_; }
  const PlmThreadWriter& writer() const { return writer_; }

 private:
  PlmThreadWriter writer_;
  MessageBuilder builder_;
  bool delayed_;
  std::uint64_t messages_ = 0;
};

}  // namespace petdaq

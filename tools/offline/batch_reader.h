// petdaq-offline's reader: threads of its own read the file of raw frames in batches and
// cut each batch into blocks with their summaries (core/chunk_summary.h), as petdaqd's
// receivers fill ring chunks, while the caller pushes the batch before into the slicer.
// A regular file is read by `readers` threads, batch k by thread k % readers at its own
// offset (pread), so that reading keeps up with many backend threads; anything else (a
// pipe) by one thread in sequence. The buffers are the caller's (page-locked for the GPU
// backend); nothing allocates after construction.
// A file the caller mapped into memory is not read at all: its batches are where they lie
// in the mapping (read only), and the threads page-lock it for the backend's copies, in
// windows of kWindowBatches batches (thread w % readers takes window w), and cut it.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/chunk_summary.h"
#include "core/host_allocator.h"
#include "proto/frame.h"

namespace petdaq {

class BatchReader {
 public:
  struct Batch {
    RawFrame* frames = nullptr;
    std::size_t n = 0;      // whole frames
    std::uint64_t bytes = 0;  // bytes read into this batch
    // The first `summarized` frames cut into `blocks` blocks; the rest (rare: more blocks
    // than kMaxBlocks) are the caller's to cut.
    std::size_t blocks = 0;
    std::size_t summarized = 0;
    std::vector<std::size_t> block_frames;
    std::vector<ChunkSummary> summaries;
    bool read_only = false;  // the frames lie in a mapped file: not to be written
  };
  static constexpr std::size_t kMaxBlocks = 64;
  static constexpr std::size_t kWindowBatches = 4;

  // `buffers` holds `count` (>= 3, and a multiple of `readers` when there are several)
  // buffers of `batch_frames` frames each, one after the other.
  BatchReader(std::FILE* input, RawFrame* buffers, std::size_t count, std::size_t batch_frames,
              std::size_t block_frames, std::uint64_t span_ticks, const SourceRule& rule,
              unsigned readers = 1);
  // A mapped file: `bytes` at `mapped` (the mapping's start, page-aligned). `lock` page-locks
  // each window for the backend (null: nothing to lock); `count` (a multiple of
  // kWindowBatches * readers, at least twice that) batch places.
  BatchReader(const RawFrame* mapped, std::uint64_t bytes, HostAllocator* lock, std::size_t count,
              std::size_t batch_frames, std::size_t block_frames, std::uint64_t span_ticks,
              const SourceRule& rule, unsigned readers);
  ~BatchReader();
  BatchReader(const BatchReader&) = delete;
  BatchReader& operator=(const BatchReader&) = delete;

  // The next batch in file order, null at the end of the file; rethrows a read error. The
  // batch stays the caller's until release().
  Batch* next();
  // The batch's buffer may be read into again: its frames are no longer needed.
  void release(Batch* batch);
  // Bytes of a partial frame at the end of the file (valid once next() returned null).
  std::size_t trailing_bytes() const { return trailing_; }
  // Seconds the reader threads spent reading (mapped: page-locking), summed.
  double read_seconds() const;
  unsigned readers() const { return readers_; }
  // Mapped: windows page-locked, and those the system would not lock (their copies then go
  // through the driver's own buffers, more slowly).
  std::uint64_t windows_locked() const;
  std::uint64_t windows_unlocked() const;

 private:
  enum class State { free, ready, taken };
  void run();                  // one thread, in sequence (fread)
  void run_at(unsigned reader);  // one of several, at offsets (pread)
  void run_mapped(unsigned reader);  // one of several, windows of a mapped file
  // Waits until batch k's place is free; false when stopped or past the end.
  bool wait_free(std::uint64_t k);
  // Batch k is cut (or its read failed: `error`, or it is past the end of the file: got == 0).
  void publish(std::uint64_t k, std::size_t got, int error, double seconds);
  void cut(Batch& b);

  std::FILE* input_;
  std::size_t batch_frames_;
  std::size_t block_frames_;
  std::uint64_t span_ticks_;
  SourceRule rule_;
  std::vector<Batch> batches_;
  std::vector<State> state_;
  std::size_t next_ = 0;  // the batch next() hands out
  std::uint64_t handed_ = 0;        // batches next() has handed out
  std::uint64_t end_ = UINT64_MAX;  // several readers: the first batch past the file's end
  std::uint64_t offset_ = 0;        // of the file's first byte to read
  int fd_ = -1;
  unsigned readers_ = 1;  // threads reading (set before they start)
  std::size_t trailing_ = 0;
  double read_s_ = 0;
  // Mapped: the mapping, the file's bytes, the locker; each window's locked start (null:
  // not locked), by window % (2 * readers).
  const RawFrame* mapped_ = nullptr;
  std::uint64_t mapped_bytes_ = 0;
  std::uint64_t mapped_batches_ = 0;
  HostAllocator* lock_ = nullptr;
  std::vector<const void*> locked_;
  std::uint64_t windows_locked_ = 0;
  std::uint64_t windows_unlocked_ = 0;
  bool finished_ = false;  // the reader is done: no batch after the ready ones
  bool stop_ = false;
  std::exception_ptr error_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::thread> threads_;
};

}  // namespace petdaq

// petdaq-offline's reader: a thread of its own reads the file of raw frames in batches and
// cuts each batch into blocks with their summaries (core/chunk_summary.h), as petdaqd's
// receivers fill ring chunks, while the caller pushes the batch before it into the slicer.
// The buffers are the caller's (page-locked for the GPU backend); nothing allocates after
// construction.
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
  };
  static constexpr std::size_t kMaxBlocks = 64;

  // `buffers` holds `count` (>= 3) buffers of `batch_frames` frames each, one after the other.
  BatchReader(std::FILE* input, RawFrame* buffers, std::size_t count, std::size_t batch_frames,
              std::size_t block_frames, std::uint64_t span_ticks, const SourceRule& rule);
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
  // Seconds the reader spent in fread.
  double read_seconds() const { return read_s_; }

 private:
  enum class State { free, ready, taken };
  void run();

  std::FILE* input_;
  std::size_t batch_frames_;
  std::size_t block_frames_;
  std::uint64_t span_ticks_;
  SourceRule rule_;
  std::vector<Batch> batches_;
  std::vector<State> state_;
  std::size_t next_ = 0;  // the batch next() hands out
  std::size_t trailing_ = 0;
  double read_s_ = 0;
  bool finished_ = false;  // the reader is done: no batch after the ready ones
  bool stop_ = false;
  std::exception_ptr error_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::thread thread_;
};

}  // namespace petdaq

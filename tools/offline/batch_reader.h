// petdaq-offline's reader: threads of its own read the file of raw frames in batches and
// cut each batch into blocks with their summaries (core/chunk_summary.h), as petdaqd's
// receivers fill ring chunks, while the caller pushes the batch before into the slicer.
// A regular file is read by `readers` threads, batch k by thread k % readers at its own
// offset (pread), so that reading keeps up with many backend threads; anything else (a
// pipe) by one thread in sequence. The buffers are the caller's (page-locked for the GPU
// backend); nothing allocates after construction.
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

// Cuts a batch into the blocks that next_block() would cut from the whole of it, one after
// the other, as its frames come in: a reader cuts each piece it has read while the piece is
// still in its core's cache, instead of reading the whole batch back from memory.
class BlockCutter {
 public:
  BlockCutter(RawFrame* frames, std::size_t max_blocks, std::size_t* block_frames,
              ChunkSummary* summaries, std::size_t block_frames_max, std::uint64_t span_ticks,
              const SourceRule& rule)
      : frames_(frames),
        max_blocks_(max_blocks),
        block_frames_(block_frames),
        summaries_(summaries),
        block_max_(block_frames_max),
        span_ticks_(span_ticks),
        rule_(rule) {}
  // The first `available` frames are in; `last`: they are all there will be. Cuts as far as
  // whole groups go (all of them when `last`).
  void feed(std::size_t available, bool last);
  std::size_t blocks() const { return blocks_; }
  // Frames in the blocks cut (valid once fed `last`): the rest, past max_blocks blocks, are
  // the caller's to cut.
  std::size_t cut_frames() const { return at_; }

 private:
  RawFrame* frames_;
  std::size_t max_blocks_;
  std::size_t* block_frames_;
  ChunkSummary* summaries_;
  std::size_t block_max_;
  std::uint64_t span_ticks_;
  SourceRule rule_;
  std::size_t blocks_ = 0;
  std::size_t at_ = 0;     // the open block's first frame
  std::size_t taken_ = 0;  // frames in the open block
};

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
  // A regular file is read in pieces of this many bytes, each cut as soon as it is in.
  static constexpr std::size_t kPieceBytes = std::size_t{1} << 20;

  // `buffers` holds `count` (>= 3, and a multiple of `readers` when there are several)
  // buffers of `batch_frames` frames each, one after the other.
  BatchReader(std::FILE* input, RawFrame* buffers, std::size_t count, std::size_t batch_frames,
              std::size_t block_frames, std::uint64_t span_ticks, const SourceRule& rule,
              unsigned readers = 1);
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
  // Seconds the reader threads spent reading, summed.
  double read_seconds() const;
  // Several readers: seconds they spent cutting batches into blocks, and waiting for a
  // buffer to read into (the caller had not given one back yet), summed.
  double cut_seconds() const;
  double buffer_wait_seconds() const;
  unsigned readers() const { return readers_; }

 private:
  enum class State { free, ready, taken };
  void run();                  // one thread, in sequence (fread)
  void run_at(unsigned reader);  // one of several, at offsets (pread)
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
  double cut_s_ = 0;
  double wait_s_ = 0;
  bool finished_ = false;  // the reader is done: no batch after the ready ones
  bool stop_ = false;
  std::exception_ptr error_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::thread> threads_;
};

}  // namespace petdaq

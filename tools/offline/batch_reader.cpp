#include "tools/offline/batch_reader.h"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>

namespace petdaq {

BatchReader::BatchReader(std::FILE* input, RawFrame* buffers, std::size_t count,
                         std::size_t batch_frames, std::size_t block_frames,
                         std::uint64_t span_ticks, const SourceRule& rule)
    : input_(input),
      batch_frames_(batch_frames),
      block_frames_(block_frames),
      span_ticks_(span_ticks),
      rule_(rule),
      batches_(count),
      state_(count, State::free) {
  if (count < 3) throw std::invalid_argument("BatchReader: at least 3 buffers");
  for (std::size_t i = 0; i < count; ++i) {
    batches_[i].frames = buffers + i * batch_frames;
    batches_[i].block_frames.resize(kMaxBlocks);
    batches_[i].summaries.resize(kMaxBlocks);
  }
  thread_ = std::thread([this] { run(); });
}

BatchReader::~BatchReader() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void BatchReader::run() {
  // A batch may end inside a frame: its first bytes open the next batch.
  std::uint8_t tail[kFrameBytes];
  std::size_t carried = 0;
  try {
    for (std::size_t i = 0;; i = (i + 1) % batches_.size()) {
      {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [&] { return stop_ || state_[i] == State::free; });
        if (stop_) return;
      }
      Batch& b = batches_[i];
      auto* const bytes = reinterpret_cast<std::uint8_t*>(b.frames);
      std::memcpy(bytes, tail, carried);
      const auto r0 = std::chrono::steady_clock::now();
      const std::size_t got =
          std::fread(bytes + carried, 1, batch_frames_ * kFrameBytes - carried, input_);
      read_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - r0).count();
      if (got == 0) {
        if (std::ferror(input_))
          throw std::runtime_error(std::string("read failed: ") + std::strerror(errno));
        std::lock_guard lock(mutex_);
        trailing_ = carried;
        finished_ = true;
        changed_.notify_all();
        return;
      }
      const std::size_t available = carried + got;
      b.n = available / kFrameBytes;
      b.bytes = got;
      carried = available % kFrameBytes;
      std::memcpy(tail, bytes + b.n * kFrameBytes, carried);
      std::size_t at = 0, k = 0;
      for (; at < b.n && k < kMaxBlocks; ++k) {
        b.block_frames[k] =
            next_block(b.frames + at, b.n - at, block_frames_, span_ticks_, rule_, b.summaries[k]);
        at += b.block_frames[k];
      }
      b.blocks = k;
      b.summarized = at;
      {
        std::lock_guard lock(mutex_);
        state_[i] = State::ready;
      }
      changed_.notify_all();
    }
  } catch (...) {
    std::lock_guard lock(mutex_);
    error_ = std::current_exception();
    finished_ = true;
    changed_.notify_all();
  }
}

BatchReader::Batch* BatchReader::next() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return state_[next_] == State::ready || finished_; });
  if (state_[next_] != State::ready) {
    if (error_) std::rethrow_exception(error_);
    return nullptr;
  }
  state_[next_] = State::taken;
  Batch* b = &batches_[next_];
  next_ = (next_ + 1) % batches_.size();
  return b;
}

void BatchReader::release(Batch* batch) {
  {
    std::lock_guard lock(mutex_);
    state_[static_cast<std::size_t>(batch - batches_.data())] = State::free;
  }
  changed_.notify_all();
}

}  // namespace petdaq

#include "tools/offline/batch_reader.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>

namespace petdaq {

BatchReader::BatchReader(std::FILE* input, RawFrame* buffers, std::size_t count,
                         std::size_t batch_frames, std::size_t block_frames,
                         std::uint64_t span_ticks, const SourceRule& rule, unsigned readers)
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
  // Several readers need a file that can be read at any offset; each keeps to its own
  // buffers (batch k goes to buffer k % count, read by thread k % readers).
  struct stat st{};
  const long at = std::ftell(input);
  if (readers > 1 && count % readers == 0 && at >= 0 && ::fstat(::fileno(input), &st) == 0 &&
      S_ISREG(st.st_mode)) {
    fd_ = ::fileno(input);
    offset_ = static_cast<std::uint64_t>(at);
    readers_ = readers;
    threads_.reserve(readers);
    for (unsigned r = 0; r < readers; ++r) threads_.emplace_back([this, r] { run_at(r); });
  } else {
    threads_.emplace_back([this] { run(); });
  }
}

BatchReader::~BatchReader() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void BlockCutter::feed(std::size_t available, bool last) {
  while (blocks_ < max_blocks_) {
    if (taken_ == 0) {
      if (at_ >= available) return;  // nothing more yet, or the batch is cut
      summaries_[blocks_].clear();
    }
    ChunkSummary& out = summaries_[blocks_];
    // next_block(): groups until the block is full, spans more than span_ticks_, or the
    // batch ends.
    for (;;) {
      if (taken_ >= block_max_) break;
      std::size_t k = std::min(kBlockGroupFrames, block_max_ - taken_);
      if (at_ + taken_ + k > available) {
        if (!last) return;  // the group is not all in yet
        k = available - at_ - taken_;
        if (k == 0) break;
      }
      out.add(frames_ + at_ + taken_, k, static_cast<std::uint32_t>(taken_), rule_);
      taken_ += k;
      if (out.span_ticks() > span_ticks_) break;
      if (last && at_ + taken_ == available) break;
    }
    block_frames_[blocks_++] = taken_;
    at_ += taken_;
    taken_ = 0;
  }
}

void BatchReader::cut(Batch& b) {
  BlockCutter cutter(b.frames, kMaxBlocks, b.block_frames.data(), b.summaries.data(),
                     block_frames_, span_ticks_, rule_);
  cutter.feed(b.n, true);
  b.blocks = cutter.blocks();
  b.summarized = cutter.cut_frames();
}

void BatchReader::run_at(unsigned reader) {
  const std::size_t batch_bytes = batch_frames_ * kFrameBytes;
  for (std::uint64_t k = reader;; k += readers_) {
    const std::size_t i = static_cast<std::size_t>(k % batches_.size());
    {
      const auto w0 = std::chrono::steady_clock::now();
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return stop_ || state_[i] == State::free || k >= end_; });
      if (stop_ || k >= end_) return;
      wait_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
    }
    Batch& b = batches_[i];
    auto* const bytes = reinterpret_cast<std::uint8_t*>(b.frames);
    // Read in pieces, each cut while it is still in this core's cache.
    BlockCutter cutter(b.frames, kMaxBlocks, b.block_frames.data(), b.summaries.data(),
                       block_frames_, span_ticks_, rule_);
    using Clock = std::chrono::steady_clock;
    Clock::duration reading{}, cutting{};
    std::size_t got = 0;
    int error = 0;
    while (got < batch_bytes) {
      const auto r0 = Clock::now();
      const ssize_t n = ::pread(fd_, bytes + got, std::min(kPieceBytes, batch_bytes - got),
                                static_cast<off_t>(offset_ + k * batch_bytes + got));
      const auto r1 = Clock::now();
      reading += r1 - r0;
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) error = errno;
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
      if (got < batch_bytes) {
        cutter.feed(got / kFrameBytes, false);
        cutting += Clock::now() - r1;
      }
    }
    b.n = got / kFrameBytes;
    b.bytes = got;
    const auto c0 = Clock::now();
    if (error == 0 && got > 0) {
      cutter.feed(b.n, true);
      b.blocks = cutter.blocks();
      b.summarized = cutter.cut_frames();
    }
    cutting += Clock::now() - c0;
    const double seconds = std::chrono::duration<double>(reading).count();
    const double cut_seconds = std::chrono::duration<double>(cutting).count();
    std::lock_guard lock(mutex_);
    read_s_ += seconds;
    cut_s_ += cut_seconds;
    if (error != 0) {
      // The batches before this one are still handed out; next() then rethrows.
      error_ = std::make_exception_ptr(
          std::runtime_error(std::string("read failed: ") + std::strerror(error)));
      end_ = std::min(end_, k);
    } else if (got == 0) {
      end_ = std::min(end_, k);
    } else {
      state_[i] = State::ready;
      if (got < batch_bytes) {  // the file's last batch
        trailing_ = got % kFrameBytes;
        end_ = std::min(end_, k + 1);
      }
    }
    changed_.notify_all();
  }
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
      cut(b);
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
  changed_.wait(lock, [&] {
    return state_[next_] == State::ready || finished_ || handed_ >= end_;
  });
  if (state_[next_] != State::ready) {
    if (error_) std::rethrow_exception(error_);
    return nullptr;
  }
  state_[next_] = State::taken;
  Batch* b = &batches_[next_];
  next_ = (next_ + 1) % batches_.size();
  ++handed_;
  return b;
}

double BatchReader::read_seconds() const {
  std::lock_guard lock(mutex_);
  return read_s_;
}

double BatchReader::cut_seconds() const {
  std::lock_guard lock(mutex_);
  return cut_s_;
}

double BatchReader::buffer_wait_seconds() const {
  std::lock_guard lock(mutex_);
  return wait_s_;
}

void BatchReader::release(Batch* batch) {
  {
    std::lock_guard lock(mutex_);
    state_[static_cast<std::size_t>(batch - batches_.data())] = State::free;
  }
  changed_.notify_all();
}

}  // namespace petdaq

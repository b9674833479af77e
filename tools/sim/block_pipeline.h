// The simulator's threads: workers generate blocks ahead of the caller, which takes them back
// in block order (the output does not depend on the number of threads).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "tools/sim/block.h"
#include "tools/sim/block_generator.h"

namespace petdaq::sim {

// Workers generate blocks in any order; the caller takes them back in block order.
class BlockPipeline {
 public:
  BlockPipeline(const BlockGenerator& generator, unsigned threads, std::uint64_t block_limit)
      : generator_(generator), limit_(block_limit), slots_(2 * threads + 2) {
    for (auto& s : slots_) s.block = std::make_unique<Block>();
    for (unsigned i = 0; i < threads; ++i) workers_.emplace_back([this] { work(); });
  }
  ~BlockPipeline() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& w : workers_) w.join();
  }

  // Block `index` (each taken once, in increasing order); valid until release().
  Block& acquire(std::uint64_t index) {
    std::unique_lock lock(mutex_);
    Slot& s = slots_[index % slots_.size()];
    cv_.wait(lock, [&] { return (s.ready && s.index == index) || error_; });
    if (error_) std::rethrow_exception(error_);
    return *s.block;
  }
  void release(std::uint64_t index) {
    {
      std::lock_guard lock(mutex_);
      slots_[index % slots_.size()].ready = false;
      consumed_ = index + 1;
    }
    cv_.notify_all();
  }

 private:
  struct Slot {
    std::unique_ptr<Block> block;
    std::uint64_t index = 0;
    bool ready = false;
  };

  void work() {
    for (;;) {
      std::uint64_t index;
      {
        std::unique_lock lock(mutex_);
        cv_.wait(lock, [&] {
          return stop_ || (next_ < limit_ && next_ < consumed_ + slots_.size());
        });
        if (stop_) return;
        index = next_++;
      }
      Block& b = *slots_[index % slots_.size()].block;
      try {
        generator_.generate(index, b);
      } catch (...) {
        std::lock_guard lock(mutex_);
        error_ = std::current_exception();
      }
      {
        std::lock_guard lock(mutex_);
        slots_[index % slots_.size()].index = index;
        slots_[index % slots_.size()].ready = true;
      }
      cv_.notify_all();
    }
  }

  const BlockGenerator& generator_;
  std::uint64_t limit_;
  std::vector<Slot> slots_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::uint64_t next_ = 0;
  std::uint64_t consumed_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
};

}  // namespace petdaq::sim

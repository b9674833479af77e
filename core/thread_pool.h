// A fixed set of threads made at start-up for fork-join work inside one call: run(n, fn)
// calls fn(0) ... fn(n - 1), each once, on the pool's threads and on the calling thread, and
// returns when all have returned. Tasks are handed out one at a time from an atomic counter,
// so a slow task does not hold the others back. Nothing allocates per call; an exception
// from a task is rethrown by run() (the first one; the other tasks still run).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace petdaq {

class ThreadPool {
 public:
  // `threads` counts the calling thread: threads - 1 are started (none for 0 or 1).
  explicit ThreadPool(unsigned threads) {
    const unsigned extra = threads > 1 ? threads - 1 : 0;
    workers_.reserve(extra);
    for (unsigned i = 0; i < extra; ++i) workers_.emplace_back([this] { serve(); });
  }
  ~ThreadPool() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    workers_.clear();  // joins
  }
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Threads that run tasks, the caller included.
  unsigned size() const { return static_cast<unsigned>(workers_.size()) + 1; }

  // fn(std::size_t task) for every task in [0, n_tasks). Not reentrant: one run at a time.
  template <class Fn>
  void run(std::size_t n_tasks, Fn&& fn) {
    using F = std::remove_reference_t<Fn>;
    run_erased(n_tasks, [](void* f, std::size_t task) { (*static_cast<F*>(f))(task); },
               const_cast<void*>(static_cast<const void*>(&fn)));
  }

 private:
  using Call = void (*)(void*, std::size_t);

  void run_erased(std::size_t n_tasks, Call call, void* context) {
    // One task (or no worker) runs here alone; the same loop keeps the exception rule.
    const bool wake = !workers_.empty() && n_tasks > 1;
    {
      std::lock_guard lock(mutex_);
      call_ = call;
      context_ = context;
      n_tasks_ = n_tasks;
      next_.store(0, std::memory_order_relaxed);
      if (wake) {
        busy_ = workers_.size();
        ++generation_;
      }
    }
    if (wake) wake_.notify_all();
    work();
    std::exception_ptr error;
    {
      // Every worker takes part in every generation, so none can still be reading this
      // run's call once busy_ is 0.
      std::unique_lock lock(mutex_);
      done_.wait(lock, [this] { return busy_ == 0; });
      error = std::exchange(error_, nullptr);
    }
    if (error) std::rethrow_exception(error);
  }

  void work() {
    for (;;) {
      const std::size_t task = next_.fetch_add(1, std::memory_order_relaxed);
      if (task >= n_tasks_) return;
      try {
        call_(context_, task);
      } catch (...) {
        std::lock_guard lock(mutex_);
        if (!error_) error_ = std::current_exception();
      }
    }
  }

  void serve() {
    std::uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
        if (stopping_) return;
        seen = generation_;
      }
      work();
      std::lock_guard lock(mutex_);
      if (--busy_ == 0) done_.notify_one();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;  // a new generation, or stopping
  std::condition_variable done_;  // busy_ reached 0
  // The current run; written under the mutex before generation_ moves, read after.
  Call call_ = nullptr;
  void* context_ = nullptr;
  std::size_t n_tasks_ = 0;
  std::atomic<std::size_t> next_{0};
  std::size_t busy_ = 0;  // workers still in the current generation
  std::uint64_t generation_ = 0;
  bool stopping_ = false;
  std::exception_ptr error_;
  std::vector<std::jthread> workers_;  // last: joined before the members above go
};

}  // namespace petdaq

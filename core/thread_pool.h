// A fixed set of threads made at start-up for fork-join work inside one call: run(n, fn)
// calls fn(0) ... fn(n - 1), each once, on the pool's threads and on the calling thread, and
// returns when all have returned. Tasks are handed out one at a time from an atomic counter,
// so a slow task does not hold the others back. Nothing allocates per call; an exception
// from a task is rethrown by run() (the first one; the other tasks still run).
//
// A backend calls run() several times per slice, microseconds apart, so the hand-over is
// the cost to keep small: a worker that has just finished spins on the generation counter
// for kSpin before it sleeps (std::atomic::wait), and the caller spins on the count of busy
// workers; a sleeping worker is woken only when one is asleep. Between slices (the slicer's
// own work, or an idle stream) the workers sleep and cost no processor time.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/thread_placement.h"

namespace petdaq {

// What a pool's runs cost, summed since it was made (read on the calling thread, between
// runs): `task_seconds` is the tasks' own time on all threads, `run_seconds` the callers'
// wall time inside run(); run_seconds * size() - task_seconds is the hand-over and the
// threads' waiting for the slowest task.
struct ThreadPoolStats {
  std::uint64_t runs = 0;
  double run_seconds = 0;
  double task_seconds = 0;
};

class ThreadPool {
 public:
  // How long a worker (and the caller) spins before it sleeps.
  static constexpr std::chrono::microseconds kSpin{50};

  // `threads` counts the calling thread: threads - 1 are started (none for 0 or 1). Thread k
  // (from 1) runs on cpus[(k - 1) % cpus.size()], anywhere when `cpus` is empty; a CPU the
  // kernel refuses leaves it anywhere (the daemon checks its lists at start-up).
  explicit ThreadPool(unsigned threads, std::vector<int> cpus = {}) {
    const unsigned extra = threads > 1 ? threads - 1 : 0;
    task_ns_ = std::vector<Slot>(extra + 1);
    workers_.reserve(extra);
    for (unsigned i = 0; i < extra; ++i)
      workers_.emplace_back([this, i, cpus] {
        name_this_thread("petdaq-pool" + std::to_string(i + 1));
        pin_this_thread(cpus, i);
        serve(i + 1);
      });
  }
  ~ThreadPool() {
    stopping_.store(true, std::memory_order_release);
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
    workers_.clear();  // joins
  }
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Threads that run tasks, the caller included.
  unsigned size() const { return static_cast<unsigned>(workers_.size()) + 1; }

  // fn(std::size_t task) for every task in [0, n_tasks), or fn(task, thread) with the index
  // of the thread that runs it (0: the caller; below size()), for per-thread state. Not
  // reentrant: one run at a time.
  template <class Fn>
  void run(std::size_t n_tasks, Fn&& fn) {
    using F = std::remove_reference_t<Fn>;
    if constexpr (std::is_invocable_v<F&, std::size_t, std::size_t>)
      run_erased(n_tasks,
                 [](void* f, std::size_t task, std::size_t thread) {
                   (*static_cast<F*>(f))(task, thread);
                 },
                 const_cast<void*>(static_cast<const void*>(&fn)));
    else
      run_erased(n_tasks,
                 [](void* f, std::size_t task, std::size_t) { (*static_cast<F*>(f))(task); },
                 const_cast<void*>(static_cast<const void*>(&fn)));
  }

  ThreadPoolStats stats() const {
    ThreadPoolStats s = stats_;
    std::uint64_t ns = 0;
    for (const Slot& slot : task_ns_) ns += slot.ns.load(std::memory_order_relaxed);
    s.task_seconds = static_cast<double>(ns) * 1e-9;
    return s;
  }

 private:
  using Call = void (*)(void*, std::size_t, std::size_t);
  using Clock = std::chrono::steady_clock;

  // Spins until done() or kSpin has passed; returns done().
  template <class Done>
  static bool spin(Done done) {
    const Clock::time_point until = Clock::now() + kSpin;
    for (;;) {
      for (int i = 0; i < 64; ++i) {
        if (done()) return true;
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
      }
      if (Clock::now() >= until) return done();
    }
  }

  void run_erased(std::size_t n_tasks, Call call, void* context) {
    const Clock::time_point start = Clock::now();
    // One task (or no worker) runs here alone; the same loop keeps the exception rule.
    const bool wake = !workers_.empty() && n_tasks > 1;
    call_ = call;
    context_ = context;
    n_tasks_ = n_tasks;
    next_.store(0, std::memory_order_relaxed);
    if (wake) {
      busy_.store(static_cast<std::uint32_t>(workers_.size()), std::memory_order_relaxed);
      // Publishes the run to the workers (they acquire the generation); sequentially
      // consistent with the sleepers' count (serve()).
      generation_.fetch_add(1, std::memory_order_seq_cst);
      if (sleeping_.load(std::memory_order_seq_cst) > 0) generation_.notify_all();
    }
    work(0);
    if (wake) {
      // Every worker takes part in every generation, so none can still be reading this
      // run's call once busy_ is 0.
      const auto finished = [this] { return busy_.load(std::memory_order_acquire) == 0; };
      while (!spin(finished)) {
        const std::uint32_t left = busy_.load(std::memory_order_acquire);
        if (left == 0) break;
        busy_.wait(left, std::memory_order_acquire);
      }
    }
    ++stats_.runs;
    stats_.run_seconds += std::chrono::duration<double>(Clock::now() - start).count();
    if (failed_.load(std::memory_order_acquire)) {
      std::exception_ptr error;
      {
        std::lock_guard lock(error_mutex_);
        error = std::exchange(error_, nullptr);
      }
      failed_.store(false, std::memory_order_relaxed);
      if (error) std::rethrow_exception(error);
    }
  }

  void work(std::size_t thread) {
    std::uint64_t ns = 0;
    for (;;) {
      const std::size_t task = next_.fetch_add(1, std::memory_order_relaxed);
      if (task >= n_tasks_) break;
      const Clock::time_point t0 = Clock::now();
      try {
        call_(context_, task, thread);
      } catch (...) {
        std::lock_guard lock(error_mutex_);
        if (!error_) error_ = std::current_exception();
        failed_.store(true, std::memory_order_release);
      }
      ns += static_cast<std::uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
    }
    if (ns) task_ns_[thread].ns.fetch_add(ns, std::memory_order_relaxed);
  }

  void serve(std::size_t thread) {
    std::uint32_t seen = 0;
    for (;;) {
      const auto moved = [&] { return generation_.load(std::memory_order_acquire) != seen; };
      if (!spin(moved)) {
        sleeping_.fetch_add(1, std::memory_order_seq_cst);
        // The caller reads sleeping_ after moving the generation: either it sees this
        // sleeper and notifies, or this load sees the new generation.
        while (generation_.load(std::memory_order_seq_cst) == seen)
          generation_.wait(seen, std::memory_order_acquire);
        sleeping_.fetch_sub(1, std::memory_order_relaxed);
      }
      seen = generation_.load(std::memory_order_acquire);
      if (stopping_.load(std::memory_order_acquire)) return;
      work(thread);
      if (busy_.fetch_sub(1, std::memory_order_acq_rel) == 1) busy_.notify_one();
    }
  }

  struct alignas(64) Slot {
    std::atomic<std::uint64_t> ns{0};
  };

  // The current run; written by the caller before generation_ moves, read after.
  Call call_ = nullptr;
  void* context_ = nullptr;
  std::size_t n_tasks_ = 0;
  alignas(64) std::atomic<std::size_t> next_{0};
  // 32-bit: the size std::atomic::wait sleeps on directly (a futex on Linux).
  alignas(64) std::atomic<std::uint32_t> generation_{0};
  alignas(64) std::atomic<std::uint32_t> busy_{0};  // workers still in the current generation
  std::atomic<unsigned> sleeping_{0};
  std::atomic<bool> stopping_{false};
  std::atomic<bool> failed_{false};
  std::mutex error_mutex_;
  std::exception_ptr error_;
  ThreadPoolStats stats_;
  std::vector<Slot> task_ns_;          // per thread (0: the caller)
  std::vector<std::jthread> workers_;  // last: joined before the members above go
};

}  // namespace petdaq

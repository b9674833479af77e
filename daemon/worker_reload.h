// The worker's reload room: the settings a SIGHUP re-read, handed from the main thread to the
// worker, and the engines of a reload: the next one while it is built on a thread of its own,
// what it changes, and the one it replaced while it is destroyed off the worker thread.
#pragma once

#include <atomic>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/settings.h"

namespace petdaq::daemon {

struct WorkerEngine;  // daemon/worker_engine.h

struct ReloadState {
  explicit ReloadState(BackendKind kind) : backend_kind(kind) {}

  // Any thread: the worker applies `reread` between two chunks.
  void request(const Settings& reread) {
    {
      std::lock_guard lock(mutex_);
      settings_ = reread;
    }
    requested.store(true, std::memory_order_release);
  }
  // The worker: the settings requested last (none: taken already).
  std::optional<Settings> take() {
    std::optional<Settings> reread;
    {
      std::lock_guard lock(mutex_);
      reread.swap(settings_);
    }
    return reread;
  }

  const BackendKind backend_kind;  // every engine's
  std::atomic<bool> requested{false};
  // The engine a reload is building (valid while it builds), what it changes, and the
  // engine it replaced, being destroyed off the worker thread.
  std::future<std::unique_ptr<WorkerEngine>> next_engine;
  std::vector<std::string> next_live;
  std::future<void> retired_engine;

 private:
  std::mutex mutex_;
  std::optional<Settings> settings_;
};

}  // namespace petdaq::daemon

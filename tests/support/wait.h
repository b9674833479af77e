// Waiting in tests: on an observable condition, with a deadline, never a bare sleep.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace petdaq::test {

// Polls `ready` every `poll` until it holds (true) or `limit` passes (false; `ready` is
// asked once more at the deadline).
inline bool wait_until(const std::function<bool()>& ready,
                       std::chrono::milliseconds limit = std::chrono::seconds(10),
                       std::chrono::milliseconds poll = std::chrono::milliseconds(50)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  for (;;) {
    if (ready()) return true;
    if (std::chrono::steady_clock::now() >= end) return false;
    std::this_thread::sleep_for(poll);
  }
}

// Polls `get` (a backend's histograms_snapshot() or image_snapshot(), which return null
// until the copy they queued is in) until it returns the set; null if it does not within
// `limit`.
template <class Get>
auto wait_for_snapshot(Get get, std::chrono::milliseconds limit = std::chrono::seconds(10))
    -> decltype(get()) {
  decltype(get()) got = nullptr;
  wait_until([&] { return (got = get()) != nullptr; }, limit, std::chrono::milliseconds(1));
  return got;
}

}  // namespace petdaq::test

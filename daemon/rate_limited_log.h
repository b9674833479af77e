// Warnings from the data path: at most one line per interval per call site, with the
// number of occurrences folded into it, so a flood of bad datagrams cannot flood the log.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string_view>

#include <spdlog/spdlog.h>

namespace petdaq::daemon {

class RateLimitedWarning {
 public:
  explicit RateLimitedWarning(std::chrono::milliseconds interval = std::chrono::seconds(5))
      : interval_ns_(std::chrono::duration_cast<std::chrono::nanoseconds>(interval).count()) {}

  template <class... Args>
  void warn(spdlog::format_string_t<Args...> fmt, Args&&... args) {
    const std::int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
    const std::uint64_t n = suppressed_.fetch_add(1, std::memory_order_relaxed) + 1;
    std::int64_t last = last_ns_.load(std::memory_order_relaxed);
    if (last != 0 && now - last < interval_ns_) return;
    if (!last_ns_.compare_exchange_strong(last, now, std::memory_order_relaxed)) return;
    suppressed_.fetch_sub(n, std::memory_order_relaxed);
    spdlog::warn("{} ({} occurrences since the last such warning)",
                 fmt::format(fmt, std::forward<Args>(args)...), n);
  }

 private:
  std::int64_t interval_ns_;
  std::atomic<std::int64_t> last_ns_{0};
  std::atomic<std::uint64_t> suppressed_{0};
};

}  // namespace petdaq::daemon

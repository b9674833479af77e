// Warnings from the data path: at most one line per interval per call site, with the
// number of occurrences folded into it, so a flood of bad datagrams cannot flood the log.
// What was held back is not lost: flush_held_back_warnings() (called once a second by the
// daemon's main thread) prints the last held-back message of each call site, with the
// occurrences since the line before, once its interval has passed.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string_view>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace petdaq::daemon {

class RateLimitedWarning {
 public:
  explicit RateLimitedWarning(std::chrono::milliseconds interval = std::chrono::seconds(5))
      : interval_ns_(std::chrono::duration_cast<std::chrono::nanoseconds>(interval).count()) {
    std::lock_guard lock(registry_mutex());
    next_ = registry();
    registry() = this;
  }
  RateLimitedWarning(const RateLimitedWarning&) = delete;
  RateLimitedWarning& operator=(const RateLimitedWarning&) = delete;
  ~RateLimitedWarning() {
    std::lock_guard lock(registry_mutex());
    for (RateLimitedWarning** p = &registry(); *p; p = &(*p)->next_)
      if (*p == this) {
        *p = next_;
        break;
      }
  }

  template <class... Args>
  void warn(spdlog::format_string_t<Args...> fmt, Args&&... args) {
    const std::int64_t now = now_ns();
    const std::uint64_t n = suppressed_.fetch_add(1, std::memory_order_relaxed) + 1;
    std::int64_t last = last_ns_.load(std::memory_order_relaxed);
    if ((last != 0 && now - last < interval_ns_) ||
        !last_ns_.compare_exchange_strong(last, now, std::memory_order_relaxed)) {
      // Held back: keep the text for flush().
      std::lock_guard lock(held_mutex_);
      const auto r = fmt::format_to_n(held_.data(), held_.size() - 1, fmt,
                                      std::forward<Args>(args)...);
      held_bytes_ = std::min(r.size, held_.size() - 1);
      return;
    }
    suppressed_.fetch_sub(n, std::memory_order_relaxed);
    spdlog::warn("{} ({} occurrences since the last such warning)",
                 fmt::format(fmt, std::forward<Args>(args)...), n);
  }

  // For warnings about things counted (datagrams dropped): `n` more of them. Each line
  // gives the total since the line before, however many calls added to it, e.g.
  // "host ring full, datagrams dropped: 30884 since the last such warning".
  void warn_count(std::uint64_t n, std::string_view what) {
    total_.fetch_add(n, std::memory_order_relaxed);
    counted_ = what;  // the same text at every call of one call site
    const std::int64_t now = now_ns();
    std::int64_t last = last_ns_.load(std::memory_order_relaxed);
    if ((last != 0 && now - last < interval_ns_) ||
        !last_ns_.compare_exchange_strong(last, now, std::memory_order_relaxed))
      return;
    print_total();
  }

  // Prints the held-back message, if any, once the interval since the last line has passed.
  void flush() {
    const std::int64_t now = now_ns();
    std::int64_t last = last_ns_.load(std::memory_order_relaxed);
    if (suppressed_.load(std::memory_order_relaxed) == 0 && total_.load(std::memory_order_relaxed) == 0)
      return;
    if (last != 0 && now - last < interval_ns_) return;
    if (total_.load(std::memory_order_relaxed) != 0) {
      if (!last_ns_.compare_exchange_strong(last, now, std::memory_order_relaxed)) return;
      print_total();
      return;
    }
    if (!last_ns_.compare_exchange_strong(last, now, std::memory_order_relaxed)) return;
    const std::uint64_t n = suppressed_.exchange(0, std::memory_order_relaxed);
    if (n == 0) return;
    std::lock_guard lock(held_mutex_);
    spdlog::warn("{} ({} occurrences since the last such warning)",
                 std::string_view(held_.data(), held_bytes_), n);
  }

  // Every warning's flush().
  static void flush_all() {
    std::lock_guard lock(registry_mutex());
    for (RateLimitedWarning* w = registry(); w; w = w->next_) w->flush();
  }

 private:
  void print_total() {
    const std::uint64_t total = total_.exchange(0, std::memory_order_relaxed);
    if (total) spdlog::warn("{}: {} since the last such warning", counted_, total);
  }

  static std::int64_t now_ns() { return std::chrono::steady_clock::now().time_since_epoch().count(); }
  static RateLimitedWarning*& registry() {
    static RateLimitedWarning* head = nullptr;
    return head;
  }
  static std::mutex& registry_mutex() {
    static std::mutex m;
    return m;
  }

  std::int64_t interval_ns_;
  std::atomic<std::int64_t> last_ns_{0};
  std::atomic<std::uint64_t> suppressed_{0};
  std::atomic<std::uint64_t> total_{0};  // warn_count(): things counted since the last line
  std::string_view counted_;             // warn_count()'s text (a literal of the call site)
  std::mutex held_mutex_;
  std::array<char, 256> held_{};
  std::size_t held_bytes_ = 0;
  RateLimitedWarning* next_ = nullptr;
};

// What the daemon's main thread calls once a second.
inline void flush_held_back_warnings() { RateLimitedWarning::flush_all(); }

}  // namespace petdaq::daemon

// petdaq-web's own counters: every message it refuses and every client it drops has a name,
// shown on the page, served in /status.json and printed at exit. One X-macro list, so the
// enum and the names cannot drift (as core/counters.h does for the daemon).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>

#define PETDAQ_WEB_COUNTERS(X)                                                            \
  X(rates_received, "web.rates_received")           /* valid rates documents */           \
  X(rates_malformed, "web.rates_malformed")         /* rates body not a version-1 doc */ \
  X(histograms_received, "web.histograms_received") /* messages on topic histograms */    \
  X(histograms_malformed, "web.histograms_malformed") /* of those, refused: skipped */ \
  X(image_received, "web.image_received")           /* messages on topic image */         \
  X(image_malformed, "web.image_malformed")         /* of those, refused: skipped */      \
  X(messages_malformed, "web.messages_malformed")   /* wrong frames, header or topic */   \
  X(publisher_changes, "web.publisher_changes") /* another publisher_id than before */   \
  X(updates_dropped, "web.updates_dropped")         /* the server loop was behind */       \
  X(clients_accepted, "web.clients_accepted")       /* WebSocket connections */           \
  X(clients_dropped_slow, "web.clients_dropped_slow") /* queue full or write stalled */   \
  X(http_requests, "web.http_requests")                                                   \
  X(http_refused, "web.http_refused") /* not GET/HEAD, or no such page */              \
  X(connections_refused, "web.connections_refused") /* over --max-connections */         \
  X(messages_too_large, "web.messages_too_large") /* request or WebSocket message */     \
  X(origin_refused, "web.origin_refused") /* Origin or Host not allowed: 403 */

namespace petdaq::web {

enum class WebCounter : std::size_t {
#define PETDAQ_WEB_ENUM(id, name) id,
  PETDAQ_WEB_COUNTERS(PETDAQ_WEB_ENUM)
#undef PETDAQ_WEB_ENUM
};

inline constexpr std::array kWebCounterNames = {
#define PETDAQ_WEB_NAME(id, name) std::string_view(name),
    PETDAQ_WEB_COUNTERS(PETDAQ_WEB_NAME)
#undef PETDAQ_WEB_NAME
};
inline constexpr std::size_t kWebCounterCount = kWebCounterNames.size();

// Shared by the intake thread and the server loop: relaxed atomics, read for display only.
class WebCounters {
 public:
  void add(WebCounter c, std::uint64_t n = 1) {
    values_[static_cast<std::size_t>(c)].fetch_add(n, std::memory_order_relaxed);
  }
  std::uint64_t get(WebCounter c) const {
    return values_[static_cast<std::size_t>(c)].load(std::memory_order_relaxed);
  }
  std::uint64_t get(std::size_t i) const { return values_[i].load(std::memory_order_relaxed); }

 private:
  std::array<std::atomic<std::uint64_t>, kWebCounterCount> values_{};
};

}  // namespace petdaq::web

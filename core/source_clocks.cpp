#include "core/source_clocks.h"

#include <algorithm>

#include "core/stream_limits.h"

namespace petdaq {

void SourceClocks::wake_others(std::size_t src, Clock::time_point now) {
  paused_ = false;
  for (std::size_t i = 0; i < sources_.size(); ++i) {
    Source& o = sources_[i];
    if (i == src || !o.sent || !o.idle || o.reset) continue;
    o.idle = false;
    o.woken = true;
    o.last_seen = now;
  }
}

std::uint32_t SourceClocks::mark_idle(Clock::time_point now, Clock::duration idle) {
  std::uint32_t marked = 0;
  for (Source& s : sources_) {
    if (s.sent && !s.idle && now - s.last_seen >= idle) {
      s.idle = true;
      ++marked;
    }
  }
  if (marked == 0) return 0;
  bool any_sent = false;
  for (const Source& s : sources_) {
    if (!s.sent) continue;
    any_sent = true;
    if (!s.idle) return marked;
  }
  paused_ = any_sent;
  return marked;
}

void SourceClocks::seen_all(Clock::time_point t) {
  for (Source& s : sources_) s.last_seen = t;
}

std::uint64_t SourceClocks::horizon(std::uint64_t max_disorder_ticks) const {
  std::uint64_t lowest = ~std::uint64_t{0};
  std::uint64_t highest = 0;
  bool any_live = false;
  bool any_sent = false;
  for (const Source& s : sources_) {
    if (!s.sent) continue;
    any_sent = true;
    highest = std::max(highest, s.latest);
    if (s.idle || s.reset || s.lagging) continue;
    any_live = true;
    lowest = std::min(lowest, s.latest);
  }
  if (!any_sent) return 0;
  return any_live ? sat_sub(lowest, max_disorder_ticks) : sat_add(highest, 1);
}

std::uint64_t SourceClocks::latest_time() const {
  std::uint64_t t = 0;
  for (const Source& s : sources_)
    if (s.sent) t = std::max(t, s.latest);
  return t;
}

void SourceClocks::skip_dead(std::span<const std::uint64_t> reached) {
  for (std::size_t b = 0; b < sources_.size() && b < reached.size(); ++b) {
    Source& s = sources_[b];
    if (reached[b] > 0 && s.sent && !s.reset && !s.lagging)
      s.latest = std::max(s.latest, reached[b] - 1);
  }
}

std::uint64_t SourceClocks::leaders_time() {
  std::size_t n = 0;
  for (const Source& s : sources_)
    if (live(s) && n < scratch_.size()) scratch_[n++] = s.latest;
  if (n == 0) return 0;
  std::nth_element(scratch_.begin(), scratch_.begin() + n / 2, scratch_.begin() + n);
  return scratch_[n / 2];
}

std::uint32_t SourceClocks::update_lag(std::uint64_t max_lag, std::uint64_t h,
                                       std::uint64_t slack) {
  const std::uint64_t leaders = leaders_time();
  std::uint32_t declared = 0;
  for (Source& s : sources_) {
    if (!live(s)) continue;
    const std::uint64_t gap = sat_sub(leaders, s.latest);
    if (s.lagging) {
      if (gap <= s.lag_rejoin && sat_add(s.latest, slack) >= h) s.lagging = false;
    } else if (max_lag > 0 && gap > max_lag && !s.receiver_behind) {
      s.lagging = true;
      s.lag_rejoin = max_lag / 2;
      ++declared;
    }
  }
  return declared;
}

void SourceClocks::declare_lagging(std::size_t src) {
  Source& s = sources_[src];
  s.lagging = true;
  s.lag_rejoin = sat_sub(leaders_time(), s.latest) / 2;
}

int SourceClocks::holding_back(std::uint64_t margin) const {
  int lowest = -1;
  std::uint64_t lo = ~std::uint64_t{0}, hi = 0;
  for (std::size_t i = 0; i < sources_.size(); ++i) {
    const Source& s = sources_[i];
    if (!live(s) || s.lagging) continue;
    hi = std::max(hi, s.latest);
    if (s.latest < lo) {
      lo = s.latest;
      lowest = static_cast<int>(i);
    }
  }
  if (lowest >= 0 && sources_[static_cast<std::size_t>(lowest)].receiver_behind) return -1;
  return lowest >= 0 && hi > sat_add(lo, margin) ? lowest : -1;
}

bool SourceClocks::held_by_receiver_behind() const {
  const Source* lowest = nullptr;
  for (const Source& s : sources_)
    if (live(s) && !s.lagging && (!lowest || s.latest < lowest->latest)) lowest = &s;
  return lowest && lowest->receiver_behind;
}

bool SourceClocks::any_lagging() const {
  for (const Source& s : sources_)
    if (s.lagging) return true;
  return false;
}

void SourceClocks::mark_reset(std::size_t src, Clock::time_point now) {
  Source& s = sources_[src];
  if (!s.reset) s.reset_since = now;
  s.reset = true;
  maybe_reset_ = true;
}

bool SourceClocks::any_reset() {
  if (!maybe_reset_) return false;
  for (const Source& s : sources_)
    if (s.reset) return true;
  maybe_reset_ = false;
  return false;
}

bool SourceClocks::reset_due(bool at_finish, std::size_t held, Clock::time_point now,
                             Clock::duration confirm, Clock::duration silent) const {
  bool any = false;
  for (const Source& s : sources_) {
    if (s.reset) {
      if (!at_finish && (s.held < kResetConfirmFrames || now - s.reset_since < confirm))
        return false;
      any = true;
    } else if (s.sent && (!s.idle || now - s.last_seen < silent)) {
      return false;
    }
  }
  return any && held > 0;
}

void SourceClocks::forget_held() {
  for (Source& s : sources_) s.held = 0;
}

void SourceClocks::start_run() {
  for (Source& s : sources_) {
    const Clock::time_point seen = s.last_seen;
    s = Source{};
    s.last_seen = seen;
  }
  maybe_reset_ = false;
  paused_ = false;
}

void SourceClocks::took(std::uint8_t src, std::uint64_t max_time, Clock::time_point now) {
  resume(src, now);
  Source& s = sources_[src];
  s.last_seen = now;
  s.idle = false;
  s.ahead_streak = 0;
  // A source that has not sent has latest 0, so max() is the per-frame rule.
  s.latest = std::max(s.latest, max_time);
  s.sent = true;
}

}  // namespace petdaq

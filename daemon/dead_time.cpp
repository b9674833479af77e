#include "daemon/dead_time.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace petdaq::daemon {

namespace {
constexpr std::uint64_t kOpenEnd = std::numeric_limits<std::uint64_t>::max();
std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) { return a > kOpenEnd - b ? kOpenEnd : a + b; }
}

DeadTime::DeadTime(double high_fraction, double low_fraction, std::size_t ring_chunks,
                   const SourceRule& rule, Counters& counters)
    : high_chunks_(std::max<std::size_t>(
          1, static_cast<std::size_t>(std::ceil(high_fraction * static_cast<double>(ring_chunks))))),
      low_chunks_(static_cast<std::size_t>(low_fraction * static_cast<double>(ring_chunks))),
      rule_(rule),
      counters_(counters),
      bdm_dropped_(counters.bdm_count(), 0),
      reached_(counters.bdm_count(), 0) {}

std::uint64_t DeadTime::wild_after() const {
  if (begin_at_first_) return kOpenEnd;
  return saturating_add(std::max(open_.t_begin, open_.t_end), max_future_);
}

// `which`: kRecent for the open interval, else the index in closed_in_run_.
bool DeadTime::in_dead(std::uint64_t t, std::size_t& which) const {
  if (shedding_ && (begin_at_first_ || t >= open_.t_begin) && !wild(t)) {
    which = kRecent;
    return true;
  }
  for (std::size_t i = 0; i < closed_in_run_.size(); ++i)
    if (t >= closed_in_run_[i].t_begin && t < closed_in_run_[i].t_end) {
      which = i;
      return true;
    }
  return false;
}

void DeadTime::note_dropped(std::size_t which, std::uint64_t t_min, std::uint64_t t_max,
                            std::uint64_t frames) {
  DeadInterval& d = which == kRecent ? open_ : closed_in_run_[which];
  d.frames_dropped += frames;
  if (which != kRecent) return;
  if (begin_at_first_) {
    // The run had taken nothing: the interval begins at the first frame it drops.
    begin_at_first_ = false;
    d.t_begin = std::max(t_min, closed_in_run_.last_end());
    d.t_end = d.t_begin;
  }
  d.t_end = std::max(d.t_end, t_max + 1);
}

void DeadTime::drop_whole(Chunk& c, std::size_t which) {
  const ChunkSummary& s = c.summary;
  for (std::uint32_t i = 0; i < s.present_count; ++i) {
    const std::uint8_t src = s.present[i];
    if (src < bdm_dropped_.size()) {
      counters_.add_bdm_dead(src, s.sources[src].frames);
      reached_[src] = std::max(reached_[src], s.sources[src].max_time + 1);
    }
  }
  counters_.add(Counter::stream_dead_frames, c.frame_count);
  note_dropped(which, s.min_time, s.max_time, c.frame_count);
  c.reset();
}

void DeadTime::drop_frames(Chunk& c) {
  RawFrame* f = c.frames();
  std::size_t kept = 0;
  std::uint64_t dropped = 0;
  for (std::size_t i = 0; i < c.frame_count; ++i) {
    const int src = rule_.source_of(f[i].bytes);
    std::size_t which = 0;
    if (src >= 0) {
      const std::uint64_t t = frame_time(f[i].bytes);
      if (in_dead(t, which)) {
        note_dropped(which, t, t, 1);
        if (static_cast<std::size_t>(src) < bdm_dropped_.size()) {
          ++bdm_dropped_[src];
          reached_[src] = std::max(reached_[src], t + 1);
        }
        ++dropped;
        continue;
      }
    }
    f[kept++] = f[i];
  }
  for (std::size_t b = 0; b < bdm_dropped_.size(); ++b)
    if (bdm_dropped_[b]) counters_.add_bdm_dead(static_cast<std::uint32_t>(b), std::exchange(bdm_dropped_[b], 0));
  counters_.add(Counter::stream_dead_frames, dropped);
  // The chunk is now its kept frames, with their summary.
  c.summary.clear();
  c.summary.add(f, kept, 0, rule_);
  c.frame_count = kept;
  c.used_bytes = kept * kFrameBytes;
}

void DeadTime::open(std::uint64_t latest_taken) {
  shedding_ = true;
  const std::uint64_t after = latest_taken > 0 ? latest_taken + 1 : closed_in_run_.last_end();
  begin_at_first_ = after == 0;
  open_.t_begin = std::max(after, closed_in_run_.last_end());
  open_.t_end = open_.t_begin;
  open_.frames_dropped = 0;
}

bool DeadTime::filter(Chunk& c, std::size_t in_use, std::size_t waiting, std::uint64_t latest_taken,
                      std::uint64_t max_future_ticks) {
  max_future_ = max_future_ticks;
  if (reached_any_) {
    std::fill(reached_.begin(), reached_.end(), 0);
    reached_any_ = false;
  }
  const std::size_t frames_before = c.frame_count;
  if (!shedding_ && in_use >= high_chunks_) open(latest_taken);
  const ChunkSummary& s = c.summary;
  if (c.frame_count > 0 && s.present_count > 0 && (shedding_ || closed_in_run_.size() > 0)) {
    bool overlaps = false;
    std::size_t whole = kRecent + 1;
    auto check = [&](std::uint64_t b, std::uint64_t e, std::size_t which) {
      if (s.max_time < b || s.min_time >= e) return;
      overlaps = true;
      if (s.min_time >= b && s.max_time < e && s.sourceless == 0) whole = which;
    };
    if (shedding_) {
      // An interval that begins at its first drop is sorted frame by frame until then.
      if (begin_at_first_)
        overlaps = true;
      else
        check(open_.t_begin, wild_after() == kOpenEnd ? kOpenEnd : wild_after() + 1, kRecent);
    }
    for (std::size_t i = 0; i < closed_in_run_.size() && whole > kRecent; ++i)
      check(closed_in_run_[i].t_begin, closed_in_run_[i].t_end, i);
    if (whole <= kRecent)
      drop_whole(c, whole);
    else if (overlaps)
      drop_frames(c);
  }
  if (shedding_ && (in_use <= low_chunks_ || waiting == 0)) close_open();
  reached_any_ = c.frame_count < frames_before;
  return reached_any_;
}

void DeadTime::close_open() {
  shedding_ = false;
  if (open_.t_end <= open_.t_begin) return;  // it dropped nothing
  counters_.add(Counter::stream_dead_intervals);
  closed_in_run_.add(open_);
  unpublished_.push(open_);
}

std::size_t DeadTime::add_loss(std::uint64_t begin, std::uint64_t end) {
  // From the open interval's start on, frames are being dropped already.
  if (shedding_ && !begin_at_first_) end = std::min(end, open_.t_begin);
  std::size_t made = 0;
  while (begin < end) {
    std::uint64_t next = end;  // the first closed interval that starts inside [begin, end)
    bool inside = false;
    for (std::size_t i = 0; i < closed_in_run_.size(); ++i) {
      const DeadInterval& d = closed_in_run_[i];
      if (begin >= d.t_begin && begin < d.t_end) {
        begin = d.t_end;
        inside = true;
        break;
      }
      if (d.t_begin > begin && d.t_begin < next) next = d.t_begin;
    }
    if (inside) continue;
    const DeadInterval piece{begin, next, 0};
    closed_in_run_.add(piece);
    unpublished_.push(piece);
    counters_.add(Counter::stream_dead_intervals);
    counters_.add(Counter::stream_loss_intervals);
    ++made;
    begin = next;
  }
  return made;
}

bool DeadTime::take_closed(DeadInterval& out) { return unpublished_.pop(out); }

void DeadTime::new_run() {
  if (shedding_) close_open();
  begin_at_first_ = false;
  closed_in_run_.clear();
  reported_dead_ = 0;
}

std::uint64_t DeadTime::run_dead_ticks() const {
  return closed_in_run_.total_ticks() + (shedding_ ? open_.t_end - open_.t_begin : 0);
}

std::uint64_t DeadTime::take_interval_dead_ticks() {
  const std::uint64_t now = run_dead_ticks();
  const std::uint64_t d = now >= reported_dead_ ? now - reported_dead_ : now;
  reported_dead_ = now;
  return d;
}

}  // namespace petdaq::daemon

// The slicer's per-source clocks of one run (DESIGN section 6): each source's latest time,
// whether it holds the horizon (sent, not idle, not waiting for a reset, not lagging), its
// wall-clock liveness, and the horizon they allow. core/slicer.h states the rules.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace petdaq {

class SourceClocks {
 public:
  using Clock = std::chrono::steady_clock;

  // Far-backwards frames each source must have sent before a clock reset is acted on, so one
  // corrupt timestamp on a single-source scanner does not start a new run.
  static constexpr std::uint64_t kResetConfirmFrames = 4;

  struct Source {
    std::uint64_t latest = 0;        // latest raw time accepted in this run
    bool sent = false;               // has sent in this run: it holds the horizon
    bool idle = false;               // silent for source_idle_ms: does not hold the horizon
    bool reset = false;              // jumped far backwards: its frames wait for the next run
    Clock::time_point reset_since{}; // wall clock of the episode's first far-backwards frame
    std::uint32_t ahead_streak = 0;  // frames in a row far ahead of the horizon
    std::uint64_t held = 0;          // its frames waiting for the next run
    Clock::time_point last_seen{};   // wall clock of its last frame
    bool woken = false;  // held the horizon again when the pause ended, not yet sent since
    bool lagging = false;          // too far behind the others: does not hold the horizon
    std::uint64_t lag_rejoin = 0;  // holds it again once this close to the leaders
    // Its frames come late because the daemon's receiver of them is behind (its socket held
    // a backlog), not the board: it is never declared lagging, and the frames that wait for
    // it are the daemon's backlog (DESIGN section 6, "Overload").
    bool receiver_behind = false;

    // Takes a frame at `key`: the source has sent, and its latest time goes on to it.
    void accept(std::uint64_t key) {
      if (!sent || key > latest) latest = key;
      sent = true;
    }
  };

  explicit SourceClocks(std::uint32_t count) : sources_(count) {}

  std::size_t size() const { return sources_.size(); }
  Source& operator[](std::size_t src) { return sources_[src]; }
  const Source& operator[](std::size_t src) const { return sources_[src]; }
  std::vector<Source>& all() { return sources_; }
  const std::vector<Source>& all() const { return sources_; }

  // A source sends again. After a pause of every source, the others that had sent hold the
  // horizon again at their latest time until they send or are idle once more: sources that
  // resume a little apart in wall-clock time lose nothing as late to the first one back.
  void resume(std::size_t src, Clock::time_point now) {
    sources_[src].woken = false;
    if (paused_) wake_others(src, now);
  }
  // A frame of `src` arrives at `now`: it is live again. Returns whether it was back from
  // idle (by the last mark_idle(), by the clock now, or woken at the end of a pause).
  bool saw(std::size_t src, Clock::time_point now, Clock::duration idle) {
    Source& s = sources_[src];
    const bool was_idle = s.idle || s.woken || (s.sent && now - s.last_seen >= idle);
    resume(src, now);
    s.last_seen = now;
    s.idle = false;
    return was_idle;
  }
  // Marks the sources silent for `idle` as idle; returns how many became so (each an episode
  // of stream.source_idle). When some did and every source that has sent is idle, the
  // sources are paused.
  std::uint32_t mark_idle(Clock::time_point now, Clock::duration idle);
  // Every source's last frame was seen at `t` (the slicer's first clock reading).
  void seen_all(Clock::time_point t);

  // The horizon the sources allow now (0: none yet): max_disorder before the latest time of
  // the slowest source holding it; with every source idle (or gone to the next run),
  // just after everything received.
  std::uint64_t horizon(std::uint64_t max_disorder_ticks) const;
  // The latest raw time taken in this run (0: none).
  std::uint64_t latest_time() const;
  // Frames were shed as dead time before the slicer: `reached[b]` is one past the latest
  // time of source b's frames dropped (0: none). Each such source that is sending, not reset
  // and not lagging goes on from there; the others keep their clocks.
  void skip_dead(std::span<const std::uint64_t> reached);

  // ---- lagging sources ----
  static bool live(const Source& s) { return s.sent && !s.idle && !s.reset; }
  // The leaders' time: the upper median of the live sources' latest times (one source far
  // ahead, or a few behind, do not move it). 0: no live source.
  std::uint64_t leaders_time();
  // A live source more than max_lag behind the leaders is lagging; a lagging one back within
  // its rejoin distance of them, and no more than `slack` behind the horizon `h` (which
  // cannot go back), holds the horizon again. Returns the sources newly lagging.
  std::uint32_t update_lag(std::uint64_t max_lag, std::uint64_t h, std::uint64_t slack);
  // Declares `src` lagging by the room rule: it rejoins at half its distance to the leaders.
  void declare_lagging(std::size_t src);
  // The source holding the horizon, when another live source is ahead of it by more than
  // `margin` and its receiver is not behind; -1 otherwise.
  int holding_back(std::uint64_t margin) const;
  // The source holding the horizon has a receiver that is behind.
  bool held_by_receiver_behind() const;
  bool any_lagging() const;

  // ---- clock reset ----
  // `src` jumped far backwards at `now`: its frames wait for the next run.
  void mark_reset(std::size_t src, Clock::time_point now);
  // Some source waits for the next run.
  bool any_reset();
  // Every source of the run reset, each has sent enough far-backwards frames and has sent
  // nothing else for `confirm` of wall-clock time: a burst of forged datagrams, however many,
  // cannot end a run while the genuine sources go on with their clock. An idle source is
  // evidence too (it must reset when it sends again: forged frames sent while the scanner
  // pauses start no run); only one silent for `silent` (a board that is off) is left out.
  bool reset_due(bool at_finish, std::size_t held, Clock::time_point now,
                 Clock::duration confirm, Clock::duration silent) const;
  // No source holds frames for the next run any more.
  void forget_held();
  // A new run: every source starts afresh (its wall-clock liveness kept).
  void start_run();

  // What the per-frame pass would do for a source whose frames of one block all lie in the
  // range the fast path allows.
  void took(std::uint8_t src, std::uint64_t max_time, Clock::time_point now);

 private:
  void wake_others(std::size_t src, Clock::time_point now);

  std::vector<Source> sources_;
  bool maybe_reset_ = false;  // some source may be waiting for the next run
  bool paused_ = false;       // every source that has sent is idle
  std::array<std::uint64_t, 256> scratch_{};  // leaders_time()'s
};

}  // namespace petdaq

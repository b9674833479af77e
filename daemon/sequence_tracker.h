// Per-source sequence accounting of the `sequenced` framing (DESIGN section 2), in numbers
// of datagrams. Each source keeps a window of the last kWindow sequence numbers: a number
// that arrives behind the newest but inside the window is a reordered datagram (or a
// duplicate, if it was seen); a number that leaves the window unseen is missing. So a
// datagram that is merely late is never counted missing, and missing counts are final.
//
// A number outside the window, ahead or behind, is held back (not processed) until a run of
// kRestartRun datagrams of the source follows it (each ahead of the one before): then it was a gap (counted missing) or, for a jump of more than
// kRestartDistance or any jump back, the source restarting its numbering (rx.seq_restarts).
// If the old numbering goes on before that, the held-back datagrams were wild headers:
// dropped, counted in rx.seq_wild, the window untouched, so a few corrupt or forged headers
// (a short run, ahead or behind) can neither fake a loss or a restart nor make the genuine
// datagrams that follow look out of place. Held-back datagrams of a confirmed jump count as
// missing. No number is processed twice.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <memory>

namespace petdaq::daemon {

struct SequenceCounts {
  std::uint64_t missing = 0;
  std::uint64_t duplicate = 0;
  std::uint64_t reordered = 0;
  std::uint64_t restarts = 0;
  std::uint64_t wild = 0;
};

class SequenceTracker {
 public:
  static constexpr std::uint32_t kWindow = 128;
  // A confirmed jump ahead of more than this is taken as the source restarting its
  // numbering (a new acquisition), not as that many missing datagrams.
  static constexpr std::uint32_t kRestartDistance = 1u << 16;
  // Datagrams that must follow a jump out of the window before it is believed.
  static constexpr std::uint32_t kRestartRun = 16;

  SequenceTracker() : sources_(std::make_unique<Source[]>(kSources)) {}

  // Returns false for a datagram whose frames must not be processed: a duplicate (a number
  // already seen inside the window) or a number outside the window not yet confirmed.
  bool observe(std::uint16_t source_id, std::uint32_t sequence, SequenceCounts& counts) {
    Source& s = sources_[source_id];
    if (!s.started) {
      restart(s, sequence, true);
      return true;
    }
    // The old numbering going on (a number in the window) ends a held-back run as wild.
    if (s.held > 0 && distance(static_cast<std::int32_t>(sequence - s.newest)) >= kWindow) {
      const auto from_last = static_cast<std::int32_t>(sequence - s.held_last);
      const auto from_first = static_cast<std::int32_t>(sequence - s.held_first);
      const bool forward_run = static_cast<std::int32_t>(s.held_first - s.newest) > 0;
      // The run goes on (ahead of a gap, another gap inside it is counted missing when it is
      // believed).
      if (from_last > 0 &&
          static_cast<std::uint32_t>(from_last) < (forward_run ? kRestartDistance : kWindow)) {
        s.held_last = sequence;
        if (++s.held <= followers_needed(s)) return false;
        confirm(s, counts);  // the held-back numbers count as missing
        return in_window(s, sequence, counts);
      }
      if (from_first >= 0 && from_last <= 0) {
        ++counts.duplicate;  // inside the held-back run
        return false;
      }
      if (forward_run && static_cast<std::int32_t>(sequence - s.newest) < 0) {
        ++counts.wild;  // an old number while a gap ahead is being confirmed
        return false;
      }
    }
    const auto ahead = static_cast<std::int32_t>(sequence - s.newest);
    if (distance(ahead) >= kWindow) {
      counts.wild += s.held;  // replaced before enough followed it
      s.held_first = s.held_last = sequence;
      s.held = 1;
      return false;
    }
    counts.wild += s.held;  // the old numbering goes on: the held-back headers were wild
    s.held = 0;
    return in_window(s, sequence, counts);
  }

  // End of the stream: the numbers still waiting in a window will not come; a held-back
  // number nothing followed is counted wild.
  void flush(SequenceCounts& counts) {
    for (std::uint32_t i = 0; i < kSources; ++i) {
      Source& s = sources_[i];
      if (!s.started) continue;
      counts.missing += unseen_in_window(s);
      counts.wild += s.held;
      s = Source{};
    }
  }

 private:
  static constexpr std::uint32_t kSources = 1u << 16;
  struct Source {
    std::uint64_t seen[2] = {0, 0};  // bit i: newest - i arrived
    std::uint32_t newest = 0;
    std::uint32_t span = 0;          // window positions that follow the first datagram
    std::uint32_t held_first = 0;    // a run of numbers outside the window, held back
    std::uint32_t held_last = 0;
    std::uint32_t held = 0;          // datagrams in that run
    bool started = false;
  };

  static std::uint32_t distance(std::int32_t d) {
    return d < 0 ? static_cast<std::uint32_t>(-static_cast<std::int64_t>(d))
                 : static_cast<std::uint32_t>(d);
  }

  static void restart(Source& s, std::uint32_t sequence, bool seen) {
    s.seen[0] = seen ? 1 : 0;
    s.seen[1] = 0;
    s.newest = sequence;
    s.span = 1;
    s.started = true;
    s.held = 0;
  }

  // Datagrams that must follow a jump before it is believed: a run a few forged or corrupt
  // headers do not make, ahead (a fake loss) or behind (old datagrams replayed).
  static std::uint32_t followers_needed(const Source&) { return kRestartRun; }

  // Enough datagrams followed the held-back number: a gap or a restart.
  static void confirm(Source& s, SequenceCounts& counts) {
    const auto ahead = static_cast<std::int32_t>(s.held_first - s.newest);
    if (ahead > 0 && static_cast<std::uint32_t>(ahead) <= kRestartDistance) {
      counts.missing += shift(s, static_cast<std::uint32_t>(ahead));
      s.newest = s.held_first;
      s.held = 0;
    } else {
      counts.missing += unseen_in_window(s);
      ++counts.restarts;
      restart(s, s.held_first, false);
    }
  }

  // A number within kWindow of the newest.
  static bool in_window(Source& s, std::uint32_t sequence, SequenceCounts& counts) {
    const auto ahead = static_cast<std::int32_t>(sequence - s.newest);
    if (ahead > 0) {
      counts.missing += shift(s, static_cast<std::uint32_t>(ahead));
      s.newest = sequence;
      s.seen[0] |= 1;
      return true;
    }
    const auto age = distance(ahead);
    if (age >= s.span) {
      // From before the first datagram seen (or the restart): it still arrived out of order.
      ++counts.reordered;
      return true;
    }
    std::uint64_t& word = s.seen[age / 64];
    const std::uint64_t bit = std::uint64_t{1} << (age % 64);
    if (word & bit) {
      ++counts.duplicate;
      return false;
    }
    word |= bit;
    if (age > 0) ++counts.reordered;
    return true;
  }

  static std::uint64_t unseen_in_window(const Source& s) {
    const std::uint32_t seen =
        static_cast<std::uint32_t>(std::popcount(s.seen[0]) + std::popcount(s.seen[1]));
    return s.span - seen;
  }

  // Moves the window d numbers ahead; returns the unseen numbers that fall out of it,
  // including gap numbers that never fit in it.
  static std::uint64_t shift(Source& s, std::uint32_t d) {
    std::uint64_t lost = 0;
    if (d >= kWindow) {
      lost = unseen_in_window(s) + (d - kWindow);
      s.seen[0] = s.seen[1] = 0;
      s.span = kWindow;
      return lost;
    }
    // Positions kWindow - d ... kWindow - 1 fall out.
    const std::uint32_t keep = kWindow - d;
    for (std::uint32_t i = keep; i < std::min(s.span, kWindow); ++i)
      if (!(s.seen[i / 64] >> (i % 64) & 1)) ++lost;
    if (d >= 64) {
      s.seen[1] = s.seen[0] << (d - 64);
      s.seen[0] = 0;
    } else {
      s.seen[1] = (s.seen[1] << d) | (s.seen[0] >> (64 - d));
      s.seen[0] <<= d;
    }
    s.span = std::min(kWindow, s.span + d);
    return lost;
  }

  std::unique_ptr<Source[]> sources_;
};

}  // namespace petdaq::daemon

// Per-source sequence accounting of the `sequenced` framing (DESIGN section 2), in numbers
// of datagrams. Each source keeps a window of the last kWindow sequence numbers: a number
// that arrives behind the newest but inside the window is a reordered datagram (or a
// duplicate, if it was seen); a number that leaves the window unseen is missing. So a
// datagram that is merely late is never counted missing, and missing counts are final.
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
};

class SequenceTracker {
 public:
  static constexpr std::uint32_t kWindow = 128;
  // A jump of more than this, either way, is taken as the source restarting its
  // numbering (a new acquisition), not as billions of missing datagrams.
  static constexpr std::uint32_t kRestartDistance = 1u << 16;

  SequenceTracker() : sources_(std::make_unique<Source[]>(kSources)) {}

  // Returns false for a duplicate (a number already seen inside the window): its frames
  // are the same data a second time and must not be processed again.
  bool observe(std::uint16_t source_id, std::uint32_t sequence, SequenceCounts& counts) {
    Source& s = sources_[source_id];
    if (!s.started) {
      restart(s, sequence);
      return true;
    }
    const auto ahead = static_cast<std::int32_t>(sequence - s.newest);
    if (ahead > 0) {
      const auto d = static_cast<std::uint32_t>(ahead);
      if (d > kRestartDistance) {
        counts.missing += unseen_in_window(s);
        restart(s, sequence);
        return true;
      }
      counts.missing += shift(s, d);
      s.newest = sequence;
      s.seen[0] |= 1;
      return true;
    }
    if (ahead == 0) {
      ++counts.duplicate;
      return false;
    }
    const auto age = static_cast<std::uint32_t>(-static_cast<std::int64_t>(ahead));
    if (age > kRestartDistance) {
      counts.missing += unseen_in_window(s);
      restart(s, sequence);
      return true;
    }
    if (age >= kWindow || age >= s.span) {
      // Older than what the window remembers: it was counted missing already (or comes
      // from before the first datagram seen); it still arrived out of order.
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
    ++counts.reordered;
    return true;
  }

  // End of the stream: the numbers still waiting in a window will not come.
  void flush(SequenceCounts& counts) {
    for (std::uint32_t i = 0; i < kSources; ++i) {
      Source& s = sources_[i];
      if (!s.started) continue;
      counts.missing += unseen_in_window(s);
      s = Source{};
    }
  }

 private:
  static constexpr std::uint32_t kSources = 1u << 16;
  struct Source {
    std::uint64_t seen[2] = {0, 0};  // bit i: newest - i arrived
    std::uint32_t newest = 0;
    std::uint32_t span = 0;          // window positions that follow the first datagram
    bool started = false;
  };

  static void restart(Source& s, std::uint32_t sequence) {
    s.seen[0] = 1;
    s.seen[1] = 0;
    s.newest = sequence;
    s.span = 1;
    s.started = true;
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

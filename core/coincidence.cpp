// The CPU coincidence engine (DESIGN sections 5 and 6): one walk over the sorted singles with
// three monotone cursors (end of the prompt window, start and end of the delayed interval),
// so the cost is linear in the singles plus the candidate pairs. The per-window decision is
// core/window_policy.h and the step from one opener to the next core/window_walk.h, both
// shared with the GPU backend.
#include "core/coincidence.h"

#include <cstdint>

#include "core/settings.h"
#include "core/window_walk.h"

namespace petdaq {

CoincidenceParams CoincidenceParams::from(const Settings& s) {
  const Geometry g = Geometry::from(s.scanner);
  CoincidenceParams p;
  p.window_ticks = ps_to_ticks(s.coincidence.window_ps, s.scanner.tick_ps);
  p.closed = s.coincidence.window_edge == WindowEdge::closed;
  p.mode = s.coincidence.window_mode;
  p.policy = s.coincidence.policy;
  p.min_sector_difference = s.coincidence.min_sector_difference;
  p.delayed = s.coincidence.delayed.enabled;
  p.delayed_offset_ticks = ps_to_ticks(s.coincidence.delayed.offset_ps, s.scanner.tick_ps);
  p.crystals_per_ring = g.crystals_per_ring();
  p.crystals_per_sector = g.crystals_per_bdm_transaxial();
  p.sectors = g.bdm_transaxial;
  return p;
}

namespace {
struct BufferSink {
  RecordBuffer& buffer;
  void operator()(const CoincRecord& r) { buffer.push(r); }
};

// The window walk's search (core/window_walk.h) on the CPU: the first index at or after
// `from` whose time fails `inside`. A cursor usually moves by zero to three singles per
// window, in no predictable pattern (the delayed window's cursors move by a Poisson count), so
// the first four steps are taken without a branch: `inside` holds on a prefix, so the number
// of the next four singles inside it is the distance moved, unless all four are; the loop
// handles the rest and the last singles of the slice. The three searches are independent
// chains (the delayed end is found from the opener's time, not from the delayed start), which
// lets consecutive windows overlap in the core. n >= 1.
struct AdvanceCursor {
  const Single* singles;
  std::size_t n;
  template <class Inside>
  std::uint64_t operator()(std::uint64_t from, Inside inside) const {
    std::size_t cursor = from;
    if (cursor + 4 <= n) {
      const Single* s = singles + cursor;
      const std::size_t moved = static_cast<std::size_t>(inside(s[0].time)) +
                                static_cast<std::size_t>(inside(s[1].time)) +
                                static_cast<std::size_t>(inside(s[2].time)) +
                                static_cast<std::size_t>(inside(s[3].time));
      cursor += moved;
      if (moved < 4) return cursor;
    }
    while (cursor < n && inside(singles[cursor].time)) ++cursor;
    return cursor;
  }
};

std::size_t walk(const Single* singles, std::size_t n, const CoincidenceParams& p,
                 std::size_t resolved_end, RecordBuffer& prompts, RecordBuffer& delayed,
                 CoincidenceCounts& counts) {
  BufferSink prompt_sink{prompts};
  BufferSink delayed_sink{delayed};
  AdvanceCursor find{singles, n};
  WalkCursors cursors;
  std::size_t open = 0;
  while (open < resolved_end)
    open = walk_window(singles, open, p, cursors, find, counts, prompt_sink, delayed_sink);
  return open < n ? open : n;
}
}  // namespace

std::size_t resolvable_end(const Single* singles, std::size_t n, const CoincidenceParams& p,
                           std::uint64_t horizon, bool final) {
  // Openers before the returned index are resolvable (resolvable() is monotone in time).
  std::size_t end = n;
  if (!final) {
    std::size_t lo = 0;
    while (lo < end) {
      const std::size_t mid = lo + (end - lo) / 2;
      if (p.resolvable(singles[mid].time, horizon))
        lo = mid + 1;
      else
        end = mid;
    }
  }
  return end;
}

// counts.prompts and counts.delayed count the records the policy emitted, including any the
// buffers had no room for (those are in RecordBuffer::overflow as well).
std::size_t walk_windows(const Single* singles, std::size_t n, const CoincidenceParams& p,
                         std::size_t resolved_end, RecordBuffer& prompts, RecordBuffer& delayed,
                         CoincidenceCounts& counts) {
  if (p.closed || p.window_ticks > 0)
    return walk(singles, n, p, resolved_end, prompts, delayed, counts);
  // Half-open and W = 0: no single is inside any window, so there is nothing to emit; the
  // carry-over still starts at the first unresolved opener (every single opens a window).
  return resolved_end;
}

std::size_t find_coincidences(const Single* singles, std::size_t n, const CoincidenceParams& p,
                              std::uint64_t horizon, bool final, RecordBuffer& prompts,
                              RecordBuffer& delayed, CoincidenceCounts& counts) {
  return walk_windows(singles, n, p, resolvable_end(singles, n, p, horizon, final), prompts,
                      delayed, counts);
}

}  // namespace petdaq

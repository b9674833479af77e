// The CPU coincidence engine (DESIGN sections 5 and 6): one walk over the sorted singles with
// three monotone cursors (end of the prompt window, start and end of the delayed interval),
// so the cost is linear in the singles plus the candidate pairs. The per-window decision is
// core/window_policy.h, shared with the GPU backend.
#include "core/coincidence.h"

#include <cstdint>

#include "core/window_policy.h"

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

// Moves `cursor` past the singles for which `before(time)` holds (a predicate that holds on
// a prefix of the singles from `cursor` on). A cursor usually moves by zero, one or two
// singles per window: the first step is taken without a branch (a clamped, in-bounds load),
// the loop handles the rest. n >= 1.
template <class Before>
inline std::size_t advance(const Single* singles, std::size_t n, std::size_t cursor,
                           Before before) {
  const std::size_t at = cursor < n ? cursor : n - 1;
  cursor += static_cast<std::size_t>((cursor < n) & before(singles[at].time));
  while (cursor < n && before(singles[cursor].time)) ++cursor;
  return cursor;
}

// The last time inside a window that starts at t_start (closed edge: t_start + W itself);
// saturates instead of wrapping for times near the end of the 64-bit range. A half-open
// window of W = 0 holds nothing but its opener; that is handled by the caller.
template <bool kClosed>
inline std::uint64_t window_last(std::uint64_t t_start, std::uint64_t window_ticks) {
  const std::uint64_t reach = kClosed ? window_ticks : window_ticks - 1;
  return t_start > UINT64_MAX - reach ? UINT64_MAX : t_start + reach;
}

// The walk, with the edge rule fixed at compile time so each window test is one compare.
// The three cursors are independent chains (the delayed end is found from the opener's
// time, not from the delayed start), which lets consecutive windows overlap in the core.
template <bool kClosed>
std::size_t find_impl(const Single* singles, std::size_t n, const CoincidenceParams& p,
                      std::size_t resolved_end, RecordBuffer& prompts, RecordBuffer& delayed,
                      CoincidenceCounts& counts) {
  const PairSet prompt_set = prompt_pair_set(p.mode);
  const bool every_single = p.mode == WindowMode::every_single;
  BufferSink prompt_sink{prompts};
  BufferSink delayed_sink{delayed};

  std::size_t window_end = 0;     // first single past the current prompt window
  std::size_t delayed_begin = 0;  // first single at or after t_open + D
  std::size_t delayed_end = 0;    // first single past t_open + D + W (or at it, half-open)
  std::size_t open = 0;
  while (open < resolved_end) {
    const std::uint64_t t_open = singles[open].time;

    // Window ends only move forward: a later opener's window reaches at least as far.
    if (window_end <= open) window_end = open + 1;
    const std::uint64_t last = window_last<kClosed>(t_open, p.window_ticks);
    window_end = advance(singles, n, window_end, [last](std::uint64_t t) { return t <= last; });
    const std::size_t others = window_end - open - 1;
    if (others >= 2) ++counts.multiples;
    if (others >= 1) {
      const WindowMembers w{singles + open, singles + open + 1,
                            static_cast<std::uint32_t>(others)};
      counts.prompts += apply_window_policy(p, w, prompt_set, false, prompt_sink);
    }

    if (p.delayed) {
      const std::uint64_t start = t_open + p.delayed_offset_ticks;
      const std::uint64_t delayed_last = window_last<kClosed>(start, p.window_ticks);
      if (delayed_begin <= open) delayed_begin = open + 1;
      if (delayed_end <= open) delayed_end = open + 1;
      delayed_begin =
          advance(singles, n, delayed_begin, [start](std::uint64_t t) { return t < start; });
      delayed_end = advance(singles, n, delayed_end,
                            [delayed_last](std::uint64_t t) { return t <= delayed_last; });
      const std::size_t members = delayed_end > delayed_begin ? delayed_end - delayed_begin : 0;
      if (members >= 2) ++counts.delayed_multiples;
      if (members >= 1) {
        const WindowMembers w{singles + open, singles + delayed_begin,
                              static_cast<std::uint32_t>(members)};
        counts.delayed += apply_window_policy(p, w, PairSet::opener_pairs, true, delayed_sink);
      }
    }

    open = every_single ? open + 1 : window_end;
  }
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
  if (p.closed) return find_impl<true>(singles, n, p, resolved_end, prompts, delayed, counts);
  if (p.window_ticks > 0)
    return find_impl<false>(singles, n, p, resolved_end, prompts, delayed, counts);
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

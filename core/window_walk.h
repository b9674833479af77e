// One step of the window walk of DESIGN section 5, written once for the CPU engine
// (core/coincidence.cpp) and the CUDA walk kernels (gpu/device/walk.cuh): the window an opener
// opens, its delayed window, the multiples and the records. The loops around it differ by
// backend (the CPU walks a slice's openers in one pass up to the resolvable end; the GPU
// walks a chain segment or one single per thread), and so does the search for a window's
// end: the CPU moves monotone cursors a single or two at a time, the GPU gallops.
#pragma once

#include <cstdint>

#include "core/window_policy.h"
#include "proto/records.h"

namespace petdaq {

// Where the walk's three searches start: each only moves forward from one opener to the
// next (a later opener's windows reach at least as far), so none looks back.
struct WalkCursors {
  std::uint64_t window_end = 0;     // first single past the current prompt window
  std::uint64_t delayed_begin = 0;  // first single at or after t_open + D
  std::uint64_t delayed_end = 0;    // first single past the delayed window
};

// The end of a window that starts at t_start (CoincidenceParams::window_past): admits(t)
// for a single inside the window or before it, a test that holds on a prefix of the sorted
// singles.
struct WindowEnd {
  std::uint64_t past = 0;
  PETDAQ_HD bool admits(std::uint64_t t) const { return t < past; }
};
PETDAQ_HD WindowEnd window_end_of(const CoincidenceParams& p, std::uint64_t t_start) {
  return WindowEnd{p.window_past(t_start)};
}

// The window opened by singles[open] and, with delayed windows on, its delayed window:
// counts the multiples, hands the records to the sinks in output order and adds their
// number to counts.prompts / counts.delayed. `find(from, inside)` returns the first index
// at or after `from` whose time fails `inside`, a test that holds on a prefix of the
// singles from `from` on (n when all pass). Returns the next opener: the first single past
// the window (first_open) or the next single (every_single).
template <class Counts, class Find, class PromptSink, class DelayedSink>
PETDAQ_HD std::uint64_t walk_window(const Single* s, std::uint64_t open,
                                    const CoincidenceParams& p, WalkCursors& c, Find& find,
                                    Counts& counts, PromptSink& prompts, DelayedSink& delayed) {
  const std::uint64_t t_open = s[open].time;
  const std::uint64_t next = open + 1;
  const WindowEnd prompt_end = window_end_of(p, t_open);
  c.window_end = find(c.window_end > next ? c.window_end : next,
                      [prompt_end](std::uint64_t t) { return prompt_end.admits(t); });
  const std::uint64_t others = c.window_end - next;
  if (others >= 2) ++counts.multiples;
  if (others >= 1) {
    const WindowMembers w{s + open, s + next, static_cast<std::uint32_t>(others)};
    counts.prompts += apply_window_policy(p, w, prompt_pair_set(p.mode), false, prompts);
  }
  if (p.delayed) {
    const std::uint64_t start = t_open + p.delayed_offset_ticks;
    c.delayed_begin = find(c.delayed_begin > next ? c.delayed_begin : next,
                           [start](std::uint64_t t) { return t < start; });
    const WindowEnd delayed_end = window_end_of(p, start);
    c.delayed_end = find(c.delayed_end > next ? c.delayed_end : next,
                         [delayed_end](std::uint64_t t) { return delayed_end.admits(t); });
    const std::uint64_t members =
        c.delayed_end > c.delayed_begin ? c.delayed_end - c.delayed_begin : 0;
    if (members >= 2) ++counts.delayed_multiples;
    if (members >= 1) {
      const WindowMembers w{s + open, s + c.delayed_begin, static_cast<std::uint32_t>(members)};
      counts.delayed += apply_window_policy(p, w, PairSet::opener_pairs, true, delayed);
    }
  }
  return p.mode == WindowMode::every_single ? next : c.window_end;
}

}  // namespace petdaq

// The per-window decision of DESIGN section 5 (candidate pairs, good pairs, the six
// multiplicity policies, flags), written once for the CPU engine and the CUDA kernels.
// No STL and no allocation: a GPU thread that owns one window calls
// count_window_records() to size its output, the kernel scans the counts, and
// emit_window_records() fills the thread's slot, so the output order never depends on
// scheduling.
#pragma once

#include <cstdint>

#include "core/coincidence_params.h"
#include "proto/records.h"

namespace petdaq {

// One window: its opener and the other members, which lie contiguously in the sorted
// singles (right after the opener for a prompt window, at the delayed interval for a
// delayed one). k = 1 + other_count.
struct WindowMembers {
  const Single* opener = nullptr;
  const Single* others = nullptr;
  std::uint32_t other_count = 0;

  PETDAQ_HD std::uint32_t k() const { return 1u + other_count; }
  // Member i of the window in the (time, crystal, energy) order; 0 is the opener.
  PETDAQ_HD const Single& member(std::uint32_t i) const { return i == 0 ? *opener : others[i - 1]; }
};

// Which pairs of a window are candidates: every pair (first_open prompt windows) or the
// opener with each other member (every_single prompt windows and all delayed windows).
enum class PairSet : std::uint8_t { all_pairs, opener_pairs };

PETDAQ_HD PairSet prompt_pair_set(WindowMode mode) {
  return mode == WindowMode::first_open ? PairSet::all_pairs : PairSet::opener_pairs;
}

PETDAQ_HD std::uint32_t window_flags(std::uint32_t k, bool delayed) {
  std::uint32_t flags = delayed ? coinc_flag::delayed : 0u;
  if (k >= 3) flags |= coinc_flag::from_multiple;
  return flags | ((k < 255u ? k : 255u) << coinc_flag::multiplicity_shift);
}

PETDAQ_HD CoincRecord make_record(const Single& a, const Single& b, std::uint32_t flags) {
  CoincRecord r;
  r.time_a = a.time;
  r.dt = static_cast<std::int32_t>(b.time - a.time);
  r.crystal_a = a.crystal;
  r.crystal_b = b.crystal;
  r.energy_a = a.energy;
  r.energy_b = b.energy;
  r.flags = flags;
  return r;
}

namespace window_detail {

// A candidate pair by member index (a < b) and its float energy sum.
struct Pair {
  std::uint32_t a = 0;
  std::uint32_t b = 0;
  float energy_sum = 0.0f;
  bool valid = false;
};

struct Survey {
  std::uint32_t pairs = 0;
  std::uint32_t goods = 0;
  Pair winner;       // largest sum among all candidates, first in order on ties
  bool winner_good = false;
  Pair best_good;    // largest sum among good candidates, first in order on ties
};

// Pairs are visited in the output order (earlier member, then later member); a strict
// comparison keeps the first of equal sums, which is the tie rule.
PETDAQ_HD Survey survey(const CoincidenceParams& p, const WindowMembers& w, PairSet set) {
  Survey s;
  const std::uint32_t k = w.k();
  const std::uint32_t last_a = set == PairSet::all_pairs ? k - 1 : 1;
  for (std::uint32_t a = 0; a < last_a; ++a) {
    const Single& sa = w.member(a);
    for (std::uint32_t b = a + 1; b < k; ++b) {
      const Single& sb = w.member(b);
      const float sum = sa.energy + sb.energy;
      const bool good = p.good_pair(sa.crystal, sb.crystal);
      ++s.pairs;
      if (!s.winner.valid || sum > s.winner.energy_sum) {
        s.winner = {a, b, sum, true};
        s.winner_good = good;
      }
      if (good) {
        ++s.goods;
        if (!s.best_good.valid || sum > s.best_good.energy_sum) s.best_good = {a, b, sum, true};
      }
    }
  }
  return s;
}

}  // namespace window_detail

namespace window_detail {

// Windows of k >= 3: the six policies of DESIGN section 5.
template <class Sink>
PETDAQ_HD std::uint32_t apply_to_multiple(const CoincidenceParams& p, const WindowMembers& w,
                                          PairSet set, bool delayed, Sink& sink) {
  const std::uint32_t k = w.k();
  const std::uint32_t flags = window_flags(k, delayed);
  if (p.policy == Policy::kill_multiples) return 0;

  if (p.policy == Policy::take_all_goods) {
    std::uint32_t emitted = 0;
    const std::uint32_t last_a = set == PairSet::all_pairs ? k - 1 : 1;
    for (std::uint32_t a = 0; a < last_a; ++a) {
      const Single& sa = w.member(a);
      for (std::uint32_t b = a + 1; b < k; ++b) {
        const Single& sb = w.member(b);
        if (!p.good_pair(sa.crystal, sb.crystal)) continue;
        sink(make_record(sa, sb, flags));
        ++emitted;
      }
    }
    return emitted;
  }

  const Survey s = survey(p, w, set);
  Pair chosen;
  switch (p.policy) {
    case Policy::take_winner_of_goods:
      chosen = s.best_good;
      break;
    case Policy::take_winner_if_good:
      if (s.winner_good) chosen = s.winner;
      break;
    case Policy::take_winner_if_all_good:
      if (s.goods == s.pairs) chosen = s.winner;
      break;
    case Policy::kill_all_if_multiple_goods:
      if (s.goods == 1) chosen = s.best_good;
      break;
    default:
      break;
  }
  if (!chosen.valid) return 0;
  sink(make_record(w.member(chosen.a), w.member(chosen.b), flags));
  return 1;
}

}  // namespace window_detail

// Applies the policy to one window and hands each record to `sink(const CoincRecord&)`, in
// output order. Returns the number of records. Windows of k = 1 emit nothing. With k = 2
// there is one candidate pair and every policy emits it exactly when it is good; that case,
// the common one, stays small enough to inline.
template <class Sink>
PETDAQ_HD std::uint32_t apply_window_policy(const CoincidenceParams& p, const WindowMembers& w,
                                            PairSet set, bool delayed, Sink& sink) {
  if (w.other_count == 0) return 0;
  if (w.other_count == 1) {
    if (!p.good_pair(w.opener->crystal, w.others[0].crystal)) return 0;
    sink(make_record(*w.opener, w.others[0], window_flags(2, delayed)));
    return 1;
  }
  return window_detail::apply_to_multiple(p, w, set, delayed, sink);
}

namespace window_detail {
struct CountSink {
  PETDAQ_HD void operator()(const CoincRecord&) {}
};
struct ArraySink {
  CoincRecord* out;
  std::uint32_t n = 0;
  PETDAQ_HD void operator()(const CoincRecord& r) { out[n++] = r; }
};
}  // namespace window_detail

// How many records the window emits (the count pass of count -> scan -> fill).
PETDAQ_HD std::uint32_t count_window_records(const CoincidenceParams& p, const WindowMembers& w,
                                             PairSet set, bool delayed) {
  window_detail::CountSink sink;
  return apply_window_policy(p, w, set, delayed, sink);
}

// Writes the window's records to out[0 .. count_window_records()) and returns their number.
PETDAQ_HD std::uint32_t emit_window_records(const CoincidenceParams& p, const WindowMembers& w,
                                            PairSet set, bool delayed, CoincRecord* out) {
  window_detail::ArraySink sink{out};
  return apply_window_policy(p, w, set, delayed, sink);
}

}  // namespace petdaq

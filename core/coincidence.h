// The coincidence engine's contract (DESIGN section 5), shared by the CPU reference and the
// GPU backend. The CPU implementation is core/coincidence.cpp; the window rules are
// core/coincidence_params.h and the per-window policy decisions core/window_policy.h, so
// both backends compile the same code. The order the engine expects is core/order.h.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/coincidence_params.h"
#include "core/counters.h"
#include "proto/records.h"

namespace petdaq {

// A fixed-capacity output array (no allocation in the data path). Records past the
// capacity are counted in `overflow` and dropped; the first `capacity` records, in order,
// are kept.
struct RecordBuffer {
  CoincRecord* data = nullptr;
  std::size_t capacity = 0;
  std::size_t size = 0;
  std::uint64_t overflow = 0;

  void push(const CoincRecord& r) {
    if (size < capacity)
      data[size++] = r;
    else
      ++overflow;
  }
  void clear() {
    size = 0;
    overflow = 0;
  }
};

struct CoincidenceCounts {
  std::uint64_t prompts = 0;
  std::uint64_t delayed = 0;
  std::uint64_t multiples = 0;          // prompt windows with k >= 3
  std::uint64_t delayed_multiples = 0;  // delayed windows with k >= 3
};

// A slice's coincidence counts and the records no buffer held, added to their counters
// (both backends).
inline void add_coincidence_counts(CounterDelta& delta, const CoincidenceCounts& c,
                                   std::uint64_t records_overflow) {
  delta[Counter::coinc_prompts] += c.prompts;
  delta[Counter::coinc_delayed] += c.delayed;
  delta[Counter::coinc_multiples] += c.multiples;
  delta[Counter::coinc_delayed_multiples] += c.delayed_multiples;
  delta[Counter::coinc_records_overflow] += records_overflow;
}

// Resolves the windows of `singles` (sorted in the order of DESIGN section 5, starting at a
// window-chain start: the first single opens a window) whose outcome can no longer change:
// all of them when `final`, otherwise those with resolvable(t_open, horizon). Every single
// not yet seen has time >= horizon. Appends the prompt and delayed records in their output
// order, adds to `counts`, and returns the index of the first single to carry over to the
// next slice (n when none): the first unresolved opener.
std::size_t find_coincidences(const Single* singles, std::size_t n, const CoincidenceParams& p,
                              std::uint64_t horizon, bool final, RecordBuffer& prompts,
                              RecordBuffer& delayed, CoincidenceCounts& counts);

// The two halves of find_coincidences(), for a caller that walks pieces of the singles on
// several threads (core/parallel_engine.h). resolvable_end(): the index of the first opener
// that may not be resolved (n when final). walk_windows(): walks the openers before
// `resolved_end`, the first single opening a window, reading the singles up to n for the
// windows; returns the first opener at or after `resolved_end` (n when none).
std::size_t resolvable_end(const Single* singles, std::size_t n, const CoincidenceParams& p,
                           std::uint64_t horizon, bool final);
std::size_t walk_windows(const Single* singles, std::size_t n, const CoincidenceParams& p,
                         std::size_t resolved_end, RecordBuffer& prompts, RecordBuffer& delayed,
                         CoincidenceCounts& counts);

}  // namespace petdaq

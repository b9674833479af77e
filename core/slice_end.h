// Where a slice's batch interval ends (core/backend.h, SliceResult::t_end), written once for
// both backends.
#pragma once

#include <cstdint>

#include "proto/records.h"

namespace petdaq {

// singles[0, n): the slice's ordered singles; the carry-over starts at first_carried (n when
// nothing is carried). A slice that resolved everything (final, or a carry overflow) ends
// just after its last single; any other at the first carried single's time or the horizon,
// whichever is earlier. Never before t_begin: consecutive slices tile time.
PETDAQ_HD std::uint64_t slice_t_end(const Single* singles, std::uint64_t n,
                                    std::uint64_t first_carried, bool resolved_all,
                                    std::uint64_t t_begin, std::uint64_t horizon) {
  std::uint64_t t_end;
  if (resolved_all)
    t_end = n > 0 ? singles[n - 1].time + 1 : t_begin;
  else
    t_end = first_carried < n && singles[first_carried].time < horizon
                ? singles[first_carried].time
                : horizon;
  return t_end > t_begin ? t_end : t_begin;
}

}  // namespace petdaq

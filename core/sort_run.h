// Sorting a short run of singles in place into the (time, crystal, energy) order of DESIGN
// section 5, written once for the CPU sort (core/order.cpp: equal times, small slices) and
// the GPU's tie pass (gpu/kernels.cuh: equal sort keys): an insertion sort for the usual
// short run, a heapsort (no extra memory, n log n) for the long runs only faulty input makes.
#pragma once

#include <cstdint>

#include "proto/records.h"

namespace petdaq {

inline constexpr std::uint64_t kInsertionSortMax = 32;

PETDAQ_HD void sort_run(Single* s, std::uint64_t len) {
  if (len <= kInsertionSortMax) {
    for (std::uint64_t i = 1; i < len; ++i) {
      const Single x = s[i];
      std::uint64_t j = i;
      for (; j > 0 && single_less(x, s[j - 1]); --j) s[j] = s[j - 1];
      s[j] = x;
    }
    return;
  }
  const auto sift_down = [s](std::uint64_t root, std::uint64_t end) {
    while (2 * root + 1 < end) {
      std::uint64_t child = 2 * root + 1;
      if (child + 1 < end && single_less(s[child], s[child + 1])) ++child;
      if (!single_less(s[root], s[child])) return;
      const Single t = s[root];
      s[root] = s[child];
      s[child] = t;
      root = child;
    }
  };
  for (std::uint64_t start = len / 2; start-- > 0;) sift_down(start, len);
  for (std::uint64_t end = len - 1; end > 0; --end) {
    const Single t = s[0];
    s[0] = s[end];
    s[end] = t;
    sift_down(0, end);
  }
}

}  // namespace petdaq

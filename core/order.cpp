// sort_singles: the (time, crystal, energy) order of DESIGN section 5.
//
// The input is a sorted carry-over followed by a few dozen nearly time-ordered per-BDM
// streams interleaved packet by packet, so natural runs are short (one packet) and a merge
// of runs would need many passes. Singles are spread fairly evenly over the slice's time
// range, so one counting pass and one scatter into about n / 4 equal slices of that range
// (at most 2^20, enough for ~4 M singles per call; the scatter is nearly sequential, as the
// input is ordered at that scale)
// leave a few singles per bucket, which are copied back straight to their rank. A bucket
// that is still large (clustered times, hostile input) gets a stable LSD radix sort on time
// with 11-bit digits; equal times are then put in (crystal, energy) order. Already-sorted
// input costs one read.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>

#include "core/order.h"
#include "core/sort_run.h"

namespace petdaq {

namespace {

constexpr unsigned kMaxDigitBits = 11;  // 2048 buckets: histograms stay in L1
constexpr unsigned kMaxPasses = (64 + kMaxDigitBits - 1) / kMaxDigitBits;
constexpr unsigned kMaxBucketBits = 20;
constexpr std::size_t kSinglesPerBucket = 4;
__extension__ typedef unsigned __int128 uint128;

// Singles of equal time are adjacent after the time sort; order each such run by the rest
// of the key (sort_run, shared with the GPU's tie pass).
void order_equal_times(Single* s, std::size_t n) {
  std::size_t i = 0;
  while (i + 1 < n) {
    if (s[i + 1].time != s[i].time) {
      ++i;
      continue;
    }
    std::size_t j = i + 2;
    while (j < n && s[j].time == s[i].time) ++j;
    sort_run(s + i, j - i);
    i = j;
  }
}

// Stable LSD radix sort on time, then (crystal, energy) within equal times. Every time is in
// [min_time, min_time + 2^key_bits).
void radix_sort(Single* singles, std::size_t n, Single* scratch, std::uint64_t min_time,
                unsigned key_bits) {
  if (key_bits > 0) {
    const unsigned passes = (key_bits + kMaxDigitBits - 1) / kMaxDigitBits;
    const unsigned digit_bits = (key_bits + passes - 1) / passes;
    const std::uint64_t digit_mask = (std::uint64_t{1} << digit_bits) - 1;

    std::uint32_t histogram[kMaxPasses][std::size_t{1} << kMaxDigitBits];
    for (unsigned d = 0; d < passes; ++d)
      std::memset(histogram[d], 0, sizeof(std::uint32_t) << digit_bits);
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint64_t key = singles[i].time - min_time;
      for (unsigned d = 0; d < passes; ++d) ++histogram[d][(key >> (d * digit_bits)) & digit_mask];
    }

    Single* src = singles;
    Single* dst = scratch;
    for (unsigned d = 0; d < passes; ++d) {
      std::uint32_t* offset = histogram[d];
      const unsigned shift = d * digit_bits;
      // A digit that every key shares would move nothing.
      if (offset[(src[0].time - min_time) >> shift & digit_mask] == n) continue;
      std::uint32_t sum = 0;
      for (std::size_t b = 0; b <= digit_mask; ++b) {
        const std::uint32_t c = offset[b];
        offset[b] = sum;
        sum += c;
      }
      for (std::size_t i = 0; i < n; ++i) {
        const Single& v = src[i];
        dst[offset[((v.time - min_time) >> shift) & digit_mask]++] = v;
      }
      std::swap(src, dst);
    }
    if (src != singles) std::memcpy(singles, src, n * sizeof(Single));
  }
  order_equal_times(singles, n);
}

// Copies src[0, n) to dst[0, n) in time order (stable), n <= kInsertionSortMax, and returns
// whether two of them share a time. Each single goes straight to its rank, counted without
// branches: within a bucket the singles of different BDMs come in no useful order, and an
// insertion sort would mispredict about once per single.
bool rank_copy(const Single* src, std::size_t n, Single* dst) {
  std::uint64_t time[kInsertionSortMax];
  for (std::size_t i = 0; i < n; ++i) time[i] = src[i].time;
  std::size_t ties = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t t = time[i];
    std::size_t rank = 0;
    for (std::size_t j = 0; j < i; ++j) {
      rank += time[j] <= t;
      ties += time[j] == t;
    }
    for (std::size_t j = i + 1; j < n; ++j) rank += time[j] < t;
    dst[rank] = src[i];
  }
  return ties != 0;
}

// rank_copy for a bucket of exactly M singles: with M known the loops unroll and nothing
// but the choice of M (one indirect jump per bucket) depends on the data.
template <std::size_t M>
bool rank_copy_fixed(const Single* src, Single* dst) {
  std::uint64_t time[M];
  for (std::size_t i = 0; i < M; ++i) time[i] = src[i].time;
  std::size_t ties = 0;
  for (std::size_t i = 0; i < M; ++i) {
    std::size_t rank = 0;
    for (std::size_t j = 0; j < M; ++j) {
      const std::size_t before_and_equal = (j < i) & (time[j] == time[i]);
      rank += (time[j] < time[i]) + before_and_equal;
      ties += before_and_equal;
    }
    dst[rank] = src[i];
  }
  return ties != 0;
}

// Copies a bucket of m singles to dst in time order; returns whether two share a time.
bool copy_bucket(const Single* src, std::size_t m, Single* dst) {
  switch (m) {
    case 0: return false;
    case 1: *dst = *src; return false;
    case 2: return rank_copy_fixed<2>(src, dst);
    case 3: return rank_copy_fixed<3>(src, dst);
    case 4: return rank_copy_fixed<4>(src, dst);
    case 5: return rank_copy_fixed<5>(src, dst);
    case 6: return rank_copy_fixed<6>(src, dst);
    case 7: return rank_copy_fixed<7>(src, dst);
    case 8: return rank_copy_fixed<8>(src, dst);
    default: return rank_copy(src, m, dst);
  }
}

}  // namespace

void sort_singles(Single* singles, std::size_t n, Single* scratch) {
  if (n < 2) return;

  // Times only, without branches: equal times are rare and handled apart.
  std::uint64_t min_time = singles[0].time;
  std::uint64_t max_time = min_time;
  std::size_t descents = 0;
  std::size_t ties = 0;
  for (std::size_t i = 1; i < n; ++i) {
    const std::uint64_t t = singles[i].time;
    const std::uint64_t before = singles[i - 1].time;
    min_time = t < min_time ? t : min_time;
    max_time = t > max_time ? t : max_time;
    descents += t < before;
    ties += t == before;
  }
  if (descents == 0) {
    if (ties > 0) order_equal_times(singles, n);
    return;
  }
  if (n <= kInsertionSortMax || n > UINT32_MAX) {
    sort_run(singles, n);
    return;
  }

  // Buckets split the time range evenly: bucket = (time - min_time) * buckets / (range + 1),
  // as one 64 x 64 -> 128-bit multiply. At most one bucket per tick of the range, so the
  // scale fits in 64 bits; a range that leaves a single bucket goes to the radix sort.
  const std::uint64_t range = max_time - min_time;
  unsigned bucket_bits = std::min<unsigned>(
      kMaxBucketBits, static_cast<unsigned>(std::bit_width(n / kSinglesPerBucket)));
  while (bucket_bits > 0 && (std::uint64_t{1} << bucket_bits) > range) --bucket_bits;
  if (bucket_bits == 0) {
    radix_sort(singles, n, scratch, min_time, static_cast<unsigned>(std::bit_width(range)));
    return;
  }
  const std::size_t buckets = std::size_t{1} << bucket_bits;
  const std::uint64_t scale = static_cast<std::uint64_t>(
      (static_cast<uint128>(buckets) << 64) / (static_cast<uint128>(range) + 1));
  auto bucket_of = [min_time, scale](std::uint64_t t) {
    return static_cast<std::size_t>((static_cast<uint128>(t - min_time) * scale) >> 64);
  };

  // Thread-local rather than on the stack: 4 MiB, taken once per thread; only the first
  // `buckets` entries are touched, so a small call maps little of it.
  static thread_local std::uint32_t next[std::size_t{1} << kMaxBucketBits];
  std::memset(next, 0, buckets * sizeof(std::uint32_t));
  for (std::size_t i = 0; i < n; ++i) ++next[bucket_of(singles[i].time)];
  std::uint32_t sum = 0;
  for (std::size_t b = 0; b < buckets; ++b) {
    const std::uint32_t c = next[b];
    next[b] = sum;
    sum += c;
  }
  for (std::size_t i = 0; i < n; ++i) {
    const Single& v = singles[i];
    scratch[next[bucket_of(v.time)]++] = v;
  }

  // next[b] is now the end of bucket b.
  std::size_t begin = 0;
  for (std::size_t b = 0; b < buckets; ++b) {
    const std::size_t end = next[b];
    const std::size_t m = end - begin;
    if (m <= kInsertionSortMax) {
      if (copy_bucket(scratch + begin, m, singles + begin)) order_equal_times(singles + begin, m);
    } else {
      std::memcpy(singles + begin, scratch + begin, m * sizeof(Single));
      std::uint64_t lo = singles[begin].time;
      std::uint64_t hi = lo;
      for (std::size_t i = begin + 1; i < end; ++i) {
        lo = std::min(lo, singles[i].time);
        hi = std::max(hi, singles[i].time);
      }
      radix_sort(singles + begin, m, scratch + begin, lo,
                 static_cast<unsigned>(std::bit_width(hi - lo)));
    }
    begin = end;
  }
}

}  // namespace petdaq

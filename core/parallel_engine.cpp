#include "core/parallel_engine.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "core/convert.h"
#include "core/histograms.h"
#include "core/order.h"

namespace petdaq {

namespace {

using Clock = std::chrono::steady_clock;
// Seconds since `since`, which moves on to now (the start of the next step).
double lap(Clock::time_point& since) {
  const Clock::time_point now = Clock::now();
  const double seconds = std::chrono::duration<double>(now - since).count();
  since = now;
  return seconds;
}

// Time ranges per thread in the sort: a few, so that a range of denser time does not leave
// the other threads idle.
constexpr std::size_t kRangesPerThread = 4;
// Convert pieces per thread (ParallelEngine::pieces()).
constexpr std::size_t kPiecesPerThread = 4;
// A cache line between the rows of per-piece range counts, which different threads write.
constexpr std::size_t kSlotPad = 64 / sizeof(std::size_t);
__extension__ typedef unsigned __int128 uint128;

// One coincidence segment's walk: its results, and where its records lie in its thread's
// buffers ([0] prompts, [1] delayed) and go in the caller's.
struct Segment {
  std::size_t thread = 0;
  std::size_t end = 0;  // the walk's return value
  CoincidenceCounts counts;
  std::size_t first[2] = {};
  std::size_t size[2] = {};
  std::uint64_t overflow[2] = {};
  std::size_t copy_to[2] = {};
  std::size_t copy_count[2] = {};
};

}  // namespace

unsigned resolve_backend_threads(unsigned backend_threads, unsigned receiver_threads) {
  if (backend_threads > 0) return backend_threads;
  const unsigned cores = std::thread::hardware_concurrency();
  return cores > receiver_threads + 1 ? cores - receiver_threads - 1 : 1;
}

struct ParallelEngine::Buffers {
  // Per convert piece: its frames' first index, accepted singles, counters, per-BDM counts.
  std::vector<std::size_t> piece_first;
  std::vector<std::size_t> piece_count;
  std::vector<std::size_t> piece_accepted;
  std::vector<CounterDelta> piece_delta;
  std::vector<std::uint64_t> piece_bdm;  // [piece][2][bdm]: accepted, energy-rejected
  std::uint32_t bdm_count = 0;
  std::size_t accepted = 0;  // of the last convert()
  // Sort: per piece its time bounds, per (piece, range) a count and then a write position.
  std::vector<std::uint64_t> piece_min;
  std::vector<std::uint64_t> piece_max;
  std::vector<std::size_t> range_slot;  // [piece][range], rows kSlotPad apart
  std::vector<std::size_t> range_begin;  // [range + 1]
  // Coincidences: segment bounds; per segment where its records went and its results; per
  // thread the buffers it appends its segments' records to.
  std::vector<std::size_t> seam;
  std::vector<Segment> segments;
  std::vector<std::unique_ptr<CoincRecord[]>> record_storage;
  std::vector<RecordBuffer> thread_prompts;
  std::vector<RecordBuffer> thread_delayed;
  // Histograms of threads 1..T-1 (thread 0, the caller, fills the caller's set).
  std::vector<std::unique_ptr<HistogramSet>> histograms;
  bool histograms_pending = false;
};

ParallelEngine::ParallelEngine(const Sizes& sizes)
    : threads_(std::max(1u, sizes.threads)),
      pieces_(threads_ > 1 ? threads_ * kPiecesPerThread : 1),
      segments_(threads_ * std::max<std::size_t>(1, sizes.segments_per_thread)),
      min_parallel_(std::max<std::size_t>(1, sizes.min_parallel)),
      pool_(threads_, sizes.pool_cpus),
      buffers_(std::make_unique<Buffers>()) {
  Buffers& b = *buffers_;
  const std::size_t t = threads_;
  const std::size_t pieces = pieces_;
  const std::size_t ranges = t * kRangesPerThread;
  b.bdm_count = sizes.bdm_count;
  b.piece_first.resize(pieces + 1);
  b.piece_count.resize(pieces);
  b.piece_accepted.resize(pieces);
  b.piece_delta.resize(pieces);
  b.piece_bdm.resize(pieces * 2 * sizes.bdm_count);
  b.piece_min.resize(pieces);
  b.piece_max.resize(pieces);
  b.range_slot.resize(pieces * (ranges + kSlotPad));
  b.range_begin.resize(ranges + 1);
  b.seam.reserve(segments_ + 1);
  b.segments.resize(segments_);
  b.thread_prompts.resize(t);
  b.thread_delayed.resize(t);
  if (threads_ > 1) {
    // A thread's segments may emit as much as a whole slice; pages nobody writes cost nothing.
    for (std::size_t s = 0; s < t; ++s) {
      b.record_storage.push_back(std::make_unique_for_overwrite<CoincRecord[]>(sizes.record_capacity));
      b.thread_prompts[s] = RecordBuffer{b.record_storage.back().get(), sizes.record_capacity};
      if (sizes.delayed) {
        b.record_storage.push_back(
            std::make_unique_for_overwrite<CoincRecord[]>(sizes.record_capacity));
        b.thread_delayed[s] = RecordBuffer{b.record_storage.back().get(), sizes.record_capacity};
      }
    }
    if (sizes.histograms)
      for (std::size_t s = 1; s < t; ++s)
        b.histograms.push_back(std::make_unique<HistogramSet>(*sizes.histograms));
  }
}

ParallelEngine::~ParallelEngine() = default;

std::size_t ParallelEngine::memory_bytes(const Sizes& sizes) {
  const std::size_t t = std::max(1u, sizes.threads);
  if (t == 1) return 0;
  const std::size_t kinds = sizes.delayed ? 2 : 1;
  std::size_t bytes = t * kinds * sizes.record_capacity * sizeof(CoincRecord);
  if (sizes.histograms) bytes += (t - 1) * sizes.histograms->bytes;
  return bytes;
}

ParallelStats ParallelEngine::stats() const {
  ParallelStats s = stats_;
  s.pool = pool_.stats();
  return s;
}

void ParallelEngine::copy_bytes(void* to, const void* from, std::size_t bytes) {
  const std::size_t pieces = pieces_;
  auto* const dst = static_cast<std::uint8_t*>(to);
  const auto* const src = static_cast<const std::uint8_t*>(from);
  pool_.run(pieces, [&](std::size_t j) {
    // Piece edges a multiple of 64 bytes from the start: on cache lines where the
    // destination starts on one, so that no two threads then write one line.
    const std::size_t a = std::min(bytes, piece_begin(bytes / 64, pieces, j) * 64);
    const std::size_t b = j + 1 == pieces ? bytes : std::min(bytes, piece_begin(bytes / 64, pieces, j + 1) * 64);
    std::memcpy(dst + a, src + a, b - a);
  });
}

std::size_t ParallelEngine::convert(const RawFrame* frames, std::size_t n,
                                    const ConvertTables& tables, Single* staging,
                                    CounterDelta& delta, std::uint64_t* bdm_singles,
                                    std::uint64_t* bdm_energy_rejected, HistogramSet* histograms) {
  Buffers& b = *buffers_;
  const std::size_t pieces = pieces_;
  for (std::size_t j = 0; j <= pieces; ++j) b.piece_first[j] = piece_begin(n, pieces, j);
  for (std::size_t j = 0; j < pieces; ++j) b.piece_count[j] = b.piece_first[j + 1] - b.piece_first[j];
  return convert_pieces(frames, b.piece_first.data(), b.piece_count.data(), tables, staging, delta,
                        bdm_singles, bdm_energy_rejected, histograms);
}

std::size_t ParallelEngine::convert_pieces(const RawFrame* frames, const std::size_t* first_of,
                                           const std::size_t* count_of,
                                           const ConvertTables& tables, Single* staging,
                                           CounterDelta& delta, std::uint64_t* bdm_singles,
                                           std::uint64_t* bdm_energy_rejected,
                                           HistogramSet* histograms, PieceTake take,
                                           void* take_context) {
  Buffers& b = *buffers_;
  const std::size_t pieces = pieces_;
  const std::uint32_t bdms = b.bdm_count;
  if (first_of != b.piece_first.data())
    for (std::size_t j = 0; j < pieces; ++j) b.piece_first[j] = first_of[j];
  if (!take && count_of != b.piece_count.data())
    for (std::size_t j = 0; j < pieces; ++j) b.piece_count[j] = count_of[j];
  // Per-thread histograms when there are sets for them, else the calling thread's afterwards.
  const bool thread_histograms = histograms && !b.histograms.empty();
  if (thread_histograms) b.histograms_pending = true;
  pool_.run(pieces, [&](std::size_t j, std::size_t thread) {
    const std::size_t first = b.piece_first[j];
    if (take) b.piece_count[j] = take(take_context, j);
    const std::size_t count = b.piece_count[j];
    CounterDelta& d = b.piece_delta[j];
    d = CounterDelta{};
    std::uint64_t* accepted = b.piece_bdm.data() + j * 2 * bdms;
    std::uint64_t* rejected = accepted + bdms;
    std::fill(accepted, accepted + 2 * bdms, 0);
    const std::size_t kept =
        convert_frames(frames + first, count, tables, staging + first, d, accepted, rejected);
    b.piece_accepted[j] = kept;
    // The sort's time bounds, while the piece's singles are still in this core's cache.
    const Single* s = staging + first;
    std::uint64_t lo = UINT64_MAX, hi = 0;
    for (std::size_t i = 0; i < kept; ++i) {
      lo = std::min(lo, s[i].time);
      hi = std::max(hi, s[i].time);
    }
    b.piece_min[j] = lo;
    b.piece_max[j] = hi;
    if (thread_histograms)
      (thread == 0 ? *histograms : *b.histograms[thread - 1]).add_frames(frames + first, count, tables);
  });
  if (histograms && !thread_histograms)
    for (std::size_t j = 0; j < pieces; ++j)
      histograms->add_frames(frames + b.piece_first[j], b.piece_count[j], tables);
  std::size_t total = 0;
  for (std::size_t j = 0; j < pieces; ++j) {
    total += b.piece_accepted[j];
    delta += b.piece_delta[j];
    const std::uint64_t* accepted = b.piece_bdm.data() + j * 2 * bdms;
    for (std::uint32_t k = 0; k < bdms; ++k) {
      bdm_singles[k] += accepted[k];
      bdm_energy_rejected[k] += accepted[bdms + k];
    }
  }
  b.accepted = total;
  ++stats_.convert_calls;
  return total;
}

void ParallelEngine::sort(Single* out, Single* staging) {
  Buffers& b = *buffers_;
  const std::size_t pieces = pieces_;
  const std::size_t n = b.accepted;
  if (n == 0) return;

  const std::uint64_t min_time = *std::min_element(b.piece_min.begin(), b.piece_min.end());
  const std::uint64_t max_time = *std::max_element(b.piece_max.begin(), b.piece_max.end());
  // range = (time - min_time) * ranges / (span + 1) as one 64 x 64 -> 128-bit multiply; at
  // most one range per tick of the span keeps the scale below 2^64 (as in sort_singles).
  const std::uint64_t span = max_time - min_time;
  const std::size_t ranges = static_cast<std::size_t>(
      std::max<std::uint64_t>(1, std::min<std::uint64_t>(threads_ * kRangesPerThread, span)));
  const std::uint64_t scale =
      span == 0 ? 0
                : static_cast<std::uint64_t>((static_cast<uint128>(ranges) << 64) /
                                             (static_cast<uint128>(span) + 1));
  const std::size_t stride = ranges + kSlotPad;
  const auto range_of = [min_time, scale](std::uint64_t t) {
    return static_cast<std::size_t>((static_cast<uint128>(t - min_time) * scale) >> 64);
  };

  Clock::time_point step = Clock::now();
  pool_.run(pieces, [&](std::size_t j) {
    std::size_t* count = b.range_slot.data() + j * stride;
    std::fill(count, count + ranges, 0);
    const Single* s = staging + b.piece_first[j];
    for (std::size_t i = 0; i < b.piece_accepted[j]; ++i) ++count[range_of(s[i].time)];
  });
  // Range r holds, in piece order, each piece's singles of that range: every single lands
  // in the range of its time, and the ranges follow each other in time.
  std::size_t at = 0;
  for (std::size_t r = 0; r < ranges; ++r) {
    b.range_begin[r] = at;
    for (std::size_t j = 0; j < pieces; ++j) {
      std::size_t& slot = b.range_slot[j * stride + r];
      const std::size_t count = slot;
      slot = at;
      at += count;
    }
  }
  b.range_begin[ranges] = at;
  pool_.run(pieces, [&](std::size_t j) {
    std::size_t* slot = b.range_slot.data() + j * stride;
    const Single* s = staging + b.piece_first[j];
    for (std::size_t i = 0; i < b.piece_accepted[j]; ++i) out[slot[range_of(s[i].time)]++] = s[i];
  });
  stats_.sort_partition_seconds += lap(step);
  // (time, crystal, energy) is a total order on every field of a single, so sorting each
  // range by it gives the bytes any other correct sort of the whole gives.
  pool_.run(ranges, [&](std::size_t r) {
    const std::size_t first = b.range_begin[r];
    sort_singles(out + first, b.range_begin[r + 1] - first, staging + first);
  });
  stats_.sort_range_seconds += lap(step);
  stats_.sort_ranges += ranges;
}

// Why the segments give the one-thread records. In first_open mode a single i with
// !within(t[i-1], t[i]) lies outside the window of every earlier opener o (t[o] <= t[i-1]),
// so the one-thread walk, whatever came before, makes it an opener; from an opener the walk
// is a function of the singles alone (its cursors restart at the opener and move forward by
// predicates on time), so a walk that starts at such a seam visits the one-thread openers of
// its segment and emits their records. It stops at the first opener at or past the segment's
// end: the next seam (itself an opener that no earlier window reaches), or for the last
// segment the resolvable end, which is where the one-thread walk stops; its return value
// is therefore the one-thread first-carried index. In every_single mode every single opens
// a window, so any index is a seam.
std::size_t ParallelEngine::find_coincidences(const Single* singles, std::size_t n,
                                              const CoincidenceParams& p, std::uint64_t horizon,
                                              bool final, RecordBuffer& prompts,
                                              RecordBuffer& delayed, CoincidenceCounts& counts) {
  const bool empty_windows = !p.closed && p.window_ticks == 0;  // nothing to walk
  if (!splits(n) || empty_windows)
    return petdaq::find_coincidences(singles, n, p, horizon, final, prompts, delayed, counts);
  Buffers& b = *buffers_;
  Clock::time_point step = Clock::now();
  const std::size_t resolved_end = resolvable_end(singles, n, p, horizon, final);
  const std::size_t parts = segments_;

  b.seam.clear();
  b.seam.push_back(0);
  for (std::size_t j = 1; j < parts; ++j) {
    std::size_t i = std::max(piece_begin(resolved_end, parts, j), b.seam.back() + 1);
    const std::size_t limit = piece_begin(resolved_end, parts, j + 1);
    if (p.mode == WindowMode::first_open)
      while (i < limit && p.within(singles[i - 1].time, singles[i].time)) ++i;
    // No chain start in this part: it stays with the segment before.
    if (i < limit) b.seam.push_back(i);
  }
  b.seam.push_back(resolved_end);
  const std::size_t segments = b.seam.size() - 1;

  // Each thread appends the records of the segments it walks to its own buffers. The pool
  // hands tasks out in rising order, so a thread's segments follow each other in segment
  // order too: a thread whose buffer fills has, with its own earlier segments, already
  // emitted more records than the caller's buffer can keep, and it kept at least what the
  // caller's buffer has room for from that segment on, so nothing that one buffer would keep
  // is lost.
  for (std::size_t t = 0; t < threads_; ++t) {
    b.thread_prompts[t].clear();
    b.thread_delayed[t].clear();
  }
  pool_.run(segments, [&](std::size_t s, std::size_t thread) {
    const std::size_t first = b.seam[s];
    // The walk updates its buffers' sizes and its counts at every record: on this thread's
    // stack, not in the arrays the other threads write beside them.
    RecordBuffer sp = b.thread_prompts[thread];
    RecordBuffer sd = b.thread_delayed[thread];
    Segment& seg = b.segments[s];
    seg.first[0] = sp.size;
    seg.first[1] = sd.size;
    seg.thread = thread;
    const std::uint64_t overflow[2] = {sp.overflow, sd.overflow};
    CoincidenceCounts counts_here;
    seg.end = first + walk_windows(singles + first, n - first, p, b.seam[s + 1] - first, sp, sd,
                                   counts_here);
    seg.counts = counts_here;
    seg.size[0] = sp.size - seg.first[0];
    seg.size[1] = sd.size - seg.first[1];
    seg.overflow[0] = sp.overflow - overflow[0];
    seg.overflow[1] = sd.overflow - overflow[1];
    b.thread_prompts[thread] = sp;
    b.thread_delayed[thread] = sd;
  });

  stats_.coincidence_walk_seconds += lap(step);
  // Records in segment order: the first `capacity` kept, the rest counted as overflow, as
  // RecordBuffer::push does on one thread.
  for (std::size_t s = 0; s < segments; ++s) {
    const CoincidenceCounts& c = b.segments[s].counts;
    counts.prompts += c.prompts;
    counts.delayed += c.delayed;
    counts.multiples += c.multiples;
    counts.delayed_multiples += c.delayed_multiples;
  }
  RecordBuffer* out[2] = {&prompts, &delayed};
  for (int k = 0; k < 2; ++k) {
    RecordBuffer& into = *out[k];
    for (std::size_t s = 0; s < segments; ++s) {
      Segment& seg = b.segments[s];
      const std::size_t take = std::min(seg.size[k], into.capacity - into.size);
      seg.copy_to[k] = into.size;
      seg.copy_count[k] = take;
      into.size += take;
      into.overflow += seg.size[k] - take + seg.overflow[k];
    }
  }
  pool_.run(2 * segments, [&](std::size_t task) {
    const std::size_t k = task / segments;
    const Segment& seg = b.segments[task % segments];
    if (seg.copy_count[k] == 0) return;
    const RecordBuffer& from = k == 0 ? b.thread_prompts[seg.thread] : b.thread_delayed[seg.thread];
    std::memcpy(out[k]->data + seg.copy_to[k], from.data + seg.first[k],
                seg.copy_count[k] * sizeof(CoincRecord));
  });
  stats_.coincidence_join_seconds += lap(step);
  ++stats_.coincidence_calls;
  stats_.coincidence_seams += segments - 1;
  // The last segment holds the resolvable end (see above); with nothing resolvable there is
  // one segment, empty, whose walk returns 0 (or n = 0).
  return b.segments[segments - 1].end;
}

void ParallelEngine::add_records(const CoincRecord* records, std::size_t n, bool delayed,
                                 HistogramSet& into) {
  Buffers& b = *buffers_;
  if (!splits(n) || b.histograms.empty()) return into.add_records(records, n, delayed);
  b.histograms_pending = true;
  const std::size_t pieces = pieces_;
  pool_.run(pieces, [&](std::size_t j, std::size_t thread) {
    const std::size_t first = piece_begin(n, pieces, j);
    (thread == 0 ? into : *b.histograms[thread - 1])
        .add_records(records + first, piece_begin(n, pieces, j + 1) - first, delayed);
  });
}

void ParallelEngine::collect_histograms(HistogramSet& into) {
  Buffers& b = *buffers_;
  if (!b.histograms_pending) return;
  b.histograms_pending = false;
  const HistogramLayout& l = into.layout();
  const std::size_t parts = threads_;
  pool_.run(parts, [&](std::size_t part) {
    for (int hi = 0; hi < kHistCount; ++hi) {
      const Hist h = static_cast<Hist>(hi);
      if (hist_is_real(h)) continue;  // derived at publish time, never filled here
      const std::size_t count = l.count[hi];
      const std::size_t first = piece_begin(count, parts, part);
      const std::size_t last = piece_begin(count, parts, part + 1);
      for (const auto& from : b.histograms) {
        if (hist_is_32bit(h)) {
          unsigned int* src = l.u32(from->bins(), h);
          unsigned int* dst = l.u32(into.bins(), h);
          for (std::size_t i = first; i < last; ++i) dst[i] += std::exchange(src[i], 0u);
        } else {
          unsigned long long* src = l.u64(from->bins(), h);
          unsigned long long* dst = l.u64(into.bins(), h);
          for (std::size_t i = first; i < last; ++i) dst[i] += std::exchange(src[i], 0ull);
        }
      }
    }
  });
}

void ParallelEngine::reset_histograms() {
  for (const auto& h : buffers_->histograms) h->reset();
  buffers_->histograms_pending = false;
}

}  // namespace petdaq

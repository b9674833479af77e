// The CPU backend's stages on several threads (docs/engine.md, "Threads"), with records,
// singles and counters byte for byte those of one thread. Each stage cuts its input into
// pieces and hands them to the single-thread code (convert_frames, sort_singles, the window
// walk of core/coincidence.cpp) on a ThreadPool made at start-up:
// * convert: T contiguous pieces of the frames (or the T pieces a take left, gaps between),
//   each converted into its own region;
// * sort: the fresh singles partitioned by time into P ranges of equal span (count, prefix
//   sums, scatter), each range sorted with sort_singles();
// * coincidences: the singles cut at seams where a window chain starts, each segment walked
//   into its own record buffer, the buffers joined in segment order.
// Every buffer is sized at construction.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/coincidence.h"
#include "core/counters.h"
#include "core/thread_pool.h"
#include "proto/frame.h"
#include "proto/records.h"

namespace petdaq {

struct ConvertTables;
class HistogramSet;
struct HistogramLayout;

// What the engine cut, summed over its calls (tests assert that seams really happened).
struct ParallelStats {
  std::uint64_t convert_calls = 0;      // convert() calls that ran on several threads
  std::uint64_t sort_ranges = 0;        // time ranges sorted apart
  std::uint64_t coincidence_calls = 0;  // find_coincidences() calls split in segments
  std::uint64_t coincidence_seams = 0;  // segments - 1, summed
  // Wall seconds of the split stages' steps (docs/engine.md, "Threads").
  double sort_partition_seconds = 0;  // count per range, prefix sums, scatter
  double sort_range_seconds = 0;      // sort_singles on each range
  double coincidence_walk_seconds = 0;  // seams and the walks
  double coincidence_join_seconds = 0;  // the segments' records after each other
  ThreadPoolStats pool;                 // every run of the pool (take and staging included)
};

// The first item of piece `piece` when `count` items are cut in `pieces` near-equal parts
// (piece `pieces` gives `count`).
inline std::size_t piece_begin(std::size_t count, std::size_t pieces, std::size_t piece) {
  __extension__ typedef unsigned __int128 uint128;
  return static_cast<std::size_t>(static_cast<uint128>(count) * piece / pieces);
}

class ParallelEngine {
 public:
  struct Sizes {
    unsigned threads = 1;
    std::size_t record_capacity = 0;  // of the caller's prompt buffer (and delayed, if on)
    bool delayed = false;
    std::uint32_t bdm_count = 0;
    const HistogramLayout* histograms = nullptr;  // per-thread histograms, when enabled
    // Fewer frames (or singles) than this run on the calling thread alone.
    std::size_t min_parallel = 64 * 1024;
    // Coincidence segments per thread: a few, handed out as threads come free.
    std::size_t segments_per_thread = 4;
    // The CPUs of the pool's threads beside the calling one (ThreadPool; empty: anywhere).
    std::vector<int> pool_cpus;
  };
  explicit ParallelEngine(const Sizes& sizes);
  ~ParallelEngine();
  // Host memory its buffers take: each thread's record buffers and histograms (the
  // bookkeeping of a few entries per piece besides).
  static std::size_t memory_bytes(const Sizes& sizes);

  unsigned threads() const { return threads_; }
  // The pieces a stage's frames (and fresh singles) are cut into: a few per thread, handed
  // out as the threads come free, so that a thread the system preempts for a while (a
  // reader, the output writer) holds up one small piece rather than a T-th of the slice.
  std::size_t pieces() const { return pieces_; }
  // Does a stage with `count` items go to several threads?
  bool splits(std::size_t count) const { return threads_ > 1 && count >= min_parallel_; }
  // Does a copy of `count` frames go to several threads? A copy is cheaper per frame than a
  // stage, so a smaller one pays for the hand-over: a receiver's ring chunk (up to 64 Ki
  // frames) that the daemon stages is copied by the pool, not by the worker alone.
  static constexpr std::size_t kMinParallelCopy = 16 * 1024;
  bool splits_copy(std::size_t count) const {
    return threads_ > 1 && count >= std::min(min_parallel_, kMinParallelCopy);
  }

  // convert_frames() on pieces() pieces of the frames: piece j's accepted singles go to
  // staging[first frame of j ...]; counters and per-BDM counts are added to the caller's.
  // `histograms` (or null) receives the frames' histograms, through per-thread sets that
  // collect_histograms() adds in. Returns the accepted singles; sort() places them.
  std::size_t convert(const RawFrame* frames, std::size_t n, const ConvertTables& tables,
                      Single* staging, CounterDelta& delta, std::uint64_t* bdm_singles,
                      std::uint64_t* bdm_energy_rejected, HistogramSet* histograms);
  // The same for frames laid out in pieces() pieces with gaps between them (as a one-pass
  // take leaves them): piece j is frames[first[j], first[j] + count[j]), first[] rising, and
  // its singles go to staging[first[j] ...]. The singles are those of convert() on the
  // pieces put end to end.
  // With `take`, piece j's task first calls take(context, j), which writes the piece's frames
  // at first[j] and returns their count (count[] is then read from nowhere else).
  using PieceTake = std::size_t (*)(void* context, std::size_t piece);
  std::size_t convert_pieces(const RawFrame* frames, const std::size_t* first,
                             const std::size_t* count, const ConvertTables& tables,
                             Single* staging, CounterDelta& delta, std::uint64_t* bdm_singles,
                             std::uint64_t* bdm_energy_rejected, HistogramSet* histograms,
                             PieceTake take = nullptr, void* take_context = nullptr);
  // Writes the singles of the last convert() to out[0, accepted) in the order of DESIGN
  // section 5; `staging` (the one given to convert()) is the sorts' scratch.
  void sort(Single* out, Single* staging);

  // find_coincidences() (core/coincidence.h), same records, counts and return value.
  std::size_t find_coincidences(const Single* singles, std::size_t n, const CoincidenceParams& p,
                                std::uint64_t horizon, bool final, RecordBuffer& prompts,
                                RecordBuffer& delayed, CoincidenceCounts& counts);

  // HistogramSet::add_records() on T pieces of the records: piece 0 into `into`, the others
  // into the per-thread sets that collect_histograms() adds in (integer counts: the bins are
  // those of one thread).
  void add_records(const CoincRecord* records, std::size_t n, bool delayed, HistogramSet& into);
  // Adds what the other threads histogrammed into `into` and zeroes theirs.
  void collect_histograms(HistogramSet& into);
  void reset_histograms();

  ParallelStats stats() const;
  // memcpy of n frames (or bytes), in pieces() pieces.
  void copy_frames(RawFrame* to, const RawFrame* from, std::size_t n) {
    copy_bytes(to, from, n * sizeof(RawFrame));
  }
  void copy_bytes(void* to, const void* from, std::size_t bytes);
  // The pool, for the backend's own per-piece work (taking a slice's frames).
  ThreadPool& pool() { return pool_; }

 private:
  struct Buffers;
  unsigned threads_;
  std::size_t pieces_;
  std::size_t segments_;  // coincidence segments to cut, at most
  std::size_t min_parallel_;
  ThreadPool pool_;
  std::unique_ptr<Buffers> buffers_;
  ParallelStats stats_;
};

// backend_threads resolved: 0 = the cores left after the receivers and the worker
// (hardware_concurrency - input.receiver_threads - 1), at least 1.
unsigned resolve_backend_threads(unsigned backend_threads, unsigned receiver_threads);

}  // namespace petdaq

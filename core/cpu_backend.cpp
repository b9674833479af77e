// The CPU backend (core/backend.h): its store of staged frames, taking a slice by its bound
// (one pass; on the backend's threads; the rare split), and the slice's stages. Over 400
// lines because the take and the stages share the backend's buffers; the stages themselves
// live in convert.cpp, order.cpp, coincidence.cpp and, on several threads, parallel_engine.cpp.
#include "core/cpu_backend.h"

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/calibration.h"
#include "core/coincidence.h"
#include "core/convert.h"
#include "core/frame_source.h"
#include "core/histograms.h"
#include "core/image.h"
#include "core/order.h"
#include "core/parallel_engine.h"
#include "core/settings.h"
#include "core/slice_end.h"

namespace petdaq {

namespace {

// Blocks a deferred stage (CpuBackend::defer_staging) remembers before it copies them anyway.
constexpr std::size_t kMaxDeferredBlocks = 1024;

// The frames of from[0, n) that a slice with this bound takes go to `taken`, the others to
// `kept`, each in order; returns how many were taken. `kept` may be `from` or before it (a
// close-up in place: each frame is read before anything is written where it was).
std::size_t split_frames(const RawFrame* from, std::size_t n, const SourceRule& rule,
                         std::uint64_t bound, RawFrame* taken, RawFrame* kept) {
  std::size_t t = 0, k = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (slice_takes(from[i].bytes, rule, bound))
      taken[t++] = from[i];
    else
      kept[k++] = from[i];
  }
  return t;
}

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
template <class T>
using HugeArray = std::unique_ptr<T[], FreeDeleter>;

// A copy of a calibration table on transparent huge pages where the kernel allows them: the
// energy table's rows are a page apart, so with 4 KiB pages nearly every look-up also misses
// the TLB.
template <class T>
HugeArray<T> huge_page_copy(const T* source, std::size_t count) {
  constexpr std::size_t kHugePageBytes = 2u << 20;
  const std::size_t bytes =
      std::max<std::size_t>(1, (count * sizeof(T) + kHugePageBytes - 1) / kHugePageBytes) *
      kHugePageBytes;
  void* p = std::aligned_alloc(kHugePageBytes, bytes);
  if (!p) throw std::bad_alloc();
  ::madvise(p, bytes, MADV_HUGEPAGE);  // a hint: without huge pages it works all the same
  if (count > 0) std::memcpy(p, source, count * sizeof(T));
  return HugeArray<T>(static_cast<T*>(p));
}

}  // namespace

struct CpuBackend::Impl {
  HugeArray<std::uint8_t> position_lut;
  HugeArray<float> energy_correction;
  ConvertTables tables;
  CoincidenceParams params;
  std::size_t max_slice_frames = 0;
  std::size_t max_staged_frames = 0;
  std::size_t max_carry_singles = 0;
  SourceRule source_rule;
  std::int64_t min_time_offset = 0;
  std::uint32_t bdm_count = 0;

  // Buffers are left uninitialised: pages nobody writes cost no memory and no start-up time.
  // Staged frames in arrival order; a slice moves those it takes into `input`.
  std::unique_ptr<RawFrame[]> store;
  std::size_t store_count = 0;
  std::uint64_t tickets = 0;
  // Deferred staging: blocks staged and not yet copied to the store (after its
  // store_count frames, in this order); tickets up to `copied` are in the store.
  struct Block {
    const RawFrame* frames;
    std::size_t count;
  };
  bool defer = false;
  std::vector<Block> deferred;
  std::vector<std::size_t> deferred_first;  // [block + 1]: prefix sums of the counts
  std::size_t deferred_count = 0;
  std::uint64_t copied = 0;
  std::unique_ptr<std::uint64_t[]> split_keys;  // raw times, for a slice that must split
  std::unique_ptr<RawFrame[]> input;
  std::size_t input_count = 0;
  // Two singles buffers of max_carry + max_slice: the carry-over sits at the front of
  // `singles`, the slice's new singles follow it; `scratch` is the sort's and the merge's
  // second buffer, and the two swap roles after a merge.
  std::unique_ptr<Single[]> singles_a;
  std::unique_ptr<Single[]> singles_b;
  Single* singles = nullptr;
  Single* scratch = nullptr;
  std::size_t carry_count = 0;
  std::uint64_t next_t_begin = 0;

  std::unique_ptr<CoincRecord[]> prompt_storage;
  std::unique_ptr<CoincRecord[]> delayed_storage;
  RecordBuffer prompts;
  RecordBuffer delayed;
  std::vector<std::uint64_t> bdm_singles;
  std::vector<std::uint64_t> bdm_energy_rejected;
  std::unique_ptr<HistogramSet> histograms;  // output.histograms.enabled
  std::unique_ptr<ImageSet> image;           // output.image.enabled
  std::unique_ptr<Single[]> resolved;        // output.singles.enabled
  std::unique_ptr<ParallelEngine> engine;     // backend_threads > 1
  // The threaded take: per piece of the store, its first frame, the frames taken, their place
  // in `input`, the frames kept. With `input_in_pieces` the slice's frames lie in `input` as
  // the pieces left them, piece j's piece_taken[j] at piece_offset[j], with gaps between.
  std::vector<std::size_t> piece_first, piece_taken, piece_offset, piece_kept;
  bool input_in_pieces = false;
  bool take_pending = false;     // complete_take()
  std::uint64_t take_bound = 0;  // of the one-pass take

  StageSeconds stage;
  SliceRequest pending;
  bool has_pending = false;
  SliceResult result;

  static ParallelEngine::Sizes engine_sizes(const Settings& s, const CpuBackendOptions& o) {
    ParallelEngine::Sizes e;
    e.threads = resolve_backend_threads(s.backend_threads, s.input.receiver_threads);
    e.delayed = s.coincidence.delayed.enabled;
    e.bdm_count = Geometry::from(s.scanner).bdm_count();
    e.min_parallel = o.min_parallel_frames;
    return e;
  }

  Impl(const Settings& s, const Calibration& cal, const CpuBackendOptions& options)
      : position_lut(huge_page_copy(cal.position_lut.data(), cal.position_lut.size())),
        energy_correction(
            huge_page_copy(cal.energy_correction.data(), cal.energy_correction.size())),
        tables(make_convert_tables(s, cal)),
        params(CoincidenceParams::from(s)),
        max_slice_frames(s.stream.max_slice_frames),
        max_staged_frames(std::max(s.stream.max_pending_frames, s.stream.max_slice_frames)),
        max_carry_singles(s.stream.max_carry_singles),
        min_time_offset(cal.min_time_offset),
        bdm_count(tables.geometry.bdm_count()) {
    if (max_slice_frames == 0) throw std::invalid_argument("stream.max_slice_frames must be > 0");
    deferred.reserve(kMaxDeferredBlocks);
    deferred_first.reserve(kMaxDeferredBlocks + 1);
    tables.position_lut = position_lut.get();
    tables.energy_correction = energy_correction.get();
    const std::size_t singles_capacity = max_carry_singles + max_slice_frames;
    source_rule = SourceRule{tables.check_markers, tables.head_marker, tables.tail_marker, bdm_count};
    store = std::make_unique_for_overwrite<RawFrame[]>(max_staged_frames);
    split_keys = std::make_unique_for_overwrite<std::uint64_t[]>(max_staged_frames);
    input = std::make_unique_for_overwrite<RawFrame[]>(max_slice_frames);
    singles_a = std::make_unique_for_overwrite<Single[]>(singles_capacity);
    singles_b = std::make_unique_for_overwrite<Single[]>(singles_capacity);
    singles = singles_a.get();
    scratch = singles_b.get();
    const std::size_t record_capacity =
        singles_capacity * std::max<std::size_t>(1, s.stream.max_records_per_single);
    const std::size_t delayed_capacity = params.delayed ? record_capacity : 0;
    prompt_storage = std::make_unique_for_overwrite<CoincRecord[]>(record_capacity);
    delayed_storage = std::make_unique_for_overwrite<CoincRecord[]>(delayed_capacity);
    prompts.data = prompt_storage.get();
    prompts.capacity = record_capacity;
    delayed.data = delayed_storage.get();
    delayed.capacity = delayed_capacity;
    bdm_singles.resize(bdm_count);
    bdm_energy_rejected.resize(bdm_count);
    if (s.output.histograms.enabled)
      histograms = std::make_unique<HistogramSet>(make_histogram_layout(s));
    if (s.output.image.enabled) image = std::make_unique<ImageSet>(s);
    if (s.output.wants_singles()) resolved = std::make_unique_for_overwrite<Single[]>(singles_capacity);
    ParallelEngine::Sizes sizes = engine_sizes(s, options);
    sizes.record_capacity = record_capacity;
    if (histograms) sizes.histograms = &histograms->layout();
    if (sizes.threads > 1) {
      engine = std::make_unique<ParallelEngine>(sizes);
      piece_first.resize(engine->pieces() + 1);
      piece_taken.resize(engine->pieces());
      piece_offset.resize(engine->pieces());
      piece_kept.resize(engine->pieces());
    }
  }

  // Copies the deferred blocks to the store, all at once, on the engine's threads.
  void copy_deferred() {
    copied = tickets;  // blocks of no frames are staged at once
    if (deferred.empty()) return;
    RawFrame* const to = store.get() + store_count;
    const std::size_t n = deferred_count;
    if (engine->splits(n)) {
      const std::size_t pieces = engine->pieces();
      engine->pool().run(pieces, [&](std::size_t j) {
        std::size_t at = piece_begin(n, pieces, j);
        const std::size_t end = piece_begin(n, pieces, j + 1);
        // The block holding frame `at`, then the blocks after it up to `end`.
        std::size_t k = static_cast<std::size_t>(
            std::upper_bound(deferred_first.begin(), deferred_first.end(), at) -
            deferred_first.begin() - 1);
        for (; at < end; ++k) {
          const std::size_t from = at - deferred_first[k];
          const std::size_t count = std::min(deferred[k].count - from, end - at);
          std::memcpy(to + at, deferred[k].frames + from, count * sizeof(RawFrame));
          at += count;
        }
      });
    } else {
      for (std::size_t k = 0; k < deferred.size(); ++k)
        std::memcpy(to + deferred_first[k], deferred[k].frames, deferred[k].count * sizeof(RawFrame));
    }
    store_count += n;
    deferred.clear();
    deferred_first.clear();
    deferred_count = 0;
  }

  // Moves the staged frames this slice takes into `input` (core/backend.h: the bound, and
  // the split when more than max_slice_frames are below it); the rest keep their order.
  void take(const SliceRequest& req) {
    result = SliceResult{};
    result.slice_id = req.slice_id;
    const std::uint64_t requested = req.final ? kNoBound : req.bound;
    const std::size_t held = store_count + deferred_count;
    if (engine && engine->splits(held) && held <= max_slice_frames) {
      plan_one_pass(requested);
      take_pending = true;  // run by the convert stage, piece by piece (process())
      return;
    }
    copy_deferred();
    if (engine && engine->splits(store_count)) return take_in_pieces(requested);
    // One pass in the common case: the frames below the bound go to `input` while it has
    // room, the others close up in the store.
    RawFrame* const st = store.get();
    RawFrame* const in = input.get();
    std::size_t taken = 0, kept = 0;
    bool more = false;  // frames below the bound found after `input` was full: a split
    for (std::size_t i = 0; i < store_count; ++i) {
      const RawFrame& f = st[i];
      const bool takes = slice_takes(f.bytes, source_rule, requested);
      if (takes && taken < max_slice_frames) {
        in[taken++] = f;
      } else {
        st[kept++] = f;
        more |= takes;
      }
    }
    if (!more) {
      store_count = kept;
      set_taken(taken, 0, requested, false);
      return;
    }
    // A split (rare): the frames go back to the store and are taken in three passes.
    std::memcpy(st + kept, in, taken * sizeof(RawFrame));
    take_split(requested);
  }

  // take() on the engine's threads when everything staged fits in a slice (the common case):
  // one pass over the store's frames and then the deferred blocks', cut in pieces (a few per
  // thread). Each piece copies the frames the slice takes to its own place in `input` (its
  // first index: no piece can overrun another) and the rest to its own place in the store,
  // closed up (frame i of the sequence lies at store index i or later); the convert stage
  // reads `input` piece by piece, gaps and all (ParallelEngine::convert_pieces). The
  // deferred blocks are thereby staged without a copy of their own. It runs in three steps,
  // so that the convert stage can run each piece's take right before converting it
  // (take_pending, below): the pieces' bounds, one piece's split, and what follows once
  // every piece is split.
  void plan_one_pass(std::uint64_t requested) {
    const std::size_t pieces = piece_taken.size();
    const std::size_t total = store_count + deferred_count;
    for (std::size_t j = 0; j <= pieces; ++j) piece_first[j] = piece_begin(total, pieces, j);
    take_bound = requested;
    set_taken(0, 0, requested, false);  // the count once the pieces are split
  }
  void take_piece(std::size_t j) {
    RawFrame* const st = store.get();
    RawFrame* const in = input.get();
    const std::size_t stored = store_count;
    const std::uint64_t requested = take_bound;
    const std::size_t begin = piece_first[j], end = piece_first[j + 1];
    std::size_t at = begin, t = 0;
    const auto split = [&](const RawFrame* from, std::size_t n) {
      t += split_frames(from, n, source_rule, requested, in + begin + t, st + begin + (at - begin - t));
      at += n;
    };
    if (at < std::min(end, stored)) split(st + at, std::min(end, stored) - at);
    if (at < end) {
      // The deferred block holding frame `at`, then the blocks after it.
      std::size_t b = static_cast<std::size_t>(
          std::upper_bound(deferred_first.begin(), deferred_first.end(), at - stored) -
          deferred_first.begin() - 1);
      for (; at < end; ++b) {
        const std::size_t from = at - stored - deferred_first[b];
        split(deferred[b].frames + from, std::min(deferred[b].count - from, end - at));
      }
    }
    piece_taken[j] = t;
    piece_kept[j] = end - begin - t;
  }
  void finish_one_pass() {
    const std::size_t pieces = piece_taken.size();
    std::size_t taken = 0;
    for (std::size_t j = 0; j < pieces; ++j) {
      piece_offset[j] = piece_first[j];
      taken += piece_taken[j];
    }
    store_count = close_up_kept();
    deferred.clear();
    deferred_first.clear();
    deferred_count = 0;
    copied = tickets;
    set_taken(taken, 0, take_bound, false);
    input_in_pieces = true;
  }

  // A one-pass take that submit() planned and the convert stage has not yet run (the
  // slicer collects a CPU slice right after submitting it). Anything that touches the
  // staged frames before that runs it first.
  void complete_take() {
    if (!take_pending) return;
    take_pending = false;
    engine->pool().run(piece_taken.size(), [&](std::size_t j) { take_piece(j); });
    finish_one_pass();
  }

  // take() on the engine's threads when the store holds more than a slice: each piece of the
  // store counts the frames the slice takes (more than max_slice_frames: the split), then
  // copies them to their place in `input` and closes up the rest in place.
  void take_in_pieces(std::uint64_t requested) {
    RawFrame* const st = store.get();
    RawFrame* const in = input.get();
    const std::size_t pieces = piece_taken.size();
    for (std::size_t j = 0; j <= pieces; ++j) piece_first[j] = piece_begin(store_count, pieces, j);
    engine->pool().run(pieces, [&](std::size_t j) {
      const std::size_t end = piece_first[j + 1];
      std::size_t n = 0;
      for (std::size_t i = piece_first[j]; i < end; ++i)
        n += slice_takes(st[i].bytes, source_rule, requested);
      piece_taken[j] = n;
    });
    std::size_t taken = 0;
    for (std::size_t j = 0; j < pieces; ++j) {
      piece_offset[j] = taken;
      taken += piece_taken[j];
    }
    if (taken > max_slice_frames) return take_split(requested);  // nothing has moved yet
    engine->pool().run(pieces, [&](std::size_t j) {
      const std::size_t begin = piece_first[j], n = piece_first[j + 1] - begin;
      piece_kept[j] = n - split_frames(st + begin, n, source_rule, requested,
                                       in + piece_offset[j], st + begin);
    });
    store_count = close_up_kept();
    set_taken(taken, 0, requested, false);
  }

  // Moves count[j] frames at first[j] of `frames` end to end to its front, in piece order;
  // returns how many.
  static std::size_t close_up(RawFrame* frames, const std::vector<std::size_t>& first,
                              const std::vector<std::size_t>& count) {
    std::size_t at = 0;
    for (std::size_t j = 0; j < count.size(); ++j) {
      if (at != first[j]) std::memmove(frames + at, frames + first[j], count[j] * sizeof(RawFrame));
      at += count[j];
    }
    return at;
  }

  // The kept rest of each piece joins the store's front, in piece order; returns the count.
  std::size_t close_up_kept() { return close_up(store.get(), piece_first, piece_kept); }

  // The slice's frames end to end in `input` (a slice too small for the threads).
  void join_input_pieces() {
    if (!input_in_pieces) return;
    close_up(input.get(), piece_offset, piece_taken);
    input_in_pieces = false;
  }

  void set_taken(std::size_t taken, std::size_t dropped, std::uint64_t bound, bool split) {
    input_count = taken;
    input_in_pieces = false;
    result.frames_taken = taken;
    result.frames_dropped = dropped;
    result.bound = bound;
    result.split = split;
    result.counters[Counter::stream_pending_full] += dropped;
  }

  // More than max_slice_frames staged frames are below `requested`: the slice takes those
  // below the (m+1)-th smallest raw time of the frames with a source (m = max_slice_frames
  // minus the frames without one).
  void take_split(std::uint64_t requested) {
    const RawFrame* const st = store.get();
    std::size_t sourceless = 0;
    std::size_t keyed = 0;
    for (std::size_t i = 0; i < store_count; ++i) {
      if (source_rule.source_of(st[i].bytes) < 0) {
        ++sourceless;
      } else {
        const std::uint64_t t = frame_time(st[i].bytes);
        if (requested == kNoBound || t < requested) split_keys[keyed++] = t;
      }
    }
    const std::size_t m = max_slice_frames - sourceless;
    std::nth_element(split_keys.get(), split_keys.get() + m, split_keys.get() + keyed);
    const std::uint64_t bound = split_keys[m];
    // More than max_slice_frames frames share the earliest time: no slice can hold them.
    const bool drop = sourceless == 0 &&
                      std::none_of(split_keys.get(), split_keys.get() + keyed,
                                   [bound](std::uint64_t t) { return t < bound; });
    RawFrame* const in = input.get();
    std::size_t taken = 0, kept = 0, dropped = 0;
    for (std::size_t i = 0; i < store_count; ++i) {
      const RawFrame& f = st[i];
      if (slice_takes(f.bytes, source_rule, bound)) {
        in[taken++] = f;
      } else if (drop && frame_time(f.bytes) == bound && source_rule.source_of(f.bytes) >= 0) {
        ++dropped;
      } else {
        store[kept++] = f;
      }
    }
    store_count = kept;
    set_taken(taken, dropped, bound, true);
  }

  void process(const SliceRequest& req) {
    if (req.run_start) {
      carry_count = 0;
      next_t_begin = 0;
      if (histograms) histograms->reset();  // histograms: a run starts
      if (engine) engine->reset_histograms();
      if (image) image->reset();
    }
    result.t_begin = next_t_begin;
    const bool final = req.final && !result.split;
    const std::uint64_t horizon = corrected_horizon(result.bound, min_time_offset);
    prompts.clear();
    delayed.clear();
    std::fill(bdm_singles.begin(), bdm_singles.end(), 0);
    std::fill(bdm_energy_rejected.begin(), bdm_energy_rejected.end(), 0);

    using Clock = std::chrono::steady_clock;
    const auto seconds = [](Clock::time_point a, Clock::time_point b) {
      return std::chrono::duration<double>(b - a).count();
    };
    const Clock::time_point t0 = Clock::now();
    const std::size_t frame_count = input_count;
    CounterDelta& delta = result.counters;
    // Threads (core/parallel_engine.h) for slices big enough to repay the split.
    // A planned one-pass take runs inside the convert stage, each piece's take right before
    // its convert, while its frames are in that core's cache; the stages after it then run
    // on the threads too, whatever the slice's size.
    const bool fused = take_pending;
    const bool split = fused || (engine && engine->splits(frame_count));
    if (!split) join_input_pieces();
    std::size_t fresh;
    if (fused) {
      take_pending = false;
      fresh = engine->convert_pieces(
          input.get(), piece_first.data(), piece_taken.data(), tables, scratch, delta,
          bdm_singles.data(), bdm_energy_rejected.data(), histograms.get(),
          [](void* self, std::size_t j) {
            Impl& m = *static_cast<Impl*>(self);
            m.take_piece(j);
            return m.piece_taken[j];
          },
          this);
      finish_one_pass();
    } else if (split && input_in_pieces) {
      fresh = engine->convert_pieces(input.get(), piece_offset.data(), piece_taken.data(), tables,
                                     scratch, delta, bdm_singles.data(),
                                     bdm_energy_rejected.data(), histograms.get());
    } else if (split) {
      fresh = engine->convert(input.get(), frame_count, tables, scratch, delta,
                              bdm_singles.data(), bdm_energy_rejected.data(), histograms.get());
    } else {
      fresh = convert_frames(input.get(), frame_count, tables, singles + carry_count, delta,
                             bdm_singles.data(), bdm_energy_rejected.data());
      if (histograms) histograms->add_frames(input.get(), frame_count, tables);  // histograms
    }
    const Clock::time_point t1 = Clock::now();
    if (split)
      engine->sort(singles + carry_count, scratch);
    else
      sort_singles(singles + carry_count, fresh, scratch);
    // The carry-over is sorted already; the new singles mostly follow it, so a merge is only
    // needed where the two overlap in time, and only the new singles below the carry-over's
    // last take part (std::merge puts equal ones after it, where they already are). Kept
    // short, as it runs on one thread whatever backend_threads says.
    if (carry_count > 0 && fresh > 0 &&
        single_less(singles[carry_count], singles[carry_count - 1])) {
      Single* const fresh_begin = singles + carry_count;
      Single* const overlap_end = std::lower_bound(fresh_begin, fresh_begin + fresh,
                                                   singles[carry_count - 1], single_less);
      Single* const merged_end =
          std::merge(singles, fresh_begin, fresh_begin, overlap_end, scratch, single_less);
      std::memcpy(singles, scratch, static_cast<std::size_t>(merged_end - scratch) * sizeof(Single));
    }
    const std::size_t total = carry_count + fresh;
    const Clock::time_point t2 = Clock::now();

    CoincidenceCounts counts;
    const auto find = [&](const Single* s, std::size_t n, bool resolve_all) {
      return engine ? engine->find_coincidences(s, n, params, horizon, resolve_all, prompts,
                                                delayed, counts)
                    : find_coincidences(s, n, params, horizon, resolve_all, prompts, delayed,
                                        counts);
    };
    std::size_t first_carried = find(singles, total, final);
    bool resolved_all = final;
    if (!final && total - first_carried > max_carry_singles) {
      // Carry overflow (core/backend.h): the rest is resolved as if the run ended here. The
      // carried part starts at a window-chain start, so resolving it alone appends exactly
      // the records a final call on the whole slice would have made.
      find(singles + first_carried, total - first_carried, true);
      first_carried = total;
      resolved_all = true;
      delta[Counter::stream_carry_overflow] += 1;
    }

    if (histograms && engine) {  // histograms of the records
      engine->add_records(prompts.data, prompts.size, false, *histograms);
      engine->add_records(delayed.data, delayed.size, true, *histograms);
    } else if (histograms) {
      histograms->add_records(prompts.data, prompts.size, false);
      histograms->add_records(delayed.data, delayed.size, true);
    }
    if (image) {  // the live image of the records
      image->add_records(prompts.data, prompts.size, false);
      image->add_records(delayed.data, delayed.size, true);
    }
    if (resolved) {  // singles topic: the resolved singles, before the carry-over moves
      std::memcpy(resolved.get(), singles, first_carried * sizeof(Single));
      result.singles = resolved.get();
      result.single_count = first_carried;
    }
    const Clock::time_point t3 = Clock::now();
    stage.convert += seconds(t0, t1);
    stage.sort += seconds(t1, t2);
    stage.coincidence += seconds(t2, t3);

    result.t_end =
        slice_t_end(singles, total, first_carried, resolved_all, result.t_begin, horizon);
    next_t_begin = result.t_end;

    carry_count = total - first_carried;
    if (carry_count > 0 && first_carried > 0)
      std::memmove(singles, singles + first_carried, carry_count * sizeof(Single));
    if (final) {
      carry_count = 0;
      next_t_begin = 0;
    }

    add_coincidence_counts(delta, counts, prompts.overflow + delayed.overflow);

    result.prompts = prompts.data;
    result.prompt_count = prompts.size;
    result.delayed = delayed.data;
    result.delayed_count = delayed.size;
    result.carry_count = carry_count;
    result.bdm_singles = bdm_singles.data();
    result.bdm_energy_rejected = bdm_energy_rejected.data();
  }
};

CpuBackend::CpuBackend(const Settings& settings, const Calibration& calibration,
                       const CpuBackendOptions& options)
    : impl_(std::make_unique<Impl>(settings, calibration, options)) {}

CpuBackend::~CpuBackend() = default;

std::size_t CpuBackend::max_slice_frames() const { return impl_->max_slice_frames; }

std::size_t CpuBackend::max_staged_frames() const { return impl_->max_staged_frames; }

std::size_t CpuBackend::preferred_slice_frames() const {
  return std::min<std::size_t>(impl_->max_slice_frames / 2, kCacheSliceFrames * threads());
}

std::uint64_t CpuBackend::stage(const RawFrame* frames, std::size_t count) {
  Impl& m = *impl_;
  m.complete_take();
  const std::size_t held = m.store_count + m.deferred_count;
  // The slicer never stages more; a caller that does has a bug, not bad data.
  if (count > m.max_staged_frames - held)
    throw std::invalid_argument("CpuBackend::stage: " + std::to_string(count) +
                                " frames do not fit beside the " + std::to_string(held) +
                                " staged (stream.max_pending_frames = " +
                                std::to_string(m.max_staged_frames) + ")");
  if (m.defer) {
    if (m.deferred.size() == kMaxDeferredBlocks) m.copy_deferred();
    if (count > 0) {
      if (m.deferred.empty()) m.deferred_first.push_back(0);
      m.deferred.push_back({frames, count});
      m.deferred_count += count;
      m.deferred_first.push_back(m.deferred_count);
    }
    return ++m.tickets;
  }
  RawFrame* const to = m.store.get() + m.store_count;
  if (m.engine && m.engine->splits(count)) {
    m.engine->copy_frames(to, frames, count);
  } else if (count > 0) {
    std::memcpy(to, frames, count * sizeof(RawFrame));
  }
  m.store_count += count;
  m.copied = ++m.tickets;
  return m.tickets;
}

void CpuBackend::defer_staging(bool on) {
  Impl& m = *impl_;
  m.complete_take();
  m.copy_deferred();
  m.defer = on && m.engine;
}

bool CpuBackend::staged(std::uint64_t ticket) { return ticket <= impl_->copied; }

void CpuBackend::wait_staged(std::uint64_t ticket) {
  impl_->complete_take();
  if (ticket > impl_->copied) impl_->copy_deferred();
}

void CpuBackend::submit(const SliceRequest& request) {
  if (impl_->has_pending)
    throw std::logic_error("CpuBackend::submit: the previous slice was not collected");
  // The frames are taken now: those staged after this request belong to later slices.
  const auto start = std::chrono::steady_clock::now();
  impl_->take(request);
  impl_->stage.take +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  impl_->pending = request;
  impl_->has_pending = true;
}

const SliceResult& CpuBackend::collect() {
  if (!impl_->has_pending) throw std::logic_error("CpuBackend::collect: no slice submitted");
  impl_->has_pending = false;
  // The work runs here rather than in submit(), so that submit() never blocks on it.
  impl_->process(impl_->pending);
  return impl_->result;
}

const CpuBackend::StageSeconds& CpuBackend::stage_seconds() const { return impl_->stage; }

const HistogramSet* CpuBackend::histograms() {
  // The other threads' histograms are added in when someone looks.
  if (impl_->histograms && impl_->engine) impl_->engine->collect_histograms(*impl_->histograms);
  return impl_->histograms.get();
}

const ImageSet* CpuBackend::image() { return impl_->image.get(); }

unsigned CpuBackend::threads() const { return impl_->engine ? impl_->engine->threads() : 1; }

ParallelStats CpuBackend::parallel_stats() const {
  return impl_->engine ? impl_->engine->stats() : ParallelStats{};
}

std::size_t CpuBackend::in_flight() const { return impl_->has_pending ? 1 : 0; }

}  // namespace petdaq

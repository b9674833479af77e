#include "core/cpu_stages.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "core/cpu_take.h"
#include "core/frame_source.h"
#include "core/geometry.h"
#include "core/histograms.h"
#include "core/image.h"
#include "core/order.h"
#include "core/parallel_engine.h"
#include "core/settings.h"
#include "core/slice_end.h"
#include "core/stream_limits.h"

namespace petdaq {

// ---- the singles and the carry-over ----

SinglesBuffers::SinglesBuffers(std::size_t capacity)
    // Left uninitialised: pages nobody writes cost no memory and no start-up time.
    : a_(std::make_unique_for_overwrite<Single[]>(capacity)),
      b_(std::make_unique_for_overwrite<Single[]>(capacity)),
      singles_(a_.get()),
      scratch_(b_.get()) {}

std::size_t SinglesBuffers::merge(std::size_t fresh) {
  // The carry-over is sorted already; the new singles mostly follow it, so a merge is only
  // needed where the two overlap in time, and only the new singles below the carry-over's
  // last take part (std::merge puts equal ones after it, where they already are). Kept
  // short, as it runs on one thread whatever backend_threads says.
  if (carry_ > 0 && fresh > 0 && single_less(singles_[carry_], singles_[carry_ - 1])) {
    Single* const fresh_begin = singles_ + carry_;
    Single* const overlap_end =
        std::lower_bound(fresh_begin, fresh_begin + fresh, singles_[carry_ - 1], single_less);
    Single* const merged_end =
        std::merge(singles_, fresh_begin, fresh_begin, overlap_end, scratch_, single_less);
    std::memcpy(singles_, scratch_, static_cast<std::size_t>(merged_end - scratch_) * sizeof(Single));
  }
  return carry_ + fresh;
}

void SinglesBuffers::carry_from(std::size_t first_carried, std::size_t total) {
  carry_ = total - first_carried;
  if (carry_ > 0 && first_carried > 0)
    std::memmove(singles_, singles_ + first_carried, carry_ * sizeof(Single));
}

// ---- the records ----

SliceRecords::SliceRecords(std::size_t record_capacity, bool delayed_on, std::uint32_t bdm_count)
    : prompt_storage(std::make_unique_for_overwrite<CoincRecord[]>(record_capacity)),
      delayed_storage(std::make_unique_for_overwrite<CoincRecord[]>(delayed_on ? record_capacity : 0)),
      prompts{prompt_storage.get(), record_capacity},
      delayed{delayed_storage.get(), delayed_on ? record_capacity : 0},
      bdm_singles(bdm_count),
      bdm_energy_rejected(bdm_count),
      bdm_dead(bdm_count) {}

void SliceRecords::clear() {
  prompts.clear();
  delayed.clear();
  std::fill(bdm_singles.begin(), bdm_singles.end(), 0);
  std::fill(bdm_energy_rejected.begin(), bdm_energy_rejected.end(), 0);
  std::fill(bdm_dead.begin(), bdm_dead.end(), 0);
}

// ---- the stages ----

std::size_t SliceStages::singles_capacity(const Settings& s) {
  return s.stream.max_carry_singles + s.stream.max_slice_frames;
}

std::size_t SliceStages::record_capacity(const Settings& s) {
  return slice_record_capacity(singles_capacity(s), s.stream.max_records_per_single);
}

std::size_t SliceStages::memory_bytes(const Settings& s) {
  std::size_t bytes = SinglesBuffers::memory_bytes(singles_capacity(s)) +
                      SliceRecords::memory_bytes(record_capacity(s), s.coincidence.delayed.enabled,
                                                 Geometry::from(s.scanner).bdm_count());
  if (s.output.histograms.enabled) bytes += make_histogram_layout(s).bytes;
  if (s.output.image.enabled) bytes += make_image_layout(s).bytes;
  if (s.output.wants_singles()) bytes += singles_capacity(s) * sizeof(Single);
  return bytes;
}

SliceStages::SliceStages(const Settings& s, std::int64_t min_time_offset,
                         const ConvertTables& tables, ParallelEngine* engine)
    : tables_(tables),
      engine_(engine),
      params_(CoincidenceParams::from(s)),
      max_carry_(s.stream.max_carry_singles),
      min_time_offset_(min_time_offset),
      singles_(singles_capacity(s)),
      records_(record_capacity(s), params_.delayed, tables.geometry.bdm_count()) {
  if (s.output.histograms.enabled)
    histograms_ = std::make_unique<HistogramSet>(make_histogram_layout(s));
  if (s.output.image.enabled) image_ = std::make_unique<ImageSet>(s);
  if (s.output.wants_singles()) resolved_ = std::make_unique_for_overwrite<Single[]>(singles_capacity(s));
}

SliceStages::~SliceStages() = default;

void SliceStages::start_run() {
  singles_.clear();
  next_t_begin_ = 0;
  if (histograms_) histograms_->reset();  // histograms: a run starts
  if (engine_) engine_->reset_histograms();
  if (image_) image_->reset();
}

void SliceStages::run(const SliceRequest& req, SliceTake& take, SliceResult& result) {
  if (req.run_start) start_run();
  // The slice's tables: the backend's, with the request's dead ranges.
  slice_tables_ = tables_;
  slice_tables_.dead = req.dead;
  slice_tables_.dead.bdm_frames = req.dead.count ? records_.bdm_dead.data() : nullptr;
  result.t_begin = next_t_begin_;
  const bool final = req.final && !take.outcome().split;
  const std::uint64_t horizon = corrected_horizon(take.outcome().bound, min_time_offset_);
  records_.clear();
  CounterDelta& delta = result.counters;

  using Clock = std::chrono::steady_clock;
  const auto seconds = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  };
  const Clock::time_point t0 = Clock::now();
  // Threads (core/parallel_engine.h) for slices big enough to repay the split; after a
  // planned take (run inside the convert) the stages run on the threads whatever the size.
  const bool threaded = take.pending() || (engine_ && engine_->splits(take.outcome().taken));
  const std::size_t fresh = convert(take, threaded, delta);
  const Clock::time_point t1 = Clock::now();
  const std::size_t total = order(fresh, threaded);
  const Clock::time_point t2 = Clock::now();

  Single* const singles = singles_.singles();
  CoincidenceCounts counts;
  std::size_t first_carried = find(singles, total, horizon, final, counts);
  bool resolved_all = final;
  if (!final && carry_overflows(total, first_carried, max_carry_)) {
    // Carry overflow (core/backend.h): the rest is resolved as if the run ended here. The
    // carried part starts at a window-chain start, so resolving it alone appends exactly
    // the records a final call on the whole slice would have made.
    find(singles + first_carried, total - first_carried, horizon, true, counts);
    first_carried = total;
    resolved_all = true;
    delta[Counter::stream_carry_overflow] += 1;
  }
  add_outputs(first_carried, result);
  const Clock::time_point t3 = Clock::now();
  seconds_.convert += seconds(t0, t1);
  seconds_.sort += seconds(t1, t2);
  seconds_.coincidence += seconds(t2, t3);

  result.t_end = slice_t_end(singles, total, first_carried, resolved_all, result.t_begin, horizon);
  next_t_begin_ = result.t_end;
  singles_.carry_from(first_carried, total);
  if (final) {
    singles_.clear();
    next_t_begin_ = 0;
  }

  RecordBuffer& prompts = records_.prompts;
  RecordBuffer& delayed = records_.delayed;
  add_coincidence_counts(delta, counts, prompts.overflow + delayed.overflow);
  result.prompts = static_cast<const CoincRecord*>(deliver(prompts.data, prompts.size, sizeof(CoincRecord)));
  result.prompt_count = prompts.size;
  result.delayed = static_cast<const CoincRecord*>(deliver(delayed.data, delayed.size, sizeof(CoincRecord)));
  result.delayed_count = delayed.size;
  result.carry_count = singles_.carry();
  result.bdm_singles = records_.bdm_singles.data();
  result.bdm_energy_rejected = records_.bdm_energy_rejected.data();
  result.bdm_dead = req.dead.count ? records_.bdm_dead.data() : nullptr;
}

// The slice's frames to new singles after the carry-over (on the threads: to the scratch
// buffer, which the threaded sort reads); returns how many were accepted.
std::size_t SliceStages::convert(SliceTake& take, bool threaded, CounterDelta& delta) {
  std::uint64_t* const bdm_singles = records_.bdm_singles.data();
  std::uint64_t* const bdm_rejected = records_.bdm_energy_rejected.data();
  if (take.pending()) {
    // The planned take runs piece by piece inside the convert, each piece's take right
    // before its convert, while its frames are in that core's cache.
    const std::size_t fresh = engine_->convert_pieces(
        take.input(), take.piece_first(), take.piece_taken(), slice_tables_, singles_.scratch(), delta,
        bdm_singles, bdm_rejected, histograms_.get(), &SliceTake::run_piece, &take);
    take.finish_one_pass();
    return fresh;
  }
  const std::size_t n = take.outcome().taken;
  if (!threaded) {
    take.join_pieces();
    const std::size_t fresh =
        convert_frames(take.input(), n, slice_tables_, singles_.fresh(), delta, bdm_singles, bdm_rejected);
    if (histograms_) histograms_->add_frames(take.input(), n, slice_tables_);  // histograms
    return fresh;
  }
  if (take.in_pieces())
    return engine_->convert_pieces(take.input(), take.piece_offset(), take.piece_taken(), slice_tables_,
                                   singles_.scratch(), delta, bdm_singles, bdm_rejected,
                                   histograms_.get());
  return engine_->convert(take.input(), n, slice_tables_, singles_.scratch(), delta, bdm_singles,
                          bdm_rejected, histograms_.get());
}

// The new singles in order after the carry-over, merged with it where the two overlap;
// returns carry-over + new singles.
std::size_t SliceStages::order(std::size_t fresh, bool threaded) {
  if (threaded)
    engine_->sort(singles_.fresh(), singles_.scratch());
  else
    sort_singles(singles_.fresh(), fresh, singles_.scratch());
  return singles_.merge(fresh);
}

std::size_t SliceStages::find(const Single* s, std::size_t n, std::uint64_t horizon,
                              bool resolve_all, CoincidenceCounts& counts) {
  RecordBuffer& p = records_.prompts;
  RecordBuffer& d = records_.delayed;
  return engine_ ? engine_->find_coincidences(s, n, params_, horizon, resolve_all, p, d, counts)
                 : find_coincidences(s, n, params_, horizon, resolve_all, p, d, counts);
}

// The outputs beside the records: histograms and image of the records, and the singles
// resolved (before the carry-over moves).
void SliceStages::add_outputs(std::size_t resolved, SliceResult& result) {
  const RecordBuffer& p = records_.prompts;
  const RecordBuffer& d = records_.delayed;
  if (histograms_ && engine_) {
    engine_->add_records(p.data, p.size, false, *histograms_);
    engine_->add_records(d.data, d.size, true, *histograms_);
  } else if (histograms_) {
    histograms_->add_records(p.data, p.size, false);
    histograms_->add_records(d.data, d.size, true);
  }
  if (image_) {
    image_->add_records(p.data, p.size, false);
    image_->add_records(d.data, d.size, true);
  }
  if (resolved_) {
    const void* lent = deliver(singles_.singles(), resolved, sizeof(Single));
    if (lent == singles_.singles()) {  // none lent: a copy of its own, before the carry moves
      std::memcpy(resolved_.get(), singles_.singles(), resolved * sizeof(Single));
      lent = resolved_.get();
    }
    result.singles = static_cast<const Single*>(lent);
    result.single_count = resolved;
  }
}

const void* SliceStages::deliver(const void* from, std::size_t count, std::size_t bytes_each) {
  const std::size_t bytes = count * bytes_each;
  void* const to = memory_ && count > 0 ? memory_->lend(bytes) : nullptr;
  if (!to) return from;
  if (engine_ && engine_->splits_copy(bytes / sizeof(RawFrame)))  // its size in frames' worth
    engine_->copy_bytes(to, from, bytes);
  else
    std::memcpy(to, from, bytes);
  return to;
}

}  // namespace petdaq

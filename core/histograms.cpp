// Live histograms (DESIGN section 7) on the host: the CPU's bins, filled from frames and
// records, and the estimates derived from them. The table of histograms is
// histogram_layout.cpp, the file and its JSON document histogram_file.cpp.
#include "core/histograms.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "core/counters.h"
#include "core/randoms.h"
#include "core/settings.h"

namespace petdaq {

void HistogramSet::FreeDeleter::operator()(void* p) const { std::free(p); }

HistogramSet::HistogramSet(const HistogramLayout& layout) : layout_(layout) {
  constexpr std::size_t kHugePageBytes = 2u << 20;
  const std::size_t bytes =
      std::max<std::size_t>(1, (layout.bytes + kHugePageBytes - 1) / kHugePageBytes) * kHugePageBytes;
  void* p = std::aligned_alloc(kHugePageBytes, bytes);
  if (!p) throw std::bad_alloc();
  ::madvise(p, bytes, MADV_HUGEPAGE);  // a hint: without huge pages it works all the same
  bins_.reset(static_cast<std::uint8_t*>(p));
  reset();
}

void HistogramSet::reset() { std::memset(bins_.get(), 0, layout_.bytes); }

// The rule is histogram_frame(); this loop only requests memory ahead, the way
// convert_frames() does: the bins (tens of MB) and the tables are read at random, and each
// frame would otherwise wait for memory several times in a row. Frame i + kPixelAhead has
// its pixel and flood bin requested, frame i + kGainAhead its gain (its label has arrived),
// frame i + kBinsAhead is converted and its spectrum bins requested; frame i is counted.
// The first kGainAhead frames convert without their gain requested: a few misses per slice.
void HistogramSet::add_frames(const RawFrame* frames, std::size_t n, const ConvertTables& tables) {
  constexpr std::size_t kPixelAhead = 48, kGainAhead = 24, kBinsAhead = 8, kRing = 64;
  constexpr std::uint32_t kNoPixel = UINT32_MAX;
  const ConvertTables t = tables;
  const HistogramLayout& l = layout_;
  std::uint8_t* const bins = bins_.get();
  std::uint32_t pixel[kRing];
  Single single[kRing];
  FrameStatus status[kRing];
  const auto request_pixel = [&](std::size_t j) {
    const std::uint8_t* f = frames[j].bytes;
    std::uint32_t index = kNoPixel;
    if (check_frame(f, t) == FrameStatus::single) {
      index = static_cast<std::uint32_t>(position_index(f, t));
      __builtin_prefetch(t.position_lut + index);
      __builtin_prefetch(l.u32(bins, Hist::flood) + index, 1);
    }
    pixel[j % kRing] = index;
  };
  const auto convert_and_request_bins = [&](std::size_t j) {
    if (pixel[j % kRing] == kNoPixel) return;
    const std::uint8_t* f = frames[j].bytes;
    Single& s = single[j % kRing];
    const FrameStatus st = convert_frame(f, t, s);
    status[j % kRing] = st;
    if (st > FrameStatus::energy_rejected) return;
    const std::uint32_t e = l.energy_bin(s.energy);
    if (e < l.energy_bins)
      __builtin_prefetch(l.u32(bins, Hist::energy_keV) + std::size_t{s.crystal} * l.energy_bins + e, 1);
    const std::uint32_t raw = bytes::load_be16(f + frame_offset::energy);
    __builtin_prefetch(l.u32(bins, Hist::energy_raw) + std::size_t{s.crystal} * l.raw_bins + l.raw_bin(raw), 1);
  };
  for (std::size_t j = 0; j < std::min(n, kPixelAhead); ++j) request_pixel(j);
  for (std::size_t j = 0; j < std::min(n, kBinsAhead); ++j) convert_and_request_bins(j);
  for (std::size_t i = 0; i < n; ++i) {
    if (i + kPixelAhead < n) request_pixel(i + kPixelAhead);
    // Written out here rather than in a helper: GCC deems a function whose only effect is a
    // prefetch free of side effects and drops the call (as in convert_frames()).
    if (i + kGainAhead < n && pixel[(i + kGainAhead) % kRing] != kNoPixel) {
      const std::size_t k = i + kGainAhead;
      const std::uint32_t label = t.position_lut[pixel[k % kRing]];
      if (label < t.crystals_per_du)
        __builtin_prefetch(t.energy_correction + energy_index(frames[k].bytes, local_of_label(label, t), t));
    }
    if (i + kBinsAhead < n) convert_and_request_bins(i + kBinsAhead);
    if (pixel[i % kRing] != kNoPixel)
      histogram_converted(frames[i].bytes, t, l, bins, status[i % kRing], single[i % kRing],
                          PlainIncrement{});
  }
}

void HistogramSet::add_records(const CoincRecord* records, std::size_t n, bool delayed) {
  for (std::size_t i = 0; i < n; ++i)
    histogram_record(records[i], delayed, layout_, bins_.get(), PlainIncrement{});
}

std::uint64_t HistogramSet::at(Hist h, std::size_t i) const {
  const std::uint8_t* p = bins_.get() + layout_.offset[static_cast<int>(h)];
  if (hist_is_32bit(h)) {
    std::uint32_t v;
    std::memcpy(&v, p + 4 * i, 4);
    return v;
  }
  std::uint64_t v;
  std::memcpy(&v, p + 8 * i, 8);
  return v;
}

std::uint64_t HistogramSet::sum(Hist h) const {
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < layout_.count[static_cast<int>(h)]; ++i) total += at(h, i);
  return total;
}

CounterBase counter_base(const Counters& counters) {
  CounterBase base{};
  for (std::size_t i = 0; i < kCounterCount; ++i) base[i] = counters.get(static_cast<Counter>(i));
  return base;
}

double singles_rate_squared_integral(const HistogramLayout& l, const std::uint8_t* bins,
                                     double tick_ps, HistogramSpan span) {
  const std::uint8_t* p = bins + l.offset[static_cast<int>(Hist::rate_singles)];
  const auto n = [&](std::size_t i) {
    std::uint64_t v;
    std::memcpy(&v, p + 8 * i, 8);
    return static_cast<double>(v);
  };
  std::size_t first = l.rate_bins, last = 0;
  double total = 0;
  for (std::size_t i = 0; i < l.rate_bins; ++i) {
    if (n(i) == 0) continue;
    first = std::min(first, i);
    last = i;
    total += n(i);
  }
  if (total == 0) return 0;
  const double tick_s = tick_ps * 1e-12;
  const double w = static_cast<double>(l.rate_bin_ticks) * tick_s;
  if (last - first < 2) {
    const double t = span.empty() ? static_cast<double>(last - first + 1) * w
                                  : static_cast<double>(span.end_tick - span.first_tick) * tick_s;
    return total * total / t;
  }
  double sum = 0;
  for (std::size_t i = first + 1; i < last; ++i) sum += n(i) * n(i) / w;
  sum += n(first) * std::max(n(first + 1), n(first)) / w;
  const bool open_ended = last + 1 == l.rate_bins;
  sum += n(last) * (open_ended ? n(last - 1) : std::max(n(last - 1), n(last))) / w;
  return sum;
}

void derive_histograms(const HistogramLayout& l, const Settings& settings, std::uint8_t* bins,
                       HistogramSpan span) {
  const std::size_t pairs = l.count[static_cast<int>(Hist::bdm_pair_randoms_singles_rate)];
  std::vector<double> crystal(l.crystal_count), matrix(pairs);
  double total = 0;
  const std::uint8_t* singles = bins + l.offset[static_cast<int>(Hist::crystal_singles)];
  for (std::size_t i = 0; i < crystal.size(); ++i) {
    std::uint64_t v;
    std::memcpy(&v, singles + 8 * i, 8);
    crystal[i] = static_cast<double>(v);
    total += crystal[i];
  }
  // τ G(N) / N² · ∫ S² dt: the singles' share of each crystal times the run's rate curve.
  const double scale =
      total > 0
          ? singles_rate_squared_integral(l, bins, settings.scanner.tick_ps, span) / (total * total)
          : 0;
  singles_rate_randoms_by_bdm_pair(RandomsSettings::from(settings), l.geometry, crystal, matrix);
  std::uint8_t* out = bins + l.offset[static_cast<int>(Hist::bdm_pair_randoms_singles_rate)];
  for (std::size_t i = 0; i < pairs; ++i) {
    const double v = matrix[i] * scale;
    std::memcpy(out + 8 * i, &v, 8);
  }
}

}  // namespace petdaq

// Live histograms (core/histograms.h) filled by the CPU backend over several slices, each
// against counts made here independently from the frames (decoded field by field, looked
// up in the tables by hand) and from the batch records; totals against the counters; the
// reset at a run start; the file round trip and its refusals; the resolved singles of
// SliceResult against the batch singles.
#include "core/histograms.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "core/cpu_backend.h"
#include "core/coincidence.h"
#include "core/counters.h"
#include "test_scanner.h"

namespace petdaq {
namespace {

using test::TestScanner;

// What the histograms of a set of frames must hold, computed without convert_frame() or the
// binning functions of core/histograms.h.
struct Expected {
  std::vector<std::uint64_t> singles, rejected, flood, keV, raw, rate_singles;
};

Expected expect_from_frames(const TestScanner& sc, const HistogramLayout& l,
                            const std::vector<RawFrame>& frames) {
  const Settings& s = sc.settings;
  const Geometry g = sc.geometry();
  const std::uint32_t ps = g.position_size;
  Expected e;
  e.singles.assign(g.crystal_count(), 0);
  e.rejected.assign(g.crystal_count(), 0);
  e.flood.assign(std::size_t{g.bdm_count()} * g.du_per_bdm() * ps * ps, 0);
  e.keV.assign(std::size_t{g.crystal_count()} * l.energy_bins, 0);
  e.raw.assign(std::size_t{g.crystal_count()} * l.raw_bins, 0);
  e.rate_singles.assign(l.rate_bins, 0);
  const float low = static_cast<float>(s.energy_window.low_keV);
  const float high = static_cast<float>(s.energy_window.high_keV);
  const float bin_keV = static_cast<float>(s.output.histograms.energy_max_keV /
                                           s.output.histograms.energy_bins);
  const std::uint64_t rate_ticks = sc.ticks(s.output.histograms.rate_bin_ms * 1e9);
  for (const RawFrame& fr : frames) {
    const FrameFields f = decode_frame(fr.bytes);
    if (f.head_marker != s.frame.head_marker || f.tail_marker != s.frame.tail_marker) continue;
    if (f.bdm >= g.bdm_count() || f.du >= g.du_per_bdm() || f.x >= ps || f.y >= ps) continue;
    const std::size_t pixel = ((std::size_t{f.bdm} * g.du_per_bdm() + f.du) * ps + f.y) * ps + f.x;
    ++e.flood[pixel];
    const std::uint32_t label = sc.calibration.position_lut[pixel];
    if (label >= g.crystals_per_du()) continue;
    const std::uint32_t local = g.local_crystal_of_label(label);
    const std::uint32_t crystal = g.crystal_id(f.bdm, f.du, local);
    std::int64_t time = static_cast<std::int64_t>(f.time_ticks);
    if (!sc.calibration.time_offsets.empty()) time += sc.calibration.time_offsets[crystal];
    if (time < 0) continue;
    const std::uint32_t ebin = std::min<std::uint32_t>(f.energy_raw / 10, TestScanner::kEnergyBins - 1);
    const float gain = sc.calibration.energy_correction
        [((std::size_t{f.bdm} * g.du_per_bdm() + f.du) * g.crystals_per_du() + local) *
             TestScanner::kEnergyBins + ebin];
    const float keV = static_cast<float>(f.energy_raw) * gain;
    if (keV >= low && keV <= high) {
      ++e.singles[crystal];
      ++e.rate_singles[std::min<std::uint64_t>(static_cast<std::uint64_t>(time) / rate_ticks, l.rate_bins - 1)];
    } else {
      ++e.rejected[crystal];
    }
    if (!std::isnan(keV)) {
      const float q = std::floor(keV / bin_keV);
      const std::uint32_t b = q < 0 ? 0 : q >= static_cast<float>(l.energy_bins) ? l.energy_bins - 1
                                                                                  : static_cast<std::uint32_t>(q);
      ++e.keV[std::size_t{crystal} * l.energy_bins + b];
    }
    const std::uint32_t rb = std::min<std::uint32_t>(f.energy_raw / s.output.histograms.raw_bin_adc,
                                                     l.raw_bins - 1);
    ++e.raw[std::size_t{crystal} * l.raw_bins + rb];
  }
  return e;
}

std::vector<std::uint64_t> values(const HistogramSet& h, Hist id) {
  std::vector<std::uint64_t> v(h.layout().count[static_cast<int>(id)]);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = h.at(id, i);
  return v;
}

// A random acquisition whose frames are spread over the whole flood map (not one pixel per
// crystal), with a few raw energies past the raw spectrum's range.
std::vector<RawFrame> spread_acquisition(const TestScanner& sc, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  test::AcquisitionOptions o;
  o.events = 3000;
  o.bad_fraction = 0.1;
  auto frames = test::random_acquisition(sc, rng, o);
  std::uniform_int_distribution<int> pixel(0, 15);
  for (std::size_t i = 0; i < frames.size(); ++i) {
    RawFrame& f = frames[i];
    if (f.bytes[frame_offset::x] < 15) {
      f.bytes[frame_offset::x] = static_cast<std::uint8_t>(pixel(rng));
      f.bytes[frame_offset::y] = static_cast<std::uint8_t>(pixel(rng));
    }
    if (i % 97 == 0) bytes::store_be16(f.bytes + frame_offset::energy, 60000);
  }
  return frames;
}

struct RunResult {
  CounterDelta counters;
  std::vector<CoincRecord> prompts, delayed;
  std::vector<Single> singles;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> intervals;
};

// Feeds `frames` to the backend in slices of `slice` frames (bound = the next slice's first
// raw time: a frame at or after it stays staged for the next slice), the last one final.
RunResult run_slices(CpuBackend& backend, const std::vector<RawFrame>& frames, std::size_t slice) {
  RunResult run;
  for (std::size_t at = 0; at < frames.size(); at += slice) {
    const std::size_t n = std::min(slice, frames.size() - at);
    backend.stage(frames.data() + at, n);
    SliceRequest r;
    r.final = at + n == frames.size();
    r.run_start = at == 0;
    r.bound = r.final ? 0 : frame_time(frames[at + n].bytes);
    backend.submit(r);
    const SliceResult& out = backend.collect();
    run.counters += out.counters;
    run.prompts.insert(run.prompts.end(), out.prompts, out.prompts + out.prompt_count);
    run.delayed.insert(run.delayed.end(), out.delayed, out.delayed + out.delayed_count);
    if (out.singles) run.singles.insert(run.singles.end(), out.singles, out.singles + out.single_count);
    for (std::size_t i = 0; i < out.single_count; ++i) {
      EXPECT_GE(out.singles[i].time, out.t_begin);
      EXPECT_LT(out.singles[i].time, out.t_end);
    }
    run.intervals.emplace_back(out.t_begin, out.t_end);
  }
  return run;
}

class HistogramsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto& hs = sc.settings.output.histograms;
    hs.enabled = true;
    hs.energy_bins = 50;
    hs.energy_max_keV = 800;
    hs.raw_bins = 40;
    hs.raw_bin_adc = 32;  // raw 0 .. 1279, and the last bin holds the rest
    hs.rate_bins = 16;
    hs.rate_bin_ms = 0.001;  // 64 000 ticks
    sc.settings.output.singles.enabled = true;
    sc.settings.coincidence.delayed.offset_ps = 20'000;
    sc.settings.stream.max_slice_frames = 4096;
    frames = spread_acquisition(sc, 11);
  }
  TestScanner sc;
  std::vector<RawFrame> frames;
};

// The rate curves' bin width in the file is the configured one, exactly: 100 ms at 15.625 ps
// ticks reads 0.1 s (a product with 1e-12 gave 0.09999999999999999).
TEST_F(HistogramsTest, RateBinWidthIsTheConfiguredOneExactly) {
  for (const double ms : {100.0, 1.0, 2.0, 250.0}) {
    Settings s = sc.settings;
    s.output.histograms.rate_bin_ms = ms;
    const HistogramSet h(make_histogram_layout(s));
    std::vector<std::uint8_t> file;
    encode_histogram_file(h, s, 1, histogram_metadata_json(s, 1, "cpu", nullptr), file);
    const HistogramFile f = parse_histogram_file(file.data(), file.size());
    EXPECT_EQ(f.find("rate_singles")->width, ms / 1000.0) << ms;
    EXPECT_EQ(f.find("rate_prompts")->width, ms / 1000.0) << ms;
  }
}

TEST_F(HistogramsTest, LayoutFollowsTheSettings) {
  const HistogramLayout l = make_histogram_layout(sc.settings);
  EXPECT_EQ(l.crystal_count, sc.geometry().crystal_count());
  EXPECT_EQ(l.dt_bins, sc.ticks(4000) + 1);  // one bin per tick over [0, W]
  EXPECT_EQ(l.dt_bin_ticks, 1u);
  EXPECT_EQ(l.tof_bins, 2 * (sc.ticks(4000) + 1));  // signed: [−W, W] and one tick more
  EXPECT_EQ(l.du_count, 16u);
  EXPECT_EQ(l.du_tof_bins * l.du_tof_bin_ticks, 2 * l.du_tof_half * l.du_tof_bin_ticks);
  EXPECT_GT(l.du_tof_half * l.du_tof_bin_ticks, sc.ticks(4000));
  EXPECT_LE(l.du_tof_half, 64u);
  EXPECT_EQ(l.delayed_offset_ticks, static_cast<std::int64_t>(sc.ticks(20'000)));
  EXPECT_EQ(l.rate_bin_ticks, 64000u);
  EXPECT_FLOAT_EQ(l.energy_bin_keV, 16.0f);
  EXPECT_EQ(l.count[static_cast<int>(Hist::flood)], 4u * 4 * 16 * 16);
  EXPECT_EQ(l.count[static_cast<int>(Hist::bdm_pair_prompt)], 16u);
  for (int i = 0; i < kHistCount; ++i) EXPECT_EQ(l.offset[i] % 8, 0u) << hist_name(static_cast<Hist>(i));
}

TEST_F(HistogramsTest, ConvertStageHistogramsEqualIndependentCounts) {
  CpuBackend backend(sc.settings, sc.calibration);
  const RunResult run = run_slices(backend, frames, 700);
  const HistogramSet& h = *backend.histograms();
  const Expected e = expect_from_frames(sc, h.layout(), frames);
  EXPECT_EQ(values(h, Hist::crystal_singles), e.singles);
  EXPECT_EQ(values(h, Hist::crystal_energy_rejected), e.rejected);
  EXPECT_EQ(values(h, Hist::flood), e.flood);
  EXPECT_EQ(values(h, Hist::energy_keV), e.keV);
  EXPECT_EQ(values(h, Hist::energy_raw), e.raw);
  EXPECT_EQ(values(h, Hist::rate_singles), e.rate_singles);
  // Totals equal the counters.
  const CounterDelta& c = run.counters;
  EXPECT_EQ(h.sum(Hist::crystal_singles), c[Counter::single_accepted]);
  EXPECT_EQ(h.sum(Hist::crystal_energy_rejected), c[Counter::single_energy_rejected]);
  EXPECT_EQ(h.sum(Hist::rate_singles), c[Counter::single_accepted]);
  EXPECT_EQ(h.sum(Hist::energy_raw),
            c[Counter::single_accepted] + c[Counter::single_energy_rejected]);
  EXPECT_EQ(h.sum(Hist::flood), c[Counter::single_accepted] + c[Counter::single_energy_rejected] +
                                    c[Counter::frame_no_crystal] + c[Counter::frame_bad_time]);
  EXPECT_GT(c[Counter::frame_no_crystal], 0u);
  EXPECT_GT(c[Counter::single_energy_rejected], 0u);
  // The last raw bin holds the energies past the range.
  std::uint64_t last_raw = 0;
  for (std::uint32_t k = 0; k < h.layout().crystal_count; ++k)
    last_raw += h.at(Hist::energy_raw, std::size_t{k} * h.layout().raw_bins + h.layout().raw_bins - 1);
  EXPECT_GT(last_raw, 0u);
}

TEST_F(HistogramsTest, CoincidenceHistogramsEqualIndependentCounts) {
  CpuBackend backend(sc.settings, sc.calibration);
  const RunResult run = run_slices(backend, frames, 500);
  const HistogramSet& h = *backend.histograms();
  const test::BatchResult batch = test::batch_process(sc, frames);
  ASSERT_EQ(run.prompts.size(), batch.prompts.size());
  ASSERT_GT(batch.prompts.size(), 100u);
  ASSERT_GT(batch.delayed.size(), 0u);
  const Geometry g = sc.geometry();
  const std::int64_t d = static_cast<std::int64_t>(sc.ticks(20'000));
  const std::uint64_t w = sc.ticks(4000);
  std::vector<std::uint64_t> dt_p(w + 1), dt_d(w + 1), pair_p(16), pair_d(16), rate_p(16), rate_d(16);
  // Signed Δt = t(lower crystal) − t(higher): one bin per tick over [−(W+1), W+1), and per
  // (DU of the lower crystal, DU of the higher) in bins of ceil((W + 1) / 64) ticks.
  const std::int64_t half = static_cast<std::int64_t>(w) + 1;
  const std::int64_t du_w = (half + 63) / 64, du_half = (half + du_w - 1) / du_w;
  const std::size_t dus = 16;
  std::vector<std::uint64_t> tof_p(2 * half), tof_d(2 * half), du_p(dus * dus * 2 * du_half),
      du_d(du_p.size());
  auto tof = [&](const CoincRecord& r, std::int64_t dt, std::vector<std::uint64_t>& global,
                 std::vector<std::uint64_t>& by_du) {
    const bool a_lower = r.crystal_a <= r.crystal_b;
    const std::int64_t s = a_lower ? -dt : dt;
    ++global[static_cast<std::size_t>(s + half)];
    const CrystalAddress lo = g.address_of(a_lower ? r.crystal_a : r.crystal_b);
    const CrystalAddress hi = g.address_of(a_lower ? r.crystal_b : r.crystal_a);
    const std::size_t cell = (lo.bdm * 4 + lo.du) * dus + hi.bdm * 4 + hi.du;
    const std::int64_t b = (s + du_half * du_w) / du_w;  // s + du_half * du_w >= 0
    ++by_du[cell * 2 * du_half + static_cast<std::size_t>(b)];
  };
  auto pair = [&](const CoincRecord& r) {
    std::uint32_t a = g.address_of(r.crystal_a).bdm, b = g.address_of(r.crystal_b).bdm;
    if (a > b) std::swap(a, b);
    return a * 4 + b;
  };
  for (const CoincRecord& r : batch.prompts) {
    ++dt_p[static_cast<std::size_t>(r.dt)];
    tof(r, r.dt, tof_p, du_p);
    ++pair_p[pair(r)];
    ++rate_p[std::min<std::uint64_t>(r.time_a / 64000, 15)];
  }
  for (const CoincRecord& r : batch.delayed) {
    ++dt_d[static_cast<std::size_t>(r.dt - d)];
    tof(r, r.dt - d, tof_d, du_d);
    ++pair_d[pair(r)];
    ++rate_d[std::min<std::uint64_t>(r.time_a / 64000, 15)];
  }
  EXPECT_EQ(values(h, Hist::dt_prompt), dt_p);
  EXPECT_EQ(values(h, Hist::dt_delayed), dt_d);
  EXPECT_EQ(values(h, Hist::bdm_pair_prompt), pair_p);
  EXPECT_EQ(values(h, Hist::bdm_pair_delayed), pair_d);
  EXPECT_EQ(values(h, Hist::rate_prompts), rate_p);
  EXPECT_EQ(values(h, Hist::rate_delayed), rate_d);
  EXPECT_EQ(h.sum(Hist::dt_prompt), run.counters[Counter::coinc_prompts]);
  EXPECT_EQ(h.sum(Hist::dt_delayed), run.counters[Counter::coinc_delayed]);
  EXPECT_EQ(h.sum(Hist::bdm_pair_prompt), run.counters[Counter::coinc_prompts]);
  EXPECT_EQ(values(h, Hist::tof_prompt), tof_p);
  EXPECT_EQ(values(h, Hist::tof_delayed), tof_d);
  EXPECT_EQ(values(h, Hist::du_pair_tof_prompt), du_p);
  EXPECT_EQ(values(h, Hist::du_pair_tof_delayed), du_d);
  EXPECT_EQ(h.sum(Hist::tof_prompt), run.counters[Counter::coinc_prompts]);
  EXPECT_EQ(h.sum(Hist::du_pair_tof_delayed), run.counters[Counter::coinc_delayed]);
  // Both signs occur: the sign follows crystal order, not arrival order.
  const std::size_t negative = std::accumulate(tof_p.begin(), tof_p.begin() + half, std::size_t{0});
  EXPECT_GT(negative, 0u);
  EXPECT_LT(negative, batch.prompts.size());
}

TEST_F(HistogramsTest, ARunStartZeroesTheBins) {
  CpuBackend backend(sc.settings, sc.calibration);
  run_slices(backend, frames, 1000);
  const std::vector<RawFrame> second(frames.begin(), frames.begin() + 300);
  const RunResult run = run_slices(backend, second, 1000);
  const HistogramSet& h = *backend.histograms();
  EXPECT_EQ(values(h, Hist::flood), expect_from_frames(sc, h.layout(), second).flood);
  EXPECT_EQ(h.sum(Hist::crystal_singles), run.counters[Counter::single_accepted]);
  EXPECT_EQ(h.sum(Hist::dt_prompt), run.counters[Counter::coinc_prompts]);
}

TEST_F(HistogramsTest, OffByDefault) {
  sc.settings.output.histograms.enabled = false;
  sc.settings.output.singles.enabled = false;
  CpuBackend backend(sc.settings, sc.calibration);
  const RunResult run = run_slices(backend, frames, 1000);
  EXPECT_EQ(backend.histograms(), nullptr);
  EXPECT_TRUE(run.singles.empty());
}

TEST_F(HistogramsTest, ResolvedSinglesTileTheRunAndEqualTheBatch) {
  CpuBackend backend(sc.settings, sc.calibration);
  const RunResult run = run_slices(backend, frames, 333);
  const test::BatchResult batch = test::batch_process(sc, frames);
  ASSERT_EQ(run.singles.size(), batch.singles.size());
  for (std::size_t i = 0; i < run.singles.size(); ++i)
    ASSERT_EQ(std::memcmp(&run.singles[i], &batch.singles[i], sizeof(Single)), 0) << i;
  for (std::size_t i = 1; i < run.intervals.size(); ++i)
    EXPECT_EQ(run.intervals[i].first, run.intervals[i - 1].second);
}

TEST_F(HistogramsTest, FileRoundTripAndRefusals) {
  CpuBackend backend(sc.settings, sc.calibration);
  run_slices(backend, frames, 1000);
  const HistogramSet& h = *backend.histograms();
  Counters counters(4);
  counters.add(Counter::single_accepted, 1234);
  std::vector<std::uint8_t> file;
  encode_histogram_file(h, sc.settings, 7,
                        histogram_metadata_json(sc.settings, 7, "cpu", &counters), file);
  const HistogramFile f = parse_histogram_file(file.data(), file.size());
  EXPECT_EQ(f.header.run_id, 7u);
  EXPECT_EQ(f.header.tick_ps, 15.625);
  ASSERT_EQ(f.descriptors.size(), static_cast<std::size_t>(kHistCount));
  for (int i = 0; i < kHistCount; ++i) {
    const Hist id = static_cast<Hist>(i);
    const HistDescriptor* d = f.find(hist_name(id));
    ASSERT_NE(d, nullptr) << hist_name(id);
    ASSERT_EQ(d->elements(), h.layout().count[i]);
    if (id == Hist::bdm_pair_randoms_singles_rate) continue;  // derived (the test below)
    for (std::uint64_t k = 0; k < d->elements(); ++k)
      ASSERT_EQ(f.value(*d, k), h.at(id, k)) << hist_name(id) << " bin " << k;
  }
  // The backend leaves the derived histogram alone; the file has it filled.
  EXPECT_EQ(h.sum(Hist::bdm_pair_randoms_singles_rate), 0u);
  const HistDescriptor& randoms = *f.find("bdm_pair_randoms_singles_rate");
  EXPECT_EQ(randoms.rank, 2u);
  EXPECT_EQ(randoms.shape[0], 4u);
  EXPECT_EQ(randoms.shape[1], 4u);
  EXPECT_EQ(randoms.element_bytes, 8u);
  EXPECT_TRUE(randoms.is_real());
  EXPECT_FALSE(f.find("bdm_pair_delayed")->is_real());
  double randoms_sum = 0;
  for (std::uint64_t k = 0; k < randoms.elements(); ++k) randoms_sum += f.number(randoms, k);
  EXPECT_GT(randoms_sum, 0.0);
  const HistDescriptor& keV = *f.find("energy_keV");
  EXPECT_EQ(keV.unit_view(), "keV");
  EXPECT_EQ(keV.rank, 2u);
  EXPECT_EQ(keV.shape[1], 50u);
  EXPECT_DOUBLE_EQ(keV.width, 16.0);
  const HistDescriptor& tof = *f.find("tof_prompt");
  EXPECT_EQ(tof.unit_view(), "ps");
  EXPECT_EQ(tof.shape[0], 2 * (sc.ticks(4000) + 1));
  // Tick k sits in the middle of its bin: bin (k + half) spans [k − ½, k + ½) ticks.
  EXPECT_DOUBLE_EQ(tof.lo, -(static_cast<double>(sc.ticks(4000) + 1) + 0.5) * 15.625);
  EXPECT_EQ(f.find("du_pair_tof_delayed")->rank, 3u);
  const HistDescriptor& flood = *f.find("flood");
  EXPECT_EQ(flood.rank, 4u);
  EXPECT_EQ(flood.shape[0], 4u);
  EXPECT_EQ(flood.shape[3], 16u);
  EXPECT_NE(f.metadata.find("\"single.accepted\":1234"), std::string_view::npos);
  EXPECT_NE(f.metadata.find("\"crystal_axial\":4"), std::string_view::npos);

  EXPECT_THROW(parse_histogram_file(file.data(), file.size() - 1), HistogramFileError);
  EXPECT_THROW(parse_histogram_file(file.data(), 10), HistogramFileError);
  std::vector<std::uint8_t> other = file;
  other[4] = 4;  // version 4
  try {
    parse_histogram_file(other.data(), other.size());
    FAIL() << "version 4 accepted";
  } catch (const HistogramFileError& e) {
    EXPECT_NE(std::string(e.what()).find("version 4"), std::string::npos) << e.what();
  }
  // A version 2 file (no signed Δt histograms in it, the same layout otherwise) still reads.
  other = file;
  other[4] = 2;
  EXPECT_EQ(parse_histogram_file(other.data(), other.size()).header.version, 2u);
  // A version 1 file (no element types: every histogram unsigned) still reads.
  other = file;
  other[4] = 1;
  bytes::store_le16(other.data() + kHistHeaderBytes +
                        static_cast<int>(Hist::bdm_pair_randoms_singles_rate) * kHistDescriptorBytes + 50,
                    0);
  EXPECT_EQ(parse_histogram_file(other.data(), other.size()).header.version, 1u);
  // An unknown element type, and a real one of 4 bytes, are refused.
  other = file;
  bytes::store_le16(other.data() + kHistHeaderBytes + 50, 2);
  EXPECT_THROW(parse_histogram_file(other.data(), other.size()), HistogramFileError);
  other = file;
  bytes::store_le16(other.data() + kHistHeaderBytes +
                        static_cast<int>(Hist::energy_keV) * kHistDescriptorBytes + 50,
                    kHistReal);
  EXPECT_THROW(parse_histogram_file(other.data(), other.size()), HistogramFileError);
  other = file;
  bytes::store_le32(other.data() + kHistHeaderBytes + 56, 1u << 30);  // a huge first axis
  EXPECT_THROW(parse_histogram_file(other.data(), other.size()), HistogramFileError);
}

// The derived singles-rate randoms per BDM pair against the textbook 2τ Σ N_i N_j / T, crystal
// pair by crystal pair with the engine's good-pair rule, for planted singles of a constant
// rate whose first and last rate bins are partly filled (and, in the second profile, the
// open-ended last bin holds three bins' worth), and for a run of two bins with and without
// its span.
struct RandomsCase {
  std::vector<std::uint64_t> rate;  // rate_singles bins
  double live_bins;                 // the acquisition time they stand for, in bins
  HistogramSpan span;
  double expected_live_bins;        // the time the derivation is expected to assume
};

class DerivedRandomsTest : public HistogramsTest, public ::testing::WithParamInterface<std::uint32_t> {};

TEST_P(DerivedRandomsTest, BdmPairRandomsAreTwoTauNiNjOverT) {
  sc.settings.coincidence.min_sector_difference = GetParam();
  const HistogramLayout l = make_histogram_layout(sc.settings);
  const Geometry g = sc.geometry();
  const CoincidenceParams p = CoincidenceParams::from(sc.settings);
  ASSERT_EQ(sc.settings.coincidence.window_edge, WindowEdge::closed);
  const double tick_s = sc.settings.scanner.tick_ps * 1e-12;
  const double tau = (static_cast<double>(sc.ticks(sc.settings.coincidence.window_ps)) + 0.5) * tick_s;
  const double w = static_cast<double>(l.rate_bin_ticks) * tick_s;
  const std::uint64_t c = 400'000;  // every profile holds more than the 255 planted crystals
  std::vector<RandomsCase> cases;
  {
    RandomsCase k{std::vector<std::uint64_t>(l.rate_bins, 0), 8.75, {}, 8.75};
    k.rate[1] = c / 2;  // the run starts half-way into bin 1
    for (int i = 2; i <= 9; ++i) k.rate[i] = c;
    k.rate[10] = c / 4;  // and ends a quarter into bin 10
    cases.push_back(k);
  }
  {
    RandomsCase k{std::vector<std::uint64_t>(l.rate_bins, 0), 5.5, {}, 5.5};
    k.rate[12] = c / 2;
    k.rate[13] = k.rate[14] = c;
    k.rate[15] = 3 * c;  // the last bin: everything from bin 15 on, three bins of it
    cases.push_back(k);
  }
  {
    RandomsCase k{std::vector<std::uint64_t>(l.rate_bins, 0), 1.25, {}, 1.25};
    k.rate[3] = c / 4;
    k.rate[4] = c;
    k.span = {l.rate_bin_ticks * 15 / 4, l.rate_bin_ticks * 5};  // 3.75 to 5 bins
    cases.push_back(k);
    k.span = {};  // without the span: the two whole bins
    k.expected_live_bins = 2;
    cases.push_back(k);
  }
  for (const RandomsCase& k : cases) {
    HistogramSet h(l);
    std::uint64_t total = 0;
    for (const std::uint64_t v : k.rate) total += v;
    auto* singles = l.u64(h.bins(), Hist::crystal_singles);
    std::uint64_t planted = 0;
    for (std::uint32_t i = 0; i + 1 < l.crystal_count; ++i) planted += singles[i] = 1000 + (i * 37) % 500;
    singles[l.crystal_count - 1] = total - planted;  // a hot crystal takes the rest
    std::copy(k.rate.begin(), k.rate.end(), l.u64(h.bins(), Hist::rate_singles));

    const double t = k.expected_live_bins * w;
    std::vector<double> expected(16, 0.0);
    for (std::uint32_t i = 0; i < l.crystal_count; ++i)
      for (std::uint32_t j = i + 1; j < l.crystal_count; ++j) {
        if (!p.good_pair(i, j)) continue;
        std::uint32_t a = g.address_of(i).bdm, b = g.address_of(j).bdm;
        if (a > b) std::swap(a, b);
        expected[a * 4 + b] += 2 * tau * static_cast<double>(singles[i]) * static_cast<double>(singles[j]) / t;
      }
    std::vector<std::uint8_t> file;
    encode_histogram_file(h, sc.settings, 1, "{}", file, k.span);
    const HistogramFile f = parse_histogram_file(file.data(), file.size());
    const HistDescriptor& d = *f.find("bdm_pair_randoms_singles_rate");
    double sum = 0;
    for (std::size_t i = 0; i < 16; ++i) {
      EXPECT_NEAR(f.number(d, i), expected[i], 1e-9 * expected[i] + 1e-12)
          << "bins " << k.live_bins << " pair " << i;
      sum += expected[i];
    }
    EXPECT_GT(sum, 1e4);
    // ∫ S² dt itself: N² / T for a constant rate.
    EXPECT_NEAR(singles_rate_squared_integral(l, h.bins(), sc.settings.scanner.tick_ps, k.span),
                static_cast<double>(total) * static_cast<double>(total) / t,
                1e-9 * static_cast<double>(total) * static_cast<double>(total) / t);
  }
}

INSTANTIATE_TEST_SUITE_P(MinSectorDifference, DerivedRandomsTest, ::testing::Values(0u, 1u, 2u));

// A source whose singles rate halves over the run (ten full rate bins from tick 0): the
// derivation's ∫S² dt within 1 % of the exact S0²/(2k)(1 − e^(−2kT)), where the classic N²/T
// is 4 % low.
TEST_F(HistogramsTest, DerivedRandomsFollowADecayingRate) {
  const HistogramLayout l = make_histogram_layout(sc.settings);
  HistogramSet h(l);
  const double w = static_cast<double>(l.rate_bin_ticks) * sc.settings.scanner.tick_ps * 1e-12;
  const double t = 10 * w, k = std::log(2.0) / t, s0 = 4e11;  // singles per second at t = 0
  auto* rate = l.u64(h.bins(), Hist::rate_singles);
  double n = 0;
  for (int i = 0; i < 10; ++i) {
    rate[i] = static_cast<std::uint64_t>(std::llround(s0 / k * (std::exp(-k * i * w) - std::exp(-k * (i + 1) * w))));
    n += static_cast<double>(rate[i]);
  }
  const double exact = s0 * s0 / (2 * k) * (1 - std::exp(-2 * k * t));
  const double got = singles_rate_squared_integral(l, h.bins(), sc.settings.scanner.tick_ps, {});
  EXPECT_NEAR(got / exact, 1.0, 0.01);
  EXPECT_LT(n * n / t / exact, 0.97);
}

TEST_F(HistogramsTest, DerivedRandomsOfNoSinglesAreZero) {
  const HistogramSet h(make_histogram_layout(sc.settings));
  std::vector<std::uint8_t> file;
  encode_histogram_file(h, sc.settings, 1, "{}", file);
  const HistogramFile f = parse_histogram_file(file.data(), file.size());
  const HistDescriptor& d = *f.find("bdm_pair_randoms_singles_rate");
  for (std::size_t i = 0; i < d.elements(); ++i) EXPECT_EQ(f.number(d, i), 0.0);
}

}  // namespace
}  // namespace petdaq

// The live image's rule (core/image.h) against positions computed here in doubles from the
// crystal centres and the signed-Δt convention; the tallies, the delayed subtraction, the
// trace's mean and error, the sliding window, the file round trip and its refusals, and the
// CPU backend's image against the rule applied to its own records.
#include "core/image.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/cpu_backend.h"
#include "core/crystal_position.h"
#include "core/coincidence_params.h"
#include "proto/bytes.h"
#include "test_scanner.h"

namespace petdaq {
namespace {

using test::TestScanner;

constexpr double kHalfLightMmPerPs = 0.299792458 / 2;

Settings image_settings() {
  Settings s;
  s.output.image.enabled = true;
  s.output.image.voxel_mm = 1.0;
  s.output.image.dim_x = s.output.image.dim_y = 40;
  s.output.image.dim_z = 20;
  s.output.image.trace_bin_ms = 1;
  s.output.image.trace_bins = 100;
  return s;
}

CoincRecord record(std::uint32_t a, std::uint32_t b, std::uint32_t dt, std::uint64_t time_a = 1000) {
  CoincRecord r{};
  r.crystal_a = a;
  r.crystal_b = b;
  r.dt = dt;
  r.time_a = time_a;
  return r;
}

// The expected point in mm, in doubles: the midpoint moved by c/2 · Δt towards the higher id,
// Δt = t(lower) − t(higher).
std::array<double, 3> expected_point(const Settings& s, const CoincRecord& r, std::int64_t delay = 0) {
  const std::uint32_t lo = std::min(r.crystal_a, r.crystal_b), hi = std::max(r.crystal_a, r.crystal_b);
  const std::array<double, 3> L = crystal_place(s.scanner, lo).centre_mm;
  const std::array<double, 3> H = crystal_place(s.scanner, hi).centre_mm;
  // time_b − time_a = dt − delay; t(lower) − t(higher):
  const double dt_ab = (static_cast<double>(r.dt) - static_cast<double>(delay)) * s.scanner.tick_ps;
  const double signed_ps = r.crystal_a <= r.crystal_b ? -dt_ab : dt_ab;
  double len = 0;
  for (int k = 0; k < 3; ++k) len += (H[k] - L[k]) * (H[k] - L[k]);
  len = std::sqrt(len);
  const double shift = std::clamp(kHalfLightMmPerPs * signed_ps, -len / 2, len / 2);
  std::array<double, 3> p;
  for (int k = 0; k < 3; ++k) p[k] = (L[k] + H[k]) / 2 + (H[k] - L[k]) / len * shift;
  return p;
}

void expect_point(const ImageSet& set, const Settings& s, const CoincRecord& r, bool delayed,
                  std::int64_t delay = 0) {
  std::int64_t p[3];
  ASSERT_TRUE(image_point(r, delayed, set.layout(), p));
  const auto e = expected_point(s, r, delay);
  for (int k = 0; k < 3; ++k)
    EXPECT_NEAR(static_cast<double>(p[k]) * 1e-3, e[k], 0.003) << "axis " << k << " of " << r.crystal_a
                                                                << "-" << r.crystal_b << " dt " << r.dt;
}

TEST(ImageRule, PointsFollowTheSignedDtConvention) {
  const Settings s = image_settings();
  ImageSet set(s);
  const Geometry g = Geometry::from(s.scanner);
  const std::uint32_t ring = g.crystals_per_ring();
  std::mt19937 rng(3);
  std::uniform_int_distribution<std::uint32_t> crystal(0, g.crystal_count() - 1);
  std::uniform_int_distribution<std::uint32_t> dt(0, 200);
  for (int i = 0; i < 2000; ++i) {
    const std::uint32_t a = crystal(rng), b = crystal(rng);
    if (a == b) continue;
    expect_point(set, s, record(a, b, dt(rng)), false);
  }
  // Opposite crystals, Δt = 0: the centre of the ring.
  std::int64_t p[3];
  ASSERT_TRUE(image_point(record(0, ring / 2, 0), false, set.layout(), p));
  const auto mid = expected_point(s, record(0, ring / 2, 0));
  EXPECT_NEAR(mid[0], 0.0, 1.0);
  // The same pair with the later single on the higher id (t(lower) − t(higher) < 0): towards
  // the lower crystal; the record written the other way round says the opposite.
  const CoincRecord towards_lower = record(0, ring / 2, 100);    // time_b = t(higher) later
  const CoincRecord towards_higher = record(ring / 2, 0, 100);  // time_b = t(lower) later
  std::int64_t pl[3], ph[3];
  ASSERT_TRUE(image_point(towards_lower, false, set.layout(), pl));
  ASSERT_TRUE(image_point(towards_higher, false, set.layout(), ph));
  const auto L = crystal_place(s.scanner, 0).centre_mm;
  const auto H = crystal_place(s.scanner, ring / 2).centre_mm;
  const auto dist = [](const std::int64_t* q, const std::array<double, 3>& c) {
    double d = 0;
    for (int k = 0; k < 3; ++k) d += (q[k] * 1e-3 - c[k]) * (q[k] * 1e-3 - c[k]);
    return std::sqrt(d);
  };
  EXPECT_LT(dist(pl, L), dist(pl, H));
  EXPECT_LT(dist(ph, H), dist(ph, L));
  // 100 ticks of 15.625 ps: 234 mm from the midpoint, beyond the crystal: clamped onto it.
  EXPECT_NEAR(dist(ph, H), 0.0, 0.002);
}

TEST(ImageRule, TalliesOutsideTheFieldAndBadIds) {
  const Settings s = image_settings();
  ImageSet set(s);
  const Geometry g = Geometry::from(s.scanner);
  const std::uint32_t ring = g.crystals_per_ring();
  const std::uint32_t mid = g.ring_count() / 2 * ring;  // a ring near z = 0
  const CoincRecord centre = record(mid, mid + ring / 2, 0);
  const CoincRecord at_crystal = record(mid + ring / 2, mid, 1000);  // clamped onto a crystal
  const CoincRecord bad = record(0, g.crystal_count(), 0);
  set.add_records(&centre, 1, false);
  set.add_records(&at_crystal, 1, false);
  set.add_records(&bad, 1, false);
  EXPECT_EQ(set.tally(ImageTally::prompts_in), 1u);
  EXPECT_EQ(set.tally(ImageTally::prompts_out), 1u);
  std::int64_t sum = 0;
  for (std::uint64_t v = 0; v < set.layout().voxel_count; ++v) sum += set.voxels()[v];
  EXPECT_EQ(sum, 1);
  std::int64_t p[3];
  ASSERT_TRUE(image_point(centre, false, set.layout(), p));
  EXPECT_EQ(set.voxels()[image_voxel(set.layout(), p)], 1);
}

TEST(ImageRule, DelayedSubtractWithTheirDelayRemoved) {
  Settings s = image_settings();
  const Geometry g = Geometry::from(s.scanner);
  const std::uint32_t ring = g.crystals_per_ring();
  const std::int64_t D = static_cast<std::int64_t>(CoincidenceParams::from(s).delayed_offset_ticks);
  const std::uint32_t mid = g.ring_count() / 2 * ring;
  const CoincRecord d = record(mid + 3, mid + ring / 2 + 5, static_cast<std::uint32_t>(D + 7));
  {
    ImageSet off(s);  // no subtraction: delayed records are ignored
    off.add_records(&d, 1, true);
    EXPECT_EQ(off.tally(ImageTally::delayed_in) + off.tally(ImageTally::delayed_out), 0u);
  }
  s.output.image.subtract_delayed = true;
  ImageSet set(s);
  expect_point(set, s, d, true, D);
  set.add_records(&d, 1, true);
  EXPECT_EQ(set.tally(ImageTally::delayed_in), 1u);
  std::int64_t p[3];
  ASSERT_TRUE(image_point(d, true, set.layout(), p));
  EXPECT_EQ(set.voxels()[image_voxel(set.layout(), p)], -1);
  const std::uint32_t bin = set.layout().trace_bin(d.time_a);
  EXPECT_EQ(set.trace_sum(bin, TraceSum::weight), -1);
  EXPECT_EQ(set.trace_sum(bin, TraceSum::events), 1);
}

TEST(ImageRule, TraceMeanAndErrorMatchADirectComputation) {
  const Settings s = image_settings();
  ImageSet set(s);
  const Geometry g = Geometry::from(s.scanner);
  const std::uint32_t ring = g.crystals_per_ring();
  std::mt19937 rng(8);
  std::uniform_int_distribution<std::uint32_t> offset(0, 8), dt(0, 20);
  std::vector<std::array<double, 3>> points;
  for (int i = 0; i < 500; ++i) {
    const std::uint32_t base = (g.ring_count() / 2 - 4) * ring;
    const std::uint32_t r1 = base + offset(rng) * ring, r2 = base + offset(rng) * ring;
    const CoincRecord r = record(r1 + offset(rng), r2 + ring / 2 + offset(rng), dt(rng), 5);
    std::int64_t p[3];
    ASSERT_TRUE(image_point(r, false, set.layout(), p));
    if (image_voxel(set.layout(), p) == set.layout().voxel_count) continue;
    set.add_records(&r, 1, false);
    points.push_back({p[0] * 1e-3, p[1] * 1e-3, p[2] * 1e-3});
  }
  ASSERT_GT(points.size(), 100u);
  std::vector<std::int64_t> sums(kTraceSums);
  for (int k = 0; k < kTraceSums; ++k) sums[k] = set.trace_sum(0, static_cast<TraceSum>(k));
  TraceSample t;
  ASSERT_TRUE(trace_sample(set.layout(), s.scanner.tick_ps, sums.data(), 0, t));
  EXPECT_EQ(t.weight, static_cast<double>(points.size()));
  for (int k = 0; k < 3; ++k) {
    double m = 0, v = 0;
    for (const auto& p : points) m += p[k];
    m /= points.size();
    for (const auto& p : points) v += (p[k] - m) * (p[k] - m);
    const double err = std::sqrt(v) / points.size();
    EXPECT_NEAR(t.mean_mm[k], m, 1e-6);
    EXPECT_NEAR(t.error_mm[k], err, 0.02 * err + 1e-3) << "axis " << k;
  }
}

TEST(ImageWindow, SubtractsTheSnapshotAWindowOlder) {
  Settings s = image_settings();
  s.output.image.window_s = 1.0;
  s.output.image.interval_ms = 500;
  const ImageLayout l = make_image_layout(s);
  ImageWindow w(s, l);
  const std::uint64_t second = ps_to_ticks(1e12, s.scanner.tick_ps);
  std::vector<std::int32_t> run(l.voxel_count, 0);
  run[7] = 5;
  w.update(run.data(), 100, second / 2);  // younger than a window: the window is the run
  EXPECT_EQ(w.window()[7], 5);
  EXPECT_EQ(w.window_first_tick(), 100u);
  run[7] = 9;
  w.update(run.data(), 100, second);
  EXPECT_EQ(w.window()[7], 9);
  run[7] = 20;
  w.update(run.data(), 100, second * 3 / 2);  // base: the snapshot at second / 2 (5)
  EXPECT_EQ(w.window()[7], 15);
  EXPECT_EQ(w.window_first_tick(), second / 2);
  for (int i = 0; i < 10; ++i) w.update(run.data(), 100, second * (2 + i));  // never overflows
  EXPECT_EQ(w.window()[7], 0);
  w.reset();
  w.update(run.data(), 100, second / 4);
  EXPECT_EQ(w.window()[7], 20);
}

TEST(ImageFileTest, RoundTripAndRefusals) {
  Settings s = image_settings();
  ImageSet set(s);
  const Geometry g = Geometry::from(s.scanner);
  const std::uint32_t ring = g.crystals_per_ring();
  std::vector<CoincRecord> rs;
  const std::uint32_t mid = g.ring_count() / 2 * ring;
  for (std::uint32_t i = 0; i < 50; ++i)
    rs.push_back(record(mid + i % 7, mid + ring / 2 + i % 5, i % 9, 1000 + std::uint64_t{i} * 70'000'000));
  EXPECT_EQ(set.trace_first(), set.trace_end());  // nothing yet: the encoder reads no bin
  set.add_records(rs.data(), rs.size(), false);
  // The trace's reach: the bins of the earliest and the latest record in the field.
  std::uint32_t first_bin = set.layout().trace_bins, last_bin = 0;
  for (const CoincRecord& r : rs) {
    std::int64_t p[3];
    ASSERT_TRUE(image_point(r, false, set.layout(), p));
    if (image_voxel(set.layout(), p) == set.layout().voxel_count) continue;
    first_bin = std::min(first_bin, set.layout().trace_bin(r.time_a));
    last_bin = std::max(last_bin, set.layout().trace_bin(r.time_a));
  }
  ASSERT_LT(first_bin, last_bin);
  EXPECT_EQ(set.trace_first(), first_bin);
  EXPECT_EQ(set.trace_end(), last_bin + 1);
  std::vector<std::int32_t> window(set.layout().voxel_count, 2);
  std::vector<std::uint8_t> bytes;
  ImageSpan span{1, 2, 3, 4};
  encode_image_file(set, s, 17, window.data(), span, bytes);
  const ImageFile f = parse_image_file(bytes.data(), bytes.size());
  EXPECT_EQ(f.run_id, 17u);
  EXPECT_EQ(f.dims[0], 40u);
  EXPECT_EQ(f.dims[2], 20u);
  EXPECT_FLOAT_EQ(f.voxel_mm, 1.0f);
  EXPECT_FLOAT_EQ(f.origin_mm[2], -10.0f);
  EXPECT_EQ(f.span.window_end_tick, 4u);
  EXPECT_EQ(f.tallies[0] + f.tallies[1], rs.size());
  std::int64_t sum = 0;
  for (std::uint64_t v = 0; v < f.voxel_count(); ++v) {
    EXPECT_EQ(f.run_voxel(v), set.voxels()[v]);
    EXPECT_EQ(f.window_voxel(v), 2);
    sum += f.run_voxel(v);
  }
  EXPECT_EQ(static_cast<std::uint64_t>(sum), f.tallies[0]);
  double axial = 0;
  for (std::uint32_t z = 0; z < f.dims[2]; ++z)
    axial += std::bit_cast<double>(bytes::load_le64(f.axial_run + 8 * z));
  EXPECT_EQ(axial, static_cast<double>(sum));
  ASSERT_GT(f.trace_count, 1u);
  double w = 0;
  for (std::uint32_t i = 0; i < f.trace_count; ++i) w += f.sample(i).weight;
  EXPECT_EQ(w, static_cast<double>(sum));
  const double bin_s = static_cast<double>(set.layout().trace_bin_ticks) * s.scanner.tick_ps * 1e-12;
  EXPECT_DOUBLE_EQ(f.sample(0).t_s, (first_bin + 0.5) * bin_s);
  EXPECT_DOUBLE_EQ(f.sample(f.trace_count - 1).t_s, (last_bin + 0.5) * bin_s);
  // Refusals: truncated, foreign, a wrong size.
  EXPECT_THROW(parse_image_file(bytes.data(), 10), ImageFileError);
  EXPECT_THROW(parse_image_file(bytes.data(), bytes.size() - 1), ImageFileError);
  std::vector<std::uint8_t> bad = bytes;
  bad[0] ^= 1;
  EXPECT_THROW(parse_image_file(bad.data(), bad.size()), ImageFileError);
  bad = bytes;
  bad[16] = 0xFF;
  bad[17] = 0xFF;
  EXPECT_THROW(parse_image_file(bad.data(), bad.size()), ImageFileError);
}

TEST(ImageCpuBackend, HoldsTheRuleAppliedToItsRecordsAndResetsAtARunStart) {
  TestScanner sc;
  Settings& s = sc.settings;
  s.output.image.enabled = true;
  s.output.image.subtract_delayed = true;
  s.output.image.voxel_mm = 4;
  s.output.image.dim_x = s.output.image.dim_y = s.output.image.dim_z = 48;
  s.coincidence.delayed.offset_ps = 20'000;
  std::mt19937_64 rng(11);
  test::AcquisitionOptions o;
  o.events = 6000;
  const std::vector<RawFrame> frames = test::random_acquisition(sc, rng, o);
  CpuBackend cpu(s, sc.calibration);
  ImageSet expected(s);
  for (int run = 0; run < 2; ++run) {
    expected.reset();
    for (std::size_t at = 0; at < frames.size(); at += 1000) {
      const std::size_t n = std::min<std::size_t>(1000, frames.size() - at);
      cpu.wait_staged(cpu.stage(frames.data() + at, n));
      SliceRequest r;
      r.slice_id = at;
      r.final = at + n == frames.size();
      r.run_start = at == 0;
      r.bound = r.final ? 0 : frame_time(frames[at + n].bytes);
      cpu.submit(r);
      const SliceResult& res = cpu.collect();
      expected.add_records(res.prompts, res.prompt_count, false);
      expected.add_records(res.delayed, res.delayed_count, true);
    }
    const ImageSet& got = *cpu.image();
    EXPECT_GT(got.tally(ImageTally::prompts_in), 100u);
    EXPECT_GT(got.tally(ImageTally::delayed_in), 0u);
    for (int k = 0; k < kImageTallies; ++k)
      EXPECT_EQ(got.tally(static_cast<ImageTally>(k)), expected.tally(static_cast<ImageTally>(k)));
    EXPECT_EQ(std::memcmp(got.bins(), expected.bins(), got.layout().bytes), 0);
  }
}

}  // namespace
}  // namespace petdaq

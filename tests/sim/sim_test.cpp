// petdaq-sim: determinism, arrival order, calibration tables and truth (tools/sim).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "core/calibration.h"
#include "core/convert.h"
#include "core/settings.h"
#include "tests/sim/sim_fixture.h"
#include "tools/sim/detector.h"
#include "tools/sim/rng.h"

namespace petdaq::sim {
namespace {

using testing::read_bytes;
using testing::read_frames;
using testing::read_text;
using testing::read_truth;
using testing::ScratchDir;
using testing::write_small_config;

SimOptions small_options() {
  SimOptions o;
  o.duration_s = 0.02;
  o.activity_MBq = 2.0;
  o.energy_bins = 1000;
  return o;
}

TEST(SimDeterminism, SameSeedSameFilesWhateverTheThreads) {
  ScratchDir dir;
  const auto config = write_small_config(dir.path());
  SimOptions o = small_options();
  o.duration_s = 0.1;
  o.threads = 1;
  const SimSummary a = simulate(config, dir.path() / "a", o);
  o.threads = 3;
  const SimSummary b = simulate(config, dir.path() / "b", o);
  ASSERT_GT(a.blocks, 3u) << "the acquisition must span several blocks to test threading";
  ASSERT_GT(a.frames, 1000u);
  EXPECT_EQ(a.frames, b.frames);
  for (const char* f : {"frames.bin", "truth.bin", "position_lut.npy", "energy_correction.npy",
                        "time_offsets.npy", "petdaq.yaml"})
    EXPECT_TRUE(read_bytes(dir.path() / "a" / f) == read_bytes(dir.path() / "b" / f)) << f;

  o.seed = 2;
  simulate(config, dir.path() / "c", o);
  EXPECT_FALSE(read_bytes(dir.path() / "a" / "frames.bin") == read_bytes(dir.path() / "c" / "frames.bin"));
  // The detector (and so its calibration) belongs to detector_seed, not to the acquisition.
  EXPECT_TRUE(read_bytes(dir.path() / "a" / "energy_correction.npy") ==
              read_bytes(dir.path() / "c" / "energy_correction.npy"));
}

// The exit panel comes from three candidates around where the ray leaves the ring's circle;
// it must be the panel a search over the whole ring finds, at the same distance, for rays
// from anywhere inside the phantom, including the last panel (where the candidates wrap).
TEST(SimGeometry, ExitPanelFromThreeCandidatesMatchesTheWholeRing) {
  const Settings settings = load_settings(testing::default_config());
  const DetectorModel model(settings, SimOptions{});
  const std::uint32_t panels = settings.scanner.bdm_transaxial;
  const double radius = settings.scanner.ring_radius_mm;
  Rng rng(7);
  std::vector<std::uint64_t> hits_per_panel(panels, 0);
  std::uint64_t located = 0;
  for (int n = 0; n < 200000; ++n) {
    const double px = rng.uniform(-30, 30), py = rng.uniform(-30, 30), pz = rng.uniform(-30, 30);
    double ux = rng.gauss(), uy = rng.gauss(), uz = 0.3 * rng.gauss();
    const double norm = 1 / std::sqrt(ux * ux + uy * uy + uz * uz);
    ux *= norm;
    uy *= norm;
    uz *= norm;
    const double a = ux * ux + uy * uy, b = px * ux + py * uy;
    const double t_circle = (-b + std::sqrt(b * b - a * (px * px + py * py - radius * radius))) / a;
    double best_t = INFINITY;
    std::uint32_t best = panels;
    for (std::uint32_t k = 0; k < panels; ++k) {
      const double angle = 2 * M_PI * k / panels;
      const double den = ux * std::cos(angle) + uy * std::sin(angle);
      if (den <= 1e-12) continue;
      const double t = (radius - px * std::cos(angle) - py * std::sin(angle)) / den;
      if (t < best_t) best_t = t, best = k;
    }
    DetectorHit hit;
    const std::uint32_t centre =
        model.panel_of(model.nearest_panel_raw(px + t_circle * ux, py + t_circle * uy));
    ASSERT_LT(centre, panels);
    if (!model.locate_near_panel(px, py, pz, ux, uy, uz, centre, hit)) continue;
    ++located;
    ASSERT_EQ(hit.bdm % panels, best) << n;
    ASSERT_NEAR(hit.distance_mm, best_t, 1e-9 * best_t) << n;
    ++hits_per_panel[best];
  }
  EXPECT_GT(located, 50000u);
  for (std::uint32_t k = 0; k < panels; ++k) EXPECT_GT(hits_per_panel[k], 1000u) << k;
}

// Per BDM, no frame is older than the newest frame before it by more than the disorder
// bound; with no disorder each BDM's frames are in time order.
std::uint64_t worst_disorder_ticks(const std::vector<FrameFields>& frames, std::uint32_t bdms) {
  std::vector<std::uint64_t> newest(bdms, 0);
  std::uint64_t worst = 0;
  for (const FrameFields& f : frames) {
    std::uint64_t& n = newest.at(f.bdm);
    if (f.time_ticks < n) worst = std::max(worst, n - f.time_ticks);
    n = std::max(n, f.time_ticks);
  }
  return worst;
}

TEST(SimOrder, EachBdmInTimeOrderWithoutDisorder) {
  ScratchDir dir;
  SimOptions o = small_options();
  o.disorder_ps = 0;
  const SimSummary s = simulate(write_small_config(dir.path()), dir.path(), o);
  const auto frames = read_frames(dir.path() / "frames.bin");
  ASSERT_EQ(frames.size(), s.frames);
  EXPECT_EQ(worst_disorder_ticks(frames, 8), 0u);
  // BDMs are interleaved datagram by datagram, not sorted globally.
  std::size_t bdm_changes = 0;
  for (std::size_t i = 1; i < frames.size(); ++i) bdm_changes += frames[i].bdm != frames[i - 1].bdm;
  EXPECT_GT(bdm_changes, 8u);
  EXPECT_LT(bdm_changes, frames.size() / 2);
  bool globally_sorted = true;
  for (std::size_t i = 1; i < frames.size(); ++i)
    globally_sorted &= frames[i].time_ticks >= frames[i - 1].time_ticks;
  EXPECT_FALSE(globally_sorted);
}

TEST(SimOrder, DisorderIsBoundedAndInsideTheStreamLimit) {
  ScratchDir dir;
  SimOptions o = small_options();
  o.disorder_ps = 50'000;  // 3 200 ticks
  const SimSummary s = simulate(write_small_config(dir.path()), dir.path(), o);
  const Settings settings = load_settings(dir.path() / "petdaq.yaml");
  EXPECT_EQ(s.disorder_ticks, 3200u);
  const std::uint64_t worst = worst_disorder_ticks(read_frames(dir.path() / "frames.bin"), 8);
  EXPECT_GT(worst, 0u) << "disorder was asked for";
  EXPECT_LE(worst, s.disorder_ticks);
  EXPECT_LT(worst * settings.scanner.tick_ps, settings.stream.max_disorder_ps);

  // The default stays a tenth of the stream's limit; more than half of it is refused.
  SimOptions d = small_options();
  const SimSummary sd = simulate(write_small_config(dir.path()), dir.path() / "d", d);
  EXPECT_EQ(sd.disorder_ticks, std::uint64_t(settings.stream.max_disorder_ps / 10 / 15.625));
  d.disorder_ps = 0.6 * settings.stream.max_disorder_ps;
  EXPECT_THROW(simulate(write_small_config(dir.path()), dir.path() / "e", d), std::invalid_argument);
}

TEST(SimTables, ShapesMatchTheGeometryAndLoad) {
  ScratchDir dir;
  SimOptions o = small_options();
  o.energy_bins = 700;
  simulate(write_small_config(dir.path()), dir.path(), o);
  const NpyArray lut = read_npy(dir.path() / "position_lut.npy");
  EXPECT_EQ(lut.dtype, "|u1");
  EXPECT_EQ(lut.shape, (std::vector<std::size_t>{8, 4, 64, 64}));
  const NpyArray energy = read_npy(dir.path() / "energy_correction.npy");
  EXPECT_EQ(energy.dtype, "<f4");
  EXPECT_EQ(energy.shape, (std::vector<std::size_t>{8, 4, 64, 700}));
  const NpyArray offsets = read_npy(dir.path() / "time_offsets.npy");
  EXPECT_EQ(offsets.dtype, "<i4");
  EXPECT_EQ(offsets.shape, (std::vector<std::size_t>{8 * 4 * 64}));

  // Every crystal of every DU owns some pixels; the rest of the image is "no crystal".
  for (std::size_t du = 0; du < 32; ++du) {
    std::set<int> labels;
    for (std::size_t p = 0; p < 64 * 64; ++p) labels.insert(lut.data[du * 64 * 64 + p]);
    EXPECT_EQ(labels.size(), 65u) << "DU " << du;  // 64 crystals + 255
    EXPECT_EQ(*labels.rbegin(), 255);
    EXPECT_EQ(*std::prev(labels.end(), 2), 63);
  }
  // The config next to the tables names them and loads as the daemon would.
  const Settings settings = load_settings(dir.path() / "petdaq.yaml");
  EXPECT_EQ(settings.calibration.position_lut, dir.path() / "position_lut.npy");
  const Calibration cal = load_calibration(settings);
  EXPECT_EQ(cal.energy_bins, 700u);
  EXPECT_EQ(cal.time_offsets.size(), 8u * 4 * 64);
  EXPECT_LT(cal.min_time_offset, 0);
  EXPECT_GT(cal.max_time_offset, 0);
}

// The tables undo the detector: converted energies equal the measured ones (where the flood
// map named the right crystal) and corrected times are the emission time plus the time of
// flight and the resolution, with no per-crystal delay left.
TEST(SimTables, CalibrationUndoesGainNonLinearityAndDelays) {
  ScratchDir dir;
  SimOptions o = small_options();
  o.source = SourceShape::point;
  o.background = false;
  simulate(write_small_config(dir.path()), dir.path(), o);
  const Settings settings = load_settings(dir.path() / "petdaq.yaml");
  const Calibration cal = load_calibration(settings);
  const ConvertTables tables = make_convert_tables(settings, cal);
  const auto raw = read_bytes(dir.path() / "frames.bin");
  const auto truth = read_truth(dir.path() / "truth.bin");
  ASSERT_EQ(raw.size() / kFrameBytes, truth.size());
  const double sigma_ticks = 350.0 / 2.3548 / 15.625;
  const double max_flight_ticks = 60.0 / 0.2998 / 15.625;  // 40 mm ring + panel corners
  std::size_t checked = 0, photopeak = 0;
  for (std::size_t i = 0; i < truth.size(); ++i) {
    if (truth[i].flags) continue;  // a wrong crystal's table does not fit this frame
    Single s;
    const FrameStatus status = convert_frame(&raw[i * kFrameBytes], tables, s);
    ASSERT_TRUE(status == FrameStatus::single || status == FrameStatus::energy_rejected);
    ASSERT_EQ(s.crystal, truth[i].crystal);
    // ADC rounding is 1 unit of about 0.15 keV; the bin's slope adds a little more.
    ASSERT_NEAR(s.energy, truth[i].energy_keV, 0.3 + 2e-4 * truth[i].energy_keV) << i;
    const double dt = double(s.time) - double(truth[i].event_ticks);
    ASSERT_GT(dt, -5 * sigma_ticks - 1);
    ASSERT_LT(dt, max_flight_ticks + 5 * sigma_ticks + 1);
    ++checked;
    photopeak += std::abs(s.energy - 511.0f) < 30.0f;
  }
  EXPECT_GT(checked, 1000u);
  EXPECT_GT(photopeak, checked / 3) << "511 keV photopeaks land at 511 keV";
}

TEST(SimTruth, SummaryMatchesTheFiles) {
  ScratchDir dir;
  const SimSummary s = simulate(write_small_config(dir.path()), dir.path(), small_options());
  const auto frames = read_frames(dir.path() / "frames.bin");
  const auto truth = read_truth(dir.path() / "truth.bin");
  ASSERT_EQ(frames.size(), truth.size());
  ASSERT_EQ(truth.size(), s.frames);
  std::map<PhotonKind, std::uint64_t> kinds;
  std::map<std::uint64_t, int> per_event;
  for (std::size_t i = 0; i < truth.size(); ++i) {
    ++kinds[truth[i].kind];
    ++per_event[truth[i].event_id];
    EXPECT_EQ(frames[i].head_marker, 0xA);
    EXPECT_EQ(frames[i].tail_marker, 0x5);
    const double temp = frame_temperature_degC(frames[i]);
    EXPECT_GT(temp, 29.0);
    EXPECT_LT(temp, 34.0);
    if (truth[i].kind == PhotonKind::background) EXPECT_EQ(truth[i].phantom_scatters, 0);
    if (truth[i].kind == PhotonKind::scattered) EXPECT_GT(truth[i].phantom_scatters, 0);
    if (truth[i].kind == PhotonKind::annihilation) EXPECT_EQ(truth[i].phantom_scatters, 0);
  }
  EXPECT_EQ(kinds[PhotonKind::annihilation], s.frames_annihilation);
  EXPECT_EQ(kinds[PhotonKind::scattered], s.frames_scattered);
  EXPECT_EQ(kinds[PhotonKind::background], s.frames_background);
  EXPECT_GT(s.frames_scattered, 0u);
  EXPECT_GT(s.frames_background, 0u);
  std::uint64_t pairs = 0;
  for (const auto& [id, n] : per_event) {
    ASSERT_LE(n, 2);
    pairs += n == 2;
  }
  EXPECT_EQ(pairs, s.pairs);
  const auto doc = nlohmann::json::parse(read_text(dir.path() / "truth.json"));
  EXPECT_EQ(doc.at("format"), "petdaq-sim truth 1");
  EXPECT_EQ(doc.at("frames").get<std::uint64_t>(), s.frames);
  EXPECT_EQ(doc.at("decays").get<std::uint64_t>(), s.decays);
  EXPECT_EQ(doc.at("frames_by_kind").at("scattered").get<std::uint64_t>(), s.frames_scattered);
  EXPECT_EQ(doc.at("duration_s").get<double>(), s.duration_s);  // exact: a round trip
  // Poisson decays: 2 MBq for 20 ms.
  EXPECT_NEAR(double(s.decays), 40'000.0, 5 * std::sqrt(40'000.0));
}

TEST(SimTruth, FrameCountStopsAtABlockBoundary) {
  ScratchDir dir;
  SimOptions o = small_options();
  o.frames = 5000;
  const SimSummary s = simulate(write_small_config(dir.path()), dir.path(), o);
  EXPECT_GE(s.frames, 5000u);
  EXPECT_EQ(read_truth(dir.path() / "truth.bin").size(), s.frames);
  // One block holds about 32 768 events: never much more than asked for.
  EXPECT_LT(s.frames, 5000u + 32768u);
}

TEST(SimErrors, RefusesWhatCannotBeSimulated) {
  ScratchDir dir;
  const auto config = write_small_config(dir.path());
  SimOptions o = small_options();
  o.phantom_radius_mm = 50;  // the small ring's radius is 40 mm
  EXPECT_THROW(simulate(config, dir.path() / "a", o), std::invalid_argument);
  std::ofstream(dir.path() / "crowded.yaml")
      << "scanner: {bdm_transaxial: 30, ring_radius_mm: 40.0}\n"
         "calibration: {position_lut: a, energy_correction: b}\n";
  EXPECT_THROW(simulate(dir.path() / "crowded.yaml", dir.path() / "b", small_options()), SettingsError);
  EXPECT_THROW(simulate(dir.path() / "missing.yaml", dir.path() / "c", small_options()), SettingsError);
}

}  // namespace
}  // namespace petdaq::sim

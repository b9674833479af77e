// petdaq-sim's front end: dead time (per DU or BDM, paralysable or not) and pulse pile-up,
// checked on the frames written and against the dead-time formulas (tools/sim/front_end.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "core/dead_time.h"
#include "tests/sim/sim_fixture.h"
#include "tools/sim/options.h"

namespace petdaq::sim {
namespace {

using testing::read_bytes;
using testing::read_frames;
using testing::read_truth;
using testing::ScratchDir;
using testing::write_small_config;

constexpr double kTickPs = 15.625;
constexpr std::uint32_t kBdms = 8, kDuPerBdm = 4;

SimOptions busy_options() {
  SimOptions o;
  o.duration_s = 0.02;
  o.activity_MBq = 20.0;
  o.threads = 2;
  return o;
}

// The frames' stamps per unit (DU, or BDM when per_board), each sorted.
std::map<std::uint32_t, std::vector<std::uint64_t>> stamps_by_unit(
    const std::vector<FrameFields>& frames, bool per_board) {
  std::map<std::uint32_t, std::vector<std::uint64_t>> out;
  for (const FrameFields& f : frames)
    out[per_board ? f.bdm : f.bdm * kDuPerBdm + f.du].push_back(f.time_ticks);
  for (auto& [unit, t] : out) std::sort(t.begin(), t.end());
  return out;
}

std::uint64_t closest_pair_ticks(const std::map<std::uint32_t, std::vector<std::uint64_t>>& units) {
  std::uint64_t closest = ~0ull;
  for (const auto& [unit, t] : units)
    for (std::size_t i = 1; i < t.size(); ++i) closest = std::min(closest, t[i] - t[i - 1]);
  return closest;
}

// The photons the formula says arrived, from each unit's measured frame rate.
double lossless_photons(const std::map<std::uint32_t, std::vector<std::uint64_t>>& units,
                        DeadTimeKind kind, double tau_s, double duration_s) {
  double n = 0;
  for (const auto& [unit, t] : units)
    n += lossless_rate(kind, double(t.size()) / duration_s, tau_s, nullptr) * duration_s;
  return n;
}

TEST(SimFrontEnd, NonParalysableDeadTimePerDuFollowsTheFormula) {
  ScratchDir dir;
  SimOptions o = busy_options();
  o.dead_time_ns = 1000;
  const SimSummary s = simulate(write_small_config(dir.path()), dir.path(), o);
  const auto frames = read_frames(dir.path() / "frames.bin");
  ASSERT_EQ(frames.size(), s.frames);
  EXPECT_EQ(s.photons_detected, s.frames + s.lost_dead_time + s.merged_pile_up);
  EXPECT_EQ(s.merged_pile_up, 0u);
  const double lost = double(s.lost_dead_time) / double(s.photons_detected);
  EXPECT_GT(lost, 0.05) << "the test needs a visible loss";
  const auto units = stamps_by_unit(frames, false);
  EXPECT_GE(closest_pair_ticks(units) * kTickPs, 1000e3 - kTickPs) << "a DU sent two frames within its dead time";
  // m = n / (1 + n τ) per DU: the photons the formula infers are the photons detected.
  const double n = lossless_photons(units, DeadTimeKind::non_paralysable, 1e-6, s.duration_s);
  EXPECT_NEAR(n / double(s.photons_detected), 1.0, 0.01);
  EXPECT_EQ(s.lost_dead_time_by_kind[0] + s.lost_dead_time_by_kind[1] + s.lost_dead_time_by_kind[2],
            s.lost_dead_time);
}

TEST(SimFrontEnd, ParalysableDeadTimeFollowsItsFormulaAndLosesMore) {
  ScratchDir dir;
  SimOptions o = busy_options();
  o.dead_time_ns = 1000;
  o.dead_time_paralysable = true;
  const SimSummary p = simulate(write_small_config(dir.path()), dir.path() / "p", o);
  o.dead_time_paralysable = false;
  const SimSummary np = simulate(write_small_config(dir.path()), dir.path() / "n", o);
  EXPECT_EQ(p.photons_detected, np.photons_detected) << "same seed, same photons";
  EXPECT_GT(p.lost_dead_time, np.lost_dead_time);
  const auto units = stamps_by_unit(read_frames(dir.path() / "p" / "frames.bin"), false);
  EXPECT_GE(closest_pair_ticks(units) * kTickPs, 1000e3 - kTickPs);
  // m = n exp(−n τ) per DU.
  const double n = lossless_photons(units, DeadTimeKind::paralysable, 1e-6, p.duration_s);
  EXPECT_NEAR(n / double(p.photons_detected), 1.0, 0.015);
}

TEST(SimFrontEnd, PerBoardDeadTimeSpansTheBoardsDus) {
  ScratchDir dir;
  SimOptions o = busy_options();
  o.dead_time_ns = 500;
  o.dead_time_per_board = true;
  const SimSummary s = simulate(write_small_config(dir.path()), dir.path(), o);
  const auto units = stamps_by_unit(read_frames(dir.path() / "frames.bin"), true);
  ASSERT_EQ(units.size(), kBdms);
  EXPECT_GE(closest_pair_ticks(units) * kTickPs, 500e3 - kTickPs) << "a BDM sent two frames within its dead time";
  const double n = lossless_photons(units, DeadTimeKind::non_paralysable, 500e-9, s.duration_s);
  EXPECT_NEAR(n / double(s.photons_detected), 1.0, 0.01);
}

TEST(SimFrontEnd, PileUpSumsThePhotonsOfAShapingTime) {
  ScratchDir dir;
  SimOptions o = busy_options();
  o.pile_up_ns = 300;
  const SimSummary s = simulate(write_small_config(dir.path()), dir.path(), o);
  const auto frames = read_frames(dir.path() / "frames.bin");
  const auto truth = read_truth(dir.path() / "truth.bin");
  ASSERT_EQ(frames.size(), truth.size());
  EXPECT_EQ(s.lost_dead_time, 0u);
  EXPECT_EQ(s.photons_detected, s.frames + s.merged_pile_up);
  std::uint64_t piled = 0, merged = 0;
  double piled_keV = 0, single_keV = 0;
  for (const TruthRecord& t : truth) {
    piled += t.pile_up > 0;
    merged += t.pile_up;
    (t.pile_up ? piled_keV : single_keV) += t.energy_keV;
  }
  EXPECT_EQ(piled, s.frames_piled_up);
  EXPECT_EQ(merged, s.merged_pile_up);
  ASSERT_GT(piled, 100u);
  // Summed energies: piled frames carry more than single photons on average, and some leave
  // the energy window that their first photon was in.
  EXPECT_GT(piled_keV / double(piled), 1.3 * single_keV / double(s.frames - piled));
  EXPECT_GT(s.piled_out_of_window, 0u);
  EXPECT_LE(s.piled_out_of_window, s.frames_piled_up);
  const auto units = stamps_by_unit(frames, false);
  EXPECT_GE(closest_pair_ticks(units) * kTickPs, 300e3 - kTickPs);
  // A pulse takes every photon of its shaping time: pulses = n / (1 + n s).
  const double n = lossless_photons(units, DeadTimeKind::non_paralysable, 300e-9, s.duration_s);
  EXPECT_NEAR(n / double(s.photons_detected), 1.0, 0.01);
}

TEST(SimFrontEnd, SameFilesWhateverTheThreadsAndOrderKept) {
  ScratchDir dir;
  const auto config = write_small_config(dir.path());
  SimOptions o = busy_options();
  o.dead_time_ns = 400;
  o.pile_up_ns = 100;
  o.disorder_ps = 50'000;
  o.threads = 1;
  const SimSummary a = simulate(config, dir.path() / "a", o);
  o.threads = 3;
  const SimSummary b = simulate(config, dir.path() / "b", o);
  ASSERT_GT(a.blocks, 3u);
  EXPECT_EQ(a.frames, b.frames);
  EXPECT_EQ(a.lost_dead_time, b.lost_dead_time);
  for (const char* f : {"frames.bin", "truth.bin", "truth.json"})
    EXPECT_TRUE(read_bytes(dir.path() / "a" / f) == read_bytes(dir.path() / "b" / f)) << f;
  // Each BDM's frames still leave in time order up to the disorder bound.
  std::vector<std::uint64_t> newest(kBdms, 0);
  std::uint64_t worst = 0;
  for (const FrameFields& f : read_frames(dir.path() / "a" / "frames.bin")) {
    std::uint64_t& n = newest.at(f.bdm);
    if (f.time_ticks < n) worst = std::max(worst, n - f.time_ticks);
    n = std::max(n, f.time_ticks);
  }
  EXPECT_LE(worst, a.disorder_ticks);
}

TEST(SimFrontEnd, RefusesBadSettings) {
  ScratchDir dir;
  SimOptions o = busy_options();
  o.dead_time_ns = -1;
  SimOptionText text;
  EXPECT_THROW(finish_sim_options(text, o), std::invalid_argument);
}

}  // namespace
}  // namespace petdaq::sim

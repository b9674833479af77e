// The flood-map histogram of a simulated acquisition against the simulator's truth and the
// position table: the backend's flood map holds every frame at its pixel, and of the frames
// of each true crystal, at least 90 % lie in pixels that position_lut.npy labels with that
// crystal (the simulator mispositions about 7 %).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/calibration.h"
#include "core/cpu_backend.h"
#include "core/histograms.h"
#include "sim_fixture.h"

namespace petdaq::sim {
namespace {

TEST(SimFlood, PeaksLieWhereThePositionTablePutsTheCrystals) {
  testing::ScratchDir dir;
  SimOptions o;
  o.duration_s = 0.02;
  o.activity_MBq = 2.0;
  const SimSummary summary = simulate(testing::write_small_config(dir.path()), dir.path(), o);
  ASSERT_GT(summary.frames, 5000u);

  Settings settings = load_settings(dir.path() / "petdaq.yaml");
  settings.output.histograms.enabled = true;
  const Calibration calibration = load_calibration(settings);
  const std::vector<std::uint8_t> bytes = testing::read_bytes(dir.path() / "frames.bin");
  const std::vector<TruthRecord> truth = testing::read_truth(dir.path() / "truth.bin");
  const std::size_t n = bytes.size() / kFrameBytes;
  ASSERT_EQ(truth.size(), n);
  settings.stream.max_slice_frames = n;
  settings.stream.max_pending_frames = n;
  CpuBackend backend(settings, calibration);
  backend.stage(reinterpret_cast<const RawFrame*>(bytes.data()), n);
  SliceRequest r;
  r.final = true;
  r.run_start = true;
  backend.submit(r);
  backend.collect();
  const HistogramSet& h = *backend.histograms();

  const Geometry g = Geometry::from(settings.scanner);
  const std::uint32_t ps = g.position_size;
  std::vector<std::uint64_t> flood(std::size_t{g.bdm_count()} * g.du_per_bdm() * ps * ps, 0);
  std::uint64_t named = 0, in_own_pixels = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const FrameFields f = decode_frame(&bytes[i * kFrameBytes]);
    ASSERT_LT(f.bdm, g.bdm_count());
    ASSERT_LT(f.du, g.du_per_bdm());
    ASSERT_LT(f.x, ps);
    ASSERT_LT(f.y, ps);
    const std::size_t pixel = ((std::size_t{f.bdm} * g.du_per_bdm() + f.du) * ps + f.y) * ps + f.x;
    ++flood[pixel];
    ++named;  // every truth record names the crystal the photon interacted in
    const std::uint32_t label = calibration.position_lut[pixel];
    if (label < g.crystals_per_du() &&
        g.crystal_id(f.bdm, f.du, g.local_crystal_of_label(label)) == truth[i].crystal)
      ++in_own_pixels;
  }
  for (std::size_t p = 0; p < flood.size(); ++p) ASSERT_EQ(h.at(Hist::flood, p), flood[p]) << p;
  const double fraction = static_cast<double>(in_own_pixels) / static_cast<double>(named);
  EXPECT_GE(fraction, 0.90);
  EXPECT_LE(fraction, 0.99);  // the simulator does misposition some
  std::printf("frames in their crystal's pixels: %.2f %% of %llu\n", 100 * fraction,
              static_cast<unsigned long long>(named));
}

}  // namespace
}  // namespace petdaq::sim

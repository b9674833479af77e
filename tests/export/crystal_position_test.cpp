// tools/export/crystal_position.h against the simulator's detector (tools/sim/detector.h):
// a photon leaving a point just inside the ring straight out through the exported centre of
// a crystal enters that very crystal, for every crystal of the default and of a non-square
// scanner.
#include <gtest/gtest.h>

#include <cmath>

#include "tools/export/crystal_position.h"
#include "tools/sim/detector.h"

namespace petdaq {
namespace {

void expect_every_crystal_where_the_simulator_puts_it(const Settings& settings) {
  const sim::DetectorModel model(settings, sim::SimOptions{});
  const Geometry& g = model.geometry();
  const double back_mm = settings.scanner.crystal_depth_mm / 2 + 1.0;
  for (std::uint32_t c = 0; c < g.crystal_count(); ++c) {
    const exporter::CrystalPlace p = exporter::crystal_place(settings.scanner, c);
    ASSERT_NEAR(std::hypot(p.outward[0], p.outward[1]), 1.0, 1e-12);
    const std::uint32_t panel = (c % g.crystals_per_ring()) / (g.du_transaxial * g.crystal_transaxial);
    sim::DetectorHit hit{};
    ASSERT_TRUE(model.locate_near_panel(p.centre_mm[0] - back_mm * p.outward[0],
                                        p.centre_mm[1] - back_mm * p.outward[1], p.centre_mm[2],
                                        p.outward[0], p.outward[1], p.outward[2], panel, hit))
        << "crystal " << c;
    ASSERT_EQ(hit.crystal, c);
    ASSERT_NEAR(hit.distance_mm, 1.0, 1e-9) << "crystal " << c;
  }
}

TEST(CrystalPosition, EveryCrystalIsWhereTheSimulatorPutsIt) {
  expect_every_crystal_where_the_simulator_puts_it(Settings{});
}

TEST(CrystalPosition, NonSquareDusAndSeveralBdmsAxially) {
  Settings s;
  s.scanner.bdm_transaxial = 16;
  s.scanner.bdm_axial = 3;
  s.scanner.du_transaxial = 3;
  s.scanner.du_axial = 1;
  s.scanner.crystal_transaxial = 8;
  s.scanner.crystal_axial = 5;
  s.scanner.crystal_pitch_axial_mm = 2.1;
  s.scanner.ring_radius_mm = 120;
  expect_every_crystal_where_the_simulator_puts_it(s);
}

}  // namespace
}  // namespace petdaq

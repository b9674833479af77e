// Generates one block of the acquisition: the decays and background events in its time
// span, each photon followed through the phantom to a crystal, and the frame the BDM sends
// for it, with its truth. A block depends only on the seed and its index, so blocks can be
// made on any thread in any order.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "core/geometry.h"
#include "core/settings.h"
#include "tools/sim/block.h"
#include "tools/sim/detector.h"
#include "tools/sim/physics.h"
#include "tools/sim/plan.h"
#include "tools/sim/rng.h"
#include "tools/sim/sim.h"
#include "tools/sim/truth.h"

namespace petdaq::sim {

class BlockGenerator {
 public:
  // Keeps references to all four: they must outlive the generator.
  BlockGenerator(const Settings& settings, const SimOptions& options, const DetectorModel& model,
                 const Plan& plan);

  // Fills `out` with block `index`, its frames grouped by BDM in sending order.
  void generate(std::uint64_t index, Block& out) const;

 private:
  struct Context {
    Block& out;
    BlockRng& rng;
    std::uint64_t base_ticks;  // origin + block start
    std::uint32_t next_event = 0;
    std::vector<std::pair<std::int8_t, std::uint8_t>> temperature{};  // per BDM: int, 16ths
  };

  // What a frame looked like to the flood map and energy window, for the truth summary.
  struct PhotonOutcome {
    bool in_window = false;  // measured energy in the window and a crystal in the flood map
    std::uint32_t measured_crystal = 0;
  };

  std::uint64_t ticks_of(Context& ctx, double t_ps) const {
    return ctx.base_ticks + static_cast<std::uint64_t>(t_ps * inv_tick_ps_ + 0.5);
  }
  std::uint64_t event_id(Context& ctx) const {
    return (ctx.out.index << 32) | ctx.next_event++;
  }

  // Annihilation photons (photon_transport.cpp): decay_chunk runs the steps below in turn
  // over the chunk's n decays (photon h of decay i at h * kChunkDecays + i of the scratch).
  void decay_chunk(Context& ctx, std::size_t first, std::size_t n) const;
  void source_points(Context& ctx, std::size_t first, std::size_t n) const;
  void photon_directions(Context& ctx, std::size_t n) const;
  void through_phantom(Context& ctx, std::size_t n) const;
  std::uint32_t reach_detector(Context& ctx, std::size_t n) const;
  std::uint32_t interact(Context& ctx, std::uint32_t hits) const;
  void make_frames(Context& ctx, std::size_t first, std::uint32_t kept) const;
  void scatter_in_phantom(ChunkScratch& s, std::uint32_t j, BlockRng& rng) const;
  double phantom_exit_mm(double px, double py, double pz, double ux, double uy, double uz) const;

  // Background and the boards' view of an interaction (block_generator.cpp).
  void set_temperatures(Context& ctx, double t_s) const;
  void background(Context& ctx, double t_ps) const;
  bool frame_begin(Context& ctx, std::uint32_t bdm, std::uint32_t du, std::uint32_t local,
                   std::uint32_t crystal, double deposit_keV, double arrival_ps,
                   std::uint64_t event_ticks, std::uint64_t id, PhotonKind kind,
                   std::uint8_t which, unsigned scatters, PendingFrame& pending) const;
  PhotonOutcome frame_end(Context& ctx, const PendingFrame& pending) const;

  const SimOptions& options_;
  const DetectorModel& model_;
  const Geometry& g_;
  const Plan& plan_;
  bool phantom_ = false;
  double phantom_r2_ = 0, phantom_half_mm_ = 0;
  double water_mean_free_path511_mm_ = 0;
  double phantom_max_chord_mm_ = 0;
  double acollinearity_sigma_rad_ = 0;
  double energy_sigma_ = 0;  // sigma = energy_sigma_ * sqrt(E / keV)
  double time_sigma_ps_ = 0;
  double inv_tick_ps_ = 1;
  double depth_mm_ = 0;
  double low_keV_ = 0, high_keV_ = 0;
  double half_axial_mm_ = 0;
  double ring_r2_mm2_ = 0;
  EnergyTable water_mean_free_path_mm_;
  EnergyTable lyso_mu_per_mm_;
  double inv_saturation_keV_ = 0;
  std::vector<std::uint32_t> du_crystal_base_;          // per BDM * DU: crystal id of local 0
  std::vector<std::uint32_t> label_of_local_;           // per local crystal
  std::vector<std::uint32_t> crystal_offset_of_label_;  // per label: id - the DU's base
  std::uint32_t du_per_bdm_ = 1, crystals_per_du_ = 1;
  std::uint8_t head_marker_ = 0, tail_marker_ = 0;
};

// The flood-map label of a frame begun by frame_begin: truth flags and counts. In the header:
// it runs once per frame, from both source files.
inline BlockGenerator::PhotonOutcome BlockGenerator::frame_end(Context& ctx,
                                                             const PendingFrame& pending) const {
  SimFrame& f = ctx.out.generated[pending.index];
  TruthRecord& t = f.truth;
  const std::uint32_t seen_label = *pending.seen;
  const bool in_crystal = seen_label < crystals_per_du_;
  if (!in_crystal)
    t.flags |= truth_flag::no_crystal;
  else if (seen_label != pending.label)
    t.flags |= truth_flag::mispositioned;

  BlockStats& st = ctx.out.stats;
  ++st.frames;
  st.frames_annihilation += t.kind == PhotonKind::annihilation;
  st.frames_scattered += t.kind == PhotonKind::scattered;
  st.frames_background += t.kind == PhotonKind::background;
  st.frames_mispositioned += (t.flags & truth_flag::mispositioned) != 0;
  st.frames_no_crystal += !in_crystal;
  PhotonOutcome outcome;
  outcome.in_window =
      in_crystal && pending.measured_keV >= low_keV_ && pending.measured_keV <= high_keV_;
  st.frames_in_window += outcome.in_window;
  if (in_crystal)
    outcome.measured_crystal =
        du_crystal_base_[pending.bdm_du] + crystal_offset_of_label_[seen_label];
  return outcome;
}

}  // namespace petdaq::sim

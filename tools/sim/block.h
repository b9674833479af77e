// One block of a simulated acquisition: the frames its events made (in generation order,
// then grouped by BDM in sending order), their truth, the counts for the summary, and the
// scratch arrays the generator works in.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "proto/frame.h"
#include "tools/sim/detector.h"
#include "tools/sim/sim.h"
#include "tools/sim/truth.h"

namespace petdaq::sim {

struct SimFrame {
  std::uint64_t key;  // the BDM's sending order: time stamp + bounded disorder
  RawFrame raw;
  TruthRecord truth;
};

struct BlockStats {
  std::uint64_t decays = 0, background_events = 0, frames = 0;
  std::uint64_t frames_annihilation = 0, frames_scattered = 0, frames_background = 0;
  std::uint64_t frames_mispositioned = 0, frames_no_crystal = 0, frames_in_window = 0;
  std::uint64_t pairs = 0, pairs_scattered = 0, pairs_in_window = 0, pairs_in_window_scattered = 0;

  void add_to(SimSummary& s) const {
    s.decays += decays;
    s.background_events += background_events;
    s.frames += frames;
    s.frames_annihilation += frames_annihilation;
    s.frames_scattered += frames_scattered;
    s.frames_background += frames_background;
    s.frames_mispositioned += frames_mispositioned;
    s.frames_no_crystal += frames_no_crystal;
    s.frames_in_window += frames_in_window;
    s.pairs += pairs;
    s.pairs_scattered += pairs_scattered;
    s.pairs_in_window += pairs_in_window;
    s.pairs_in_window_scattered += pairs_in_window_scattered;
  }
};

// Decays are simulated a chunk at a time, stage by stage (emission, phantom, ring, crystal,
// frame) over arrays, so each stage is a tight loop and the arrays stay in the L1/L2 cache.
inline constexpr std::uint32_t kChunkDecays = 1024;
inline constexpr std::uint32_t kChunkPhotons = 2 * kChunkDecays;

// A frame whose flood-map label is still being fetched: the table is megabytes, read at
// random, so every frame of a chunk issues its load before any is used.
struct PendingFrame {
  const std::uint8_t* seen;  // the flood-map pixel
  std::uint32_t index;       // in Block::generated
  std::uint32_t label;       // the true crystal's label
  std::uint32_t bdm_du;
  std::uint32_t photon;      // in the chunk
  double measured_keV;
};

// Photon 0 of decay i is i, photon 1 is kChunkDecays + i: each stage runs the same loop
// over both halves, and the arithmetic-only loops vectorise.
struct ChunkScratch {
  double px[kChunkPhotons], py[kChunkPhotons], pz[kChunkPhotons];
  double ux[kChunkPhotons], uy[kChunkPhotons], uz[kChunkPhotons];
  double energy_keV[kChunkPhotons], path_mm[kChunkPhotons];
  double free_mm[kChunkPhotons], panel_raw[kChunkPhotons];
  // Emission draws per decay: a point in the unit disk (direction) and the acollinearity.
  double disk_a[kChunkDecays], disk_b[kChunkDecays], tilt_x[kChunkDecays], tilt_y[kChunkDecays];
  std::uint8_t scatters[kChunkPhotons];
  // Per stage, 1 or 0: interacts in the phantom / reaches the ring (a double, so that the
  // loop computing it is all doubles and vectorises).
  double flag[kChunkPhotons];
  std::uint8_t made[kChunkPhotons], in_window[kChunkPhotons];
  std::uint32_t measured_crystal[kChunkPhotons];
  std::uint32_t list[kChunkPhotons];  // compacted photon indices
  std::uint32_t hit_photon[kChunkPhotons];
  DetectorHit hit[kChunkPhotons];
  PendingFrame pending[kChunkPhotons];
};

struct Block {
  Block() : scratch(std::make_unique<ChunkScratch>()) {}
  std::unique_ptr<ChunkScratch> scratch;
  std::vector<double> decay_ps;  // emission times in the block
  std::uint64_t index = 0;
  std::uint64_t end_ticks = 0;  // relative to the origin
  std::vector<SimFrame> generated;  // in generation order
  std::vector<SimFrame> frames;     // grouped by BDM, each BDM in key order
  std::vector<std::uint32_t> bdm_begin;
  BlockStats stats;
};

// Groups the block's generated frames into `frames` by BDM, each BDM in key order.
void group_by_bdm(Block& block, std::uint32_t bdm_count);

}  // namespace petdaq::sim

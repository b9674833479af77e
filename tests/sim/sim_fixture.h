// Reading what petdaq-sim wrote (frames, truth), a small scanner's configuration, and the
// shared scratch folder and file readers (tests/support).
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "proto/frame.h"
#include "tests/support/files.h"
#include "tests/support/scratch_dir.h"
#include "tools/sim/sim.h"
#include "tools/sim/truth.h"

namespace petdaq::sim::testing {

using petdaq::test::read_bytes;
using petdaq::test::read_text;
using petdaq::test::ScratchDir;

inline std::vector<FrameFields> read_frames(const std::filesystem::path& p) {
  const std::vector<std::uint8_t> bytes = read_bytes(p);
  std::vector<FrameFields> out(bytes.size() / kFrameBytes);
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = decode_frame(&bytes[i * kFrameBytes]);
  return out;
}

inline std::vector<TruthRecord> read_truth(const std::filesystem::path& p) {
  const std::vector<std::uint8_t> bytes = read_bytes(p);
  std::vector<TruthRecord> out(bytes.size() / kTruthBytes);
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = decode_truth(&bytes[i * kTruthBytes]);
  return out;
}

// A small scanner (8 x 1 boards of 2 x 2 DUs of 8 x 8 crystals, 64-pixel flood maps) so a
// test acquisition and its tables are a few hundred kilobytes.
inline std::filesystem::path write_small_config(const std::filesystem::path& dir) {
  const std::filesystem::path file = dir / "small.yaml";
  std::ofstream out(file);
  out << "scanner:\n"
         "  bdm_transaxial: 8\n  bdm_axial: 1\n  du_transaxial: 2\n  du_axial: 2\n"
         "  crystal_transaxial: 8\n  crystal_axial: 8\n  position_size: 64\n"
         "  tick_ps: 15.625\n  ring_radius_mm: 40.0\n"
         "calibration:\n  position_lut: none.npy\n  energy_correction: none.npy\n";
  return file;
}

inline std::filesystem::path default_config() {
  return std::filesystem::path(PETDAQ_SOURCE_DIR) / "config" / "petdaq.yaml";
}

}  // namespace petdaq::sim::testing

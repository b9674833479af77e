// A scratch directory per test, and functions that read what petdaq-sim wrote.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "proto/frame.h"
#include "tools/sim/sim.h"
#include "tools/sim/truth.h"

namespace petdaq::sim::testing {

class ScratchDir {
 public:
  ScratchDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::temp_directory_path() /
            ("petdaq-sim-" + std::string(info->test_suite_name()) + "-" + info->name() + "-" +
             std::to_string(::getpid()));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline std::vector<std::uint8_t> read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline std::vector<FrameFields> read_frames(const std::filesystem::path& p) {
  const std::vector<std::uint8_t> bytes = read_file(p);
  std::vector<FrameFields> out(bytes.size() / kFrameBytes);
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = decode_frame(&bytes[i * kFrameBytes]);
  return out;
}

inline std::vector<TruthRecord> read_truth(const std::filesystem::path& p) {
  const std::vector<std::uint8_t> bytes = read_file(p);
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

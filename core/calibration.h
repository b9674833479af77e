// Calibration tables (DESIGN section 3) and the NumPy .npy format 1.0 they are stored in.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/dead_time.h"
#include "core/geometry.h"

namespace petdaq {

struct Settings;

// A refused .npy or calibration file; what() names the file and the problem.
class CalibrationError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One .npy array: little-endian, C order; dtype as NumPy writes it ("|u1", "<f4", "<i4").
struct NpyArray {
  std::string dtype;
  std::vector<std::size_t> shape;
  std::vector<std::uint8_t> data;  // element bytes, C order

  std::size_t element_count() const;
};

NpyArray read_npy(const std::filesystem::path& file);
void write_npy(const std::filesystem::path& file, const std::string& dtype,
               const std::vector<std::size_t>& shape, const void* data, std::size_t bytes);

template <class T>
struct NpyDtype;
template <>
struct NpyDtype<std::uint8_t> {
  static constexpr const char* name = "|u1";
};
template <>
struct NpyDtype<float> {
  static constexpr const char* name = "<f4";
};
template <>
struct NpyDtype<std::int32_t> {
  static constexpr const char* name = "<i4";
};

template <class T>
void write_npy(const std::filesystem::path& file, const std::vector<std::size_t>& shape,
               const std::vector<T>& values) {
  write_npy(file, NpyDtype<T>::name, shape, values.data(), values.size() * sizeof(T));
}

// Reads `file` and checks its dtype and shape; the error names the file, the expected and
// the found shape or dtype.
template <class T>
std::vector<T> read_npy_checked(const std::filesystem::path& file,
                                const std::vector<std::size_t>& expected_shape);

struct Calibration {
  std::vector<std::uint8_t> position_lut;  // [bdm][du][y][x]: flood-map label
  std::vector<float> energy_correction;    // [bdm][du][local crystal][bins]
  std::uint32_t energy_bins = 0;
  std::uint32_t energy_bin_width = 10;
  std::vector<std::int32_t> time_offsets;  // [crystal], ticks; empty when not configured
  std::int32_t min_time_offset = 0;        // over the table (0 when none)
  std::int32_t max_time_offset = 0;
  DeadTimeModel dead_time;                 // kind none when not configured
};

// Loads the tables the settings name and checks them against the geometry.
Calibration load_calibration(const Settings& settings);

}  // namespace petdaq

// The .npy reader on arbitrary files: a table or a CalibrationError naming the file.
#include <cstdint>
#include <cstdlib>

#include "core/calibration.h"
#include "fuzz_file.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto path = petdaq::fuzz::input_file("table.npy", data, size);
  try {
    const petdaq::NpyArray a = petdaq::read_npy(path);
    std::size_t elements = 1;
    for (std::size_t d : a.shape) elements *= d;
    if (a.element_count() != elements) std::abort();
    (void)petdaq::read_npy_checked<float>(path, a.shape);
  } catch (const petdaq::CalibrationError&) {
  }
  return 0;
}

// The readers that take a path get the fuzzer's bytes through a file of their own in
// /dev/shm (or the temp directory), written afresh for each input.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace petdaq::fuzz {

inline std::filesystem::path input_file(const char* name, const std::uint8_t* data, std::size_t size) {
  static const std::filesystem::path dir = [] {
    std::error_code ec;
    const std::filesystem::path shm = "/dev/shm";
    return std::filesystem::is_directory(shm, ec) ? shm : std::filesystem::temp_directory_path();
  }();
  const auto path = dir / ("petdaq-fuzz-" + std::to_string(getpid()) + "-" + name);
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path;
}

}  // namespace petdaq::fuzz

#include "tests/support/scratch_dir.h"

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <system_error>

namespace petdaq::test {

ScratchDir::ScratchDir(std::string_view label) {
  std::string pattern =
      (std::filesystem::temp_directory_path() / ("petdaq-" + std::string(label) + "-XXXXXX"))
          .string();
  if (::mkdtemp(pattern.data()) == nullptr)
    throw std::system_error(errno, std::generic_category(), "mkdtemp " + pattern);
  path_ = pattern;
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::filesystem::path ScratchDir::write(const std::string& name, std::string_view text) const {
  const std::filesystem::path p = path_ / name;
  std::ofstream out(p, std::ios::binary);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!out) throw std::runtime_error("cannot write " + p.string());
  return p;
}

}  // namespace petdaq::test

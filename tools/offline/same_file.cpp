#include "same_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace petdaq {

void refuse_output_that_is_input(std::FILE* input, const std::filesystem::path& input_path,
                                 const std::filesystem::path& output_path) {
  struct stat in {};
  if (fstat(fileno(input), &in) != 0)
    throw std::runtime_error(input_path.string() + ": " + std::strerror(errno));
  struct stat out {};
  if (stat(output_path.c_str(), &out) != 0) return;
  if (in.st_dev == out.st_dev && in.st_ino == out.st_ino)
    throw std::invalid_argument("--output " + output_path.string() + " is the input file " +
                                input_path.string() + "; refusing to overwrite it");
}

}  // namespace petdaq

// No petdaq program writes over one of its own inputs: an output is refused when it is an
// input file itself (same device and inode: the same path, another spelling, a symlink or a
// hard link). One helper for every program that writes a file (docs/tools.md).
#pragma once

#include <sys/stat.h>

#include <filesystem>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

namespace petdaq::cli {

// The message for a usage error when `output` is one of `inputs` (empty paths are skipped;
// an output that does not exist yet is never an input), or nullopt.
inline std::optional<std::string> output_is_an_input(
    std::string_view option, const std::filesystem::path& output,
    std::initializer_list<std::pair<std::string_view, std::filesystem::path>> inputs) {
  struct stat out {};
  if (output.empty() || ::stat(output.c_str(), &out) != 0) return std::nullopt;
  for (const auto& [what, path] : inputs) {
    struct stat in {};
    if (path.empty() || ::stat(path.c_str(), &in) != 0) continue;
    if (in.st_dev == out.st_dev && in.st_ino == out.st_ino)
      return std::string(option) + " " + output.string() + " is the " + std::string(what) +
             " file " + path.string() + "; refusing to overwrite it";
  }
  return std::nullopt;
}

}  // namespace petdaq::cli

// petdaq-offline must never write over its input: the output is refused when it is the
// input file itself (same device and inode: the same path, a symlink or a hard link).
#pragma once

#include <cstdio>
#include <filesystem>

namespace petdaq {

// `input` is the opened input; throws std::invalid_argument naming both paths when `output`
// is the same file. An output that does not exist yet is never the input.
void refuse_output_that_is_input(std::FILE* input, const std::filesystem::path& input_path,
                                 const std::filesystem::path& output_path);

}  // namespace petdaq

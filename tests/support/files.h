// A whole file read into memory, as a string (text, or bytes to edit and write back) or as
// bytes; empty when it cannot be opened.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace petdaq::test {

std::string read_text(const std::filesystem::path& p);
std::vector<std::uint8_t> read_bytes(const std::filesystem::path& p);

}  // namespace petdaq::test

// Names of the files the daemon writes: petdaq-<UTC time>-<suffix> in a directory, the time
// in the compact ISO 8601 form (20261123T181500Z), so that a directory sorts by time.
#pragma once

#include <ctime>
#include <filesystem>
#include <string>
#include <string_view>

namespace petdaq::daemon {

inline std::filesystem::path stamped_file(const std::filesystem::path& directory,
                                          std::string_view suffix) {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &utc);
  return directory / ("petdaq-" + std::string(stamp) + "-" + std::string(suffix));
}

}  // namespace petdaq::daemon

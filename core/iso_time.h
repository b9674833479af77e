// A wall-clock time (nanoseconds since 1970, UTC) as ISO 8601 to the second,
// "2026-11-26T21:20:46Z": how the run catalogue and its readers print times.
#pragma once

#include <cstdint>
#include <ctime>
#include <string>

namespace petdaq {

inline std::string iso_time(std::uint64_t unix_ns) {
  const std::time_t t = static_cast<std::time_t>(unix_ns / 1'000'000'000);
  std::tm utc{};
  gmtime_r(&t, &utc);
  char out[32];
  std::strftime(out, sizeof out, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return out;
}

}  // namespace petdaq

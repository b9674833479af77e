// The ZeroMQ topics petdaqd publishes (DESIGN section 7): the first frame of every message.
// The daemon, the tools that subscribe and the tests take the names from here; the Python
// package (python/petdaq/live.py) and petdaq-qa keep their own copies of these strings.
#pragma once

#include <array>
#include <string_view>

namespace petdaq::topic {

inline constexpr std::string_view prompts = "coinc.prompt";
inline constexpr std::string_view delayed = "coinc.delayed";
inline constexpr std::string_view rates = "rates";
inline constexpr std::string_view singles = "singles";
inline constexpr std::string_view histograms = "histograms";
inline constexpr std::string_view deadtime = "deadtime";
inline constexpr std::string_view image = "image";
inline constexpr std::string_view acquisition = "acquisition";
inline constexpr std::array<std::string_view, 8> all = {prompts,    delayed,  rates, singles,
                                                        histograms, deadtime, image, acquisition};

}  // namespace petdaq::topic

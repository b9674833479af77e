// The coincidence settings' choices (DESIGN section 5: window edge, window mode, multiples
// policy), apart from the rest of core/settings.h so that the code nvcc compiles
// (core/coincidence_params.h) needs no more of the settings than these. Their names in the
// configuration are in core/settings.h (kWindowEdgeNames, kWindowModeNames, kPolicyNames).
#pragma once

#include <cstdint>

namespace petdaq {

enum class WindowEdge : std::uint8_t { closed, half_open };
enum class WindowMode : std::uint8_t { first_open, every_single };
enum class Policy : std::uint8_t {
  kill_multiples,
  take_all_goods,
  take_winner_of_goods,
  take_winner_if_good,
  take_winner_if_all_good,
  kill_all_if_multiple_goods,
};

}  // namespace petdaq

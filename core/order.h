// The (time, crystal, energy) order of DESIGN section 5 that the coincidence engine
// expects (core/coincidence.h). Implemented in core/order.cpp.
#pragma once

#include <cstddef>

#include "proto/records.h"

namespace petdaq {

// Sorts singles into the (time, crystal, energy) order. `scratch` has room for n singles.
// Fast on the usual input (a few nearly-ordered runs), correct on any order.
void sort_singles(Single* singles, std::size_t n, Single* scratch);

}  // namespace petdaq

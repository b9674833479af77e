// The exports' crystal positions: the rule of core/crystal_position.h.
#pragma once

#include "core/crystal_position.h"

namespace petdaq::exporter {
using petdaq::crystal_place;
using petdaq::CrystalPlace;
}  // namespace petdaq::exporter

// What a SIGHUP does with the re-read configuration (DESIGN section 9): the sections that
// may change while running are applied, the others are reported as needing a restart.
#pragma once

#include <string>
#include <vector>

#include "core/settings.h"

namespace petdaq::daemon {

// The keys of DESIGN section 9 that a SIGHUP applies; the others need a restart.
struct ReloadPlan {
  Settings applied;                  // the running settings with the live keys replaced
  std::vector<std::string> live;     // sections applied with a new run
  std::vector<std::string> instant;  // sections applied at once, the run going on (alarms)
  std::vector<std::string> restart;  // sections that changed but need a restart
};

// Sections are compared with the settings structs' operator==, so a key added to a section
// is noticed without being listed here.
ReloadPlan plan_reload(const Settings& running, const Settings& reread);

}  // namespace petdaq::daemon

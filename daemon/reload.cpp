#include "daemon/reload.h"

namespace petdaq::daemon {

ReloadPlan plan_reload(const Settings& running, const Settings& reread) {
  ReloadPlan plan;
  plan.applied = running;
  auto live = [&](const char* name, auto& to, const auto& from) {
    if (to != from) {
      to = from;
      plan.live.push_back(name);
    }
  };
  live("energy_window", plan.applied.energy_window, reread.energy_window);
  live("coincidence", plan.applied.coincidence, reread.coincidence);
  if (plan.applied.alarms != reread.alarms) {
    plan.applied.alarms = reread.alarms;
    plan.instant.push_back("alarms");
  }
  auto restart = [&](const char* name, const auto& a, const auto& b) {
    if (a != b) plan.restart.push_back(name);
  };
  restart("scanner", running.scanner, reread.scanner);
  restart("calibration", running.calibration, reread.calibration);
  restart("frame", running.frame, reread.frame);
  restart("stream", running.stream, reread.stream);
  restart("input", running.input, reread.input);
  restart("output", running.output, reread.output);
  restart("log", running.log, reread.log);
  restart("backend", running.backend, reread.backend);
  restart("backend_threads", running.backend_threads, reread.backend_threads);
  restart("cpus", running.cpus, reread.cpus);
  return plan;
}

}  // namespace petdaq::daemon

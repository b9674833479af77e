// systemd's notify protocol (sd_notify): READY=1 once sockets are bound and the backend is
// up, WATCHDOG=1 from the worker's progress, STATUS= with the current rates, STOPPING=1
// and RELOADING=1 around the life-cycle steps. Harmless when not run by systemd.
#pragma once

#include <chrono>
#include <string>

namespace petdaq::daemon {

void notify_ready();
void notify_stopping();
void notify_reloading();
void notify_status(const std::string& status);
void notify_watchdog();
// The interval at which WATCHDOG=1 must come (half of WatchdogSec), or zero when the
// service runs without a watchdog.
std::chrono::microseconds watchdog_interval();
// True when stderr is the systemd journal's stream (JOURNAL_STREAM names its device and
// inode): the journal stamps every line itself and takes a priority per line.
bool stderr_is_journal();

}  // namespace petdaq::daemon

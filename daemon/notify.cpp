#include "daemon/notify.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include <systemd/sd-daemon.h>

namespace petdaq::daemon {

void notify_ready() { sd_notify(0, "READY=1"); }
void notify_stopping() { sd_notify(0, "STOPPING=1"); }
void notify_reloading() { sd_notify(0, "RELOADING=1"); }
void notify_status(const std::string& status) { sd_notifyf(0, "STATUS=%s", status.c_str()); }
void notify_watchdog() { sd_notify(0, "WATCHDOG=1"); }

std::chrono::microseconds watchdog_interval() {
  std::uint64_t usec = 0;
  if (sd_watchdog_enabled(0, &usec) <= 0) return std::chrono::microseconds(0);
  return std::chrono::microseconds(usec / 2);
}

}  // namespace petdaq::daemon

namespace petdaq::daemon {

bool stderr_is_journal() {
  const char* stream = std::getenv("JOURNAL_STREAM");
  if (!stream) return false;
  unsigned long long dev = 0, ino = 0;
  if (std::sscanf(stream, "%llu:%llu", &dev, &ino) != 2) return false;
  struct stat st {};
  if (fstat(STDERR_FILENO, &st) != 0) return false;
  return static_cast<unsigned long long>(st.st_dev) == dev &&
         static_cast<unsigned long long>(st.st_ino) == ino;
}

}  // namespace petdaq::daemon

// Where the daemon's busy threads run (DESIGN section 9, `cpus`): names for `top -H`,
// `ps -L` and /proc/<pid>/task/<tid>/comm, and CPU lists in taskset's syntax ("8-11,14").
#pragma once

#include <pthread.h>
#include <sched.h>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

namespace petdaq {

// Names the calling thread; Linux keeps 15 characters, longer names are cut.
inline void name_this_thread(const std::string& name) {
  char cut[16];
  std::snprintf(cut, sizeof cut, "%s", name.c_str());
  pthread_setname_np(pthread_self(), cut);
}

// The CPUs of a taskset list in its order, into `out` ("" gives none); false when it is
// not one (a part that is not N or N-M with N <= M, or a CPU past CPU_SETSIZE).
inline bool parse_cpu_list(const std::string& list, std::vector<int>& out) {
  out.clear();
  if (list.empty()) return true;
  if (list.back() == ',') return false;
  std::stringstream in(list);
  std::string part;
  auto number = [](const std::string& t, long& v) {
    if (t.empty() || t.size() > 6 || t.find_first_not_of("0123456789") != std::string::npos) return false;
    v = std::stol(t);
    return true;
  };
  while (std::getline(in, part, ',')) {
    const auto dash = part.find('-');
    const std::string lo_text = part.substr(0, dash);
    const std::string hi_text = dash == std::string::npos ? lo_text : part.substr(dash + 1);
    long lo = 0, hi = 0;
    if (!number(lo_text, lo) || !number(hi_text, hi) || hi < lo || hi >= CPU_SETSIZE) return false;
    for (long c = lo; c <= hi; ++c) out.push_back(static_cast<int>(c));
  }
  return true;
}
// The CPUs of a list the settings have checked (none where it is not one).
inline std::vector<int> cpu_list(const std::string& list) {
  std::vector<int> out;
  if (!parse_cpu_list(list, out)) out.clear();
  return out;
}

// The CPUs of `cpus` this process may not run on (its affinity mask: taskset, systemd's
// CPUAffinity=, a cgroup's cpuset); empty when all are allowed.
inline std::vector<int> cpus_not_allowed(const std::vector<int>& cpus) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return cpus;
  std::vector<int> out;
  for (int c : cpus)
    if (!CPU_ISSET(c, &allowed)) out.push_back(c);
  return out;
}

// The calling thread on cpus[index % cpus.size()] (nothing for an empty list); false when
// the kernel refused.
inline bool pin_this_thread(const std::vector<int>& cpus, std::size_t index) {
  if (cpus.empty()) return true;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpus[index % cpus.size()], &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

// The calling thread on any CPU of `cpus` (nothing for an empty list).
inline bool confine_this_thread(const std::vector<int>& cpus) {
  if (cpus.empty()) return true;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) CPU_SET(c, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

}  // namespace petdaq

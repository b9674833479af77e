// What sets a host's pace, for benchmarks that compare hosts (petdaq-bench-engine,
// petdaqd_bench): steal time from /proc/stat (time a virtual machine's CPU was ready to run
// while its host ran something else), the memory's copy rate, the cores' clock as the kernel
// reports it and whether transparent huge pages are on; and what a thread waited for a CPU
// and a process's CPU time. Header-only; Linux.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <unistd.h>

namespace petdaq::host_probe {

// This thread's time waiting on a run queue for a CPU so far, ns (/proc/thread-self/
// schedstat's second field; 0 where the kernel does not keep it).
inline std::uint64_t run_queue_wait_ns() {
  std::ifstream in("/proc/thread-self/schedstat");
  std::uint64_t on_cpu = 0, waited = 0;
  in >> on_cpu >> waited;
  return in ? waited : 0;
}

// A process's CPU time (user + system, all its threads) so far, seconds (/proc/PID/stat).
inline double process_cpu_seconds(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(in, line);
  const std::size_t close = line.rfind(')');  // the command name may hold spaces
  if (close == std::string::npos) return 0;
  std::istringstream fields(line.substr(close + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i)
    if (i == 14 || i == 15) ticks += std::stod(field);  // utime, stime
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// Time the machine's CPUs spent, from /proc/stat, in USER_HZ ticks: per CPU, all and "steal".
// A run whose threads stall for milliseconds while steal time grows stalled because of the
// host.
struct CpuTimes {
  std::vector<std::uint64_t> total, steal;
};
inline CpuTimes cpu_times() {
  CpuTimes t;
  std::ifstream in("/proc/stat");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("cpu", 0) != 0 || line.size() < 4 || line[3] == ' ') continue;  // cpuN only
    std::istringstream f(line.substr(line.find(' ')));
    std::uint64_t v = 0, sum = 0, steal = 0;
    for (int k = 0; f >> v; ++k) {
      if (k < 8) sum += v;  // user nice system idle iowait irq softirq steal
      if (k == 7) steal = v;
    }
    t.total.push_back(sum);
    t.steal.push_back(steal);
  }
  return t;
}
// Steal time between two readings: the share of all CPUs' time, and of the CPU with most.
inline std::pair<double, double> steal_shares(const CpuTimes& a, const CpuTimes& b) {
  double all_total = 0, all_steal = 0, most = 0;
  for (std::size_t i = 0; i < std::min(a.total.size(), b.total.size()); ++i) {
    const double total = static_cast<double>(b.total[i] - a.total[i]);
    const double steal = static_cast<double>(b.steal[i] - a.steal[i]);
    all_total += total;
    all_steal += steal;
    if (total > 0) most = std::max(most, steal / total);
  }
  return {all_total > 0 ? all_steal / all_total : 0.0, most};
}

// The memory's copy rate in GB/s (bytes copied per second) with `threads` threads, each
// copying its own 256 MiB, pages touched first, best of three passes.
inline double copy_rate_gbps(unsigned threads) {
  constexpr std::size_t kBytes = 256u << 20;
  threads = std::max(1u, threads);
  std::vector<std::vector<char>> from(threads), to(threads);
  for (unsigned i = 0; i < threads; ++i) {
    from[i].assign(kBytes, static_cast<char>(i + 1));
    to[i].assign(kBytes, 0);
  }
  double best = 0;
  for (int pass = 0; pass < 3; ++pass) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> copies;
    for (unsigned i = 1; i < threads; ++i)
      copies.emplace_back([&, i] { std::memcpy(to[i].data(), from[i].data(), kBytes); });
    std::memcpy(to[0].data(), from[0].data(), kBytes);
    for (std::thread& t : copies) t.join();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, static_cast<double>(kBytes) * threads / s / 1e9);
  }
  return best;
}

// The core's own speed, apart from memory: nanoseconds per step of a dependent integer loop
// (a xorshift step and an add), best of three runs of 10^8 steps on the calling thread. Its
// ratio between two hosts is the ratio of their cores' clocks where the cores are alike.
inline double core_step_ns() {
  double best = 1e30;
  for (int run = 0; run < 3; ++run) {
    const auto t0 = std::chrono::steady_clock::now();
    std::uint64_t x = 88172645463325252ull + static_cast<std::uint64_t>(run), acc = 0;
    for (long i = 0; i < 100000000; ++i) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      acc += x * 3 + (x >> 5);
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    volatile std::uint64_t sink = acc;  // keeps the loop
    (void)sink;
    best = std::min(best, s * 10.0);  // ns per step: s / 1e8 * 1e9
  }
  return best;
}

// The first line of a text file, or "unknown".
inline std::string first_line_of(const char* path) {
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line)) return "unknown";
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return line;
}

// The mean of the cores' "cpu MHz" in /proc/cpuinfo (0 where it has none; a virtual machine
// often reports its nominal clock, whatever the cores run at).
inline double mean_cpu_mhz() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  double sum = 0;
  int n = 0;
  while (std::getline(in, line))
    if (line.rfind("cpu MHz", 0) == 0)
      if (const auto colon = line.find(':'); colon != std::string::npos) {
        sum += std::atof(line.c_str() + colon + 1);
        ++n;
      }
  return n ? sum / n : 0;
}

// One line: the memory's copy rate on 1 and on `threads` threads, the core's loop step, the
// clock, huge pages.
inline void print_host(unsigned threads) {
  threads = std::max(1u, threads);
  const double one = copy_rate_gbps(1);
  const double many = threads > 1 ? copy_rate_gbps(threads) : one;
  std::printf("host: memory copy %.1f GB/s on 1 thread, %.1f GB/s on %u; a dependent integer "
              "loop %.3f ns a step; cores at %.0f MHz (/proc/cpuinfo mean); transparent huge "
              "pages: %s\n",
              one, many, threads, core_step_ns(), mean_cpu_mhz(),
              first_line_of("/sys/kernel/mm/transparent_hugepage/enabled").c_str());
}

}  // namespace petdaq::host_probe

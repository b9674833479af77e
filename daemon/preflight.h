// Start-up checks that need the machine, not only the file (docs/daemon.md, "Start-up
// checks"): endpoints that can be bound, nobody else on them, the sink directory,
// the backend, and buffer sizes against memory and limits. `petdaqd --check-config` runs all
// of them; the daemon runs the size checks before it maps anything.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/calibration.h"
#include "core/settings.h"

namespace petdaq::daemon {

struct Problem {
  std::string text;        // "<key>: <reason>"
  bool in_use = false;     // another process holds the resource: may clear by itself
};

// Who serves an ipc:// endpoint already ("ipc endpoint ... is served by another process"),
// or nullopt when it is free (no socket file, or a stale one nobody listens on) or not ipc.
std::optional<std::string> ipc_endpoint_in_use(const std::string& endpoint);

// Whether another socket holds a UDP address:port: a probe bound without SO_REUSEPORT fails
// even where every holder set SO_REUSEPORT. Port 0 is never in use.
std::optional<std::string> udp_port_in_use(const UdpEndpoint& endpoint);

// The memory the ring, the engine buffers and the outputs take (bytes), as each owner reports
// it (memory_bytes): the engine is the backend `kind` would give on this machine (the
// configuration's `backend` when none is named) and the slicer.
struct MemoryPlan {
  std::uint64_t ring_bytes = 0;
  std::uint64_t engine_bytes = 0;
  std::uint64_t message_bytes = 0;  // output.zmq.message_buffer_bytes
  // What libzmq may hold for subscribers outside the arena: output.zmq.held_bytes_max
  // (docs/daemon.md, "Memory of the outputs").
  std::uint64_t held_bytes = 0;
  // The other outputs' own memory, as each reports it (memory_bytes): the live histograms'
  // and image's encoded bodies and the image's sliding window (daemon/worker_views.h), the
  // raw capture's and the list-mode file sink's write buffers.
  std::uint64_t output_bytes = 0;
  std::uint64_t total() const {
    return ring_bytes + engine_bytes + message_bytes + held_bytes + output_bytes;
  }
};
MemoryPlan memory_plan(const Settings& s, std::optional<BackendKind> kind = std::nullopt);

// Bytes this process may use: the least of physical memory, the cgroup's memory.max and
// RLIMIT_AS / RLIMIT_DATA; `source` says which one it was.
std::uint64_t memory_limit_bytes(std::string& source);

// Buffer sizes against memory (cheap: run before mapping anything).
std::vector<Problem> check_sizes(const Settings& s, std::optional<BackendKind> kind = std::nullopt);
// The `cpus` lists (DESIGN section 9): every CPU one names must be one this process may run
// on (taskset, systemd's CPUAffinity=, a cgroup's cpuset). Appends a problem per list.
void check_cpus(const Settings& s, std::vector<Problem>& out);
// Everything: endpoints, sink directory, backend, sizes, CPUs.
std::vector<Problem> preflight(const Settings& s, BackendKind backend);
// Not refusals: values that start but are probably wrong (some non-finite calibration
// entries: crystals whose singles are all energy-rejected, which may be meant).
std::vector<std::string> preflight_warnings(const Calibration& calibration);
// Refusals of the calibration: an energy correction with no finite entry at all.
std::vector<Problem> calibration_problems(const Calibration& calibration);

}  // namespace petdaq::daemon

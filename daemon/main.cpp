// petdaqd: UDP frames in, coincidences out over ZeroMQ (DESIGN section 1).
//
//   receiver threads --(sealed ring chunks)--> worker: slicer + backend --> publisher
//
// Start-up problems exit 2 (configuration, calibration) or 1 (anything else), with a
// message. SIGTERM/SIGINT drain and exit 0; SIGHUP re-reads the configuration.
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <optional>

#include <fmt/format.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/sinks/systemd_sink.h>
#include <spdlog/spdlog.h>

#include "backends/select_backend.h"
#include "core/calibration.h"
#include "core/counters.h"
#include "core/settings.h"
#include "core/thread_placement.h"
#include "daemon/acquisition.h"
#include "daemon/catalogue.h"
#include "daemon/control.h"
#include "daemon/host_ring.h"
#include "daemon/metrics.h"
#include "daemon/notify.h"
#include "daemon/options.h"
#include "daemon/preflight.h"
#include "daemon/publisher.h"
#include "daemon/rate_limited_log.h"
#include "daemon/receiver.h"
#include "daemon/worker.h"

using namespace petdaq;
using namespace petdaq::daemon;

namespace {

struct Loaded {
  Settings settings;
  Calibration calibration;
};

// Configuration and calibration, or the reasons they were refused (exit code 2).
std::optional<Loaded> load(const std::filesystem::path& config) {
  try {
    Loaded l;
    l.settings = load_settings(config);
    l.calibration = load_calibration(l.settings);
    return l;
  } catch (const std::exception& e) {
    fmt::print(stderr, "petdaqd: configuration refused: {}\n", e.what());
    return std::nullopt;
  }
}

std::uint64_t unix_ns_now() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

double gib(std::uint64_t bytes) { return static_cast<double>(bytes) / (1ull << 30); }

// --check-config: everything a start would meet that can be known now. Exit 0, 2 for a
// problem of the configuration or the machine, 1 when the only problems are endpoints that
// another process holds (they may clear by themselves).
int check_config(const Loaded& loaded, const Options& opt) {
  const auto problems = preflight(loaded.settings, opt.backend.value_or(loaded.settings.backend));
  if (problems.empty()) {
    const MemoryPlan plan = memory_plan(loaded.settings, opt.backend);
    std::string source;
    const std::uint64_t limit = memory_limit_bytes(source);
    fmt::print("petdaqd: {} is valid (calibration loaded, endpoints free); buffers {:.2f} GiB "
               "(ring {:.2f} GiB, engine {:.2f} GiB, messages {:.2f} GiB, held for subscribers at "
               "most {:.2f} GiB, other outputs {:.2f} GiB) of {:.2f} GiB ({})\n",
               opt.config.string(), gib(plan.total()), gib(plan.ring_bytes),
               gib(plan.engine_bytes), gib(plan.message_bytes), gib(plan.held_bytes),
               gib(plan.output_bytes), gib(limit), source);
    return 0;
  }
  bool only_in_use = true;
  for (const Problem& p : problems) {
    fmt::print(stderr, "petdaqd: configuration refused: {}\n", p.text);
    only_in_use = only_in_use && p.in_use;
  }
  return only_in_use ? 1 : 2;
}

int run(Loaded loaded, const Options& opt) {
  const Settings& s = loaded.settings;
  spdlog::set_level(spdlog::level::from_str(s.log.level));
  // Signals go to the main thread only: every thread started below inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&signals, sig);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  Counters counters(s.scanner.bdm_transaxial * s.scanner.bdm_axial);
  // The GPU backend copies whole ring chunks to the device: it needs memory CUDA page-locked.
  const BackendKind backend = opt.backend.value_or(s.backend);
  LockedPageAllocator locked;
  const std::unique_ptr<HostAllocator> pinned = make_stage_allocator(backend);
  HostAllocator& allocator = pinned ? *pinned : static_cast<HostAllocator&>(locked);
  HostRing ring(s.input.ring_chunk_bytes, s.input.ring_chunks, s.input.receiver_threads, allocator);
  spdlog::info("host ring: {} chunks of {} bytes ({})", ring.chunk_count(), ring.chunk_bytes(),
               allocator.kind());
  // Before the publisher: libzmq lets go of the bodies it still holds when the socket closes.
  std::unique_ptr<MessageArena> arena;
  if (s.output.zmq.message_buffer_bytes > 0)
    arena = std::make_unique<MessageArena>(s.output.zmq.message_buffer_bytes, allocator);
  Publisher publisher(s.output.zmq, counters, arena.get());
  spdlog::info("publishing on {}", publisher.endpoint());
  // Before the worker, whose thread hands them every rates document.
  std::unique_ptr<MetricsExporter> metrics;
  if (!s.output.metrics.listen.empty()) {
    metrics = std::make_unique<MetricsExporter>(s.output.metrics.listen);
    spdlog::info("Prometheus metrics on http://{}/metrics", s.output.metrics.listen);
  }
  // The run catalogue outlives the worker and the control thread that tell it things.
  std::unique_ptr<Catalogue> catalogue;
  if (!s.output.catalogue.path.empty()) {
    catalogue = std::make_unique<Catalogue>(s.output.catalogue.path, counters, PETDAQ_VERSION);
    spdlog::info("run catalogue {}", s.output.catalogue.path.string());
  }
  AcquisitionControl acquisitions(catalogue ? catalogue->next_acquisition_id() : 1);
  if (catalogue)
    acquisitions.on_change([c = catalogue.get()](const Acquisition& a, const char* what) {
      c->acquisition_changed(a, what);
    });
  std::unique_ptr<ControlServer> control;
  if (!s.output.control.endpoint.empty()) {
    control = std::make_unique<ControlServer>(s.output, acquisitions, counters);
    spdlog::info("acquisition control on {}", s.output.control.endpoint);
  }
  Worker worker(s, std::move(loaded.calibration), backend, ring, counters, publisher,
                opt.print_rates, arena.get());
  spdlog::info("{}", worker.backend_explanation());
  worker.set_acquisitions(&acquisitions);
  worker.set_catalogue(catalogue.get());
  worker.set_rates_observer([m = metrics.get(), c = control.get()](const std::string& json) {
    if (m) m->update(json);
    if (c) c->update_rates(json);
  });
  Receiver receiver(s.input, make_source_rule(s), max_chunk_span_ticks(s), ring, counters);

  // DESIGN section 9, `cpus`: checked at start-up (check_cpus).
  worker.start(cpu_list(s.cpus.worker));
  receiver.start(cpu_list(s.cpus.receivers));
  notify_ready();
  spdlog::info("petdaqd {} ready", PETDAQ_VERSION);

  for (;;) {
    // Once a second without a signal: print what the data path's warnings held back.
    const timespec tick{1, 0};
    const int sig = sigtimedwait(&signals, nullptr, &tick);
    if (sig < 0) {
      flush_held_back_warnings();
      continue;
    }
    if (sig != SIGHUP) break;
    notify_reloading();
    spdlog::info("SIGHUP: re-reading {}", opt.config.string());
    try {
      worker.reload(load_settings(opt.config));
    } catch (const std::exception& e) {
      spdlog::error("reload refused, keeping the running configuration: {}", e.what());
    }
    notify_ready();
  }

  notify_stopping();
  spdlog::info("stopping: draining the ring");
  if (control) control->close();  // no command between here and the end
  if (const auto open = acquisitions.current()) {
    const Acquisition a = acquisitions.stop(unix_ns_now(), "daemon stopped");
    spdlog::warn("acquisition {} '{}' ended by the daemon's stop (end_reason \"daemon stopped\")",
                 a.id, a.name);
  }
  receiver.stop();
  worker.stop();
  spdlog::info("final counters: {}", worker.final_report());
  spdlog::info("worker phases: {}", worker.phase_report());
  return worker.failed() ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Load every GPU kernel when CUDA starts, not at its first launch: a lazily loaded kernel
  // would stall the first slices while the ring fills (no effect without the GPU backend).
  ::setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  // Under systemd the journal stamps each line: log to it with the level as the priority and
  // no second timestamp.
  spdlog::set_default_logger(stderr_is_journal() ? spdlog::systemd_logger_mt("petdaqd", "petdaqd")
                                                 : spdlog::stderr_logger_mt("petdaqd"));
  // A file-size limit (RLIMIT_FSIZE) makes a write fail, counted by the file sink, instead
  // of killing the daemon.
  std::signal(SIGXFSZ, SIG_IGN);
  Options opt;
  if (const auto rc = parse_options(argc, argv, opt)) return *rc;

  std::optional<Loaded> loaded = load(opt.config);
  if (!loaded) return 2;
  for (const std::string& w : preflight_warnings(loaded->calibration))
    fmt::print(stderr, "petdaqd: warning: {}\n", w);
  if (const auto problems = calibration_problems(loaded->calibration); !problems.empty()) {
    fmt::print(stderr, "petdaqd: configuration refused: {}\n", problems.front().text);
    return 2;
  }
  if (opt.check_config) return check_config(*loaded, opt);
  // Sizes first: a ring or buffer larger than memory fails here, by key, not after mapping;
  // and CPUs the daemon may not run on.
  auto problems = check_sizes(loaded->settings, opt.backend);
  check_cpus(loaded->settings, problems);
  if (!problems.empty()) {
    fmt::print(stderr, "petdaqd: configuration refused: {}\n", problems.front().text);
    return 2;
  }
  try {
    return run(std::move(*loaded), opt);
  } catch (const std::exception& e) {
    spdlog::critical("cannot start: {}", e.what());
    return 1;
  }
}

// petdaq-bench-engine: times the CPU order (sort_singles) and coincidence (find_coincidences)
// stages on a simulated acquisition, slice by slice with the carry-over, as the CPU backend
// runs them, and prints the per-core rates next to the CPU backend's target of 25 M frames/s
// per core (DESIGN section 11).
//
// The stream: annihilations at a Poisson rate in the default 12 x 2-BDM scanner, each
// photon detected with probability 0.7 (a single's partner is present 70 % of the time),
// photon pairs in roughly opposite BDMs, ~200 ps time jitter. Each BDM's singles arrive in
// time order up to that jitter, in packets of 560 (one 8 972-byte datagram), and packets of
// all BDMs interleave in the order they fill. Data generation is not timed.
//
// --threads N,N,...: instead, the whole CPU backend (CpuBackend: convert, order,
// coincidences) on raw frames (tools/common/bench_frames.h) in slices of 1 M frames, once
// per thread count (backend_threads), with frames/s, the speed-up over the first count and
// the scaling efficiency; the records of every count must be those of the first.
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "common/cli.h"
#include "core/calibration.h"
#include "core/coincidence.h"
#include "core/cpu_backend.h"
#include "core/geometry.h"
#include "core/order.h"
#include "core/settings.h"
#include "tools/common/bench_frames.h"
#include "tools/common/host_probe.h"

namespace petdaq {
namespace {

constexpr double kTargetFramesPerSecond = 25e6;  // CPU backend, per core (DESIGN 11)

struct Options {
  std::uint64_t singles = 50'000'000;
  double rate_per_s = 20e6;
  double slice_ms = 10.0;
  unsigned repetitions = 5;
  std::size_t packet_singles = 560;
  std::uint64_t seed = 1;
  std::vector<unsigned> threads;  // --threads: the backend sweep
  std::uint64_t frames = 16u << 20;
};

// Returns the exit code when the program should stop here (--help, --version, a usage error).
std::optional<int> parse(int argc, char** argv, Options& o) {
  cli::App app("petdaq-bench-engine",
               "The CPU order + coincidence engine on a simulated stream of singles.");
  app.add_option("--singles", o.singles, "singles to process per repetition")
      ->type_name("N")
      ->check(CLI::PositiveNumber);
  app.add_option("--rate", o.rate_per_s, "simulated singles rate in 1/s")
      ->type_name("SINGLES_PER_S")
      ->check(CLI::PositiveNumber);
  app.add_option("--slice-ms", o.slice_ms, "slice length in ms of acquisition time")
      ->type_name("MS")
      ->check(CLI::PositiveNumber);
  cli::add_repetitions(app, o.repetitions);
  app.add_option("--packet", o.packet_singles, "singles per datagram from one BDM")
      ->type_name("N")
      ->check(CLI::PositiveNumber);
  cli::add_seed(app, o.seed, "random seed");
  app.add_option("--threads", o.threads,
                 "time the whole CPU backend on raw frames instead, once per thread count "
                 "(e.g. 1,2,4,8,16), with the scaling efficiency")
      ->type_name("N,N,...")
      ->delimiter(',')
      ->check(CLI::Range(1u, kMaxBackendThreads));
  app.add_option("--frames", o.frames, "raw frames per run of the --threads sweep")
      ->type_name("N")
      ->check(CLI::PositiveNumber);
  return app.parse_or_exit(argc, argv);
}

// Simulated singles, produced slice by slice in arrival order.
class Stream {
 public:
  Stream(const Settings& s, const Options& o)
      : geometry_(Geometry::from(s.scanner)),
        rng_(o.seed),
        packet_(o.packet_singles),
        jitter_ticks_(200.0 / s.scanner.tick_ps),
        per_bdm_(geometry_.bdm_count()) {
    const double event_rate_per_s = o.rate_per_s / (2.0 * kDetectProbability);
    gap_ = std::exponential_distribution<double>(event_rate_per_s * s.scanner.tick_ps * 1e-12);
  }

  // Appends to `out`, in arrival order, the singles with time < horizon not given before.
  void take_until(std::uint64_t horizon, std::vector<Single>& out) {
    // Events a few jitters past the horizon may still put a photon before it.
    while (next_event_ticks_ < static_cast<double>(horizon) + 10 * jitter_ticks_) emit_event();
    for (auto& q : per_bdm_) q.clear();
    std::size_t kept = 0;
    for (const Single& x : pending_) {
      if (x.time < horizon)
        per_bdm_[geometry_.address_of(x.crystal).bdm].push_back(x);
      else
        pending_[kept++] = x;
    }
    pending_.resize(kept);

    // A packet leaves its BDM when it is full (or the slice ends): order packets by the time
    // of their last single.
    packets_.clear();
    for (std::size_t b = 0; b < per_bdm_.size(); ++b)
      for (std::size_t first = 0; first < per_bdm_[b].size(); first += packet_) {
        const std::size_t last = std::min(per_bdm_[b].size(), first + packet_);
        packets_.push_back({per_bdm_[b][last - 1].time, b, first, last});
      }
    std::sort(packets_.begin(), packets_.end(),
              [](const Packet& a, const Packet& b) { return a.sent_ticks < b.sent_ticks; });
    for (const Packet& p : packets_)
      out.insert(out.end(), per_bdm_[p.bdm].begin() + static_cast<std::ptrdiff_t>(p.first),
                 per_bdm_[p.bdm].begin() + static_cast<std::ptrdiff_t>(p.last));
  }

  std::uint64_t start_ticks() const { return kStartTicks; }

 private:
  static constexpr double kDetectProbability = 0.7;
  static constexpr std::uint64_t kStartTicks = 1'000'000'000;

  struct Packet {
    std::uint64_t sent_ticks;
    std::size_t bdm, first, last;
  };

  std::uint32_t random_crystal(std::uint32_t b_trans) {
    const std::uint32_t b_axial = static_cast<std::uint32_t>(rng_() % geometry_.bdm_axial);
    const std::uint32_t du = static_cast<std::uint32_t>(rng_() % geometry_.du_per_bdm());
    const std::uint32_t local = static_cast<std::uint32_t>(rng_() % geometry_.crystals_per_du());
    return geometry_.crystal_id(b_axial * geometry_.bdm_transaxial + b_trans, du, local);
  }

  float random_energy_keV() {
    // Most photons in the photopeak, a third scattered down to the window's lower edge.
    if (uniform_(rng_) < 0.3) return static_cast<float>(350.0 + 161.0 * uniform_(rng_));
    return static_cast<float>(std::clamp(511.0 + 25.0 * normal_(rng_), 350.0, 650.0));
  }

  void emit_event() {
    next_event_ticks_ += gap_(rng_);
    const std::uint32_t n = geometry_.bdm_transaxial;
    const std::uint32_t b1 = static_cast<std::uint32_t>(rng_() % n);
    const std::uint32_t spread = static_cast<std::uint32_t>(rng_() % 5);  // opposite +- 2
    const std::uint32_t b2 = (b1 + n / 2 + n + spread - 2) % n;
    for (const std::uint32_t b : {b1, b2}) {
      if (uniform_(rng_) >= kDetectProbability) continue;
      const double t = next_event_ticks_ + jitter_ticks_ * normal_(rng_);
      pending_.push_back({static_cast<std::uint64_t>(std::max(0.0, t)), random_crystal(b),
                          random_energy_keV()});
    }
  }

  Geometry geometry_;
  std::mt19937_64 rng_;
  std::size_t packet_;
  double jitter_ticks_;
  double next_event_ticks_ = static_cast<double>(kStartTicks);
  std::exponential_distribution<double> gap_;
  std::uniform_real_distribution<double> uniform_{0.0, 1.0};
  std::normal_distribution<double> normal_{0.0, 1.0};
  std::vector<Single> pending_;
  std::vector<std::vector<Single>> per_bdm_;
  std::vector<Packet> packets_;
};

struct PassResult {
  double sort_s = 0;
  double coinc_s = 0;
  std::uint64_t singles = 0;
  std::uint64_t windows = 0;
  std::uint64_t overflow = 0;
  CoincidenceCounts counts;
};

// first_open windows among singles[0, end) (they start at a chain start).
std::uint64_t count_windows(const Single* s, std::size_t end, const CoincidenceParams& p) {
  std::uint64_t windows = 0;
  for (std::size_t i = 0; i < end;) {
    const std::uint64_t t_open = s[i].time;
    ++windows;
    ++i;
    while (i < end && p.within(t_open, s[i].time)) ++i;
  }
  return windows;
}

PassResult run_pass(const Settings& settings, const Options& o, bool count) {
  using Clock = std::chrono::steady_clock;
  const CoincidenceParams p = CoincidenceParams::from(settings);
  Stream stream(settings, o);
  const std::uint64_t slice_ticks = ps_to_ticks(o.slice_ms * 1e9, settings.scanner.tick_ps);

  std::vector<Single> work;
  std::vector<Single> scratch;
  std::vector<CoincRecord> prompt_storage;
  std::vector<CoincRecord> delayed_storage;
  std::size_t carry = 0;
  std::uint64_t horizon = stream.start_ticks();
  PassResult r;
  while (r.singles < o.singles) {
    horizon += slice_ticks;
    work.resize(carry);
    stream.take_until(horizon, work);
    const std::size_t fresh = work.size() - carry;
    r.singles += fresh;
    const bool final = r.singles >= o.singles;
    scratch.resize(work.size());
    // Room for two records per single, as the CPU backend sizes its buffers.
    prompt_storage.resize(2 * work.size());
    delayed_storage.resize(2 * work.size());
    RecordBuffer prompts{prompt_storage.data(), prompt_storage.size()};
    RecordBuffer delayed{delayed_storage.data(), delayed_storage.size()};

    const auto t0 = Clock::now();
    sort_singles(work.data(), work.size(), scratch.data());
    const auto t1 = Clock::now();
    const std::size_t next = find_coincidences(work.data(), work.size(), p, horizon, final,
                                               prompts, delayed, r.counts);
    const auto t2 = Clock::now();

    r.sort_s += std::chrono::duration<double>(t1 - t0).count();
    r.coinc_s += std::chrono::duration<double>(t2 - t1).count();
    r.overflow += prompts.overflow + delayed.overflow;
    if (count) r.windows += count_windows(work.data(), next, p);
    carry = work.size() - next;
    std::memmove(work.data(), work.data() + next, carry * sizeof(Single));
  }
  return r;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

void print_stage(const char* name, double seconds, std::uint64_t singles) {
  const double ns_per_single = seconds * 1e9 / static_cast<double>(singles);
  const double per_s = static_cast<double>(singles) / seconds;
  std::printf("  %-22s %7.2f ns/single  %8.1f M singles/s per core  %6.2fx of 25 M/s\n", name,
              ns_per_single, per_s / 1e6, per_s / kTargetFramesPerSecond);
}

// --threads: the CPU backend end to end, once per thread count.
int backend_sweep(const Options& o) {
  using Clock = std::chrono::steady_clock;
  constexpr std::uint64_t kChunkFrames = 1u << 20;  // also the slice: one chunk per slice
  Settings s;  // the default scanner and coincidence settings
  s.stream.max_slice_frames = 2 * kChunkFrames;
  s.stream.max_pending_frames = s.stream.max_slice_frames;
  const Calibration cal = bench_frames::flat_calibration(s);
  const std::uint64_t chunks = (o.frames + kChunkFrames - 1) / kChunkFrames;
  std::vector<RawFrame> frames(chunks * kChunkFrames);
  std::vector<std::uint64_t> chunk_start(chunks + 1);
  double t = 1e9;
  for (std::uint64_t c = 0; c < chunks; ++c) {
    chunk_start[c] = static_cast<std::uint64_t>(t);
    t += bench_frames::fill_chunk(s, o.rate_per_s, o.seed, c, t, frames.data() + c * kChunkFrames,
                                  kChunkFrames);
  }
  chunk_start[chunks] = static_cast<std::uint64_t>(t);
  const std::uint64_t margin = static_cast<std::uint64_t>(10 * 200.0 / s.scanner.tick_ps);
  host_probe::print_host(o.threads.empty() ? 1u : *std::max_element(o.threads.begin(), o.threads.end()));
  const host_probe::CpuTimes cpu_before = host_probe::cpu_times();
  std::printf("petdaq-bench-engine --threads: the CPU backend on %llu frames at %.1f M singles/s, "
              "slices of %llu frames, best of %u, %u cores\n",
              static_cast<unsigned long long>(frames.size()), o.rate_per_s / 1e6,
              static_cast<unsigned long long>(kChunkFrames), o.repetitions,
              std::thread::hardware_concurrency());
  std::printf("%8s %14s %9s %11s %12s %10s %8s %8s\n", "threads", "M frames/s", "speed-up",
              "efficiency", "per thread", "convert s", "sort s", "coinc s");
  double first_fps = 0;
  unsigned first_threads = 0;
  std::uint64_t first_hash = 0;
  for (const unsigned threads : o.threads) {
    s.backend_threads = threads;
    CpuBackend backend(s, cal);
    double best_s = 0;
    CpuBackend::StageSeconds best_stage;
    std::uint64_t hash = 0;
    for (unsigned rep = 0; rep < std::max(1u, o.repetitions); ++rep) {
      hash = 1469598103934665603ull;  // FNV-1a over every record, in order (not timed)
      double sec = 0;
      const CpuBackend::StageSeconds before = backend.stage_seconds();
      for (std::uint64_t c = 0; c < chunks; ++c) {
        const auto t0 = Clock::now();
        backend.stage(frames.data() + c * kChunkFrames, kChunkFrames);
        SliceRequest r;
        r.slice_id = c;
        r.run_start = c == 0;
        r.final = c + 1 == chunks;
        r.bound = chunk_start[c + 1] - margin;
        backend.submit(r);
        const SliceResult& out = backend.collect();
        sec += std::chrono::duration<double>(Clock::now() - t0).count();
        for (const auto& [p, n] : {std::pair{out.prompts, out.prompt_count}, {out.delayed, out.delayed_count}}) {
          const auto* b = reinterpret_cast<const std::uint8_t*>(p);
          for (std::size_t i = 0; i < n * sizeof(CoincRecord); ++i) hash = (hash ^ b[i]) * 1099511628211ull;
        }
      }
      if (rep == 0 || sec < best_s) {
        best_s = sec;
        const CpuBackend::StageSeconds& after = backend.stage_seconds();
        best_stage = {after.convert - before.convert, after.sort - before.sort,
                      after.coincidence - before.coincidence};
      }
    }
    const double fps = static_cast<double>(frames.size()) / best_s;
    if (first_threads == 0) {
      first_fps = fps;
      first_threads = threads;
      first_hash = hash;
    }
    const double speedup = fps / first_fps;
    std::printf("%8u %14.2f %8.2fx %10.0f%% %8.2f M/s %10.3f %8.3f %8.3f%s\n", threads,
                fps / 1e6, speedup, 100.0 * speedup * first_threads / threads, fps / threads / 1e6,
                best_stage.convert, best_stage.sort, best_stage.coincidence,
                hash == first_hash ? "" : "  RECORDS DIFFER FROM THE FIRST COUNT");
    if (hash != first_hash) return 1;
  }
  const auto [steal, steal_most] = host_probe::steal_shares(cpu_before, host_probe::cpu_times());
  std::printf("(efficiency: speed-up over the first count per extra thread, 100%% = linear; "
              "target >= 25 M frames/s per core, DESIGN section 11)\n");
  std::printf("steal time during the sweep: %.2f %% of the CPUs' time (%.2f %% on the CPU with "
              "most)\n", 100 * steal, 100 * steal_most);
  return 0;
}

}  // namespace
}  // namespace petdaq

int main(int argc, char** argv) {
  using namespace petdaq;
  Options o;
  if (const auto rc = parse(argc, argv, o)) return *rc;
  if (!o.threads.empty()) return backend_sweep(o);
  const Settings settings;  // the default scanner and coincidence settings
  const CoincidenceParams p = CoincidenceParams::from(settings);
  std::printf(
      "petdaq-bench-engine: %llu singles at %.1f M singles/s, %g ms slices, %u repetitions "
      "(median), window %llu ticks, delayed offset %llu ticks, policy %s, mode %s\n",
      static_cast<unsigned long long>(o.singles), o.rate_per_s / 1e6, o.slice_ms,
      o.repetitions, static_cast<unsigned long long>(p.window_ticks),
      static_cast<unsigned long long>(p.delayed_offset_ticks), to_string(p.policy),
      to_string(p.mode));

  std::vector<double> sort_s, coinc_s, both_s;
  PassResult first;
  for (unsigned rep = 0; rep < o.repetitions; ++rep) {
    const PassResult r = run_pass(settings, o, rep == 0);
    if (rep == 0) {
      first = r;
    } else if (r.counts.prompts != first.counts.prompts ||
               r.counts.delayed != first.counts.delayed) {
      std::fprintf(stderr, "petdaq-bench-engine: repetition %u gave different results\n", rep);
      return 1;
    }
    sort_s.push_back(r.sort_s);
    coinc_s.push_back(r.coinc_s);
    both_s.push_back(r.sort_s + r.coinc_s);
  }

  const double windows = static_cast<double>(first.windows);
  std::printf(
      "  stream: %llu singles, %llu windows, %.2f %% multiple, %llu prompts, %llu delayed, "
      "%llu records overflowed\n",
      static_cast<unsigned long long>(first.singles),
      static_cast<unsigned long long>(first.windows),
      windows > 0 ? 100.0 * static_cast<double>(first.counts.multiples) / windows : 0.0,
      static_cast<unsigned long long>(first.counts.prompts),
      static_cast<unsigned long long>(first.counts.delayed),
      static_cast<unsigned long long>(first.overflow));
  print_stage("sort_singles", median(sort_s), first.singles);
  print_stage("find_coincidences", median(coinc_s), first.singles);
  print_stage("sort + coincidences", median(both_s), first.singles);
  std::printf("  target: the whole CPU path (convert, order, coincidences) at >= 25 M frames/s "
              "per core, i.e. <= 40 ns per frame\n");
  return 0;
}

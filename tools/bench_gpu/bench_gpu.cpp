// petdaq-bench-gpu: the GPU backend from raw frames in pinned host memory to coincidence
// records in pinned host memory, many slices, steady state, next to the pinned host->device
// copy rate measured in the same run (the limit, DESIGN section 11) and the CPU backend on
// a smaller share of the same input. Prints per-stage times per slice (slices run one at a
// time, so that no stage waits for another slice) and the latency of a slice holding
// stream.max_slice_ms of data.
//
// The stream (tools/common/bench_frames.h) in the default 12 x 2-BDM scanner. Frames are
// generated once (in parallel, not timed) into one pinned pool, and each slice is submitted
// straight from its place in the pool. The CPU line runs on each --cpu-threads count.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/cli.h"
#include "core/calibration.h"
#include "core/cpu_backend.h"
#include "core/geometry.h"
#include "core/phase_timer.h"
#include "core/settings.h"
#include "gpu/cuda_support.h"
#include "gpu/gpu_backend.h"
#include "gpu/gpu_stage_times.h"
#include "proto/bytes.h"
#include "proto/frame.h"
#include "tools/common/bench_frames.h"

namespace petdaq {
namespace {

using Clock = std::chrono::steady_clock;

constexpr double kTargetFramesPerSecond = 2.5e9;  // one H100 (DESIGN section 11)
constexpr double kTargetCopyFraction = 0.8;

struct Options {
  double rate_per_s = 200e6;            // singles per second of acquisition
  std::uint64_t pool_frames = 640u << 20;  // frames generated (pinned)
  std::uint64_t cpu_frames = 16u << 20;
  std::vector<unsigned> cpu_threads = {1};  // backend_threads of the CPU line (a sweep)
  std::vector<std::uint64_t> slice_frames = {1u << 20, 16u << 20, 64u << 20};
  unsigned stage_repetitions = 5;
  std::uint64_t seed = 1;
};

// Returns the exit code when the program should stop here (--help, --version, a usage error).
std::optional<int> parse(int argc, char** argv, Options& o) {
  cli::App app("petdaq-bench-gpu",
               "GPU backend throughput next to the pinned copy rate and the CPU backend.");
  app.add_option("--rate", o.rate_per_s, "simulated singles rate in 1/s")
      ->type_name("SINGLES_PER_S")
      ->check(CLI::PositiveNumber);
  app.add_option("--pool-frames", o.pool_frames, "frames generated into pinned memory")
      ->type_name("N")
      ->check(CLI::PositiveNumber);
  app.add_option("--cpu-frames", o.cpu_frames, "frames the CPU backend processes")
      ->type_name("N")
      ->check(CLI::PositiveNumber);
  app.add_option("--cpu-threads", o.cpu_threads,
                 "threads of the CPU backend line, one run each (e.g. 1,2,4,8,16)")
      ->type_name("N,N,...")
      ->delimiter(',')
      ->check(CLI::Range(1u, kMaxBackendThreads));
  app.add_option("--slices", o.slice_frames, "frames per slice to measure")
      ->type_name("N,N,...")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  cli::add_repetitions(app, o.stage_repetitions,
                       "single-slice runs per size for the stage times");
  cli::add_seed(app, o.seed, "random seed");
  return app.parse_or_exit(argc, argv);
}

struct Pool {
  cuda::pinned_unique_ptr<RawFrame> frames;
  std::uint64_t count = 0;
  std::vector<std::uint64_t> event_ticks;  // time of the first event of each chunk
};

constexpr std::uint64_t kChunkFrames = 1u << 20;
constexpr std::uint64_t kStartTicks = 1'000'000'000;

Pool make_pool(const Settings& s, const Options& o) {
  Pool pool;
  pool.count = o.pool_frames;
  pool.frames = cuda::make_pinned<RawFrame>(pool.count);
  const std::uint64_t chunks = (pool.count + kChunkFrames - 1) / kChunkFrames;
  std::vector<double> span(chunks), start(chunks + 1);
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  auto parallel = [&](auto&& body) {
    std::vector<std::thread> workers;
    for (unsigned w = 0; w < threads; ++w)
      workers.emplace_back([&, w] {
        for (std::uint64_t c = w; c < chunks; c += threads) body(c);
      });
    for (auto& t : workers) t.join();
  };
  auto chunk_frames = [&](std::uint64_t c) {
    return std::min(kChunkFrames, pool.count - c * kChunkFrames);
  };
  parallel([&](std::uint64_t c) {
    span[c] = bench_frames::fill_chunk(s, o.rate_per_s, o.seed, c, 0.0, nullptr, chunk_frames(c));
  });
  start[0] = kStartTicks;
  for (std::uint64_t c = 0; c < chunks; ++c) start[c + 1] = start[c] + span[c];
  parallel([&](std::uint64_t c) {
    bench_frames::fill_chunk(s, o.rate_per_s, o.seed, c, start[c], pool.frames.get() + c * kChunkFrames,
                      chunk_frames(c));
  });
  for (std::uint64_t c = 0; c <= chunks; ++c)
    pool.event_ticks.push_back(static_cast<std::uint64_t>(start[c]));
  return pool;
}

// The horizon after frames [0, end): below the first event time of the chunk holding
// frame `end`, minus the jitter margin (each chunk's events start after its start time).
std::uint64_t horizon_at(const Pool& pool, std::uint64_t end, double jitter_ticks) {
  const std::uint64_t chunk = end / kChunkFrames;
  const std::uint64_t t = pool.event_ticks[std::min<std::uint64_t>(chunk, pool.event_ticks.size() - 1)];
  const std::uint64_t margin = static_cast<std::uint64_t>(10 * jitter_ticks);
  return t > margin ? t - margin : 0;
}

struct RunStats {
  double seconds = 0;
  std::uint64_t frames = 0;
  std::uint64_t prompts = 0;
  std::uint64_t delayed = 0;
  std::uint64_t records_overflow = 0;
  std::uint64_t carry_overflow = 0;
  std::vector<GpuStageTimes> stages;
  std::vector<double> latency_ms;  // submit -> collected
  std::vector<double> collected_s;  // since the start, per slice in order
};

// The rate in the middle of a pipelined run, where slices are in flight before and after:
// the frames of the slices collected between the `edge`-th and the `edge`-th from last,
// over the time between those two collections. The whole run's rate also holds the first
// slice's copy before any work, and the last slice's work after the last copy. 0: too few
// slices.
double middle_rate(const RunStats& st, std::uint64_t slice_frames, std::size_t edge) {
  const std::size_t n = st.collected_s.size();
  if (n < 2 * edge + 2) return 0;
  const double span = st.collected_s[n - 1 - edge] - st.collected_s[edge];
  return span > 0 ? static_cast<double>((n - 1 - 2 * edge) * slice_frames) / span : 0;
}

// Streams `slices` slices of `slice_frames` frames through `backend`. pipelined: keep as
// many in flight as the backend allows; otherwise one at a time. Slices start at chunk
// boundaries so that their horizons are exact.
RunStats run(Backend& backend, const Pool& pool, std::uint64_t slice_frames, std::uint64_t slices,
             bool pipelined, double jitter_ticks, std::uint64_t first_frame = 0) {
  RunStats st;
  std::vector<Clock::time_point> submitted;
  submitted.reserve(slices);
  const auto t0 = Clock::now();
  std::uint64_t at = first_frame;
  auto take = [&](const SliceResult& r) {
    const auto now = Clock::now();
    st.latency_ms.push_back(
        std::chrono::duration<double, std::milli>(now - submitted[r.slice_id]).count());
    st.collected_s.push_back(std::chrono::duration<double>(now - t0).count());
    st.prompts += r.prompt_count;
    st.delayed += r.delayed_count;
    st.records_overflow += r.counters[Counter::coinc_records_overflow];
    st.carry_overflow += r.counters[Counter::stream_carry_overflow];
    GpuStageTimes times;
    if (gpu_last_stage_times(backend, times)) st.stages.push_back(times);
  };
  for (std::uint64_t i = 0; i < slices; ++i) {
    const std::size_t limit = pipelined ? backend.max_in_flight() : 1;
    // One at a time: the slice before is collected before this one's frames are staged.
    if (!pipelined && backend.in_flight() >= limit) take(backend.collect());
    SliceRequest req;
    req.slice_id = i;
    submitted.push_back(Clock::now());
    // The slice's frames are staged from pinned memory in ring-chunk-sized pieces, as the
    // daemon stages its ring chunks: as they come, before the worker waits for the oldest
    // slice in flight, so that the copies go on while it waits.
    for (std::uint64_t k = 0; k < slice_frames; k += kChunkFrames)
      backend.stage(pool.frames.get() + at + k,
                    static_cast<std::size_t>(std::min<std::uint64_t>(kChunkFrames, slice_frames - k)));
    at += slice_frames;
    if (backend.in_flight() >= limit) take(backend.collect());
    req.run_start = i == 0;
    req.final = i + 1 == slices;
    req.bound = horizon_at(pool, at, jitter_ticks);
    backend.submit(req);
    st.frames += slice_frames;
  }
  while (backend.in_flight() > 0) take(backend.collect());
  st.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return st;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(q * static_cast<double>(v.size())))];
}

// Pinned host -> device copy rate in bytes/s: median of repeated 256 MiB copies.
double measure_copy_rate() {
  const std::size_t bytes = std::size_t{256} << 20;
  auto host = cuda::make_pinned<std::uint8_t>(bytes);
  auto device = cuda::make_device<std::uint8_t>(bytes);
  std::fill(host.get(), host.get() + bytes, std::uint8_t{0x5A});
  cuda::Event begin, end;
  std::vector<double> rates;
  for (int i = 0; i < 12; ++i) {
    PETDAQ_CUDA_CHECK(cudaEventRecord(begin.get(), nullptr));
    PETDAQ_CUDA_CHECK(cudaMemcpyAsync(device.get(), host.get(), bytes, cudaMemcpyHostToDevice, nullptr));
    PETDAQ_CUDA_CHECK(cudaEventRecord(end.get(), nullptr));
    PETDAQ_CUDA_CHECK(cudaEventSynchronize(end.get()));
    float ms = 0;
    PETDAQ_CUDA_CHECK(cudaEventElapsedTime(&ms, begin.get(), end.get()));
    if (i >= 2) rates.push_back(static_cast<double>(bytes) / (ms * 1e-3));
  }
  return median(rates);
}

// The same host -> device copy while a device -> host copy of half its size runs beside it
// on another stream (a slice's records go back while the next frames come in): the host
// -> device rate in bytes/s, median of repeats.
double measure_duplex_rate() {
  const std::size_t bytes = std::size_t{256} << 20;
  auto host_in = cuda::make_pinned<std::uint8_t>(bytes);
  auto host_out = cuda::make_pinned<std::uint8_t>(bytes / 2);
  auto device_in = cuda::make_device<std::uint8_t>(bytes);
  auto device_out = cuda::make_device<std::uint8_t>(bytes / 2);
  std::fill(host_in.get(), host_in.get() + bytes, std::uint8_t{0x5A});
  PETDAQ_CUDA_CHECK(cudaMemset(device_out.get(), 0x3C, bytes / 2));
  cuda::Stream in, out;
  cuda::Event begin, end, out_end;
  std::vector<double> rates;
  for (int i = 0; i < 12; ++i) {
    PETDAQ_CUDA_CHECK(cudaEventRecord(begin.get(), in.get()));
    PETDAQ_CUDA_CHECK(cudaStreamWaitEvent(out.get(), begin.get(), 0));
    PETDAQ_CUDA_CHECK(cudaMemcpyAsync(host_out.get(), device_out.get(), bytes / 2,
                                      cudaMemcpyDeviceToHost, out.get()));
    PETDAQ_CUDA_CHECK(cudaMemcpyAsync(device_in.get(), host_in.get(), bytes,
                                      cudaMemcpyHostToDevice, in.get()));
    PETDAQ_CUDA_CHECK(cudaEventRecord(end.get(), in.get()));
    PETDAQ_CUDA_CHECK(cudaEventRecord(out_end.get(), out.get()));
    PETDAQ_CUDA_CHECK(cudaEventSynchronize(end.get()));
    PETDAQ_CUDA_CHECK(cudaEventSynchronize(out_end.get()));
    float ms = 0;
    PETDAQ_CUDA_CHECK(cudaEventElapsedTime(&ms, begin.get(), end.get()));
    if (i >= 2) rates.push_back(static_cast<double>(bytes) / (ms * 1e-3));
  }
  return median(rates);
}

// The whole pool copied to the device as the backend stages it (kChunkFrames pieces, one
// stream, into a device buffer of 256 MiB reused in turn): host -> device bytes/s, median
// of three passes. Unlike the repeated copy of one buffer above, it reads every page of the
// pool, as the slices do.
double measure_pool_copy_rate(const Pool& pool) {
  const std::uint64_t piece_bytes = kChunkFrames * sizeof(RawFrame);
  const std::uint64_t device_pieces = 16;
  auto device = cuda::make_device<std::uint8_t>(device_pieces * piece_bytes);
  const auto* host = reinterpret_cast<const std::uint8_t*>(pool.frames.get());
  const std::uint64_t bytes = pool.count * sizeof(RawFrame);
  cuda::Stream stream;
  cuda::Event begin, end;
  std::vector<double> rates;
  for (int pass = 0; pass < 3; ++pass) {
    PETDAQ_CUDA_CHECK(cudaEventRecord(begin.get(), stream.get()));
    for (std::uint64_t at = 0, k = 0; at < bytes; at += piece_bytes, ++k)
      PETDAQ_CUDA_CHECK(cudaMemcpyAsync(device.get() + (k % device_pieces) * piece_bytes, host + at,
                                        std::min(piece_bytes, bytes - at), cudaMemcpyHostToDevice,
                                        stream.get()));
    PETDAQ_CUDA_CHECK(cudaEventRecord(end.get(), stream.get()));
    PETDAQ_CUDA_CHECK(cudaEventSynchronize(end.get()));
    float ms = 0;
    PETDAQ_CUDA_CHECK(cudaEventElapsedTime(&ms, begin.get(), end.get()));
    rates.push_back(static_cast<double>(bytes) / (ms * 1e-3));
  }
  return median(rates);
}

// Frames per second over a copy rate in bytes per second.
double share_of_copy(double frames_per_s, double bytes_per_s) {
  return bytes_per_s > 0 ? frames_per_s * sizeof(RawFrame) / bytes_per_s : 0;
}

int bench(const Options& o) {
  std::string device;
  if (!gpu_device_usable(device)) {
    std::fprintf(stderr, "petdaq-bench-gpu: no usable CUDA device: %s\n", device.c_str());
    return 2;
  }
  Settings s;  // the daemon's defaults, except the slice size set per run
  s.stream.max_records_per_single = 1;  // ~0.2 records per single here; keeps pinned memory small
  const Calibration cal = bench_frames::flat_calibration(s);
  const double jitter_ticks = 200.0 / s.scanner.tick_ps;
  std::printf("petdaq-bench-gpu: %s\n", device.c_str());
  std::printf("stream: %.3g singles/s, window %.0f ps, %s, %s, delayed %s\n", o.rate_per_s,
              s.coincidence.window_ps, to_string(s.coincidence.window_mode),
              to_string(s.coincidence.policy), s.coincidence.delayed.enabled ? "on" : "off");

  const auto g0 = Clock::now();
  const Pool pool = make_pool(s, o);
  std::printf("generated %llu frames (%.1f GiB pinned) in %.1f s\n",
              static_cast<unsigned long long>(pool.count),
              static_cast<double>(pool.count * sizeof(RawFrame)) / (1u << 30),
              std::chrono::duration<double>(Clock::now() - g0).count());

  const double copy_bytes_per_s = measure_copy_rate();
  const double copy_frames_per_s = copy_bytes_per_s / sizeof(RawFrame);
  std::printf("pinned host->device copy: %.1f GB/s = %.3f G frames/s\n", copy_bytes_per_s / 1e9,
              copy_frames_per_s / 1e9);
  const double duplex_bytes_per_s = measure_duplex_rate();
  std::printf("  with a device->host copy of half its size beside it: %.1f GB/s = %.3f G frames/s\n",
              duplex_bytes_per_s / 1e9, duplex_bytes_per_s / sizeof(RawFrame) / 1e9);
  const double pool_bytes_per_s = measure_pool_copy_rate(pool);
  std::printf("  the whole pool, in %llu-frame pieces as staged: %.1f GB/s = %.3f G frames/s\n",
              static_cast<unsigned long long>(kChunkFrames), pool_bytes_per_s / 1e9,
              pool_bytes_per_s / sizeof(RawFrame) / 1e9);

  // CPU backend on the first cpu_frames of the same stream, slices of 1 M frames, on each
  // thread count; the first count's rate is the one the GPU is compared with.
  double cpu_frames_per_s = 0;
  unsigned cpu_threads = 0;
  std::uint64_t cpu_prompts = 0, cpu_frames = 0;
  for (const unsigned threads : o.cpu_threads) {
    Settings cs = s;
    cs.stream.max_slice_frames = 2u << 20;
    cs.stream.max_pending_frames = cs.stream.max_slice_frames;
    cs.backend_threads = threads;
    CpuBackend cpu(cs, cal);
    const std::uint64_t slices = std::max<std::uint64_t>(1, o.cpu_frames / (cs.stream.max_slice_frames / 2));
    const RunStats st = run(cpu, pool, cs.stream.max_slice_frames / 2, slices, false, jitter_ticks);
    const double fps = static_cast<double>(st.frames) / st.seconds;
    if (cpu_threads == 0) {
      cpu_frames_per_s = fps;
      cpu_threads = threads;
      cpu_prompts = st.prompts;
      cpu_frames = st.frames;
    }
    // Scaling efficiency: the rate per thread over the first count's rate per thread.
    std::printf("cpu backend (%u threads): %llu frames in %.2f s = %.1f M frames/s, %llu prompts%s; "
                "efficiency %.0f %%\n",
                threads, static_cast<unsigned long long>(st.frames), st.seconds, fps / 1e6,
                static_cast<unsigned long long>(st.prompts),
                st.prompts == cpu_prompts ? "" : " (DIFFERENT FROM THE FIRST COUNT)",
                100.0 * (fps / threads) / (cpu_frames_per_s / cpu_threads));
  }

  struct Row {
    std::uint64_t slice_frames;
    double frames_per_s;
    double middle_frames_per_s;  // middle_rate()
    double around_frames_per_s;  // the pool's copy just before and after the run, their mean
    GpuStageTimes stage;
    std::uint64_t slices;
  };
  std::vector<Row> rows;
  for (const std::uint64_t slice_frames : o.slice_frames) {
    if (slice_frames > pool.count) continue;
    Settings gs = s;
    // Room for the frames the previous slice left staged (past its bound), as the slicer
    // leaves it: a slice of new frames never needs the backend's split.
    gs.stream.max_slice_frames = 2 * slice_frames;
    gs.stream.max_pending_frames = 2 * slice_frames;
    const auto gpu = make_gpu_backend(gs, cal);
    // Same input as the CPU run, same slicing: the record counts must agree.
    if (slice_frames == (1u << 20)) {
      const RunStats check = run(*gpu, pool, slice_frames, cpu_frames / slice_frames, false, jitter_ticks);
      std::printf("gpu on the cpu's input: %llu prompts (%s)\n",
                  static_cast<unsigned long long>(check.prompts),
                  check.prompts == cpu_prompts ? "same as cpu" : "DIFFERENT FROM CPU");
    }
    // Stage times: one slice at a time, so that no stage waits for another slice.
    std::vector<GpuStageTimes> stages;
    for (unsigned r = 0; r < o.stage_repetitions + 1; ++r) {
      const RunStats st = run(*gpu, pool, slice_frames, 1, false, jitter_ticks, 0);
      if (r > 0) stages.insert(stages.end(), st.stages.begin(), st.stages.end());
    }
    auto med = [&](float GpuStageTimes::*field) {
      std::vector<double> v;
      for (const auto& t : stages) v.push_back(t.*field);
      return static_cast<float>(median(v));
    };
    GpuStageTimes stage{med(&GpuStageTimes::copy_in_ms), med(&GpuStageTimes::convert_ms),
                        med(&GpuStageTimes::sort_ms), med(&GpuStageTimes::coincidence_ms),
                        med(&GpuStageTimes::slice_ms), med(&GpuStageTimes::copy_out_ms)};
    // Throughput: the whole pool, slices overlapped, after one warm-up pass.
    const std::uint64_t slices = pool.count / slice_frames;
    run(*gpu, pool, slice_frames, std::min<std::uint64_t>(slices, 3), true, jitter_ticks);
    // The copy the run is measured against, right before and right after it: a host's copy
    // rate moves within a minute (docs/gpu.md).
    const double around_before = measure_pool_copy_rate(pool);
    PhaseTimer waits;  // the host's waits on the device (docs/daemon.md, "Worker phases")
    gpu->set_phase_timer(&waits);
    const RunStats st = run(*gpu, pool, slice_frames, slices, true, jitter_ticks);
    gpu->set_phase_timer(nullptr);
    const double around_after = measure_pool_copy_rate(pool);
    const double around_fps = (around_before + around_after) / 2 / sizeof(RawFrame);
    const double fps = static_cast<double>(st.frames) / st.seconds;
    std::printf("gpu, %llu frames/slice: %llu slices, %llu frames in %.3f s = %.3f G frames/s; "
                "%llu prompts, %llu delayed, records_overflow %llu, carry_overflow %llu\n",
                static_cast<unsigned long long>(slice_frames), static_cast<unsigned long long>(slices),
                static_cast<unsigned long long>(st.frames), st.seconds, fps / 1e9,
                static_cast<unsigned long long>(st.prompts), static_cast<unsigned long long>(st.delayed),
                static_cast<unsigned long long>(st.records_overflow),
                static_cast<unsigned long long>(st.carry_overflow));
    auto wait_ms = [&](Phase p) {
      return static_cast<double>(waits.stats(p).total_ns) * 1e-6 / static_cast<double>(slices);
    };
    std::printf("  host waits per slice: partition %.3f ms, count %.3f ms (%llu counts), slice "
                "%.3f ms, records %.3f ms; of %.3f ms per slice\n",
                wait_ms(Phase::partition_wait), wait_ms(Phase::count_wait),
                static_cast<unsigned long long>(waits.stats(Phase::count_wait).calls),
                wait_ms(Phase::collect_wait), wait_ms(Phase::copy_out_wait),
                st.seconds * 1e3 / static_cast<double>(slices));
    const std::size_t edge = gpu->max_in_flight();
    const double middle_fps = middle_rate(st, slice_frames, edge);
    std::printf("  middle of the run (slices %zu to %llu collected, %zu in flight before and "
                "after): %.3f G frames/s = %.1f %% of the copy, %.1f %% of the pool's copy; "
                "the whole run %.1f %% of the pool's copy\n",
                edge + 2, static_cast<unsigned long long>(slices - edge), edge, middle_fps / 1e9,
                100.0 * middle_fps / copy_frames_per_s,
                100.0 * share_of_copy(middle_fps, pool_bytes_per_s),
                100.0 * share_of_copy(fps, pool_bytes_per_s));
    std::printf("  the pool's copy right before and after the run: %.1f and %.1f GB/s; the whole "
                "run %.1f %% of their mean, its middle %.1f %%\n",
                around_before / 1e9, around_after / 1e9, 100.0 * fps / around_fps,
                100.0 * middle_fps / around_fps);
    rows.push_back({slice_frames, fps, middle_fps, around_fps, stage, slices});
  }

  // Latency of a slice holding stream.max_slice_ms of data at this rate, one at a time and
  // with slices overlapped.
  // Whole chunks (their horizons are exact), rounded to the nearest.
  const std::uint64_t latency_frames = std::max<std::uint64_t>(
      kChunkFrames,
      (static_cast<std::uint64_t>(o.rate_per_s * s.stream.max_slice_ms * 1e-3) + kChunkFrames / 2) /
          kChunkFrames * kChunkFrames);
  const double latency_data_ms = static_cast<double>(latency_frames) / o.rate_per_s * 1e3;
  double latency_p50 = 0, latency_p99 = 0, latency_pipe_p50 = 0, latency_pipe_p99 = 0;
  if (latency_frames <= pool.count) {
    Settings ls = s;
    ls.stream.max_slice_frames = 2 * latency_frames;
    ls.stream.max_pending_frames = 2 * latency_frames;
    const auto gpu = make_gpu_backend(ls, cal);
    const std::uint64_t slices = std::min<std::uint64_t>(200, pool.count / latency_frames);
    run(*gpu, pool, latency_frames, 3, false, jitter_ticks);
    const RunStats one = run(*gpu, pool, latency_frames, slices, false, jitter_ticks);
    latency_p50 = percentile(one.latency_ms, 0.5);
    latency_p99 = percentile(one.latency_ms, 0.99);
    const RunStats pipe = run(*gpu, pool, latency_frames, slices, true, jitter_ticks);
    latency_pipe_p50 = percentile(pipe.latency_ms, 0.5);
    latency_pipe_p99 = percentile(pipe.latency_ms, 0.99);
  }

  std::printf("\n%-12s %10s %8s %8s %8s %8s %7s %8s %8s %8s %9s %8s %9s %8s\n", "frames/slice",
              "G frames/s", "vs copy", "middle", "around", "vs 2.5G", "vs cpu", "in ms", "conv ms", "sort ms",
              "coinc ms", "out ms", "slice ms", "kernels");
  for (const Row& r : rows) {
    const double kernels_ms = r.stage.convert_ms + r.stage.sort_ms + r.stage.coincidence_ms;
    std::printf("%-12llu %10.3f %7.1f%% %7.1f%% %7.1f%% %7.1f%% %6.0fx %8.3f %8.3f %8.3f %9.3f %8.3f %9.3f %7.2fx\n",
                static_cast<unsigned long long>(r.slice_frames), r.frames_per_s / 1e9,
                100.0 * r.frames_per_s / copy_frames_per_s,
                100.0 * r.middle_frames_per_s / copy_frames_per_s,
                100.0 * r.frames_per_s / r.around_frames_per_s,
                100.0 * r.frames_per_s / kTargetFramesPerSecond, r.frames_per_s / cpu_frames_per_s,
                r.stage.copy_in_ms, r.stage.convert_ms, r.stage.sort_ms, r.stage.coincidence_ms,
                r.stage.copy_out_ms, r.stage.slice_ms, kernels_ms / std::max(1e-9, static_cast<double>(r.stage.copy_in_ms)));
  }
  std::printf("(vs copy: share of the measured pinned copy rate, target >= %.0f%%; middle: the "
              "same over the middle of the run, as its line above says; around: the whole run "
              "against the pool's copy right before and after it; stage times: "
              "one slice alone, median; slice ms: copy-in start to last kernel end; kernels: "
              "convert+sort+coincidence time over copy-in time)\n",
              100 * kTargetCopyFraction);
  std::printf("cpu backend: %.1f M frames/s on %u thread%s (%llu frames)\n", cpu_frames_per_s / 1e6,
              cpu_threads, cpu_threads == 1 ? "" : "s", static_cast<unsigned long long>(cpu_frames));
  std::printf("slice latency, %llu frames = %.1f ms of data at %.3g singles/s (stream.max_slice_ms "
              "%.0f): one at a time p50 %.2f ms p99 %.2f ms; overlapped p50 %.2f ms p99 %.2f ms "
              "(limit 20 ms)\n",
              static_cast<unsigned long long>(latency_frames), latency_data_ms, o.rate_per_s,
              s.stream.max_slice_ms, latency_p50, latency_p99, latency_pipe_p50, latency_pipe_p99);
  return 0;
}

}  // namespace
}  // namespace petdaq

int main(int argc, char** argv) {
  petdaq::Options o;
  if (const auto rc = petdaq::parse(argc, argv, o)) return *rc;
  try {
    return petdaq::bench(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "petdaq-bench-gpu: %s\n", e.what());
    return 1;
  }
}

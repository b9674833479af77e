// petdaq-bench-slicer: pushes a recorded frame file through the Slicer into a backend that
// only counts frames, so the figure is the slicer's own per-frame cost (ns of thread CPU
// time per frame, best of the repeats).
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <filesystem>
#include <string>
#include <vector>

#include "common/cli.h"
#include "core/calibration.h"
#include "core/counters.h"
#include "core/geometry.h"
#include "core/settings.h"
#include "core/chunk_summary.h"
#include "core/slicer.h"

namespace {

using namespace petdaq;

// Counts what it is given: the slicer's own cost, without conversion. Every slice takes
// everything staged.
class CountingBackend final : public Backend {
 public:
  CountingBackend(std::size_t max_slice, std::size_t max_staged)
      : max_slice_(max_slice), max_staged_(max_staged) {}
  const char* name() const override { return "count"; }
  std::size_t max_slice_frames() const override { return max_slice_; }
  std::size_t max_staged_frames() const override { return max_staged_; }
  std::size_t max_in_flight() const override { return 1; }
  std::uint64_t stage(const RawFrame*, std::size_t n) override {
    frames += n;
    staged_ += n;
    return ++tickets_;
  }
  bool staged(std::uint64_t) override { return true; }
  void wait_staged(std::uint64_t) override {}
  void submit(const SliceRequest& r) override {
    result_.slice_id = r.slice_id;
    result_.t_begin = result_.t_end;
    result_.t_end = r.bound;
    result_.bound = r.bound;
    result_.frames_taken = staged_;
    staged_ = 0;
    ++in_flight_;
  }
  const SliceResult& collect() override {
    --in_flight_;
    return result_;
  }
  std::size_t in_flight() const override { return in_flight_; }
  std::uint64_t frames = 0;

 private:
  std::size_t max_slice_;
  std::size_t max_staged_;
  std::size_t staged_ = 0;
  std::uint64_t tickets_ = 0;
  std::size_t in_flight_ = 0;
  SliceResult result_{};
};

class NullSink final : public ResultSink {
 public:
  void on_slice(std::uint64_t, const SliceResult&) override { ++slices; }
  std::uint64_t slices = 0;
};

double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace

int main(int argc, char** argv) try {
  std::filesystem::path config, input;
  std::size_t push_frames = 262144;  // one ring chunk of the default size
  int repeats = 3;
  cli::App app("petdaq-bench-slicer",
               "The Slicer alone, feeding a backend that only counts frames.");
  cli::add_config(app, config, "the configuration")->required();
  app.add_option("-i,--input", input, "frame file (petdaq-sim's frames.bin)")
      ->type_name("FILE")
      ->required();
  app.add_option("--push-frames", push_frames, "frames per push (one datagram)")
      ->type_name("N")
      ->check(CLI::PositiveNumber);
  cli::add_repetitions(app, repeats, "passes; the best is reported");
  if (const auto rc = app.parse_or_exit(argc, argv)) return *rc;
  const Settings settings = load_settings(config);
  const Calibration calibration = load_calibration(settings);

  std::FILE* f = std::fopen(input.c_str(), "rb");
  if (!f) {
    std::fprintf(stderr, "petdaq-bench-slicer: cannot open %s\n", input.c_str());
    return 1;
  }
  std::vector<RawFrame> frames;
  RawFrame buf[4096];
  std::size_t got;
  while ((got = std::fread(buf, sizeof(RawFrame), 4096, f)) > 0) frames.insert(frames.end(), buf, buf + got);
  std::fclose(f);

  // The receivers' share: blocks as they fill ring chunks (at most --push-frames, and at
  // most max_chunk_span_ticks of acquisition time), each with its summary.
  const SourceRule rule = make_source_rule(settings);
  const std::uint64_t span_ticks = max_chunk_span_ticks(settings);
  std::vector<ChunkSummary> summaries;
  std::vector<std::size_t> block_sizes;
  const double s0 = thread_cpu_s();
  for (std::size_t i = 0; i < frames.size();) {
    summaries.emplace_back();
    const std::size_t k = next_block(frames.data() + i, frames.size() - i, push_frames, span_ticks,
                                     rule, summaries.back());
    block_sizes.push_back(k);
    i += k;
  }
  const double summary_s = thread_cpu_s() - s0;

  double best_s = 1e30;
  for (int r = 0; r < repeats; ++r) {
    Counters counters(Geometry::from(settings.scanner).bdm_count());
    CountingBackend backend(settings.stream.max_slice_frames,
                            std::max(settings.stream.max_pending_frames, settings.stream.max_slice_frames));
    NullSink sink;
    Slicer slicer(settings, backend, sink, counters);
    const auto epoch = Slicer::Clock::time_point{};
    std::vector<RawFrame> work = frames;  // the slicer may rewrite blocks in place
    const double t0 = thread_cpu_s();
    std::size_t pushes = 0;
    for (std::size_t i = 0; pushes < block_sizes.size(); i += block_sizes[pushes], ++pushes) {
      // A microsecond of wall clock per push: slices are cut by size, as at full rate.
      const auto now = epoch + std::chrono::microseconds(pushes);
      slicer.push_block(work.data() + i, block_sizes[pushes], summaries[pushes], now);
      if ((pushes & 15) == 0) slicer.poll(now);
    }
    slicer.finish();
    const double s = thread_cpu_s() - t0;
    best_s = std::min(best_s, s);
    std::printf("run %d: %.3f s, %.2f ns/frame, %llu frames to the backend in %llu slices\n", r,
                s, 1e9 * s / static_cast<double>(frames.size()),
                static_cast<unsigned long long>(backend.frames),
                static_cast<unsigned long long>(sink.slices));
  }
  std::printf("receiver summaries: %.2f ns/frame (%.1f M frames/s per receiver thread)\n",
              1e9 * summary_s / static_cast<double>(frames.size()),
              static_cast<double>(frames.size()) / summary_s / 1e6);
  std::printf("slicer (worker thread): %zu frames, %zu blocks (%.0f frames each on average), best %.3f ns/frame (%.1f M frames/s, one thread)\n",
              frames.size(), block_sizes.size(),
              static_cast<double>(frames.size()) / static_cast<double>(block_sizes.size()), 1e9 * best_s / static_cast<double>(frames.size()),
              static_cast<double>(frames.size()) / best_s / 1e6);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "petdaq-bench-slicer: %s\n", e.what());
  return 1;
}

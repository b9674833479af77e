// petdaq-offline: a frame file through the same slicer and backend as the daemon, into a
// list-mode file. The input is a plain concatenation of 16-byte raw frames (DESIGN section 2),
// read in large sequential chunks so files of any size stream through fixed memory.
//
// The slicer's clock follows acquisition time (the median raw time of a sample of each
// chunk), not the wall clock: idle sources and time cuts then mean what they mean during the
// acquisition, and the output does not depend on how fast the file is read.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/calibration.h"
#include "core/counters.h"
#include "core/cpu_backend.h"
#include "core/geometry.h"
#include "core/output.h"
#include "same_file.h"
#include "core/settings.h"
#include "core/slicer.h"
#include "gpu/select_backend.h"

namespace petdaq {
namespace {

constexpr std::size_t kChunkFrames = 1u << 20;  // 16 MiB per read
constexpr std::size_t kClockSamples = 63;

struct Options {
  std::filesystem::path config;
  std::filesystem::path input;
  std::filesystem::path output;
  std::string backend;  // empty: from the config
  bool quiet = false;
};

void usage(std::FILE* out) {
  std::fprintf(out,
               "usage: petdaq-offline --config FILE --input FRAMES --output OUT.plm "
               "[--backend cpu|gpu|auto] [--quiet]\n"
               "  Processes a file of 16-byte raw frames as petdaqd would and writes the\n"
               "  coincidences to a list-mode (.plm) file; prints a summary.\n");
}

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw UsageError(a + " needs a value");
      return argv[++i];
    };
    if (a == "--config") o.config = value();
    else if (a == "--input") o.input = value();
    else if (a == "--output") o.output = value();
    else if (a == "--backend") o.backend = value();
    else if (a == "--quiet") o.quiet = true;
    else if (a == "--help" || a == "-h") {
      usage(stdout);
      std::exit(0);
    } else
      throw UsageError("unknown argument '" + a + "'");
  }
  if (o.config.empty()) throw UsageError("--config is required");
  if (o.input.empty()) throw UsageError("--input is required");
  if (o.output.empty()) throw UsageError("--output is required");
  return o;
}

BackendKind backend_kind(const std::string& name, BackendKind from_config) {
  if (name.empty()) return from_config;
  if (name == "cpu") return BackendKind::cpu;
  if (name == "gpu") return BackendKind::gpu;
  if (name == "auto") return BackendKind::auto_select;
  throw UsageError("--backend: 'cpu', 'gpu' or 'auto', not '" + name + "'");
}

// Acquisition time of a chunk for the slicer's clock: the median of evenly spaced samples, so
// that a few corrupt stamps cannot move it.
std::uint64_t chunk_time(const RawFrame* frames, std::size_t n) {
  std::array<std::uint64_t, kClockSamples> t{};
  const std::size_t k = std::min(n, kClockSamples);
  for (std::size_t i = 0; i < k; ++i) t[i] = frame_time(frames[i * n / k].bytes);
  std::nth_element(t.begin(), t.begin() + k / 2, t.begin() + k);
  return t[k / 2];
}

// Passes every result on to the list-mode file and measures the acquisition's span from the
// batches themselves, at no per-frame cost: for each run, from its first coincidence record
// (the earliest single any window opened with) to the end of its final batch (its last
// single's time + 1, core/backend.h); runs add up.
class SpanSink final : public ResultSink {
 public:
  explicit SpanSink(ResultSink& inner) : inner_(inner) {}
  void on_slice(std::uint64_t run_id, const SliceResult& r) override {
    if (!have_first_) {
      if (r.prompt_count > 0) first_ = r.prompts[0].time_a, have_first_ = true;
      if (r.delayed_count > 0 && (!have_first_ || r.delayed[0].time_a < first_))
        first_ = r.delayed[0].time_a, have_first_ = true;
    }
    last_end_ = r.t_end;
    inner_.on_slice(run_id, r);
  }
  void on_run_end(std::uint64_t run_id) override {
    if (have_first_ && last_end_ > first_) ticks_ += last_end_ - first_;
    have_first_ = false;
    inner_.on_run_end(run_id);
  }
  std::uint64_t ticks() const { return ticks_; }

 private:
  ResultSink& inner_;
  bool have_first_ = false;
  std::uint64_t first_ = 0;
  std::uint64_t last_end_ = 0;
  std::uint64_t ticks_ = 0;
};

class Progress {
 public:
  Progress(std::uint64_t total_bytes, bool enabled)
      : total_(total_bytes), enabled_(enabled && ::isatty(STDERR_FILENO)) {}
  void update(std::uint64_t done_bytes, std::chrono::steady_clock::time_point now) {
    if (!enabled_ || total_ == 0) return;
    const double elapsed_s = std::chrono::duration<double>(now - start_).count();
    if (elapsed_s < 1.0 || now - last_ < std::chrono::milliseconds(200)) return;
    last_ = now;
    shown_ = true;
    const double f = static_cast<double>(done_bytes) / static_cast<double>(total_);
    const int width = 40;
    const int filled = static_cast<int>(f * width);
    const double eta_s = f > 0 ? elapsed_s * (1 - f) / f : 0;
    std::fprintf(stderr, "\r[%.*s%*s] %5.1f%%  %.0f s left ", filled,
                 "########################################", width - filled, "", 100 * f, eta_s);
    std::fflush(stderr);
  }
  void done() {
    if (shown_) std::fprintf(stderr, "\r%*s\r", 70, "");
  }

 private:
  std::uint64_t total_;
  bool enabled_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_{};
};

class FileCloser {
 public:
  explicit FileCloser(std::FILE* f) : f_(f) {}
  ~FileCloser() {
    if (f_) std::fclose(f_);
  }
  std::FILE* get() const { return f_; }

 private:
  std::FILE* f_;
};

double per_second(std::uint64_t n, double s) { return s > 0 ? static_cast<double>(n) / s : 0.0; }

int run(const Options& o) {
  const auto wall_start = std::chrono::steady_clock::now();
  const Settings settings = load_settings(o.config);
  const Calibration calibration = load_calibration(settings);
  const BackendKind kind = backend_kind(o.backend, settings.backend);

  FileCloser input(std::fopen(o.input.c_str(), "rb"));
  if (!input.get())
    throw std::runtime_error(o.input.string() + ": cannot open: " + std::strerror(errno));
  refuse_output_that_is_input(input.get(), o.input, o.output);
  std::error_code ec;
  const std::uint64_t input_bytes = std::filesystem::file_size(o.input, ec);

  std::string explanation;
  std::unique_ptr<Backend> backend = make_backend(kind, settings, calibration, explanation);
  const Geometry geometry = Geometry::from(settings.scanner);
  Counters counters(geometry.bdm_count());
  PlmSink sink(settings, o.output);
  SpanSink span(sink);
  Slicer slicer(settings, calibration, *backend, span, counters);
  if (!o.quiet) std::fprintf(stderr, "petdaq-offline: %s\n", explanation.c_str());

  std::vector<RawFrame> chunk(kChunkFrames);
  // A chunk may end inside a frame; its first bytes wait for the next read.
  std::size_t carried_bytes = 0;
  std::uint64_t bytes_read = 0;
  std::uint64_t frames = 0;
  std::uint64_t first_time = 0, acquisition_ticks = 0;
  bool have_time = false;
  const auto epoch = Slicer::Clock::time_point{};
  Progress progress(input_bytes, !o.quiet);
  const auto processing_start = std::chrono::steady_clock::now();
  double read_s = 0;
  auto* const bytes = reinterpret_cast<std::uint8_t*>(chunk.data());
  for (;;) {
    const auto r0 = std::chrono::steady_clock::now();
    const std::size_t got = std::fread(bytes + carried_bytes, 1,
                                       kChunkFrames * kFrameBytes - carried_bytes, input.get());
    read_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - r0).count();
    if (got == 0) {
      if (std::ferror(input.get()))
        throw std::runtime_error(o.input.string() + ": read failed: " + std::strerror(errno));
      break;
    }
    bytes_read += got;
    const std::size_t available = carried_bytes + got;
    const std::size_t n = available / kFrameBytes;
    carried_bytes = available % kFrameBytes;
    if (n > 0) {
      const std::uint64_t median = chunk_time(chunk.data(), n);
      if (!have_time) {
        first_time = median;
        have_time = true;
      }
      acquisition_ticks =
          std::max(acquisition_ticks, median > first_time ? median - first_time : 0);
      const auto now = epoch + std::chrono::duration_cast<Slicer::Clock::duration>(
                                   std::chrono::duration<double, std::pico>(
                                       static_cast<double>(acquisition_ticks) * settings.scanner.tick_ps));
      slicer.push(chunk.data(), n, now);
      slicer.poll(now);
      frames += n;
      std::memmove(bytes, bytes + n * kFrameBytes, carried_bytes);
    }
    progress.update(bytes_read, std::chrono::steady_clock::now());
  }
  slicer.finish();
  sink.close();
  progress.done();
  if (carried_bytes > 0) counters.add(Counter::rx_trailing_bytes, carried_bytes);
  const auto wall_end = std::chrono::steady_clock::now();
  const double wall_s = std::chrono::duration<double>(wall_end - wall_start).count();
  const double processing_s = std::chrono::duration<double>(wall_end - processing_start).count();

  const double acq_s = static_cast<double>(span.ticks()) * settings.scanner.tick_ps * 1e-12;
  auto c = [&](Counter k) { return counters.get(k); };
  const std::uint64_t bad = c(Counter::frame_bad_marker) + c(Counter::frame_bad_bdm) +
                            c(Counter::frame_bad_du) + c(Counter::frame_bad_position) +
                            c(Counter::frame_no_crystal) + c(Counter::frame_bad_time);
  std::printf("input            %s (%llu bytes)\n", o.input.c_str(),
              static_cast<unsigned long long>(bytes_read));
  std::printf("output           %s (%llu bytes, %llu messages)\n", o.output.c_str(),
              static_cast<unsigned long long>(sink.bytes_written()),
              static_cast<unsigned long long>(sink.messages()));
  std::printf("backend          %s\n", backend->name());
  std::printf("frames           %llu\n", static_cast<unsigned long long>(frames));
  if (carried_bytes > 0)
    std::printf("trailing bytes   %zu (a partial frame at the end of the file, discarded)\n",
                carried_bytes);
  std::printf("bad frames       %llu\n", static_cast<unsigned long long>(bad));
  for (Counter k : {Counter::frame_bad_marker, Counter::frame_bad_bdm, Counter::frame_bad_du,
                    Counter::frame_bad_position, Counter::frame_no_crystal, Counter::frame_bad_time})
    if (c(k)) std::printf("  %-20s %llu\n", std::string(counter_name(k)).c_str(),
                          static_cast<unsigned long long>(c(k)));
  std::printf("acquisition      %.6f s\n", acq_s);
  auto line = [&](const char* label, Counter k) {
    std::printf("%-16s %llu", label, static_cast<unsigned long long>(c(k)));
    if (acq_s > 0) std::printf("  (%.1f /s)", per_second(c(k), acq_s));
    std::printf("\n");
  };
  line("singles", Counter::single_accepted);
  line("energy rejected", Counter::single_energy_rejected);
  line("prompts", Counter::coinc_prompts);
  line("delayed", Counter::coinc_delayed);
  line("multiples", Counter::coinc_multiples);
  line("delayed mult.", Counter::coinc_delayed_multiples);
  for (Counter k : {Counter::stream_late, Counter::stream_time_jump, Counter::stream_source_idle,
                    Counter::stream_runs, Counter::stream_slices, Counter::stream_pending_full,
                    Counter::stream_carry_overflow, Counter::coinc_records_overflow})
    std::printf("%-16s %llu\n", std::string(counter_name(k)).c_str(),
                static_cast<unsigned long long>(c(k)));
  std::printf("wall time        %.3f s (start-up %.3f s, read %.3f s)\n", wall_s,
              wall_s - processing_s, read_s);
  if (const auto* cpu = dynamic_cast<const CpuBackend*>(backend.get())) {
    const CpuBackend::StageSeconds& st = cpu->stage_seconds();
    std::printf("stages           convert %.3f s, sort %.3f s, coincidence %.3f s, "
                "slicer and output %.3f s\n",
                st.convert, st.sort, st.coincidence,
                processing_s - read_s - st.convert - st.sort - st.coincidence);
  }
  std::printf("throughput       %.3f M frames/s (after start-up, one thread)\n",
              per_second(frames, processing_s) / 1e6);
  return 0;
}

}  // namespace
}  // namespace petdaq

int main(int argc, char** argv) {
  using namespace petdaq;
  Options o;
  try {
    o = parse(argc, argv);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "petdaq-offline: %s\n", e.what());
    usage(stderr);
    return 2;
  }
  try {
    return run(o);
  } catch (const SettingsError& e) {
    std::fprintf(stderr, "petdaq-offline: bad configuration %s:\n%s\n", o.config.c_str(), e.what());
    return 2;
  } catch (const CalibrationError& e) {
    std::fprintf(stderr, "petdaq-offline: bad calibration: %s\n", e.what());
    return 2;
  } catch (const BackendUnavailable& e) {
    std::fprintf(stderr, "petdaq-offline: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "petdaq-offline: %s\n", e.what());
    return 2;
  }
}

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
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "backends/select_backend.h"
#include "common/cli.h"
#include "core/calibration.h"
#include "core/counters.h"
#include "core/geometry.h"
#include "core/histograms.h"
#include "core/phase_timer.h"
#include "core/image.h"
#include "core/plm_file.h"
#include "core/plm_sink.h"
#include "core/settings.h"
#include "core/chunk_summary.h"
#include "core/slicer.h"
#include "core/timed_backend.h"
#include "core/stream_limits.h"
#include "tools/common/same_file.h"
#include "tools/common/progress.h"
#include "tools/offline/batch_reader.h"
#include "proto/datagram.h"
#if PETDAQ_HAVE_PCAP
#include "tools/replay/input.h"
#endif

namespace petdaq {
namespace {

constexpr std::size_t kChunkFrames = 1u << 20;  // 16 MiB per read
// Threads that read a regular file, each at its own offsets (--readers 0): one alone reads
// and cuts a frame in about the 5 ns that 200 M frames/s allows (docs/offline.md, "The main
// thread"). The CPU backend needs the other cores; the GPU backend leaves them to the readers:
// with ten it ran at about 0.8-1 G frames/s from the page cache, fewer were slower and more
// no faster (docs/offline.md, "Large files").
constexpr unsigned kReaderThreadsCpu = 2;
constexpr unsigned kReaderThreadsGpu = 10;
constexpr unsigned kMaxReaderThreads = 64;
// Threads that write the .plm (--writers 0), each message at its place in the file
// (core/plm_sink.h): the GPU backend's records come at several GB/s, more than one thread's
// copies into the page cache; the CPU backend's come slower and it needs the cores.
constexpr unsigned kWriterThreadsCpu = 1;
constexpr unsigned kWriterThreadsGpu = 4;
constexpr unsigned kMaxWriterThreads = 64;
// The writer's memory, where the GPU backend puts a slice's records (page-locked) and where
// they wait to be written; the CPU backend's records are copied into it, and less of it
// stays in the caches the backend's threads need.
constexpr std::size_t kWriterMemoryBytesGpu = 64u << 20;
constexpr std::size_t kWriterMemoryBytesCpu = 16u << 20;
constexpr std::size_t kClockSamples = 63;

constexpr const char* kProgram = "petdaq-offline";

struct Options {
  std::filesystem::path config;
  std::filesystem::path input;
  std::filesystem::path output;
  std::string backend;  // empty: from the config
  std::filesystem::path histograms;  // the live histograms' file (empty: none)
  std::filesystem::path image;       // the live image's file (empty: none)
  long long threads = -1;            // backend_threads override (-1: from the config)
  unsigned readers = 0;              // reader threads (0: by backend)
  unsigned writers = 0;              // writer threads (0: by backend)
  bool quiet = false;
};

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Each option is declared once here; adding one is one add_option line and one field.
std::optional<int> parse(int argc, char** argv, Options& o) {
  cli::App app(kProgram,
               "Processes a file of 16-byte raw frames as petdaqd would and writes the "
               "coincidences to a list-mode (.plm) file; prints a summary.");
  cli::add_config(app, o.config, "the YAML configuration (scanner, calibration, coincidence)")
      ->required();
  cli::add_input(app, o.input, "the frame file (16-byte raw frames back to back)")->required();
  cli::add_output(app, o.output, "the list-mode file to write")->required();
  cli::add_backend(app, o.backend);
  app.add_option("--histograms", o.histograms,
                 "also write the histograms petdaqd publishes (a later run of the file, after a "
                 "clock reset, goes to OUT-run1.pdh and so on)")
      ->type_name("OUT.pdh");
  app.add_option("--image", o.image,
                 "also write the live TOF back-positioned image and centroid trace petdaqd "
                 "publishes (output.image; a later run goes to OUT-run1.pdim and so on)")
      ->type_name("OUT.pdim");
  app.add_option("--threads", o.threads,
                 "threads of the CPU backend, this one included (overrides backend_threads; "
                 "0 = automatic: the cores left after the receivers and the worker); the "
                 "output does not depend on it; the GPU backend ignores it")
      ->type_name("N")
      ->check(CLI::Range(0LL, static_cast<long long>(kMaxBackendThreads)));
  app.add_option("--readers", o.readers,
                 "threads that read a regular file (0 = automatic: " +
                     std::to_string(kReaderThreadsCpu) + " with the CPU backend, " +
                     std::to_string(kReaderThreadsGpu) +
                     " with the GPU backend); the output does not depend on it")
      ->type_name("N")
      ->check(CLI::Range(0u, kMaxReaderThreads));
  app.add_option("--writers", o.writers,
                 "threads that write the list-mode file (0 = automatic: " +
                     std::to_string(kWriterThreadsCpu) + " with the CPU backend, " +
                     std::to_string(kWriterThreadsGpu) +
                     " with the GPU backend; one for an output that cannot seek, such as a "
                     "pipe); the output does not depend on it")
      ->type_name("N")
      ->check(CLI::Range(0u, kMaxWriterThreads));
  cli::add_quiet(app, o.quiet);
  if (const auto rc = app.parse_or_exit(argc, argv)) return rc;
  for (const auto& [option, output] : {std::pair<std::string_view, std::filesystem::path>{
                                           "--output", o.output},
                                       {"--histograms", o.histograms}})
    if (const auto why = cli::output_is_an_input(option, output,
                                                 {{"input", o.input}, {"configuration", o.config}}))
      return app.usage_error(*why);
  return std::nullopt;
}

BackendKind backend_kind(const std::string& name, BackendKind from_config) {
  if (name.empty()) return from_config;
  if (const auto kind = parse_backend(name)) return *kind;
  throw UsageError("--backend: not a backend: '" + name + "'");
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

// Passes every result on and, with the GPU backend, adds up the device's times of each
// slice (gpu/gpu_stage_times.h), read from the events the backend records anyway.
class DeviceTimesSink final : public ResultSink {
 public:
  DeviceTimesSink(ResultSink& inner, const Backend& backend) : inner_(inner), backend_(backend) {}
  void on_slice(std::uint64_t run_id, const SliceResult& r) override {
    if (const auto t = device_stage_times(backend_)) {
      sum_.copy_in_ms += t->copy_in_ms;
      sum_.convert_ms += t->convert_ms;
      sum_.sort_ms += t->sort_ms;
      sum_.coincidence_ms += t->coincidence_ms;
      sum_.slice_ms += t->slice_ms;
      sum_.copy_out_ms += t->copy_out_ms;
      ++slices_;
    }
    inner_.on_slice(run_id, r);
  }
  void on_run_end(std::uint64_t run_id, RunEnd reason) override { inner_.on_run_end(run_id, reason); }
  // Mean times per slice, or nothing (not the GPU backend).
  void print() const {
    if (slices_ == 0) return;
    const double n = static_cast<double>(slices_);
    std::printf("device per slice mean of %llu: partition %.3f ms, convert %.3f ms (from the "
                "partition's end, waits for the host and earlier slices included), sort %.3f ms, "
                "coincidences %.3f ms, records out %.3f ms; staged frames in to the last kernel "
                "%.3f ms\n",
                static_cast<unsigned long long>(slices_), sum_.copy_in_ms / n, sum_.convert_ms / n,
                sum_.sort_ms / n, sum_.coincidence_ms / n, sum_.copy_out_ms / n, sum_.slice_ms / n);
  }

 private:
  ResultSink& inner_;
  const Backend& backend_;
  GpuStageTimes sum_;
  std::uint64_t slices_ = 0;
};

// Passes every result on, its time charged to this thread's `publish` phase (the output).
class TimedSink final : public ResultSink {
 public:
  TimedSink(ResultSink& inner, PhaseTimer& phases) : inner_(inner), phases_(phases) {}
  void on_slice(std::uint64_t run_id, const SliceResult& r) override {
    PhaseScope scope(&phases_, Phase::publish);
    inner_.on_slice(run_id, r);
  }
  void on_run_end(std::uint64_t run_id, RunEnd reason) override {
    PhaseScope scope(&phases_, Phase::publish);
    inner_.on_run_end(run_id, reason);
  }

 private:
  ResultSink& inner_;
  PhaseTimer& phases_;
};

// Passes every result on to the list-mode file and measures the acquisition's span from the
// batches themselves, at no per-frame cost: for each run, from its first coincidence record
// (the earliest single any window opened with) to the end of its final batch (its last
// single's time + 1, core/backend.h); runs add up.
class SpanSink final : public ResultSink {
 public:
  SpanSink(ResultSink& inner, ResultSink& run_end) : inner_(inner), run_end_(run_end) {}
  void on_slice(std::uint64_t run_id, const SliceResult& r) override {
    if (!have_first_) {
      if (r.prompt_count > 0) first_ = r.prompts[0].time_a, have_first_ = true;
      if (r.delayed_count > 0 && (!have_first_ || r.delayed[0].time_a < first_))
        first_ = r.delayed[0].time_a, have_first_ = true;
    }
    last_end_ = r.t_end;
    inner_.on_slice(run_id, r);
  }
  void on_run_end(std::uint64_t run_id, RunEnd reason) override {
    run_span_ = have_first_ ? HistogramSpan{first_, last_end_} : HistogramSpan{};
    if (!run_span_.empty()) ticks_ += last_end_ - first_;
    have_first_ = false;
    inner_.on_run_end(run_id, reason);
    run_end_.on_run_end(run_id, reason);
  }
  std::uint64_t ticks() const { return ticks_; }
  // The span of the run that is ending (valid in run_end's on_run_end).
  HistogramSpan run_span() const { return run_span_; }

 private:
  ResultSink& inner_;
  ResultSink& run_end_;
  bool have_first_ = false;
  std::uint64_t first_ = 0;
  std::uint64_t last_end_ = 0;
  std::uint64_t ticks_ = 0;
  HistogramSpan run_span_;
};

// Writes the backend's histograms at the end of each run (--histograms).
class HistogramFileSink final : public ResultSink {
 public:
  HistogramFileSink(const Settings& settings, Backend& backend, const Counters& counters,
                    std::filesystem::path file)
      : settings_(settings), backend_(backend), counters_(counters), file_(std::move(file)) {}
  // Where the ending run's acquisition span comes from (the derived randoms histogram).
  void span_from(const SpanSink* span) { span_ = span; }
  void on_slice(std::uint64_t, const SliceResult&) override {}
  void on_run_end(std::uint64_t run_id, RunEnd) override {
    const HistogramSet* h = backend_.histograms();
    if (!h || file_.empty()) return;
    encode_histogram_file(*h, settings_, run_id,
                          histogram_metadata_json(settings_, run_id, backend_.name(), &counters_,
                                                  &run_base_),
                          bytes_, span_ ? span_->run_span() : HistogramSpan{});
    run_base_ = counter_base(counters_);  // the next run's counts start here
    std::filesystem::path out = file_;
    if (runs_ > 0)
      out.replace_filename(file_.stem().string() + "-run" + std::to_string(runs_) +
                           file_.extension().string());
    write_histogram_file(out, bytes_);
    written_.push_back(out);
    ++runs_;
  }
  // The histogram files written, one per run, in order.
  const std::vector<std::filesystem::path>& written() const { return written_; }

 private:
  const Settings& settings_;
  Backend& backend_;
  const Counters& counters_;
  std::filesystem::path file_;
  std::vector<std::uint8_t> bytes_;
  std::uint64_t runs_ = 0;
  std::vector<std::filesystem::path> written_;
  const SpanSink* span_ = nullptr;
  CounterBase run_base_{};
};

// Writes the backend's image at the end of each run (--image); its window is the whole run.
class ImageFileSink final : public ResultSink {
 public:
  ImageFileSink(const Settings& settings, Backend& backend, ResultSink& next,
                std::filesystem::path file)
      : settings_(settings), backend_(backend), next_(next), file_(std::move(file)) {}
  void span_from(const SpanSink* span) { span_ = span; }
  void on_slice(std::uint64_t, const SliceResult&) override {}
  void on_run_end(std::uint64_t run_id, RunEnd reason) override {
    next_.on_run_end(run_id, reason);
    const ImageSet* image = backend_.image();
    if (!image || file_.empty()) return;
    ImageSpan span;
    if (span_ && !span_->run_span().empty()) {
      span.run_first_tick = span.window_first_tick = span_->run_span().first_tick;
      span.run_end_tick = span.window_end_tick = span_->run_span().end_tick;
    }
    encode_image_file(*image, settings_, run_id, nullptr, span, bytes_);
    std::filesystem::path out = file_;
    if (runs_ > 0)
      out.replace_filename(file_.stem().string() + "-run" + std::to_string(runs_) +
                           file_.extension().string());
    write_image_file(out, bytes_);
    ++runs_;
  }

 private:
  const Settings& settings_;
  Backend& backend_;
  ResultSink& next_;
  std::filesystem::path file_;
  std::vector<std::uint8_t> bytes_;
  std::uint64_t runs_ = 0;
  const SpanSink* span_ = nullptr;
};

// A pcap (either byte order, µs or ns) or pcapng file, by its first four bytes. Only a
// regular file is looked into: reading a pipe's first bytes here would take them (a whole
// stdio buffer of them) from the frames read after.
bool is_capture(const std::filesystem::path& file) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec)) return false;
  std::uint8_t magic[4] = {};
  std::FILE* f = std::fopen(file.c_str(), "rb");
  if (!f) return false;
  const bool whole = std::fread(magic, 1, 4, f) == 4;
  std::fclose(f);
  if (!whole) return false;
  const std::uint32_t le = bytes::load_le32(magic);
  return le == 0xA1B2C3D4 || le == 0xD4C3B2A1 || le == 0xA1B23C4D || le == 0x4D3CB2A1 ||
         le == 0x0A0D0D0A;
}

// The frames of every UDP payload of a capture, in capture order (tools/replay's reader);
// what petdaqd's receiver would count is counted the same way.
std::vector<RawFrame> capture_frames(const std::filesystem::path& file, Framing framing,
                                     Counters& counters) {
#if !PETDAQ_HAVE_PCAP
  (void)framing;
  (void)counters;
  throw std::runtime_error(file.string() + " is a capture, and this build has no libpcap");
#else
  const replay::Capture cap = replay::load_capture(file);
  std::vector<RawFrame> out;
  out.reserve(cap.payloads.size() / kFrameBytes);
  for (const replay::CapturedDatagram& d : cap.datagrams) {
    const DatagramView v = parse_datagram(cap.payloads.data() + d.offset, d.bytes, framing);
    counters.add(Counter::rx_datagrams);
    counters.add(Counter::rx_bytes, d.bytes);
    counters.add(Counter::rx_trailing_bytes, v.trailing_bytes);
    if (v.status == DatagramStatus::bad_header || v.status == DatagramStatus::count_mismatch)
      counters.add(Counter::rx_bad_header);
    if (v.status == DatagramStatus::empty) counters.add(Counter::rx_empty);
    if (v.status != DatagramStatus::ok) continue;
    counters.add(Counter::rx_frames, v.frame_count);
    const auto* first = reinterpret_cast<const RawFrame*>(v.frames);
    out.insert(out.end(), first, first + v.frame_count);
  }
  if (cap.skipped_not_udp + cap.skipped_fragment + cap.skipped_truncated + cap.skipped_link_type)
    std::fprintf(stderr,
                 "petdaq-offline: %s: skipped %llu packets that are not UDP, %llu fragments, "
                 "%llu truncated, %llu of an unknown link type\n",
                 file.c_str(), static_cast<unsigned long long>(cap.skipped_not_udp),
                 static_cast<unsigned long long>(cap.skipped_fragment),
                 static_cast<unsigned long long>(cap.skipped_truncated),
                 static_cast<unsigned long long>(cap.skipped_link_type));
  return out;
#endif
}

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

// The configuration with the command line's overrides.
Settings offline_settings(const Options& o) {
  Settings settings = load_settings(o.config);
  if (!o.histograms.empty()) settings.output.histograms.enabled = true;
  if (!o.image.empty()) settings.output.image.enabled = true;
  if (o.threads >= 0) settings.backend_threads = static_cast<std::uint32_t>(o.threads);
  // The `cpus` section places the daemon's threads beside its receivers: a file's
  // processing takes the machine's cores as --threads says.
  settings.cpus = {};
  return settings;
}

// Read buffers of kChunkFrames frames in the memory the backend copies from fastest
// (page-locked for the GPU backend): the reader threads read into one each while this
// thread pushes one and the backend may still take from the one before.
class ReadBuffers {
 public:
  ReadBuffers(const Backend& backend, std::size_t count)
      : pinned_(backend.make_stage_allocator()), bytes_(count * kChunkFrames * kFrameBytes) {
    if (pinned_) {
      data_ = static_cast<RawFrame*>(pinned_->allocate(bytes_));
    } else {
      plain_.resize(count * kChunkFrames);
      data_ = plain_.data();
    }
  }
  ~ReadBuffers() {
    if (pinned_) pinned_->deallocate(data_, bytes_);
  }
  ReadBuffers(const ReadBuffers&) = delete;
  ReadBuffers& operator=(const ReadBuffers&) = delete;
  RawFrame* data() const { return data_; }

 private:
  std::unique_ptr<HostAllocator> pinned_;
  std::vector<RawFrame> plain_;
  std::size_t bytes_;
  RawFrame* data_ = nullptr;
};

// Batches of frames into the slicer as petdaqd's receivers hand them over: in blocks with
// their summaries, at most half a slice and max_chunk_span_ticks of acquisition time each,
// the slicer's clock at each batch's acquisition time.
class FramePusher {
 public:
  FramePusher(const Settings& settings, Slicer& slicer)
      : slicer_(slicer),
        tick_ps_(settings.scanner.tick_ps),
        rule_(make_source_rule(settings)),
        block_frames_(std::max<std::size_t>(1, slice_new_frames(settings.stream.max_slice_frames))),
        span_ticks_(max_chunk_span_ticks(settings)) {}

  // One batch; `cut`: the blocks a reader thread already cut from it. Returns the ticket of
  // its last stage: the batch's memory stays untouched until it is staged.
  std::uint64_t push(RawFrame* batch, std::size_t n, const BatchReader::Batch* cut = nullptr) {
    const auto now = advance_clock(batch, n);
    std::uint64_t ticket = 0;
    std::size_t i = 0;
    // The blocks the reader cut, then (rare) the rest of the batch here.
    for (std::size_t b = 0; cut && b < cut->blocks; ++b) {
      const std::uint64_t t =
          slicer_.push_block(batch + i, cut->block_frames[b], cut->summaries[b], now);
      if (t != 0) ticket = t;
      i += cut->block_frames[b];
    }
    while (i < n) {
      const std::size_t k = next_block(batch + i, n - i, block_frames_, span_ticks_, rule_, summary_);
      const std::uint64_t t = slicer_.push_block(batch + i, k, summary_, now);
      if (t != 0) ticket = t;
      i += k;
    }
    slicer_.poll(now);
    frames_ += n;
    return ticket;
  }

  std::uint64_t frames() const { return frames_; }
  std::size_t block_frames() const { return block_frames_; }
  std::uint64_t span_ticks() const { return span_ticks_; }
  const SourceRule& rule() const { return rule_; }

 private:
  // The slicer's clock: acquisition time, advanced by each batch's step forward. A step back
  // (the scanner's clock was reset) does not stop it: it goes on from the new clock, so a
  // reset is confirmed after stream.reset_confirm_ms of the new run's data, as live.
  Slicer::Clock::time_point advance_clock(const RawFrame* batch, std::size_t n) {
    const std::uint64_t median = chunk_time(batch, n);
    if (!have_time_) {
      last_time_ = median;
      have_time_ = true;
    }
    if (median > last_time_) acquisition_ticks_ += median - last_time_;
    last_time_ = median;
    return Slicer::Clock::time_point{} +
           std::chrono::duration_cast<Slicer::Clock::duration>(std::chrono::duration<double, std::pico>(
               static_cast<double>(acquisition_ticks_) * tick_ps_));
  }

  Slicer& slicer_;
  const double tick_ps_;
  const SourceRule rule_;
  const std::size_t block_frames_;
  const std::uint64_t span_ticks_;
  ChunkSummary summary_;
  std::uint64_t last_time_ = 0, acquisition_ticks_ = 0;
  bool have_time_ = false;
  std::uint64_t frames_ = 0;
};

// What reading the input took.
struct ReadTotals {
  std::uint64_t bytes = 0;
  std::size_t trailing_bytes = 0;  // a partial frame at the end of the file
  double read_s = 0;
  double cut_s = 0;          // several readers: cutting batches into blocks
  double buffer_wait_s = 0;  // several readers: waiting for a buffer to read into
  unsigned readers = 1;
};

// A pcap/pcapng capture: its UDP payloads, split by input.framing as petdaqd would.
ReadTotals push_capture(const Options& o, const Settings& settings, std::uint64_t input_bytes,
                        Counters& counters, FramePusher& pusher, Slicer& slicer) {
  std::vector<RawFrame> captured = capture_frames(o.input, settings.input.framing, counters);
  for (std::size_t at = 0; at < captured.size(); at += kChunkFrames)
    slicer.wait_staged(
        pusher.push(captured.data() + at, std::min(kChunkFrames, captured.size() - at)));
  return {.bytes = input_bytes};
}

// A frame file, read by `reader_threads` threads into `buffers`.
ReadTotals push_file(const Options& o, std::FILE* input, std::uint64_t input_bytes,
                     const ReadBuffers& buffers, std::size_t buffer_count,
                     unsigned reader_threads, FramePusher& pusher, Slicer& slicer,
                     PhaseTimer& phases, cli::Progress& progress) {
  BatchReader reader(input, buffers.data(), buffer_count, kChunkFrames, pusher.block_frames(),
                     pusher.span_ticks(), pusher.rule(), reader_threads);
  ReadTotals totals;
  totals.readers = reader.readers();
  // A batch goes back to the reader once the batch after it is pushed and its own frames
  // are staged (with the GPU backend its copy may still run while the next is pushed).
  BatchReader::Batch* held = nullptr;
  std::uint64_t held_ticket = 0;
  for (;;) {
    BatchReader::Batch* b = nullptr;
    try {
      PhaseScope wait(&phases, Phase::wait_chunk);
      b = reader.next();
    } catch (const std::exception& e) {
      throw std::runtime_error(o.input.string() + ": " + e.what());
    }
    if (!b) break;
    const std::uint64_t ticket = b->n > 0 ? pusher.push(b->frames, b->n, b) : 0;
    totals.bytes += b->bytes;
    if (held) {
      {
        PhaseScope wait(&phases, Phase::stage_wait);
        slicer.wait_staged(held_ticket);
      }
      reader.release(held);
    }
    held = b;
    held_ticket = ticket;
    if (input_bytes > 0)
      progress.update(static_cast<double>(totals.bytes) / static_cast<double>(input_bytes),
                      std::to_string(pusher.frames()) + " frames");
  }
  if (held) slicer.wait_staged(held_ticket);
  totals.trailing_bytes = reader.trailing_bytes();
  totals.read_s = reader.read_seconds();
  totals.cut_s = reader.cut_seconds();
  totals.buffer_wait_s = reader.buffer_wait_seconds();
  return totals;
}

constexpr Counter kBadFrameCounters[] = {Counter::frame_bad_marker,   Counter::frame_bad_bdm,
                                         Counter::frame_bad_du,       Counter::frame_bad_position,
                                         Counter::frame_no_crystal,   Counter::frame_bad_time};

std::uint64_t bad_frames(const Counters& counters) {
  std::uint64_t bad = 0;
  for (Counter k : kBadFrameCounters) bad += counters.get(k);
  return bad;
}

// The summary's first part: files, frames and what became of them.
void print_counts(const Options& o, const ReadTotals& read, const PlmSink& sink,
                  const HistogramFileSink& histograms, const Backend& backend,
                  std::uint64_t frames, const Counters& counters, double acq_s) {
  auto c = [&](Counter k) { return counters.get(k); };
  std::printf("input            %s (%llu bytes)\n", o.input.c_str(),
              static_cast<unsigned long long>(read.bytes));
  std::printf("output           %s (%llu bytes, %llu messages)\n", o.output.c_str(),
              static_cast<unsigned long long>(sink.bytes_written()),
              static_cast<unsigned long long>(sink.messages()));
  for (const auto& pdh : histograms.written())
    std::printf("histograms       %s\n", pdh.c_str());
  std::printf("backend          %s\n", backend.name());
  std::printf("frames           %llu\n", static_cast<unsigned long long>(frames));
  if (read.trailing_bytes > 0)
    std::printf("trailing bytes   %zu (a partial frame at the end of the file, discarded)\n",
                read.trailing_bytes);
  std::printf("bad frames       %llu\n", static_cast<unsigned long long>(bad_frames(counters)));
  for (Counter k : kBadFrameCounters)
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
}

// The summary's second part: where the time went.
void print_timing(const ReadTotals& read, const Backend& backend, const PlmSink& sink,
                  const PhaseTimer& phases, std::uint64_t frames, double wall_s,
                  double processing_s) {
  if (read.readers > 1)
    std::printf("wall time        %.3f s (start-up %.3f s; %u reader threads: read %.3f s, cut "
                "%.3f s, waited for a buffer %.3f s)\n",
                wall_s, wall_s - processing_s, read.readers, read.read_s, read.cut_s,
                read.buffer_wait_s);
  else
    std::printf("wall time        %.3f s (start-up %.3f s, read %.3f s on 1 reader thread)\n",
                wall_s, wall_s - processing_s, read.read_s);
  const std::optional<HostStageWork> work = host_stage_work(backend);
  if (work) {
    // The rest of this thread's time: the slicer, staging, the output, and waiting for the
    // reader (a read that the processing does not hide).
    std::printf("stages           take %.3f s, convert %.3f s, sort %.3f s, coincidence %.3f s, "
                "slicer, output and waiting for the reader %.3f s\n",
                work->take_s, work->convert_s, work->sort_s, work->coincidence_s,
                processing_s - work->take_s - work->convert_s - work->sort_s -
                    work->coincidence_s);
  }
  const unsigned threads = backend.threads();
  if (work && threads > 1) {
    const ParallelStats& ps = work->parallel;
    std::printf("threads          %u (%llu slices split, %llu coincidence seams)\n", threads,
                static_cast<unsigned long long>(ps.convert_calls),
                static_cast<unsigned long long>(ps.coincidence_seams));
    // Where the split stages' time goes, and what the hand-overs and the wait for the slowest
    // task cost (thread-seconds in runs minus the tasks' own).
    std::printf("split steps      sort: partition %.3f s, ranges %.3f s; coincidence: walks %.3f s, "
                "join %.3f s; %llu pool runs, %.3f s, idle in them %.1f %%\n",
                ps.sort_partition_seconds, ps.sort_range_seconds, ps.coincidence_walk_seconds,
                ps.coincidence_join_seconds, static_cast<unsigned long long>(ps.pool.runs),
                ps.pool.run_seconds,
                ps.pool.run_seconds > 0
                    ? 100.0 * (1.0 - ps.pool.task_seconds / (ps.pool.run_seconds * threads))
                    : 0.0);
  }
  const PlmThreadWriter::Stats w = sink.writer().stats();
  std::printf("output writing   %u thread%s, %.3f s in writes (summed); %llu of %llu messages "
              "written from where the backend put them, %.1f MB copied; this thread waited "
              "%.3f s for the writers\n",
              sink.writer().threads(), sink.writer().threads() == 1 ? "" : "s", w.write_s,
              static_cast<unsigned long long>(w.messages_in_place),
              static_cast<unsigned long long>(w.messages), static_cast<double>(w.bytes_copied) * 1e-6,
              w.caller_wait_s);
  auto waited = [&](Phase p) { return static_cast<double>(phases.stats(p).total_ns) * 1e-9; };
  std::printf("waits            reader %.3f s, staged copies %.3f s", waited(Phase::wait_chunk),
              waited(Phase::stage_wait));
  if (!work)
    std::printf(", device: partition %.3f s, count %.3f s, slice %.3f s, records %.3f s",
                waited(Phase::partition_wait), waited(Phase::count_wait),
                waited(Phase::collect_wait), waited(Phase::copy_out_wait));
  std::printf(" (this thread)\n");
  if (!work) {
    // The rest of this thread's time: the backend's calls (their own time, waits apart), the
    // output, and the slicer with the hand-overs of batches.
    double phased = 0;
    for (std::size_t p = 0; p < kPhaseCount; ++p) phased += waited(static_cast<Phase>(p));
    std::printf("this thread      backend calls: stage %.3f s, submit %.3f s, collect %.3f s; "
                "output %.3f s; slicer and the rest %.3f s (waits apart)\n",
                waited(Phase::backend_stage) + waited(Phase::staged_poll), waited(Phase::submit),
                waited(Phase::collect), waited(Phase::publish), processing_s - phased);
  }
  std::printf("throughput       %.3f M frames/s (after start-up, %u backend thread%s)\n",
              per_second(frames, processing_s) / 1e6, threads, threads == 1 ? "" : "s");
}

int run(const Options& o) {
  const auto wall_start = std::chrono::steady_clock::now();
  const Settings settings = offline_settings(o);
  const Calibration calibration = load_calibration(settings);
  const BackendKind kind = backend_kind(o.backend, settings.backend);

  FileCloser input(std::fopen(o.input.c_str(), "rb"));
  if (!input.get())
    throw std::runtime_error(o.input.string() + ": cannot open: " + std::strerror(errno));
  std::error_code ec;
  const std::uint64_t input_bytes = std::filesystem::file_size(o.input, ec);

  std::string explanation;
  std::unique_ptr<Backend> backend = make_backend(kind, settings, calibration, explanation);
  // Each batch stays untouched until its tickets are staged (push_file), so the CPU backend
  // may copy its blocks when it takes a slice, all at once on its threads.
  backend->defer_staging(true);
  const Geometry geometry = Geometry::from(settings.scanner);
  Counters counters(geometry.bdm_count());
  PlmWriterOptions writing;
  writing.threads = o.writers > 0 ? o.writers
                                  : (backend->works_in_collect() ? kWriterThreadsCpu : kWriterThreadsGpu);
  writing.memory_bytes =
      backend->works_in_collect() ? kWriterMemoryBytesCpu : kWriterMemoryBytesGpu;
  writing.allocator = backend->make_stage_allocator();
  PlmSink sink(settings, o.output, std::move(writing));
  // A backend that copies its records out (the GPU backend) copies them into the writer's
  // memory, and the writer threads write them from there.
  backend->set_result_memory(&sink.memory());
  HistogramFileSink histograms(settings, *backend, counters, o.histograms);
  ImageFileSink image(settings, *backend, histograms, o.image);
  SpanSink span(sink, image);
  histograms.span_from(&span);
  image.span_from(&span);
  DeviceTimesSink device_times(span, *backend);
  // This thread's phases: its waits for the reader, for the backend's copies of a batch and
  // (the GPU backend marks them) for the device; its time in the backend's calls and in the
  // output.
  PhaseTimer phases;
  TimedBackend timed(*backend, phases);
  TimedSink output(device_times, phases);
  // Nobody waits for a slice here: results are delivered as the backend's pipeline needs,
  // not at each max_slice_ms of acquisition time.
  Slicer slicer(settings, timed, output, counters, 0, Slicer::Delivery::throughput);
  if (!o.quiet) std::fprintf(stderr, "petdaq-offline: %s\n", explanation.c_str());

  // A backend whose work runs on this host's cores (inside collect()) needs them; one that
  // works on a device leaves them to the readers, which then set the pace.
  const unsigned reader_threads =
      o.readers > 0 ? o.readers
                    : (backend->works_in_collect() ? kReaderThreadsCpu : kReaderThreadsGpu);
  // Two buffers per reader (three at least: BatchReader).
  const std::size_t buffer_count = std::max<std::size_t>(3, 2 * std::size_t{reader_threads});
  const ReadBuffers buffers(*backend, buffer_count);
  FramePusher pusher(settings, slicer);
  cli::Progress progress(kProgram, !o.quiet);
  const auto processing_start = std::chrono::steady_clock::now();
  const ReadTotals read =
      is_capture(o.input)
          ? push_capture(o, settings, input_bytes, counters, pusher, slicer)
          : push_file(o, input.get(), input_bytes, buffers, buffer_count, reader_threads, pusher,
                      slicer, phases, progress);
  slicer.finish();
  backend->set_result_memory(nullptr);
  sink.close();
  progress.done();
  if (read.trailing_bytes > 0) counters.add(Counter::rx_trailing_bytes, read.trailing_bytes);
  const auto wall_end = std::chrono::steady_clock::now();
  const double wall_s = std::chrono::duration<double>(wall_end - wall_start).count();
  const double processing_s = std::chrono::duration<double>(wall_end - processing_start).count();

  const double acq_s = static_cast<double>(span.ticks()) * settings.scanner.tick_ps * 1e-12;
  const std::uint64_t frames = pusher.frames();
  print_counts(o, read, sink, histograms, *backend, frames, counters, acq_s);
  print_timing(read, *backend, sink, phases, frames, wall_s, processing_s);
  device_times.print();
  // A file with no valid frame (an empty file, or one that is not frames at all, such as
  // truth.json) is an error, not an empty result.
  const std::uint64_t bad = bad_frames(counters);
  if (frames == 0 || bad == frames) {
    std::fprintf(stderr,
                 "petdaq-offline: %s: no valid frame in %llu frames (%llu bad): is it a file of "
                 "16-byte raw frames?\n",
                 o.input.c_str(), static_cast<unsigned long long>(frames),
                 static_cast<unsigned long long>(bad));
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace petdaq

int main(int argc, char** argv) {
  using namespace petdaq;
  Options o;
  if (const auto rc = parse(argc, argv, o)) return *rc;
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
  } catch (const UsageError& e) {
    std::fprintf(stderr, "petdaq-offline: %s\n", e.what());
    return 2;
  } catch (const std::bad_alloc&) {
    // The engine's buffers are sized by the configuration, all at start.
    std::fprintf(stderr,
                 "petdaq-offline: not enough memory for the engine buffers of %s: make "
                 "stream.max_slice_frames, max_pending_frames, max_carry_singles or "
                 "max_records_per_single smaller (petdaqd --check-config prints what they "
                 "need)\n",
                 o.config.c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "petdaq-offline: %s\n", e.what());
    return 2;
  }
}

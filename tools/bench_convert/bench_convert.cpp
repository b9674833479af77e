// petdaq-bench-convert: the CPU convert stage (convert_frames: decode, position and energy
// look-ups with their prefetches, energy correction, window test) on one thread, over a
// realistic synthetic stream of the configured scanner (default: 24 BDMs x 4 DUs x 169
// crystals, 256 x 256 flood maps, 1000 energy bins: a 65 MB energy table) or over a recorded
// file of frames with the configuration's calibration (--input). Prints frames/s per core
// (median of the repetitions) next to the 50 M frames/s per-core target, for the tables as
// the CPU backend holds them, other page sizes, prefetch distances and energy-table sizes.
#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/cli.h"
#include "core/calibration.h"
#include "core/convert.h"
#include "core/settings.h"

namespace petdaq {
namespace {

constexpr double kTargetFramesPerSecond = 50e6;  // per core, for the convert stage alone
constexpr std::size_t kHugePageBytes = 2u << 20;

struct Options {
  std::size_t frames = 10'000'000;
  int repeat = 7;
  std::string config;
  std::string input;  // frames file; empty: synthetic frames
  std::uint64_t seed = 1;
  std::size_t frames_per_datagram = 560;  // 8960 bytes: a full raw datagram under a 9000 MTU
  bool backend_only = false;  // only the CPU backend's layout (for instruction counts)
};

// Returns the exit code when the program should stop here (--help, --version, a usage error).
std::optional<int> parse_args(int argc, char** argv, Options& o) {
  cli::App app("petdaq-bench-convert",
               "The CPU convert stage on the default scanner and other energy-table layouts, "
               "or on a file of frames with the configuration's calibration.");
  app.add_option("--frames", o.frames, "frames per pass")->type_name("N")->check(CLI::PositiveNumber);
  app.add_option("--datagram", o.frames_per_datagram,
                 "frames per datagram, all from one BDM; the worst case, every frame from a "
                 "random BDM, is measured as well")
      ->type_name("F")
      ->check(CLI::PositiveNumber);
  cli::add_repetitions(app, o.repeat);
  app.add_option("-c,--config", o.config,
                 "scanner and energy window from this file (default: built-in defaults, which "
                 "equal config/petdaq.yaml); the tables are synthetic")
      ->type_name("FILE");
  app.add_option("-i,--input", o.input,
                 "convert the first N frames of this file of raw frames (petdaq-sim's "
                 "frames.bin) with the calibration tables --config names")
      ->type_name("FILE");
  cli::add_seed(app, o.seed, "random seed of the synthetic stream");
  app.add_flag("--backend-only", o.backend_only,
               "measure only the CPU backend's layout (2 MB pages, default prefetch), e.g. for "
               "instructions per frame under valgrind --tool=callgrind");
  return app.parse_or_exit(argc, argv);
}

// Raw ADC value of the 511 keV photopeak of each crystal: crystals differ in light yield.
std::vector<float> make_photopeaks(const Geometry& g, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> peak(1800.f, 2600.f);
  std::vector<float> p(std::size_t{g.bdm_count()} * g.du_per_bdm() * g.crystals_per_du());
  for (auto& v : p) v = peak(rng);
  return p;
}

// A flood map per DU: crystal_transaxial rows x crystal_axial columns of cells; the pixels
// near a cell's border belong to no crystal (255), as in a segmented flood image.
std::vector<std::uint8_t> make_position_lut(const Geometry& g) {
  const std::uint32_t n = g.position_size;
  std::vector<std::uint8_t> lut(std::size_t{g.bdm_count()} * g.du_per_bdm() * n * n);
  const double row_px = double(n) / g.crystal_transaxial;
  const double col_px = double(n) / g.crystal_axial;
  for (std::size_t bd = 0; bd < std::size_t{g.bdm_count()} * g.du_per_bdm(); ++bd)
    for (std::uint32_t y = 0; y < n; ++y)
      for (std::uint32_t x = 0; x < n; ++x) {
        const double fy = (y + 0.5) / row_px, fx = (x + 0.5) / col_px;
        const double dy = fy - std::floor(fy), dx = fx - std::floor(fx);
        const bool border = dy < 0.06 || dy > 0.94 || dx < 0.06 || dx > 0.94;
        const auto label = static_cast<std::uint32_t>(fy) * g.crystal_axial + static_cast<std::uint32_t>(fx);
        lut[(bd * n + y) * n + x] = border ? 255 : static_cast<std::uint8_t>(label);
      }
  return lut;
}

// float32[bdm][du][crystal][bins]: the crystal's gain (511 keV at its photopeak) times a mild
// non-linearity along the energy axis.
std::vector<float> make_energy_table(const Geometry& g, const std::vector<float>& peaks,
                                     std::uint32_t bins, std::uint32_t bin_width) {
  std::vector<float> t(peaks.size() * bins);
  for (std::size_t c = 0; c < peaks.size(); ++c)
    for (std::uint32_t b = 0; b < bins; ++b) {
      const double raw = (b + 0.5) * bin_width;
      const double nonlinearity = 1.0 + 0.04 * std::tanh((raw - peaks[c]) / 2000.0);
      t[c * bins + b] = static_cast<float>(511.0 / peaks[c] * nonlinearity);
    }
  (void)g;
  return t;
}

// The stream the receivers hand on: datagrams of `per_datagram` frames from one BDM each,
// BDMs in random order, each BDM's times nearly ordered, x/y scattered around a crystal's
// cell centre, energies a 511 keV photopeak over a Compton tail.
std::vector<RawFrame> make_frames(const Geometry& g, const Settings& s,
                                  const std::vector<float>& peaks, std::size_t n,
                                  std::size_t per_datagram, std::mt19937_64& rng) {
  std::vector<RawFrame> frames(n);
  std::uniform_int_distribution<std::uint32_t> bdm_d(0, g.bdm_count() - 1);
  std::uniform_int_distribution<std::uint32_t> du_d(0, g.du_per_bdm() - 1);
  std::uniform_int_distribution<std::uint32_t> label_d(0, g.crystals_per_du() - 1);
  std::normal_distribution<double> spread(0.0, 0.18);  // in cell widths
  std::normal_distribution<double> resolution(0.0, 0.05);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::exponential_distribution<double> gap_ticks(1.0 / 3.0);
  std::uniform_int_distribution<int> jitter_ticks(0, 200);
  const double row_px = double(g.position_size) / g.crystal_transaxial;
  const double col_px = double(g.position_size) / g.crystal_axial;
  double now_ticks = 1e9;
  std::uint32_t bdm = 0;
  for (std::size_t i = 0; i < n; ++i) {
    now_ticks += gap_ticks(rng);
    if (i % per_datagram == 0) bdm = bdm_d(rng);
    FrameFields f{};
    f.head_marker = s.frame.head_marker;
    f.tail_marker = s.frame.tail_marker;
    const std::uint32_t du = du_d(rng), label = label_d(rng);
    f.bdm = static_cast<std::uint8_t>(bdm);
    f.du = static_cast<std::uint8_t>(du);
    f.time_ticks = static_cast<std::uint64_t>(now_ticks) + jitter_ticks(rng);
    const double row = label / g.crystal_axial + 0.5 + spread(rng);
    const double col = label % g.crystal_axial + 0.5 + spread(rng);
    const double last = g.position_size - 1;
    f.y = static_cast<std::uint8_t>(std::clamp(row * row_px, 0.0, last));
    f.x = static_cast<std::uint8_t>(std::clamp(col * col_px, 0.0, last));
    const float peak =
        peaks[(std::size_t{bdm} * g.du_per_bdm() + du) * g.crystals_per_du() + g.local_crystal_of_label(label)];
    const double raw = unit(rng) < 0.75 ? peak * (1.0 + resolution(rng)) : peak * (0.1 + 0.8 * unit(rng));
    f.energy_raw = static_cast<std::uint16_t>(std::clamp(raw, 0.0, 65535.0));
    f.temp_int_degC = 35;
    f.temp_frac_16ths = static_cast<std::uint8_t>(i & 0xF);
    encode_frame(f, frames[i].bytes);
  }
  return frames;
}

// A copy of a table in memory backed by 2 MB pages where the kernel grants them, so that the
// random per-frame row look-ups miss the TLB less often.
template <class T>
struct HugePageTable {
  T* data = nullptr;
  std::size_t bytes = 0;
  explicit HugePageTable(const std::vector<T>& src) {
    bytes = (src.size() * sizeof(T) + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
    data = static_cast<T*>(std::aligned_alloc(kHugePageBytes, bytes));
    if (!data) throw std::bad_alloc();
    madvise(data, bytes, MADV_HUGEPAGE);
    std::memcpy(data, src.data(), src.size() * sizeof(T));
  }
  ~HugePageTable() { std::free(data); }
  HugePageTable(const HugePageTable&) = delete;
  HugePageTable& operator=(const HugePageTable&) = delete;
};

// Kernel's count of anonymous memory in huge pages, for the record ("" if unknown).
std::string anon_huge_pages() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("AnonHugePages:", 0) == 0) return line.substr(14);
  return "";
}

// One way of converting the stream: its frames, tables and loop.
struct Variant {
  std::string label;
  double table_MB;
  const std::vector<RawFrame>* frames;
  ConvertTables tables;
  PrefetchDistance ahead;
  std::vector<double> wall_fps, cpu_fps;  // one per round
  CounterDelta delta;                     // of the first round
};

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

// One pass of `v` over its frames: frames/s of wall-clock time and of this thread's CPU time
// (the latter leaves out the time other processes held the core).
void measure_once(Variant& v, std::vector<Single>& out, std::uint32_t bdm_count, bool first) {
  std::vector<std::uint64_t> bdm_singles(bdm_count), bdm_rejected(bdm_count);
  CounterDelta delta;
  const double cpu0 = thread_cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  const std::size_t kept = convert_frames(v.frames->data(), v.frames->size(), v.tables, out.data(),
                                          delta, bdm_singles.data(), bdm_rejected.data(), v.ahead);
  const auto t1 = std::chrono::steady_clock::now();
  const double cpu1 = thread_cpu_seconds();
  const double n = double(v.frames->size());
  v.wall_fps.push_back(n / std::chrono::duration<double>(t1 - t0).count());
  v.cpu_fps.push_back(n / std::max(cpu1 - cpu0, 1e-9));
  if (first) v.delta = delta;
  if (kept > out.size()) std::abort();  // never: convert_frames keeps at most n
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void report(const Variant& v) {
  const double cpu = median(v.cpu_fps);
  const double wall = median(v.wall_fps);
  std::printf("%-52s %6.1f MB  %7.2f M frames/s per core (wall clock %6.2f)  ratio to 50 M/s: %.3f\n",
              v.label.c_str(), v.table_MB, cpu / 1e6, wall / 1e6, cpu / kTargetFramesPerSecond);
}

// The same calibration at `factor` times coarser bins: each coarse bin averages its fine bins.
std::vector<float> coarsen(const std::vector<float>& fine, std::uint32_t fine_bins, std::uint32_t factor) {
  const std::uint32_t coarse_bins = (fine_bins + factor - 1) / factor;
  const std::size_t crystals = fine.size() / fine_bins;
  std::vector<float> t(crystals * coarse_bins);
  for (std::size_t c = 0; c < crystals; ++c)
    for (std::uint32_t k = 0; k < coarse_bins; ++k) {
      double sum = 0;
      std::uint32_t n = 0;
      for (std::uint32_t b = k * factor; b < std::min(fine_bins, (k + 1) * factor); ++b, ++n)
        sum += fine[c * fine_bins + b];
      t[c * coarse_bins + k] = static_cast<float>(sum / n);
    }
  return t;
}

// The first `n` frames of a file of raw frames (fewer if the file is shorter).
std::vector<RawFrame> read_frames(const std::string& file, std::size_t n) {
  std::FILE* in = std::fopen(file.c_str(), "rb");
  if (!in) throw std::runtime_error(file + ": cannot open");
  std::vector<RawFrame> frames(n);
  const std::size_t got = std::fread(frames.data(), sizeof(RawFrame), n, in);
  std::fclose(in);
  if (got == 0) throw std::runtime_error(file + ": no frames");
  frames.resize(got);
  return frames;
}

int run(const Options& o) {
  Settings s = o.config.empty() ? Settings{} : load_settings(o.config);
  const Geometry g = Geometry::from(s.scanner);
  std::mt19937_64 rng(o.seed);

  Calibration cal;
  std::vector<RawFrame> frames;
  if (!o.input.empty()) {
    // Recorded frames with the configuration's own calibration tables (time offsets included).
    cal = load_calibration(s);
    frames = read_frames(o.input, o.frames);
  } else {
    const auto peaks = make_photopeaks(g, rng);
    cal.position_lut = make_position_lut(g);
    cal.energy_bins = 1000;
    cal.energy_bin_width = s.calibration.energy_bin_width;
    cal.energy_correction = make_energy_table(g, peaks, cal.energy_bins, cal.energy_bin_width);
    frames = make_frames(g, s, peaks, o.frames, o.frames_per_datagram, rng);
  }
  const std::uint32_t bins = cal.energy_bins;
  const std::uint32_t bin_width = cal.energy_bin_width;
  std::vector<Single> out(frames.size());
  std::fill(reinterpret_cast<unsigned char*>(out.data()),
            reinterpret_cast<unsigned char*>(out.data() + out.size()), 0);  // fault the pages in

  double load[3] = {0, 0, 0};
  if (std::FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3) load[0] = -1;
    std::fclose(f);
  }
  std::printf("petdaq-bench-convert: CPU convert stage, one thread\n");
  std::printf("scanner: %u BDMs x %u DUs x %u crystals, flood map %ux%u, energy table %u bins of %u ADC\n",
              g.bdm_count(), g.du_per_bdm(), g.crystals_per_du(), g.position_size, g.position_size,
              bins, bin_width);
  if (o.input.empty())
    std::printf("frames: %zu per pass, synthetic, in datagrams of %zu frames from one BDM\n",
                frames.size(), o.frames_per_datagram);
  else
    std::printf("frames: the first %zu of %s, calibration of the configuration%s\n", frames.size(),
                o.input.c_str(), cal.time_offsets.empty() ? "" : " (with time offsets)");
  std::printf("%d passes per layout (median reported); load average %.2f\n", o.repeat, load[0]);

  const double MB = 1.0 / (1 << 20);
  const double table_MB = cal.energy_correction.size() * sizeof(float) * MB;
  const ConvertTables base = make_convert_tables(s, cal);

  // Worst case: consecutive frames from random BDMs (no datagram locality at all).
  std::vector<RawFrame> mixed = frames;
  std::shuffle(mixed.begin(), mixed.end(), rng);
  // Control: the same frames, all moved to BDM 0 / DU 0, so both tables stay in cache: what
  // the stage costs without memory misses.
  std::vector<RawFrame> one_du = frames;
  for (RawFrame& f : one_du) {
    f.bytes[frame_offset::bdm] = 0;
    f.bytes[frame_offset::head_du] &= 0xF0;
  }
  const HugePageTable<float> huge(cal.energy_correction);
  ConvertTables huge_tables = base;
  huge_tables.energy_correction = huge.data;
  const HugePageTable<std::uint8_t> huge_lut(cal.position_lut);
  ConvertTables all_huge_tables = huge_tables;
  all_huge_tables.position_lut = huge_lut.data;
  std::vector<std::vector<float>> coarse_tables;
  std::vector<Variant> variants;
  const auto add = [&](std::string label, double MB_, const std::vector<RawFrame>& f, const ConvertTables& t,
                       PrefetchDistance ahead = {}) {
    variants.push_back({std::move(label), MB_, &f, t, ahead, {}, {}, {}});
  };
  // convert_frames prefetches the look-ups of frames ahead itself; the CPU backend hands it
  // copies of both tables on 2 MB pages, the first line below.
  char first[96];
  std::snprintf(first, sizeof first, "2 MB pages, prefetch %zu / %zu ahead (the CPU backend)",
                PrefetchDistance{}.position, PrefetchDistance{}.energy);
  add(first, huge.bytes * MB, frames, all_huge_tables);
  if (!o.backend_only) {
    add("  LUT and table in 4 KB pages (the .npy layout)", table_MB, frames, base);
    add("  table in 2 MB pages, LUT in 4 KB pages", huge.bytes * MB, frames, huge_tables);
    for (const PrefetchDistance d : {PrefetchDistance{0, 0}, PrefetchDistance{16, 8}, PrefetchDistance{32, 16},
                                     PrefetchDistance{128, 64}, PrefetchDistance{256, 128}}) {
      char label[96];
      std::snprintf(label, sizeof label, "  2 MB pages, prefetch %zu / %zu frames ahead%s", d.position, d.energy,
                    d.position == 0 ? " (none)" : "");
      add(label, huge.bytes * MB, frames, all_huge_tables, d);
    }
    coarse_tables.reserve(3);
    for (const std::uint32_t factor : {10u, 100u, bins}) {
      coarse_tables.push_back(coarsen(cal.energy_correction, bins, factor));
      ConvertTables t = all_huge_tables;
      t.energy_correction = coarse_tables.back().data();
      t.energy_bins = (bins + factor - 1) / factor;
      t.energy_bin_width = bin_width * factor;
      t.derive();
      char label[96];
      if (factor == bins)  // one bin: a per-crystal gain, the floor of any "gain x shared curve"
        std::snprintf(label, sizeof label, "  per-crystal gain only (1 bin)");
      else
        std::snprintf(label, sizeof label, "  coarser: %u bins of %u ADC", t.energy_bins, t.energy_bin_width);
      add(label, coarse_tables.back().size() * sizeof(float) * MB, frames, t);
    }
    add("worst case: every frame from a random BDM, 2 MB pages", huge.bytes * MB, mixed, all_huge_tables);
    add("  same, no prefetch", huge.bytes * MB, mixed, all_huge_tables, PrefetchDistance{0, 0});
    add("  same, 4 KB pages", table_MB, mixed, base);
    add("control: all frames on one DU (tables in cache)", table_MB, one_du, base);
  }

  // Rounds over all variants, so that a change of the machine's load hits them all alike.
  for (int r = 0; r < o.repeat; ++r)
    for (Variant& v : variants) measure_once(v, out, g.bdm_count(), r == 0);

  const CounterDelta& d = variants.front().delta;
  const double n = double(frames.size());
  std::printf("stream: %.1f %% singles in the window, %.1f %% outside it, %.1f %% no crystal, %.1f %% other bad\n",
              100 * d[Counter::single_accepted] / n, 100 * d[Counter::single_energy_rejected] / n,
              100 * d[Counter::frame_no_crystal] / n,
              100 * (d[Counter::frame_bad_marker] + d[Counter::frame_bad_bdm] + d[Counter::frame_bad_du] +
                     d[Counter::frame_bad_position] + d[Counter::frame_bad_time]) / n);
  std::printf("\nconvert_frames by energy-table layout (median of %d; per core = per second of this\n"
              "thread's CPU time):\n", o.repeat);
  for (const Variant& v : variants) report(v);
  const std::string granted = anon_huge_pages();
  if (!granted.empty()) std::printf("(AnonHugePages at the end:%s)\n", granted.c_str());
  std::printf("\ntarget: 50 M frames/s per core for the convert stage\n");
  return 0;
}

}  // namespace
}  // namespace petdaq

int main(int argc, char** argv) {
  petdaq::Options o;
  if (const auto rc = petdaq::parse_args(argc, argv, o)) return *rc;
  try {
    return petdaq::run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "petdaq-bench-convert: %s\n", e.what());
    return 1;
  }
}

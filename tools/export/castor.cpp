#include "tools/export/castor.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "core/geometry.h"
#include "proto/bytes.h"
#include "proto/signed_tof.h"
#include "tools/export/crystal_position.h"

namespace petdaq::exporter {

namespace {

std::filesystem::path with_suffix(const std::filesystem::path& base, const char* suffix) {
  return std::filesystem::path(base.string() + suffix);
}

void write_or_throw(std::FILE* f, const void* data, std::size_t bytes,
                    const std::filesystem::path& path) {
  if (std::fwrite(data, 1, bytes, f) != bytes)
    throw std::runtime_error(path.string() + ": write failed: " + std::strerror(errno));
}

}  // namespace

CastorWriter::CastorWriter(const std::filesystem::path& base, const Settings& settings,
                           double tick_ps, const Corrections& corrections, CastorMode mode)
    : base_(base),
      settings_(settings),
      tick_ps_(tick_ps),
      corrections_(corrections),
      crystal_count_(Geometry::from(settings.scanner).crystal_count()),
      geometry_(Geometry::from(settings.scanner)),
      mode_(mode) {
  if (mode_ == CastorMode::histogram)
    counts_.assign(std::uint64_t{crystal_count_} * (crystal_count_ - 1) / 2, 0);
  const auto cdf = with_suffix(base_, ".cdf");
  cdf_ = std::fopen(cdf.c_str(), "wb");
  if (!cdf_) throw std::runtime_error(cdf.string() + ": cannot create: " + std::strerror(errno));
}

CastorWriter::~CastorWriter() {
  if (cdf_) std::fclose(cdf_);
}

void CastorWriter::add(const MessageHeader& m, const CoincRecord* records, std::size_t n) {
  if (m.kind != static_cast<std::uint16_t>(MessageKind::prompts)) return;
  if (!have_run_ || m.run_id != run_) {
    // A new run restarts the scanner's clock: continue the time line after the last one.
    run_offset_ms_ = run_end_ms_;
    run_ = m.run_id;
    run_start_ticks_ = m.t_begin;
    have_run_ = true;
  }
  const double ms_per_tick = tick_ps_ * 1e-9;
  run_end_ms_ = run_offset_ms_ + double(m.t_end - run_start_ticks_) * ms_per_tick;
  const bool randoms = writes_randoms(), norm = writes_normalization();
  const double live = corrections_.live.live_fraction();
  std::uint8_t event[24];
  const std::size_t size = event_bytes();
  auto store_float = [](std::uint8_t* p, float v) {
    std::uint32_t bits;
    std::memcpy(&bits, &v, 4);
    bytes::store_le32(p, bits);
  };
  if (mode_ == CastorMode::histogram) {
    for (std::size_t i = 0; i < n; ++i) check_crystals(records[i], crystal_count_, m, i);
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint32_t id1 = tof_lower_crystal(records[i]), id2 = tof_higher_crystal(records[i]);
      if (id1 != id2) ++counts_[line_index(id1, id2)];
    }
    events_ += n;
    return;
  }
  for (std::size_t i = 0; i < n; ++i) {
    const CoincRecord& r = records[i];
    check_crystals(r, crystal_count_, m, i);
    const std::uint32_t id1 = tof_lower_crystal(r), id2 = tof_higher_crystal(r);
    const double ms = run_offset_ms_ + std::floor(double(r.time_a - run_start_ticks_) * ms_per_tick);
    std::uint8_t* p = event;
    bytes::store_le32(p, static_cast<std::uint32_t>(ms));
    p += 4;
    if (randoms) {
      store_float(p, float(corrections_.randoms->per_s(id1, id2)));
      p += 4;
    }
    if (norm) {
      // CASToR divides the forward projection by this factor: 1 / (LOR efficiency · live).
      const double eff = corrections_.normalization ? corrections_.normalization->efficiency(id1, id2) : 1.0;
      store_float(p, float(1.0 / (eff * live)));
      p += 4;
    }
    store_float(p, float(double(signed_dt_ticks(r)) * tick_ps_));
    bytes::store_le32(p + 4, id1);
    bytes::store_le32(p + 8, id2);
    write_or_throw(cdf_, event, size, with_suffix(base_, ".cdf"));
  }
  events_ += n;
}

template <class Fn>
void CastorWriter::for_each_line(Fn fn) const {
  // Every pair of crystals the sorter can pair: different crystals, sectors at least
  // min_sector_difference apart.
  const std::uint32_t sectors = geometry_.bdm_transaxial;
  const std::uint32_t min_sectors = settings_.coincidence.min_sector_difference;
  for (std::uint32_t i = 0; i < crystal_count_; ++i)
    for (std::uint32_t j = i + 1; j < crystal_count_; ++j)
      if (!min_sectors ||
          sector_distance(geometry_.sector_of(i), geometry_.sector_of(j), sectors) >= min_sectors)
        fn(i, j);
}

namespace {

// Events appended to a buffer and written a megabyte at a time.
class EventFile {
 public:
  explicit EventFile(const std::filesystem::path& path)
      : path_(path), file_(std::fopen(path.c_str(), "wb"), &std::fclose) {
    if (!file_) throw std::runtime_error(path.string() + ": cannot create: " + std::strerror(errno));
    buffer_.reserve(1 << 20);
  }
  void u32(std::uint32_t v) {
    std::uint8_t b[4];
    bytes::store_le32(b, v);
    buffer_.insert(buffer_.end(), b, b + 4);
  }
  void f32(float v) {
    std::uint32_t bits;
    std::memcpy(&bits, &v, 4);
    u32(bits);
  }
  void end_event() {
    if (buffer_.size() < (1u << 20) - 64) return;
    write_or_throw(file_.get(), buffer_.data(), buffer_.size(), path_);
    buffer_.clear();
  }
  void close() {
    write_or_throw(file_.get(), buffer_.data(), buffer_.size(), path_);
    if (std::fclose(file_.release()) != 0)
      throw std::runtime_error(path_.string() + ": write failed: " + std::strerror(errno));
  }

 private:
  std::filesystem::path path_;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file_;
  std::vector<std::uint8_t> buffer_;
};

}  // namespace

void CastorWriter::write_normalization_file(const std::string& scanner) {
  // Every line, crystal 1 the lower id, with the events' factor.
  const std::filesystem::path norm_base(base_.string() + "_norm");
  const auto cdf = with_suffix(norm_base, ".cdf");
  EventFile f(cdf);
  const double live = corrections_.live.live_fraction();
  norm_lines_ = 0;
  for_each_line([&](std::uint32_t i, std::uint32_t j) {
    f.f32(float(1.0 / (corrections_.normalization->efficiency(i, j) * live)));
    f.u32(i);
    f.u32(j);
    f.end_event();
    ++norm_lines_;
  });
  f.close();
  std::ofstream h(with_suffix(norm_base, ".cdh"));
  h << "Scanner name: " << scanner << "\n"
    << "Data filename: " << cdf.filename().string() << "\n"
    << "Number of events: " << norm_lines_ << "\n"
    << "Data mode: normalization\n"
    << "Data type: PET\n"
    << "Normalization correction flag: 1\n"
    << "Attenuation correction flag: 0\n";
  if (!h) throw std::runtime_error(with_suffix(norm_base, ".cdh").string() + ": write failed");
}

void CastorWriter::write_histogram() {
  // Every line the sorter can form, empty ones too: CASToR's histogram mode takes its
  // sensitivity from the lines listed.
  const auto cdf = with_suffix(base_, ".cdf");
  std::fclose(cdf_);
  cdf_ = nullptr;
  EventFile f(cdf);
  const bool randoms = writes_randoms(), norm = writes_normalization();
  const double live = corrections_.live.live_fraction();
  histogram_lines_ = 0;
  for_each_line([&](std::uint32_t i, std::uint32_t j) {
    f.u32(0);
    if (randoms) f.f32(float(corrections_.randoms->per_s(i, j)));
    if (norm) {
      const double eff = corrections_.normalization ? corrections_.normalization->efficiency(i, j) : 1.0;
      f.f32(float(1.0 / (eff * live)));
    }
    f.f32(float(counts_[line_index(i, j)]));
    f.u32(i);
    f.u32(j);
    f.end_event();
    ++histogram_lines_;
  });
  f.close();
}

void CastorWriter::finish() {
  const auto cdf = with_suffix(base_, ".cdf");
  if (mode_ == CastorMode::histogram) write_histogram();
  if (cdf_ && std::fclose(cdf_) != 0) {
    cdf_ = nullptr;
    throw std::runtime_error(cdf.string() + ": write failed: " + std::strerror(errno));
  }
  cdf_ = nullptr;

  const ScannerSettings& s = settings_.scanner;
  const Geometry g = Geometry::from(s);
  // The scanner is named after its geometry, and its .hscan/.lut after the name, as CASToR
  // finds them (config/scanner/<name>.hscan): exports of one scanner share one pair.
  std::ostringstream name;
  name << "petdaq_" << s.bdm_transaxial << 'x' << s.bdm_axial << "bdm_" << s.du_transaxial << 'x'
       << s.du_axial << "du_" << s.crystal_transaxial << 'x' << s.crystal_axial << "crystals_r"
       << s.ring_radius_mm << "mm";
  const std::string scanner = name.str();
  // The list mode's sensitivity needs every line's factor; a histogram lists them itself.
  if (corrections_.normalization && mode_ == CastorMode::list) write_normalization_file(scanner);
  const auto scanner_base = base_.parent_path() / scanner;
  const auto lut_path = with_suffix(scanner_base, ".lut");
  {
    std::FILE* lut = std::fopen(lut_path.c_str(), "wb");
    if (!lut) throw std::runtime_error(lut_path.string() + ": cannot create: " + std::strerror(errno));
    std::uint8_t entry[24];
    for (std::uint32_t c = 0; c < g.crystal_count(); ++c) {
      const CrystalPlace p = crystal_place(s, c);
      const float v[6] = {float(p.centre_mm[0]), float(p.centre_mm[1]), float(p.centre_mm[2]),
                          float(p.outward[0]),   float(p.outward[1]),   float(p.outward[2])};
      for (int k = 0; k < 6; ++k) {
        std::uint32_t bits;
        std::memcpy(&bits, &v[k], 4);
        bytes::store_le32(entry + 4 * k, bits);
      }
      if (std::fwrite(entry, 1, sizeof entry, lut) != sizeof entry) {
        std::fclose(lut);
        throw std::runtime_error(lut_path.string() + ": write failed");
      }
    }
    if (std::fclose(lut) != 0) throw std::runtime_error(lut_path.string() + ": write failed");
  }
  const double axial_fov_mm = g.ring_count() * s.crystal_pitch_axial_mm +
                              (s.du_axial * s.bdm_axial - 1.0) * s.du_gap_mm;
  {
    std::ofstream h(with_suffix(scanner_base, ".hscan"));
    h << "modality: PET\n"
      << "scanner name: " << scanner << "\n"
      << "number of elements: " << g.crystal_count() << "\n"
      << "number of layers: 1\n"
      << "number of crystals in layer(s): " << g.crystal_count() << "\n"
      << "crystals size depth: " << s.crystal_depth_mm << "\n"
      << "crystals size transaxial: " << s.crystal_pitch_transaxial_mm << "\n"
      << "crystals size axial: " << s.crystal_pitch_axial_mm << "\n"
      << "mean depth of interaction(s): -1\n"
      << "min angle difference: 0\n"
      << "voxels number transaxial: 128\n"
      << "voxels number axial: " << 2 * g.ring_count() - 1 << "\n"
      << "field of view transaxial: " << 2.0 * s.ring_radius_mm * 0.8 << "\n"
      << "field of view axial: " << axial_fov_mm << "\n"
      << "description: petdaq scanner, LUT indexed by petdaq's global crystal id (DESIGN section 3)\n";
    if (!h) throw std::runtime_error(with_suffix(scanner_base, ".hscan").string() + ": write failed");
  }
  {
    std::ofstream h(with_suffix(base_, ".cdh"));
    const bool list = mode_ == CastorMode::list;
    h << "Scanner name: " << scanner << "\n"
      << "Data filename: " << cdf.filename().string() << "\n"
      << "Number of events: " << (list ? events_ : histogram_lines_) << "\n"
      << "Data mode: " << (list ? "list-mode" : "histogram") << "\n"
      << "Data type: PET\n"
      << "Start time (s): 0\n"
      << "Duration (s): " << run_end_ms_ * 1e-3 << "\n"
      << "Calibration factor: 1\n"
      << "Isotope: unknown\n";
    if (list)  // TOF: Δt = t(crystal 1) − t(crystal 2) in ps, over ±window; quantised by the tick.
      h << "TOF information flag: 1\n"
        << "TOF resolution (ps): " << settings_.coincidence.time_resolution_ps << "\n"
        << "List TOF measurement range (ps): " << 2.0 * settings_.coincidence.window_ps << "\n"
        << "List TOF quantization bin size (ps): " << tick_ps_ << "\n";
    else
      h << "TOF information flag: 0\n"
        << "petdaq prompts: " << events_ << "\n";
    h << "Attenuation correction flag: 0\n"
      << "Normalization correction flag: " << writes_normalization() << "\n"
      << "Scatter correction flag: 0\n"
      << "Random correction flag: " << writes_randoms() << "\n";
    // Provenance of the corrections (keys CASToR does not read).
    const LiveTime& live = corrections_.live;
    if (corrections_.live_known)
      h << "petdaq live-time fraction: " << live.live_fraction() << "\n"
        << "petdaq dead time (s): " << live.dead_s << "\n";
    if (corrections_.normalization)
      h << "petdaq normalization: component-based table (petdaq-calibrate normalization)\n";
    if (corrections_.randoms)
      h << "petdaq randoms: "
        << (corrections_.randoms->model() == PairRandoms::Model::singles_prompts
                ? "singles-rate per crystal pair scaled to the singles-prompts model"
                : "singles-rate per crystal pair")
        << ", " << corrections_.randoms->total_per_s() << " per s in all\n";
    if (!h) throw std::runtime_error(with_suffix(base_, ".cdh").string() + ": write failed");
  }
}

}  // namespace petdaq::exporter

#include "tools/export/castor.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include "core/geometry.h"
#include "proto/bytes.h"
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
                           double tick_ps)
    : base_(base), settings_(settings), tick_ps_(tick_ps) {
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
  std::uint8_t event[12];
  const std::uint32_t crystals = Geometry::from(settings_.scanner).crystal_count();
  std::size_t written = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const CoincRecord& r = records[i];
    if (r.crystal_a >= crystals || r.crystal_b >= crystals) {
      ++skipped_;  // no line of response in the scanner's LUT: left out, counted
      continue;
    }
    ++written;
    const double ms = run_offset_ms_ + std::floor(double(r.time_a - run_start_ticks_) * ms_per_tick);
    bytes::store_le32(event + 0, static_cast<std::uint32_t>(ms));
    bytes::store_le32(event + 4, r.crystal_a);
    bytes::store_le32(event + 8, r.crystal_b);
    write_or_throw(cdf_, event, sizeof event, with_suffix(base_, ".cdf"));
  }
  events_ += written;
}

void CastorWriter::finish() {
  const auto cdf = with_suffix(base_, ".cdf");
  if (std::fclose(cdf_) != 0) {
    cdf_ = nullptr;
    throw std::runtime_error(cdf.string() + ": write failed: " + std::strerror(errno));
  }
  cdf_ = nullptr;

  const ScannerSettings& s = settings_.scanner;
  const Geometry g = Geometry::from(s);
  const std::string scanner = base_.filename().string();
  const auto lut_path = with_suffix(base_, ".lut");
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
    std::ofstream h(with_suffix(base_, ".hscan"));
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
    if (!h) throw std::runtime_error(with_suffix(base_, ".hscan").string() + ": write failed");
  }
  {
    std::ofstream h(with_suffix(base_, ".cdh"));
    h << "Scanner name: " << scanner << "\n"
      << "Data filename: " << cdf.filename().string() << "\n"
      << "Number of events: " << events_ << "\n"
      << "Data mode: list-mode\n"
      << "Data type: PET\n"
      << "Start time (s): 0\n"
      << "Duration (s): " << run_end_ms_ * 1e-3 << "\n"
      << "Calibration factor: 1\n"
      << "Isotope: unknown\n"
      << "TOF information flag: 0\n"
      << "Attenuation correction flag: 0\n"
      << "Normalization correction flag: 0\n"
      << "Scatter correction flag: 0\n"
      << "Random correction flag: 0\n";
    if (!h) throw std::runtime_error(with_suffix(base_, ".cdh").string() + ": write failed");
  }
}

}  // namespace petdaq::exporter

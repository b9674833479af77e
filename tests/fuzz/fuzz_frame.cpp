// The frame decoder and the frame -> single conversion (DESIGN sections 2-4) on arbitrary
// 16-byte frames, with calibration tables whose entries are themselves fuzzed: decoding and
// encoding are inverse, and conversion never reads outside its tables (ASan) and always
// gives a status.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/calibration.h"
#include "core/convert.h"
#include "core/geometry.h"
#include "core/settings.h"
#include "proto/frame.h"

using namespace petdaq;

namespace {
struct Tables {
  Settings settings;
  Calibration calibration;
  ConvertTables t;
  Tables() {
    settings.scanner.bdm_transaxial = 3;
    settings.scanner.bdm_axial = 2;
    settings.scanner.position_size = 32;
    settings.scanner.crystal_transaxial = 5;
    settings.scanner.crystal_axial = 4;
    const Geometry g = Geometry::from(settings.scanner);
    calibration.energy_bins = 8;
    calibration.energy_bin_width = 500;
    calibration.position_lut.resize(std::size_t{g.bdm_count()} * g.du_per_bdm() * 32 * 32);
    calibration.energy_correction.resize(std::size_t{g.bdm_count()} * g.du_per_bdm() *
                                         g.crystals_per_du() * calibration.energy_bins);
    calibration.time_offsets.resize(g.crystal_count());
    t = make_convert_tables(settings, calibration);
  }
};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static Tables tables;
  auto& cal = tables.calibration;
  // Table contents from the tail of the input: labels (any byte, 255 and out-of-range
  // labels included), gains (NaN and infinities included), time offsets.
  std::size_t at = size - size % kFrameBytes;
  for (std::size_t i = 0; at < size && i < cal.position_lut.size(); ++i) cal.position_lut[i] = data[at++];
  for (std::size_t i = 0; at + 4 <= size && i < cal.energy_correction.size(); ++i, at += 4)
    std::memcpy(&cal.energy_correction[i], data + at, 4);
  for (std::size_t off = 0; off + kFrameBytes <= size - size % kFrameBytes; off += kFrameBytes) {
    const std::uint8_t* f = data + off;
    const FrameFields fields = decode_frame(f);
    std::uint8_t again[kFrameBytes];
    encode_frame(fields, again);
    if (std::memcmp(again, f, kFrameBytes) != 0) std::abort();
    Single s{};
    const FrameStatus status = convert_frame(f, tables.t, s);
    if (status == FrameStatus::single || status == FrameStatus::energy_rejected) {
      if (s.crystal >= tables.t.geometry.crystal_count()) std::abort();
    }
  }
  return 0;
}

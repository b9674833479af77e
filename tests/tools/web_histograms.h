// A histogram file for petdaq-web's tests, made with the project's own writer
// (encode_histogram_file): a small scanner whose dimensions all differ (so a swapped axis
// shows), every bin of every histogram filled with a known, varied count.
#pragma once

#include <cstdint>
#include <vector>

#include "core/histograms.h"
#include "core/settings.h"

namespace petdaq::test {

inline Settings web_histogram_settings() {
  Settings s;
  auto& sc = s.scanner;
  sc.bdm_transaxial = 3;
  sc.bdm_axial = 2;
  sc.du_transaxial = 2;
  sc.du_axial = 2;
  sc.crystal_transaxial = 3;
  sc.crystal_axial = 4;
  sc.position_size = 10;
  s.output.histograms.enabled = true;
  s.output.histograms.energy_bins = 50;
  s.output.histograms.energy_max_keV = 1000.0;
  s.output.histograms.raw_bins = 8;
  s.output.histograms.rate_bins = 16;
  return s;
}

// Bin i of histogram h: 1 ... 97, different from its neighbours and from other histograms'.
inline std::uint64_t web_histogram_count(Hist h, std::uint64_t i) {
  return 1 + (i * 7919 + static_cast<std::uint64_t>(h) * 31 + (i * i) % 13) % 97;
}

inline void fill_web_histograms(HistogramSet& set) {
  const HistogramLayout& l = set.layout();
  for (int k = 0; k < kHistCount; ++k) {
    const Hist h = static_cast<Hist>(k);
    for (std::uint64_t i = 0; i < l.count[k]; ++i) {
      if (hist_is_32bit(h))
        l.u32(set.bins(), h)[i] = static_cast<unsigned int>(web_histogram_count(h, i));
      else
        l.u64(set.bins(), h)[i] = web_histogram_count(h, i);
    }
  }
}

// The encoded file (= the `histograms` message body) of `set` for `settings`.
inline std::vector<std::uint8_t> web_histogram_file(const HistogramSet& set, const Settings& settings,
                                                    std::uint64_t run_id) {
  std::vector<std::uint8_t> bytes;
  encode_histogram_file(set, settings, run_id,
                        histogram_metadata_json(settings, run_id, "cpu", nullptr), bytes);
  return bytes;
}

}  // namespace petdaq::test

// The histogram file reader under AddressSanitizer and UBSan: every truncation and random
// corruption of a valid file is either refused with HistogramFileError or parsed into
// descriptors whose every bin lies inside the bytes (each one is read here).
#include "core/histograms.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "test_scanner.h"

namespace petdaq {
namespace {

std::vector<std::uint8_t> valid_file() {
  test::TestScanner sc;
  sc.settings.output.histograms.enabled = true;
  sc.settings.output.histograms.energy_bins = 8;
  sc.settings.output.histograms.raw_bins = 8;
  sc.settings.output.histograms.rate_bins = 4;
  HistogramSet h(make_histogram_layout(sc.settings));
  for (std::size_t i = 0; i < h.layout().bytes; ++i) h.bins()[i] = static_cast<std::uint8_t>(i * 7);
  std::vector<std::uint8_t> bytes;
  encode_histogram_file(h, sc.settings, 1, histogram_metadata_json(sc.settings, 1, "cpu", nullptr), bytes);
  return bytes;
}

// Parses and, when accepted, reads every bin of every histogram.
bool parse_and_read(const std::vector<std::uint8_t>& bytes) {
  try {
    const HistogramFile f = parse_histogram_file(bytes.data(), bytes.size());
    std::uint64_t sum = 0;
    for (const HistDescriptor& d : f.descriptors)
      for (std::uint64_t i = 0; i < d.elements(); ++i) sum += f.value(d, i);
    (void)sum;
    return true;
  } catch (const HistogramFileError&) {
    return false;
  }
}

TEST(HistogramFileAsan, EveryTruncationIsRefused) {
  const std::vector<std::uint8_t> file = valid_file();
  ASSERT_TRUE(parse_and_read(file));
  for (std::size_t n = 0; n < file.size(); n += 1 + n / 64) {
    const std::vector<std::uint8_t> cut(file.begin(), file.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_FALSE(parse_and_read(cut)) << n;
  }
}

TEST(HistogramFileAsan, CorruptHeadersNeverReadOutside) {
  const std::vector<std::uint8_t> file = valid_file();
  std::mt19937_64 rng(17);
  const std::size_t head = kHistHeaderBytes + kHistCount * kHistDescriptorBytes;
  std::uniform_int_distribution<std::size_t> where(0, head - 1);
  std::uniform_int_distribution<int> byte(0, 255);
  int refused = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<std::uint8_t> bad = file;
    for (int k = 0; k < 1 + trial % 4; ++k) bad[where(rng)] = static_cast<std::uint8_t>(byte(rng));
    refused += parse_and_read(bad) ? 0 : 1;
  }
  EXPECT_GT(refused, 100);  // many corruptions hit a checked field
}

}  // namespace
}  // namespace petdaq

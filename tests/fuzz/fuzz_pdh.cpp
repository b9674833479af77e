// The .pdh reader (histogram files and `histograms` message bodies) on arbitrary bytes:
// parse_histogram_file either refuses them (HistogramFileError) or every bin of every
// histogram it accepted lies inside the bytes, and what petdaq-top and petdaq-web make of an
// accepted file (the crystal view, the page's message) is an answer or a clear refusal.
#include <cstdint>
#include <cstdlib>
#include <stdexcept>

#include "core/histograms.h"
#include "tools/top/crystals.h"
#include "tools/web/messages.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace petdaq;
  HistogramFile f;
  try {
    f = parse_histogram_file(data, size);
  } catch (const HistogramFileError&) {
    return 0;
  }
  // Every bin is readable (AddressSanitizer catches one that is not).
  volatile double sum = 0;
  for (const HistDescriptor& d : f.descriptors) {
    const std::uint64_t n = d.elements();
    for (std::uint64_t i = 0; i < n; i += 1 + n / 64) sum = sum + f.number(d, i) + f.value(d, i);
    if (n > 0) sum = sum + f.number(d, n - 1);
  }
  try {
    (void)top::analyse_crystals(f);
  } catch (const std::exception&) {
  }
  try {
    (void)web::histograms_message(
        std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const std::exception&) {
  }
  return 0;
}

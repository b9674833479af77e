// The .plm reader on arbitrary files: whole messages, or a PlmError at the first bad byte.
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "core/plm_file.h"
#include "fuzz_file.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto path = petdaq::fuzz::input_file("list.plm", data, size);
  try {
    petdaq::PlmReader reader(path);
    petdaq::MessageHeader h;
    std::vector<petdaq::CoincRecord> records;
    while (reader.next(h, records))
      if (records.size() != h.record_count) std::abort();
  } catch (const petdaq::PlmError&) {
  }
  return 0;
}

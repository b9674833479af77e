// The .plm writer threads under ThreadSanitizer: many messages through little memory, so that
// the caller waits for the threads again and again; the file must be PlmWriter's, byte for
// byte, and TSan must see no race.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "core/plm_file.h"
#include "core/plm_sink.h"
#include "test_scanner.h"
#include "tests/support/files.h"

namespace petdaq {
namespace {

TEST(PlmTsan, ThreadWriterHandsBuffersOverWithoutRaces) {
  test::TestScanner scanner;
  const PlmHeader header = make_plm_header(scanner.settings);
  const auto direct = scanner.dir / "direct.plm", threaded = scanner.dir / "threaded.plm";
  PlmWriter a(direct, header);
  // Three threads and 4 KiB of memory: the caller waits for room again and again, and the
  // threads finish out of order.
  PlmWriterOptions options;
  options.threads = 3;
  options.memory_bytes = 4096;
  PlmThreadWriter b(threaded, header, std::move(options));
  MessageBuilder builder_a, builder_b;
  std::vector<CoincRecord> records;
  for (std::uint32_t i = 0; i < 500; ++i) {
    records.assign(i % 71, CoincRecord{i, 3, i, i + 1, 511.0f, 500.0f, 0});
    SliceResult r;
    r.slice_id = i;
    r.t_begin = i;
    r.t_end = i + 1;
    r.prompts = records.data();
    r.prompt_count = records.size();
    const std::size_t bytes = records.size() * sizeof(CoincRecord);
    a.write_message(builder_a.build(MessageKind::prompts, 0, r), records.data(), bytes);
    b.write_message(builder_b.build(MessageKind::prompts, 0, r), records.data(), bytes);
    if (i % 100 == 99) b.flush();
  }
  a.close();
  b.close();
  EXPECT_EQ(test::read_bytes(threaded), test::read_bytes(direct));
  EXPECT_GT(b.bytes_written(), 500u * 64u);
}

}  // namespace
}  // namespace petdaq

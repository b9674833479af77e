// The list-mode file sink (daemon/file_sink.h) on a disk that refuses writes.
#include "daemon/file_sink.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <filesystem>
#include <vector>

#include "core/counters.h"
#include "core/plm_file.h"
#include "core/settings.h"
#include "tests/support/scratch_dir.h"

namespace petdaq::daemon {
namespace {

using namespace std::chrono_literals;

// A disk that refuses writes (here RLIMIT_FSIZE, which fails a write the way a full disk
// does): the error and every dropped byte are counted, the file ends on its last whole
// message, and writing resumes on a new file once the disk takes data again.
TEST(FileSink, RefusedWritesAreCountedFilesEndOnAMessageAndWritingResumes) {
  const test::ScratchDir scratch;
  const std::filesystem::path& dir = scratch.path();
  Settings s;
  s.output.file.enabled = true;
  s.output.file.directory = dir;
  s.output.file.rotate_bytes = 1ull << 30;
  Counters counters(1);
  std::signal(SIGXFSZ, SIG_IGN);
  rlimit unlimited{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &unlimited), 0);
  constexpr std::size_t kRecords = 100;
  constexpr std::uint64_t kMessageBytes = kMessageHeaderBytes + kRecords * sizeof(CoincRecord);
  std::vector<std::uint8_t> body(kRecords * sizeof(CoincRecord));
  auto message = [&](std::uint64_t id) {
    MessageHeader h;
    h.kind = 1;
    h.message_id = id;
    h.record_count = kRecords;
    h.record_size = sizeof(CoincRecord);
    std::fill(body.begin(), body.end(), static_cast<std::uint8_t>(id));
    return h;
  };
  auto limit = [&](rlim_t bytes) {
    rlimit r = unlimited;
    r.rlim_cur = bytes;
    ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &r), 0);
  };
  {
    FileSink sink(s, counters, 0ms);
    // Room for 10 messages and part of the 11th.
    limit(kPlmHeaderBytes + 10 * kMessageBytes + 1000);
    for (std::uint64_t id = 0; id <= 10; ++id) sink.write(message(id), body.data(), body.size());
    EXPECT_EQ(counters.get(Counter::out_file_errors), 1u);
    // The disk takes nothing: every retry fails, every message is dropped and counted.
    limit(0);
    for (std::uint64_t id = 11; id <= 14; ++id) sink.write(message(id), body.data(), body.size());
    // Space again: a new file.
    ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &unlimited), 0);
    for (std::uint64_t id = 15; id <= 19; ++id) sink.write(message(id), body.data(), body.size());
    sink.close();
  }
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &unlimited), 0);
  EXPECT_EQ(counters.get(Counter::out_file_errors), 5u);
  EXPECT_EQ(counters.get(Counter::out_file_dropped_bytes), 5 * kMessageBytes);
  EXPECT_EQ(counters.get(Counter::out_file_bytes), 15 * kMessageBytes);
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(std::filesystem::file_size(files[0]), kPlmHeaderBytes + 10 * kMessageBytes);
  std::vector<std::uint64_t> ids;
  for (const auto& f : files) {
    PlmReader reader(f);  // throws on a message cut short
    MessageHeader h;
    std::vector<CoincRecord> records;
    while (reader.next(h, records)) {
      ids.push_back(h.message_id);
      EXPECT_EQ(records.size(), kRecords);
    }
  }
  const std::vector<std::uint64_t> expected = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 18, 19};
  EXPECT_EQ(ids, expected);
}

}  // namespace
}  // namespace petdaq::daemon

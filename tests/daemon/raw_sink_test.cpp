// Raw capture on a disk that refuses writes (RLIMIT_FSIZE, which fails a write the way a
// full disk does): every frame is on disk or counted lost, the files hold whole frames only,
// and capture resumes on a new file once the disk takes data again.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include <gtest/gtest.h>

#include "core/counters.h"
#include "core/settings.h"
#include "daemon/raw_sink.h"
#include "proto/frame.h"
#include "tests/support/files.h"
#include "tests/support/scratch_dir.h"

namespace petdaq::daemon {
namespace {

using namespace std::chrono_literals;

TEST(RawSink, EveryFrameIsOnDiskOrCountedAndCaptureResumes) {
  const test::ScratchDir scratch;
  const std::filesystem::path& dir = scratch.path();
  RawCaptureSettings s;
  s.enabled = true;
  s.directory = dir;
  s.rotate_bytes = 1ull << 30;
  Counters counters(1);
  std::signal(SIGXFSZ, SIG_IGN);
  rlimit unlimited{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &unlimited), 0);
  auto limit = [&](rlim_t bytes) {
    rlimit r = unlimited;
    r.rlim_cur = bytes;
    ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &r), 0);
  };
  // Frames numbered in their bytes, so that every frame on disk can be told apart.
  std::uint64_t next = 0;
  auto chunk = [&](std::size_t n) {
    std::vector<RawFrame> f(n);
    for (auto& frame : f) {
      const std::uint64_t v = next++;
      std::memcpy(frame.bytes, &v, sizeof v);
      std::memcpy(frame.bytes + 8, &v, sizeof v);
    }
    return f;
  };
  constexpr std::size_t kChunk = 100'000;  // 1.6 MB
  std::uint64_t given = 0;
  {
    RawSink sink(s, counters, 0ms);
    // Room for 10.5 MB (not a multiple of 16 bytes): the disk fills in the middle of a write.
    limit(10'485'760 + 7);
    for (int i = 0; i < 10; ++i) {
      const auto f = chunk(kChunk);
      sink.write(f.data(), f.size());
      given += f.size();
    }
    sink.close();  // the last buffer meets the full disk here (as at a rotation)
    // The disk takes nothing: every frame is counted lost.
    limit(0);
    for (int i = 0; i < 3; ++i) {
      const auto f = chunk(kChunk);
      sink.write(f.data(), f.size());
      given += f.size();
    }
    // Space again: capture goes on in a new file.
    ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &unlimited), 0);
    for (int i = 0; i < 5; ++i) {
      const auto f = chunk(kChunk);
      sink.write(f.data(), f.size());
      given += f.size();
    }
    sink.close();
  }
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &unlimited), 0);
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::uint64_t on_disk = 0;
  std::vector<std::uint64_t> numbers;
  for (const auto& f : files) {
    const auto bytes = test::read_bytes(f);
    EXPECT_EQ(bytes.size() % kFrameBytes, 0u) << f << " holds a partial frame";
    on_disk += bytes.size();
    for (std::size_t at = 0; at + kFrameBytes <= bytes.size(); at += kFrameBytes) {
      std::uint64_t v;
      std::memcpy(&v, &bytes[at], sizeof v);
      numbers.push_back(v);
    }
  }
  const std::uint64_t raw_bytes = counters.get(Counter::out_raw_bytes);
  const std::uint64_t lost = counters.get(Counter::out_raw_lost_frames);
  std::fprintf(stderr, "%zu files, %llu bytes on disk, out.raw_bytes %llu, out.raw_lost_frames %llu, "
               "frames given %llu\n",
               files.size(), static_cast<unsigned long long>(on_disk),
               static_cast<unsigned long long>(raw_bytes), static_cast<unsigned long long>(lost),
               static_cast<unsigned long long>(given));
  EXPECT_EQ(raw_bytes, on_disk) << "out.raw_bytes counts bytes that are not on disk";
  EXPECT_EQ(raw_bytes / kFrameBytes + lost, given) << "frames neither on disk nor counted";
  // Each frame on disk once, in order; the last five chunks all made it (resumed).
  EXPECT_TRUE(std::is_sorted(numbers.begin(), numbers.end()));
  EXPECT_EQ(std::adjacent_find(numbers.begin(), numbers.end()), numbers.end());
  ASSERT_GE(numbers.size(), 5 * kChunk);
  EXPECT_EQ(numbers.back(), given - 1);
  EXPECT_EQ(numbers[numbers.size() - 5 * kChunk], given - 5 * kChunk);
  EXPECT_GE(files.size(), 2u);
}

}  // namespace
}  // namespace petdaq::daemon

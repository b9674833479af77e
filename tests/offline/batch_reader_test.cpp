// petdaq-offline's reader (tools/offline/batch_reader.h): batches come out in file order,
// every byte once, whether one thread reads in sequence or several at their own offsets;
// the blocks cover the batch; a partial frame at the end is reported, not handed out.
#include "tools/offline/batch_reader.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "tests/support/scratch_dir.h"

namespace petdaq {
namespace {

struct Read {
  std::vector<RawFrame> frames;
  std::size_t trailing = 0;
  unsigned readers = 0;
};

// Takes the batches as petdaq-offline does: a batch goes back once the next is taken.
Read read_all(const std::filesystem::path& file, std::size_t batch_frames, std::size_t count,
              unsigned readers) {
  std::FILE* f = std::fopen(file.c_str(), "rb");
  EXPECT_NE(f, nullptr);
  std::vector<RawFrame> buffers(count * batch_frames);
  const SourceRule rule{false, 0, 0, 4};
  Read out;
  {
    BatchReader reader(f, buffers.data(), count, batch_frames, 70, 1000, rule, readers);
    out.readers = reader.readers();
    BatchReader::Batch* held = nullptr;
    while (BatchReader::Batch* b = reader.next()) {
      EXPECT_LE(b->n, batch_frames);
      std::size_t blocks = 0;
      for (std::size_t k = 0; k < b->blocks; ++k) {
        EXPECT_GT(b->block_frames[k], 0u);
        EXPECT_EQ(b->summaries[k].frames, b->block_frames[k]);
        blocks += b->block_frames[k];
      }
      EXPECT_EQ(blocks, b->summarized);
      EXPECT_EQ(b->summarized, b->n);  // under kMaxBlocks blocks of 70 frames at most
      out.frames.insert(out.frames.end(), b->frames, b->frames + b->n);
      if (held) reader.release(held);
      held = b;
    }
    out.trailing = reader.trailing_bytes();
  }
  std::fclose(f);
  return out;
}

TEST(BatchReader, SeveralReadersGiveTheFileInOrderOnce) {
  const test::ScratchDir dir;
  const std::size_t batch = 1000;
  // A partial last batch with a partial frame, exactly whole batches, one partial batch,
  // and nothing.
  for (const std::size_t n : {std::size_t{7 * batch + 321}, std::size_t{4 * batch},
                              std::size_t{17}, std::size_t{0}}) {
    for (const std::size_t trailing : {std::size_t{0}, std::size_t{5}}) {
      SCOPED_TRACE(std::to_string(n) + " frames, " + std::to_string(trailing) + " more bytes");
      std::vector<RawFrame> frames(n);
      for (std::size_t i = 0; i < n; ++i) {
        for (std::size_t b = 0; b < kFrameBytes; ++b)
          frames[i].bytes[b] = static_cast<std::uint8_t>((i >> (8 * (b % 4))) + b);
      }
      const auto file = dir / "frames.bin";
      {
        std::ofstream o(file, std::ios::binary);
        o.write(reinterpret_cast<const char*>(frames.data()),
                static_cast<std::streamsize>(n * kFrameBytes));
        o.write("abcde", static_cast<std::streamsize>(trailing));
      }
      for (const auto& [count, readers] : {std::pair<std::size_t, unsigned>{3, 1}, {4, 2}, {6, 3}}) {
        SCOPED_TRACE(std::to_string(readers) + " readers");
        const Read r = read_all(file, batch, count, readers);
        EXPECT_EQ(r.readers, readers);
        ASSERT_EQ(r.frames.size(), n);
        EXPECT_EQ(std::memcmp(r.frames.data(), frames.data(), n * kFrameBytes), 0);
        EXPECT_EQ(r.trailing, trailing);
      }
    }
  }
}

// A locker that checks how the reader page-locks a mapped file: whole pages, no window twice,
// each unlocked once and only when none of its batches is still with the caller; it refuses
// every third window (the reader then goes on without the lock).
class CheckingLocker final : public HostAllocator {
 public:
  void* allocate(std::size_t) override { return nullptr; }
  void deallocate(void*, std::size_t) noexcept override {}
  const char* kind() const override { return "checking"; }
  bool lock_read_only(const void* p, std::size_t bytes) override {
    std::lock_guard lock(mutex_);
    const auto at = reinterpret_cast<std::uintptr_t>(p);
    const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
    EXPECT_EQ(at % page, 0u);
    EXPECT_EQ(bytes % page, 0u);
    for (const auto& [q, n] : locked_) EXPECT_TRUE(at + bytes <= q || q + n <= at) << "overlap";
    if (++calls_ % 3 == 0) return false;
    locked_[at] = bytes;
    most_ = std::max(most_, locked_.size());
    return true;
  }
  void unlock(const void* p) noexcept override {
    std::lock_guard lock(mutex_);
    const auto it = locked_.find(reinterpret_cast<std::uintptr_t>(p));
    EXPECT_NE(it, locked_.end()) << "unlock of a window not locked";
    if (it == locked_.end()) return;
    for (const RawFrame* b : with_caller_) {
      const auto at = reinterpret_cast<std::uintptr_t>(b);
      EXPECT_FALSE(at >= it->first && at < it->first + it->second)
          << "a window unlocked while the caller holds one of its batches: window at " << it->first << " bytes " << it->second << " batch at " << at;
    }
    locked_.erase(it);
  }
  // The caller took / gave back a batch.
  void took(const RawFrame* b) {
    std::lock_guard lock(mutex_);
    with_caller_.insert(b);
  }
  void gave_back(const RawFrame* b) {
    std::lock_guard lock(mutex_);
    with_caller_.erase(b);
  }
  std::size_t locked() const {
    std::lock_guard lock(mutex_);
    return locked_.size();
  }
  std::size_t most() const { return most_; }

 private:
  mutable std::mutex mutex_;
  std::map<std::uintptr_t, std::size_t> locked_;
  std::set<const RawFrame*> with_caller_;
  std::size_t calls_ = 0, most_ = 0;
};

// A mapped file: the batches lie in the mapping, in order, every byte once; the windows are
// locked and unlocked as CheckingLocker asks, and none is left locked.
TEST(BatchReader, AMappedFileIsHandedOutWhereItLiesInLockedWindows) {
  const test::ScratchDir dir;
  const std::size_t batch = 1024;  // 16 KiB: whole pages
  const SourceRule rule{false, 0, 0, 4};
  for (const std::size_t n : {std::size_t{37 * batch + 321}, std::size_t{8 * batch},
                              std::size_t{17}}) {
    for (const unsigned readers : {1u, 3u}) {
      SCOPED_TRACE(std::to_string(n) + " frames, " + std::to_string(readers) + " readers");
      std::vector<RawFrame> frames(n);
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t b = 0; b < kFrameBytes; ++b)
          frames[i].bytes[b] = static_cast<std::uint8_t>((i >> (8 * (b % 4))) + b);
      const auto file = dir / "frames.bin";
      {
        std::ofstream o(file, std::ios::binary);
        o.write(reinterpret_cast<const char*>(frames.data()),
                static_cast<std::streamsize>(n * kFrameBytes));
        o.write("abc", 3);
      }
      const std::uint64_t bytes = n * kFrameBytes + 3;
      const int fd = ::open(file.c_str(), O_RDONLY);
      ASSERT_GE(fd, 0);
      void* map = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
      ASSERT_NE(map, MAP_FAILED);
      const auto* mapped = static_cast<const RawFrame*>(map);
      CheckingLocker locker;
      std::vector<RawFrame> got;
      std::uint64_t windows = 0;
      {
        BatchReader reader(mapped, bytes, &locker, 2 * BatchReader::kWindowBatches * readers,
                           batch, 70, 1000, rule, readers);
        EXPECT_EQ(reader.readers(), readers);
        BatchReader::Batch* held = nullptr;
        std::size_t k = 0;
        while (BatchReader::Batch* b = reader.next()) {
          locker.took(b->frames);
          EXPECT_TRUE(b->read_only);
          EXPECT_EQ(b->frames, mapped + k * batch) << "batch " << k << " not where it lies";
          std::size_t blocks = 0;
          for (std::size_t j = 0; j < b->blocks; ++j) blocks += b->block_frames[j];
          EXPECT_EQ(blocks, b->n);
          got.insert(got.end(), b->frames, b->frames + b->n);
          if (held) {
            locker.gave_back(held->frames);
            reader.release(held);
          }
          held = b;
          ++k;
        }
        if (held) locker.gave_back(held->frames);
        EXPECT_EQ(reader.trailing_bytes(), 3u);
        windows = reader.windows_locked() + reader.windows_unlocked();
        EXPECT_EQ(windows, (k + BatchReader::kWindowBatches - 1) / BatchReader::kWindowBatches);
        EXPECT_LE(locker.most(), 2 * readers);
      }
      EXPECT_EQ(locker.locked(), 0u) << "windows left locked";
      ASSERT_EQ(got.size(), n);
      EXPECT_EQ(std::memcmp(got.data(), frames.data(), n * kFrameBytes), 0);
      ::munmap(map, bytes);
      ::close(fd);
    }
  }
}

}  // namespace
}  // namespace petdaq

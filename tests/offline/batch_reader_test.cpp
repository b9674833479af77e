// petdaq-offline's reader (tools/offline/batch_reader.h): batches come out in file order,
// every byte once, whether one thread reads in sequence or several at their own offsets;
// the blocks cover the batch; a partial frame at the end is reported, not handed out.
#include "tools/offline/batch_reader.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
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

}  // namespace
}  // namespace petdaq

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
#include <random>
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

// The cutter fed piece by piece cuts exactly the blocks next_block() cuts from the whole
// batch: their sizes and summaries, whatever the pieces, block limits and time spans.
TEST(BlockCutter, PiecesGiveTheBlocksOfTheWholeBatch) {
  std::mt19937_64 rng(1127);
  const SourceRule rule{true, 0x5, 0xA, 6};
  for (int round = 0; round < 200; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const std::size_t n = std::uniform_int_distribution<std::size_t>(0, 9000)(rng);
    std::vector<RawFrame> frames(n);
    std::uint64_t t = 1000;
    for (RawFrame& f : frames) {
      // Runs of one source, now and then a bad frame or a jump in time.
      FrameFields x{};
      x.head_marker = 0x5;
      x.tail_marker = rng() % 50 == 0 ? 0x3 : 0xA;
      x.bdm = static_cast<std::uint8_t>(rng() % 8);
      t += rng() % 40 == 0 ? 5000 : rng() % 7;
      x.time_ticks = t;
      encode_frame(x, f.bytes);
    }
    const std::size_t max_frames = std::uniform_int_distribution<std::size_t>(1, 3000)(rng);
    const std::uint64_t span = std::uniform_int_distribution<std::uint64_t>(1, 20000)(rng);
    const std::size_t max_blocks = std::uniform_int_distribution<std::size_t>(1, 12)(rng);
    // next_block() over the whole batch.
    std::vector<std::size_t> want_frames;
    std::vector<ChunkSummary> want(max_blocks);
    std::size_t at = 0;
    for (std::size_t k = 0; at < n && k < max_blocks; ++k) {
      want_frames.push_back(next_block(frames.data() + at, n - at, max_frames, span, rule, want[k]));
      at += want_frames.back();
    }
    // The cutter, fed in random pieces.
    std::vector<std::size_t> got_frames(max_blocks);
    std::vector<ChunkSummary> got(max_blocks);
    BlockCutter cutter(frames.data(), max_blocks, got_frames.data(), got.data(), max_frames, span,
                       rule);
    for (std::size_t in = 0; in < n;) {
      in = std::min(n, in + std::uniform_int_distribution<std::size_t>(1, 1500)(rng));
      cutter.feed(in, false);
    }
    cutter.feed(n, true);
    ASSERT_EQ(cutter.blocks(), want_frames.size());
    EXPECT_EQ(cutter.cut_frames(), at);
    for (std::size_t k = 0; k < want_frames.size(); ++k) {
      ASSERT_EQ(got_frames[k], want_frames[k]) << "block " << k;
      EXPECT_EQ(got[k].frames, want[k].frames);
      EXPECT_EQ(got[k].sourceless, want[k].sourceless);
      EXPECT_EQ(got[k].min_time, want[k].min_time);
      EXPECT_EQ(got[k].max_time, want[k].max_time);
      ASSERT_EQ(got[k].present_count, want[k].present_count);
      for (std::uint32_t i = 0; i < want[k].present_count; ++i) {
        const std::uint8_t src = want[k].present[i];
        EXPECT_EQ(got[k].present[i], src);
        EXPECT_EQ(got[k].sources[src].min_time, want[k].sources[src].min_time);
        EXPECT_EQ(got[k].sources[src].max_time, want[k].sources[src].max_time);
        EXPECT_EQ(got[k].sources[src].frames, want[k].sources[src].frames);
        EXPECT_EQ(got[k].sources[src].first_index, want[k].sources[src].first_index);
      }
    }
  }
}

}  // namespace
}  // namespace petdaq

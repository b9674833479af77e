// Message headers and the list-mode file (DESIGN section 7).
#include "core/plm_file.h"
#include "core/plm_sink.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/settings.h"
#include "test_scanner.h"
#include "tests/support/files.h"

namespace petdaq {
namespace {

using test::TestScanner;

CoincRecord record(std::uint64_t t, std::uint32_t a, std::uint32_t b, std::uint32_t flags = 0) {
  return CoincRecord{t, 17, a, b, 500.5f, 480.25f, flags};
}

SliceResult slice(std::uint64_t id, std::uint64_t t0, std::uint64_t t1,
                  const std::vector<CoincRecord>& prompts, const std::vector<CoincRecord>& delayed) {
  SliceResult r;
  r.slice_id = id;
  r.t_begin = t0;
  r.t_end = t1;
  r.prompts = prompts.data();
  r.prompt_count = prompts.size();
  r.delayed = delayed.data();
  r.delayed_count = delayed.size();
  return r;
}

std::string error_of(const std::filesystem::path& file) {
  try {
    PlmReader reader(file);
    MessageHeader h;
    std::vector<CoincRecord> records;
    while (reader.next(h, records)) {
    }
  } catch (const PlmError& e) {
    return e.what();
  }
  return "";
}

TEST(MessageBuilder, IdsAreConsecutivePerKindFromZero) {
  MessageBuilder builder;
  const std::vector<CoincRecord> p = {record(10, 1, 2), record(11, 3, 4)}, d = {record(12, 5, 6)};
  const SliceResult r = slice(7, 100, 200, p, d);
  const MessageHeader a = builder.build(MessageKind::prompts, 3, r);
  const MessageHeader b = builder.build(MessageKind::delayed, 3, r);
  const MessageHeader c = builder.build(MessageKind::prompts, 3, r);
  const MessageHeader e = builder.build(MessageKind::prompts, 4, r);
  const MessageHeader f = builder.build(MessageKind::delayed, 4, r);
  EXPECT_EQ(a.message_id, 0u);
  EXPECT_EQ(c.message_id, 1u);
  EXPECT_EQ(e.message_id, 2u);
  EXPECT_EQ(b.message_id, 0u);
  EXPECT_EQ(f.message_id, 1u);
  EXPECT_EQ(builder.next_id(MessageKind::prompts), 3u);
  EXPECT_EQ(builder.next_id(MessageKind::delayed), 2u);
  EXPECT_EQ(a.magic, kMessageMagic);
  EXPECT_EQ(a.version, kMessageVersion);
  EXPECT_EQ(a.kind, 1u);
  EXPECT_EQ(b.kind, 2u);
  EXPECT_EQ(a.run_id, 3u);
  EXPECT_EQ(e.run_id, 4u);
  EXPECT_EQ(a.slice_id, 7u);
  EXPECT_EQ(a.t_begin, 100u);
  EXPECT_EQ(a.t_end, 200u);
  EXPECT_EQ(a.record_count, 2u);
  EXPECT_EQ(b.record_count, 1u);
  EXPECT_EQ(a.record_size, 32u);
  EXPECT_EQ(a.flags, 0u);
  EXPECT_EQ(a.publisher_id, 0u);
}

TEST(Plm, WriterReaderRoundTrip) {
  TestScanner scanner;
  const auto file = scanner.dir / "round.plm";
  const PlmHeader header = make_plm_header(scanner.settings);
  std::vector<std::vector<CoincRecord>> written;
  MessageBuilder builder;
  {
    PlmWriter writer(file, header);
    for (std::uint32_t i = 0; i < 5; ++i) {
      std::vector<CoincRecord> p, d;
      for (std::uint32_t k = 0; k < i; ++k) p.push_back(record(1000 * i + k, k, k + 1, k << 8));
      if (i % 2) d.push_back(record(1000 * i + 5, 9, 10, coinc_flag::delayed));
      const SliceResult r = slice(i, 1000 * i, 1000 * (i + 1), p, d);
      MessageHeader h = builder.build(MessageKind::prompts, 1, r);
      writer.write_message(h, p.data(), p.size() * sizeof(CoincRecord));
      written.push_back(p);
      h = builder.build(MessageKind::delayed, 1, r);
      writer.write_message(h, d.data(), d.size() * sizeof(CoincRecord));
      written.push_back(d);
    }
    writer.close();
    EXPECT_EQ(writer.bytes_written(), std::filesystem::file_size(file));
  }
  PlmReader reader(file);
  EXPECT_EQ(reader.header().magic, kPlmMagic);
  EXPECT_EQ(reader.header().tick_ps, scanner.settings.scanner.tick_ps);
  EXPECT_EQ(reader.header().crystal_count, scanner.geometry().crystal_count());
  EXPECT_EQ(reader.header().crystals_per_ring, scanner.geometry().crystals_per_ring());
  EXPECT_EQ(reader.header().settings_hash, output_settings_hash(scanner.settings));
  EXPECT_EQ(reader.header().created_unix_ns, header.created_unix_ns);
  MessageHeader h;
  std::vector<CoincRecord> records;
  std::size_t n = 0;
  while (reader.next(h, records)) {
    ASSERT_LT(n, written.size());
    EXPECT_EQ(h.kind, n % 2 ? 2u : 1u);
    EXPECT_EQ(h.message_id, n / 2);
    EXPECT_EQ(h.slice_id, n / 2);
    EXPECT_EQ(h.t_begin, 1000 * (n / 2));
    ASSERT_EQ(records.size(), written[n].size());
    for (std::size_t i = 0; i < records.size(); ++i) EXPECT_TRUE(records[i] == written[n][i]);
    ++n;
  }
  EXPECT_EQ(n, written.size());
}

PlmWriterOptions writer_options(unsigned threads, std::size_t memory_bytes) {
  PlmWriterOptions o;
  o.threads = threads;
  o.memory_bytes = memory_bytes;
  return o;
}

// The writer threads' file is PlmWriter's, byte for byte: one thread and three, messages
// copied in parts (larger than a quarter of the writer's memory), empty messages, and a
// flush() in between.
TEST(Plm, ThreadWriterWritesWhatPlmWriterWrites) {
  TestScanner scanner;
  const PlmHeader header = make_plm_header(scanner.settings);
  const auto direct = scanner.dir / "direct.plm";
  PlmWriter a(direct, header);
  MessageBuilder builder_a;
  std::vector<std::vector<CoincRecord>> messages;
  for (std::uint32_t i = 0; i < 60; ++i) {
    std::vector<CoincRecord> p;
    for (std::uint32_t k = 0; k < (i * 7) % 61; ++k) p.push_back(record(100 * i + k, k, i, k));
    messages.push_back(p);
    const SliceResult r = slice(i, 100 * i, 100 * (i + 1), p, {});
    a.write_message(builder_a.build(MessageKind::prompts, 0, r), p.data(), p.size() * sizeof(CoincRecord));
  }
  a.close();
  for (const unsigned threads : {1u, 3u}) {
    const auto threaded = scanner.dir / ("threaded" + std::to_string(threads) + ".plm");
    // 4 KiB: records are copied in parts of 1 KiB (32 records), and the caller waits for room.
    PlmThreadWriter b(threaded, header, writer_options(threads, 4096));
    EXPECT_EQ(b.threads(), threads);
    MessageBuilder builder_b;
    for (std::uint32_t i = 0; i < messages.size(); ++i) {
      const auto& p = messages[i];
      const SliceResult r = slice(i, 100 * i, 100 * (i + 1), p, {});
      b.write_message(builder_b.build(MessageKind::prompts, 0, r), p.data(), p.size() * sizeof(CoincRecord));
      if (i == 20) {
        b.flush();
        EXPECT_EQ(std::filesystem::file_size(threaded), b.bytes_written());
      }
    }
    b.close();
    EXPECT_EQ(b.bytes_written(), a.bytes_written());
    EXPECT_EQ(test::read_bytes(threaded), test::read_bytes(direct)) << threads << " threads";
    const PlmThreadWriter::Stats st = b.stats();
    EXPECT_EQ(st.messages, messages.size());
    EXPECT_EQ(st.messages_in_place, 0u);
    EXPECT_EQ(st.parts_by_caller, 0u);
    EXPECT_EQ(st.bytes_copied, b.bytes_written() - kPlmHeaderBytes - messages.size() * kMessageHeaderBytes);
    EXPECT_THROW(b.write_message(MessageHeader{}, nullptr, 0), PlmError);
  }
}

// The same messages through PlmWriter and through a PlmThreadWriter, whose files must be
// the same; the threaded writer may be given the records where it lent the memory for them.
struct TwoWriters {
  TwoWriters(const TestScanner& scanner, const std::string& name, PlmWriterOptions options)
      : header(make_plm_header(scanner.settings)),
        direct(scanner.dir / ("direct-" + name)),
        threaded(scanner.dir / name),
        a(direct, header),
        b(threaded, header, std::move(options)) {}
  // As a backend's collect() does: the records copied into a piece the writer lends, or
  // null when it has no room.
  const CoincRecord* lend_copy(const std::vector<CoincRecord>& v) {
    void* piece = v.empty() ? nullptr : b.lend(v.size() * sizeof(CoincRecord));
    if (piece) std::memcpy(piece, v.data(), v.size() * sizeof(CoincRecord));
    return static_cast<const CoincRecord*>(piece);
  }
  // `records` to PlmWriter, the same bytes at `at` to the threaded writer.
  void write(MessageKind kind, const SliceResult& r, const std::vector<CoincRecord>& records,
             const CoincRecord* at) {
    const std::size_t bytes = records.size() * sizeof(CoincRecord);
    a.write_message(builder_a.build(kind, 0, r), records.data(), bytes);
    b.write_message(builder_b.build(kind, 0, r), at, bytes);
  }
  void close_and_compare() {
    a.close();
    b.close();
    EXPECT_EQ(test::read_bytes(threaded), test::read_bytes(direct));
  }
  PlmHeader header;
  std::filesystem::path direct, threaded;
  PlmWriter a;
  PlmThreadWriter b;
  MessageBuilder builder_a, builder_b;
};

// Records a backend wrote into the writer's memory (ResultMemory::lend) go to the file from
// there, uncopied; records elsewhere are copied. The file is PlmWriter's either way, and
// every piece comes back.
TEST(Plm, ThreadWriterWritesLentRecordsWhereTheyLie) {
  TestScanner scanner;
  TwoWriters w(scanner, "lent.plm", writer_options(2, 4096));
  std::uint64_t lent_messages = 0;
  for (std::uint32_t i = 0; i < 40; ++i) {
    std::vector<CoincRecord> p, d;
    for (std::uint32_t k = 0; k < (i * 5) % 90; ++k) p.push_back(record(100 * i + k, k, i, k));
    for (std::uint32_t k = 0; k < (i * 3) % 50; ++k) d.push_back(record(100 * i + k, k, i, 1));
    SliceResult r = slice(i, 100 * i, 100 * (i + 1), p, d);
    for (auto [v, at] : {std::pair{&p, &r.prompts}, std::pair{&d, &r.delayed}})
      if (const CoincRecord* piece = w.lend_copy(*v)) {
        *at = piece;
        ++lent_messages;
      }
    w.write(MessageKind::prompts, r, p, r.prompts);
    w.write(MessageKind::delayed, r, d, r.delayed);
    w.b.let_go_lent(r);
  }
  w.close_and_compare();
  const PlmThreadWriter::Stats st = w.b.stats();
  EXPECT_GT(lent_messages, 10u);
  EXPECT_EQ(st.messages_in_place, lent_messages);
  EXPECT_GT(st.bytes_copied, 0u);  // the slices whose pieces did not fit
}

// A slice's own lent piece fills the writer's memory and a message that lies elsewhere comes
// first: no thread can make room (the piece is let go of only once the slice is delivered),
// so the caller writes the part that does not fit itself, in its place.
TEST(Plm, ThreadWriterWritesAPartItselfWhenOnlyTheSliceHoldsTheMemory) {
  TestScanner scanner;
  TwoWriters w(scanner, "held.plm", writer_options(2, 4096));
  std::vector<CoincRecord> p(93), d(62);  // 2 976 bytes lent, 1 984 bytes elsewhere
  for (std::uint32_t k = 0; k < p.size(); ++k) p[k] = record(k, k, 1, k);
  for (std::uint32_t k = 0; k < d.size(); ++k) d[k] = record(k, k, 2, 1);
  SliceResult r = slice(0, 0, 100, p, d);
  r.prompts = w.lend_copy(p);
  ASSERT_NE(r.prompts, nullptr);
  w.write(MessageKind::delayed, r, d, r.delayed);
  w.write(MessageKind::prompts, r, p, r.prompts);
  w.b.let_go_lent(r);
  w.close_and_compare();
  const PlmThreadWriter::Stats st = w.b.stats();
  EXPECT_EQ(st.parts_by_caller, 1u);  // the second of the delayed records' two parts
  EXPECT_EQ(st.messages_in_place, 1u);
  EXPECT_EQ(st.bytes_copied, 1024u);  // the first part, a quarter of the memory
}

// A write that fails on the writer thread comes back as PlmWriter's error, on the caller's
// thread, at the latest from close(); nothing hangs with every buffer waiting.
TEST(Plm, ThreadWriterReportsAFailedWrite) {
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full on this system";
  TestScanner scanner;
  std::string error;
  try {
    PlmThreadWriter w("/dev/full", make_plm_header(scanner.settings), writer_options(2, 4096));
    MessageBuilder builder;
    const std::vector<CoincRecord> p(50, record(5, 1, 2));
    for (std::uint32_t i = 0; i < 100; ++i)
      w.write_message(builder.build(MessageKind::prompts, 0, slice(i, i, i + 1, p, {})), p.data(),
                      p.size() * sizeof(CoincRecord));
    w.close();
  } catch (const PlmError& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("/dev/full: write failed"), std::string::npos) << error;
}

// Singles messages (kind 3) and kinds the reader does not know: next() skips and counts them,
// next_message() hands every message out with its body; a singles message with another
// record size is refused naming the kind.
TEST(Plm, OtherKindsAreSkippedAndCountedOrReadWhole) {
  TestScanner scanner;
  const auto file = scanner.dir / "kinds.plm";
  const std::vector<CoincRecord> p = {record(5, 1, 2), record(6, 2, 3)}, d = {record(7, 3, 4, 1)};
  const std::vector<Single> singles = {{5, 1, 511.0f}, {6, 2, 480.5f}, {7, 3, 300.25f}};
  const std::vector<std::uint8_t> other(3 * 24, 0xAB);
  MessageBuilder builder;
  {
    PlmWriter writer(file, make_plm_header(scanner.settings));
    SliceResult r = slice(0, 0, 10, p, d);
    r.singles = singles.data();
    r.single_count = singles.size();
    writer.write_message(builder.build(MessageKind::prompts, 0, r), p.data(), 2 * sizeof(CoincRecord));
    writer.write_message(builder.build(MessageKind::singles, 0, r), singles.data(),
                         3 * sizeof(Single));
    MessageHeader unknown;
    unknown.kind = 9;
    unknown.record_count = 3;
    unknown.record_size = 24;
    writer.write_message(unknown, other.data(), other.size());
    writer.write_message(builder.build(MessageKind::delayed, 0, r), d.data(), sizeof(CoincRecord));
    writer.close();
  }
  {
    PlmReader reader(file);
    MessageHeader h;
    std::vector<CoincRecord> records;
    ASSERT_TRUE(reader.next(h, records));
    EXPECT_EQ(h.kind, 1u);
    EXPECT_EQ(records.size(), 2u);
    ASSERT_TRUE(reader.next(h, records));
    EXPECT_EQ(h.kind, 2u);
    ASSERT_EQ(records.size(), 1u);
    EXPECT_TRUE(records[0] == d[0]);
    EXPECT_FALSE(reader.next(h, records));
    EXPECT_EQ(reader.skipped_messages(), 2u);
    EXPECT_EQ(reader.skipped().at(3), 1u);
    EXPECT_EQ(reader.skipped().at(9), 1u);
  }
  {
    PlmReader reader(file);
    MessageHeader h;
    std::vector<std::uint8_t> body;
    std::vector<std::uint16_t> kinds;
    while (reader.next_message(h, body, false)) {
      kinds.push_back(h.kind);
      ASSERT_EQ(body.size(), std::size_t{h.record_count} * h.record_size);
      if (h.kind == 3) EXPECT_EQ(std::memcmp(body.data(), singles.data(), body.size()), 0);
      if (h.kind == 9) EXPECT_EQ(body, other);
    }
    EXPECT_EQ(kinds, (std::vector<std::uint16_t>{1, 3, 9, 2}));
  }
  // A singles message whose records are not 16 bytes: refused, naming the kind.
  std::string bytes = test::read_text(file);
  const std::size_t singles_at = 64 + 64 + 2 * 32;
  bytes[singles_at + 52] = 32;
  std::ofstream(scanner.dir / "bad.plm", std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  const std::string error = error_of(scanner.dir / "bad.plm");
  EXPECT_NE(error.find("record size 32 for kind 3, expected 16"), std::string::npos) << error;
}

TEST(Plm, TruncatedOrForeignFilesAreRefusedWithAMessage) {
  TestScanner scanner;
  const auto file = scanner.dir / "full.plm";
  {
    PlmWriter writer(file, make_plm_header(scanner.settings));
    MessageBuilder builder;
    const std::vector<CoincRecord> p = {record(5, 1, 2), record(6, 2, 3)}, d;
    writer.write_message(builder.build(MessageKind::prompts, 0, slice(0, 0, 10, p, d)), p.data(),
                         p.size() * sizeof(CoincRecord));
    writer.close();
  }
  std::string bytes = test::read_text(file);
  ASSERT_EQ(bytes.size(), 64u + 64u + 64u);
  auto write_prefix = [&](std::size_t n, const char* name) {
    const auto out = scanner.dir / name;
    std::ofstream(out, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(n));
    return out;
  };
  EXPECT_EQ(error_of(write_prefix(bytes.size(), "ok.plm")), "");
  EXPECT_NE(error_of(write_prefix(30, "a.plm")).find("truncated file header"), std::string::npos);
  EXPECT_NE(error_of(write_prefix(64 + 20, "b.plm")).find("truncated header"), std::string::npos);
  const std::string records = error_of(write_prefix(64 + 64 + 40, "c.plm"));
  EXPECT_NE(records.find("truncated records"), std::string::npos) << records;
  EXPECT_NE(records.find("message at byte 64"), std::string::npos) << records;

  bytes[0] = 'X';
  EXPECT_NE(error_of(write_prefix(bytes.size(), "d.plm")).find("not a petdaq list-mode file"),
            std::string::npos);
  bytes[0] = 'P';
  bytes[64 + 48] = 0x7F;  // a record count far beyond the file
  bytes[64 + 51] = 0x7F;
  EXPECT_NE(error_of(write_prefix(bytes.size(), "e.plm")).find("truncated records"), std::string::npos);
  EXPECT_NE(error_of(scanner.dir / "missing.plm").find("cannot open"), std::string::npos);
}

// A refused file is closed: 200 foreign files opened in turn leave no descriptor behind
// (a reader over many bad files, or a fuzzer, would otherwise run out of them).
TEST(Plm, ARefusedFileLeavesNoDescriptorOpen) {
  TestScanner scanner;
  const auto bad = scanner.dir / "foreign.plm";
  std::ofstream(bad, std::ios::binary) << std::string(100, 'x');
  auto open_descriptors = [] {
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
    return n;
  };
  const std::size_t before = open_descriptors();
  for (int i = 0; i < 200; ++i) EXPECT_THROW(PlmReader reader(bad), PlmError);
  EXPECT_EQ(open_descriptors(), before);
}

TEST(Plm, SinkWritesPromptsAndDelayedForEverySliceIncludingEmptyOnes) {
  TestScanner scanner;
  scanner.settings.coincidence.delayed.enabled = true;
  const auto file = scanner.dir / "sink.plm";
  {
    PlmSink sink(scanner.settings, file);
    const std::vector<CoincRecord> p = {record(5, 1, 2)}, none;
    sink.on_slice(2, slice(0, 0, 10, p, none));
    sink.on_slice(2, slice(1, 10, 20, none, none));
    sink.close();
    EXPECT_EQ(sink.messages(), 4u);
  }
  PlmReader reader(file);
  MessageHeader h;
  std::vector<CoincRecord> records;
  std::vector<std::uint16_t> kinds;
  std::vector<std::uint32_t> counts;
  while (reader.next(h, records)) {
    kinds.push_back(h.kind);
    counts.push_back(h.record_count);
    EXPECT_EQ(h.run_id, 2u);
  }
  EXPECT_EQ(kinds, (std::vector<std::uint16_t>{1, 2, 1, 2}));
  EXPECT_EQ(counts, (std::vector<std::uint32_t>{1, 0, 0, 0}));

  scanner.settings.coincidence.delayed.enabled = false;
  const auto prompts_only = scanner.dir / "prompts.plm";
  {
    PlmSink sink(scanner.settings, prompts_only);
    sink.on_slice(0, slice(0, 0, 10, {}, {}));
    sink.close();
  }
  EXPECT_EQ(std::filesystem::file_size(prompts_only), 128u);
}

}  // namespace
}  // namespace petdaq

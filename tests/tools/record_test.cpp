// petdaq-record: the message-id bookkeeping, then the tool against a test publisher: the file
// holds exactly the batches published, and the missed ones are reported.
#include <set>

#include <gtest/gtest.h>

#include "core/plm_file.h"
#include "core/settings.h"
#include "tests/tools/tool_harness.h"
#include "tests/tools/test_messages.h"
#include "tools/record/message_ids.h"

namespace petdaq {
namespace {

using test::bin_dir;
using test::ScratchDir;

TEST(RecordMessageIds, CountsGapsNotALateStart) {
  record::MessageIdTracker t;
  for (std::uint64_t id : {5, 6, 7, 9, 10, 14}) t.see(id);
  EXPECT_EQ(t.first_id(), 5u);
  EXPECT_EQ(t.received(), 6u);
  EXPECT_EQ(t.missed(), 1u + 3u);
  EXPECT_EQ(t.went_back(), 0u);
}

TEST(RecordMessageIds, AnIdGoingBackIsARestartNotAGap) {
  record::MessageIdTracker t;
  for (std::uint64_t id : {0, 1, 2, 0, 1, 3}) t.see(id);
  EXPECT_EQ(t.went_back(), 1u);
  EXPECT_EQ(t.missed(), 1u);  // 2 after the restart
}

std::string config_file() { return (test::source_dir() / "config" / "petdaq.yaml").string(); }

TEST(RecordTool, WritesEveryPublishedBatchAndReportsTheMissedOnes) {
  ScratchDir dir;
  const std::string endpoint = dir.ipc("coinc");
  const auto plm = dir / "out.plm";
  test::Child rec({(bin_dir() / "petdaq-record").string(), "--config", config_file(), "--output",
                   plm.string(), "--endpoint", endpoint, "--messages", "18"},
                  dir / "rec.out", dir / "rec.err");
  // Three malformed messages first (refused, not written, not counted), then 10 slices:
  // prompts ids 0..9 with 3 and 7 never sent (lost), delayed ids 0..9.
  const int pub_rc = test::run_command(
      {(bin_dir() / "petdaq-test-publisher").string(), "--endpoint", endpoint,
       "--wait-subscriptions", "2", "--batches", "10", "--skip-prompt-ids", "3,7",
       "--bad-first"},
      dir / "pub.out", dir / "pub.err", std::chrono::seconds(30));
  ASSERT_EQ(pub_rc, 0) << test::read_text(dir / "pub.err");
  ASSERT_EQ(rec.wait_for(std::chrono::seconds(20)), 0) << test::read_text(dir / "rec.err");
  const std::string err = test::read_text(dir / "rec.err");
  EXPECT_NE(err.find("missed 2 prompts 0 delayed  refused 3"), std::string::npos) << err;
  EXPECT_NE(err.find("refused a message: bad message header"), std::string::npos) << err;
  EXPECT_NE(err.find("refused a message: body of 64 bytes for 3 records"), std::string::npos)
      << err;
  EXPECT_NE(err.find("refused a message: 2 frames instead of 3"), std::string::npos) << err;
  EXPECT_NE(err.find("prompts  first message id 0, received 8, missed 2"), std::string::npos) << err;

  PlmReader reader(plm);
  const Settings settings = load_settings(config_file());
  const PlmHeader expected = make_plm_header(settings);
  EXPECT_EQ(reader.header().tick_ps, expected.tick_ps);
  EXPECT_EQ(reader.header().crystal_count, expected.crystal_count);
  EXPECT_EQ(reader.header().crystals_per_ring, expected.crystals_per_ring);
  EXPECT_EQ(reader.header().settings_hash, expected.settings_hash);

  // The file holds the messages in publication order, headers and records as sent.
  MessageHeader h;
  std::vector<CoincRecord> records;
  std::uint64_t prompt_id = 0;
  int messages = 0;
  for (std::uint64_t i = 0; i < 10; ++i) {
    for (MessageKind kind : {MessageKind::prompts, MessageKind::delayed}) {
      std::uint64_t id = i;
      if (kind == MessageKind::prompts) {
        id = prompt_id++;
        if (id == 3 || id == 7) continue;
      }
      ASSERT_TRUE(reader.next(h, records)) << "message " << messages;
      const auto want = test::test_batch_records(kind, i);
      const MessageHeader want_h =
          test::test_batch_header(kind, i, id, static_cast<std::uint32_t>(want.size()));
      std::uint8_t got_bytes[kMessageHeaderBytes], want_bytes[kMessageHeaderBytes];
      encode_message_header(h, got_bytes);
      encode_message_header(want_h, want_bytes);
      EXPECT_EQ(0, std::memcmp(got_bytes, want_bytes, sizeof got_bytes)) << "message " << messages;
      EXPECT_EQ(records, want) << "message " << messages;
      ++messages;
    }
  }
  EXPECT_EQ(messages, 18);
  EXPECT_FALSE(reader.next(h, records));
}

TEST(RecordTool, StopsOnSigtermWithACompleteFile) {
  ScratchDir dir;
  const std::string endpoint = dir.ipc("coinc");
  const auto plm = dir / "out.plm";
  test::Child rec({(bin_dir() / "petdaq-record").string(), "--config", config_file(), "--output",
                   plm.string(), "--endpoint", endpoint},
                  dir / "rec.out", dir / "rec.err");
  ASSERT_EQ(test::run_command({(bin_dir() / "petdaq-test-publisher").string(), "--endpoint",
                               endpoint, "--wait-subscriptions", "2", "--batches", "4"},
                              dir / "pub.out", dir / "pub.err", std::chrono::seconds(30)),
            0);
  // A signal stops it at once: first let it take all 8 messages (its progress line says so).
  EXPECT_TRUE(test::wait_until([&] {
    const std::string err = test::read_text(dir / "rec.err");
    return err.find("prompts 4 msgs") != std::string::npos &&
           err.find("delayed 4 msgs") != std::string::npos;
  })) << test::read_text(dir / "rec.err");
  rec.signal(SIGTERM);
  ASSERT_EQ(rec.wait_for(std::chrono::seconds(10)), 0) << test::read_text(dir / "rec.err");
  EXPECT_NE(test::read_text(dir / "rec.err").find("stopped by signal"), std::string::npos);
  PlmReader reader(plm);
  MessageHeader h;
  std::vector<CoincRecord> records;
  int n = 0;
  while (reader.next(h, records)) ++n;
  EXPECT_EQ(n, 8);
}

// Another publisher on the endpoint (a restarted daemon, or another process that took it):
// petdaq-record stops and says so, and its file holds the first publisher's messages only;
// with --across-publishers it records on and says where the publisher changed.
TEST(RecordTool, AnotherPublishersMessagesAreNotAppendedSilently) {
  for (const bool across : {false, true}) {
    SCOPED_TRACE(across ? "--across-publishers" : "default");
    ScratchDir dir;
    const std::string endpoint = dir.ipc("coinc");
    const auto plm = dir / "out.plm";
    std::vector<std::string> args = {(bin_dir() / "petdaq-record").string(), "--config",
                                     config_file(), "--output", plm.string(), "--endpoint",
                                     endpoint, "--messages", "12", "--duration-s", "20"};
    if (across) args.push_back("--across-publishers");
    test::Child rec(args, dir / "rec.out", dir / "rec.err");
    ASSERT_EQ(test::run_command({(bin_dir() / "petdaq-test-publisher").string(), "--endpoint",
                                 endpoint, "--wait-subscriptions", "2", "--batches", "6",
                                 "--publisher-id", "4660", "--new-publisher-from", "3"},
                                dir / "pub.out", dir / "pub.err", std::chrono::seconds(30)),
              0);
    const auto rc = rec.wait_for(std::chrono::seconds(20));
    const std::string err = test::read_text(dir / "rec.err");
    ASSERT_TRUE(rc.has_value()) << err;
    PlmReader reader(plm);
    MessageHeader h;
    std::vector<CoincRecord> records;
    int n = 0;
    std::set<std::uint32_t> publishers;
    while (reader.next(h, records)) {
      ++n;
      publishers.insert(h.publisher_id);
    }
    if (!across) {
      EXPECT_EQ(*rc, 1) << err;
      EXPECT_NE(err.find("messages from another publisher (publisher_id 00001235, was 00001234"),
                std::string::npos)
          << err;
      EXPECT_EQ(n, 6);  // batches 0..2, prompts and delayed
      EXPECT_EQ(publishers, std::set<std::uint32_t>{0x1234});
    } else {
      EXPECT_EQ(*rc, 0) << err;
      EXPECT_NE(err.find("another publisher from here on"), std::string::npos) << err;
      EXPECT_NE(err.find("publisher changed 1 time(s)"), std::string::npos) << err;
      // Ids starting again with the new publisher are neither a gap nor a restart.
      EXPECT_NE(err.find("prompts  first message id 0, received 6, missed 0\n"), std::string::npos)
          << err;
      EXPECT_EQ(n, 12);
      EXPECT_EQ(publishers, (std::set<std::uint32_t>{0x1234, 0x1235}));
    }
  }
}

TEST(RecordTool, StopsAfterItsDurationEvenWithoutDataAndSaysSo) {
  ScratchDir dir;
  const auto start = std::chrono::steady_clock::now();
  const int rc = test::run_command({(bin_dir() / "petdaq-record").string(), "--config",
                                    config_file(), "--output", (dir / "e.plm").string(),
                                    "--endpoint", dir.ipc("none"), "--duration-s", "0.5"},
                                   dir / "rec.out", dir / "rec.err", std::chrono::seconds(20));
  // Nothing received is a warning and exit 1, not a silent empty file.
  EXPECT_EQ(rc, 1);
  EXPECT_NE(test::read_text(dir / "rec.err").find("no message received from " + dir.ipc("none")),
            std::string::npos)
      << test::read_text(dir / "rec.err");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  PlmReader reader(dir / "e.plm");  // a valid file with a header and no message
  MessageHeader h;
  std::vector<CoincRecord> records;
  EXPECT_FALSE(reader.next(h, records));
}

TEST(RecordTool, BadArgumentsAreClearErrors) {
  ScratchDir dir;
  int rc = test::run_command({(bin_dir() / "petdaq-record").string(), "--output",
                              (dir / "x.plm").string()},
                             dir / "o", dir / "e");
  EXPECT_EQ(rc, 2);
  EXPECT_NE(test::read_text(dir / "e").find("--config is required"), std::string::npos)
      << test::read_text(dir / "e");
  rc = test::run_command({(bin_dir() / "petdaq-record").string(), "--config",
                          (dir / "missing.yaml").string(), "--output", (dir / "x.plm").string()},
                         dir / "o", dir / "e");
  EXPECT_EQ(rc, 2);
  EXPECT_NE(test::read_text(dir / "e").find("missing.yaml"), std::string::npos);
  rc = test::run_command({(bin_dir() / "petdaq-record").string(), "--config", config_file(),
                          "--output", (dir / "no" / "such" / "dir.plm").string(), "--duration-s",
                          "0.2"},
                         dir / "o", dir / "e");
  EXPECT_EQ(rc, 1);
  EXPECT_NE(test::read_text(dir / "e").find("dir.plm"), std::string::npos) << test::read_text(dir / "e");
  // An output that is its configuration (here through a symlink) is refused, the file kept.
  const auto config = dir / "petdaq.yaml";
  std::filesystem::copy_file(config_file(), config);
  std::filesystem::create_symlink(config, dir / "link.plm");
  const std::string before = test::read_text(config);
  rc = test::run_command({(bin_dir() / "petdaq-record").string(), "--config", config.string(),
                          "--output", (dir / "link.plm").string(), "--duration-s", "0.2"},
                         dir / "o", dir / "e");
  EXPECT_EQ(rc, 2);
  EXPECT_NE(test::read_text(dir / "e").find("is the configuration file"), std::string::npos)
      << test::read_text(dir / "e");
  EXPECT_EQ(test::read_text(config), before);
}

}  // namespace
}  // namespace petdaq

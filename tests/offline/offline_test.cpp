// petdaq-offline and petdaq-dump as programs: a generated frame file in, a .plm out that holds
// exactly the batch result; bad configurations and inputs exit 2 with a message.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/output.h"
#include "core/settings.h"
#include "test_scanner.h"

namespace petdaq {
namespace {

using test::TestScanner;

struct Result {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string read_text(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

Result run(const std::filesystem::path& dir, const std::string& program,
           const std::vector<std::string>& args) {
  std::string cmd = quote(program);
  for (const auto& a : args) cmd += " " + quote(a);
  const auto out = dir / "stdout.txt", err = dir / "stderr.txt";
  cmd += " > " + quote(out.string()) + " 2> " + quote(err.string());
  const int status = std::system(cmd.c_str());
  Result r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_text(out);
  r.err = read_text(err);
  return r;
}

void write_frames(const std::filesystem::path& file, const std::vector<RawFrame>& frames,
                  std::size_t trailing_bytes) {
  std::ofstream f(file, std::ios::binary);
  f.write(reinterpret_cast<const char*>(frames.data()),
          static_cast<std::streamsize>(frames.size() * sizeof(RawFrame)));
  const char partial[kFrameBytes] = {};
  f.write(partial, static_cast<std::streamsize>(trailing_bytes));
}

TEST(Offline, ThePlmFileHoldsExactlyTheBatchResult) {
  std::mt19937_64 rng(99);
  TestScanner scanner;
  Settings& s = scanner.settings;
  s.coincidence.policy = Policy::take_winner_of_goods;
  s.coincidence.delayed.offset_ps = 2000 * s.scanner.tick_ps;
  s.stream.max_disorder_ps = 500 * s.scanner.tick_ps;
  s.stream.max_slice_frames = 700;
  s.stream.max_pending_frames = 1 << 16;
  s.stream.max_carry_singles = 1 << 14;
  test::AcquisitionOptions o;
  o.events = 30000;
  const auto frames = test::random_acquisition(scanner, rng, o);
  const test::BatchResult want = test::batch_process(scanner, frames);
  ASSERT_GT(want.prompts.size(), 1000u);
  ASSERT_GT(want.delayed.size(), 10u);

  const auto config = scanner.write_config();
  const auto input = scanner.dir / "acq.frames";
  const auto output = scanner.dir / "acq.plm";
  write_frames(input, test::arrival_order(frames, 500, rng), 5);

  const Result r = run(scanner.dir, PETDAQ_OFFLINE_BIN,
                       {"--config", config.string(), "--input", input.string(), "--output",
                        output.string(), "--backend", "cpu"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("frames           " + std::to_string(frames.size())), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("trailing bytes   5"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("prompts          " + std::to_string(want.counts.prompts)), std::string::npos)
      << r.out;

  PlmReader reader(output);
  EXPECT_EQ(reader.header().settings_hash, output_settings_hash(load_settings(config)));
  EXPECT_EQ(reader.header().settings_hash, output_settings_hash(s));
  MessageHeader h;
  std::vector<CoincRecord> records, prompts, delayed;
  std::uint64_t t_prompts = 0, t_delayed = 0, messages = 0;
  while (reader.next(h, records)) {
    ++messages;
    EXPECT_EQ(h.run_id, 0u);
    std::uint64_t& t = h.kind == 1 ? t_prompts : t_delayed;
    EXPECT_EQ(h.t_begin, t) << "message " << h.message_id << " kind " << h.kind;
    t = h.t_end;
    for (const CoincRecord& rec : records) {
      EXPECT_GE(rec.time_a, h.t_begin);
      EXPECT_LT(rec.time_a, h.t_end);
    }
    auto& into = h.kind == 1 ? prompts : delayed;
    into.insert(into.end(), records.begin(), records.end());
  }
  EXPECT_GT(messages, 2 * frames.size() / 700);
  EXPECT_EQ(t_prompts, t_delayed);
  ASSERT_EQ(prompts.size(), want.prompts.size());
  ASSERT_EQ(delayed.size(), want.delayed.size());
  for (std::size_t i = 0; i < prompts.size(); ++i) ASSERT_TRUE(prompts[i] == want.prompts[i]) << i;
  for (std::size_t i = 0; i < delayed.size(); ++i) ASSERT_TRUE(delayed[i] == want.delayed[i]) << i;

  // petdaq-dump: one line per record, and the same counts in the summary.
  const Result dump = run(scanner.dir, PETDAQ_DUMP_BIN, {output.string()});
  ASSERT_EQ(dump.exit_code, 0) << dump.err;
  std::size_t prompt_lines = 0, delayed_lines = 0;
  std::istringstream lines(dump.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("prompt ", 0) == 0) ++prompt_lines;
    if (line.rfind("delayed ", 0) == 0) ++delayed_lines;
  }
  EXPECT_EQ(prompt_lines, want.prompts.size());
  EXPECT_EQ(delayed_lines, want.delayed.size());
  const Result summary = run(scanner.dir, PETDAQ_DUMP_BIN, {"--summary", output.string()});
  ASSERT_EQ(summary.exit_code, 0) << summary.err;
  EXPECT_NE(summary.out.find("# records prompt " + std::to_string(want.prompts.size()) +
                             " delayed " + std::to_string(want.delayed.size())),
            std::string::npos)
      << summary.out;

  // Processing the same file twice gives the same records and batches.
  const auto again = scanner.dir / "again.plm";
  ASSERT_EQ(run(scanner.dir, PETDAQ_OFFLINE_BIN,
                {"--config", config.string(), "--input", input.string(), "--output",
                 again.string(), "--backend", "cpu", "--quiet"})
                .exit_code,
            0);
  const std::string a = read_text(output), b = read_text(again);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(a.substr(kPlmHeaderBytes), b.substr(kPlmHeaderBytes));
}

TEST(Offline, BadConfigurationOrInputExitsTwoWithAMessage) {
  TestScanner scanner;
  const auto input = scanner.dir / "acq.frames";
  write_frames(input, {scanner.frame(0, 0, 0, 1000, 500)}, 0);
  const auto output = scanner.dir / "out.plm";

  const auto bad = scanner.dir / "bad.yaml";
  std::ofstream(bad) << read_text(scanner.write_config()) << "bogus_section:\n  x: 1\n";
  Result r = run(scanner.dir, PETDAQ_OFFLINE_BIN,
                 {"--config", bad.string(), "--input", input.string(), "--output", output.string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("bogus_section"), std::string::npos) << r.err;

  const auto missing_table = scanner.dir / "missing.yaml";
  {
    std::string text = read_text(scanner.write_config());
    const std::string lut = scanner.settings.calibration.position_lut.string();
    text.replace(text.find(lut), lut.size(), (scanner.dir / "nope.npy").string());
    std::ofstream(missing_table) << text;
  }
  r = run(scanner.dir, PETDAQ_OFFLINE_BIN,
          {"--config", missing_table.string(), "--input", input.string(), "--output",
           output.string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("nope.npy"), std::string::npos) << r.err;

  const auto good = scanner.write_config();
  r = run(scanner.dir, PETDAQ_OFFLINE_BIN,
          {"--config", good.string(), "--input", (scanner.dir / "absent.frames").string(),
           "--output", output.string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("absent.frames"), std::string::npos) << r.err;

  r = run(scanner.dir, PETDAQ_OFFLINE_BIN, {"--config", good.string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--input is required"), std::string::npos) << r.err;

  r = run(scanner.dir, PETDAQ_OFFLINE_BIN,
          {"--config", good.string(), "--input", input.string(), "--output", output.string(),
           "--backend", "fpga"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("fpga"), std::string::npos) << r.err;

  // A truncated .plm: petdaq-dump says so and exits 2.
  r = run(scanner.dir, PETDAQ_OFFLINE_BIN,
          {"--config", good.string(), "--input", input.string(), "--output", output.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string plm = read_text(output);
  ASSERT_GT(plm.size(), kPlmHeaderBytes + 10);
  const auto cut = scanner.dir / "cut.plm";
  std::ofstream(cut, std::ios::binary) << plm.substr(0, kPlmHeaderBytes + 10);
  r = run(scanner.dir, PETDAQ_DUMP_BIN, {cut.string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("truncated"), std::string::npos) << r.err;
}

// An output that is the input (the same path, a symlink, a hard link) is refused before
// anything is written: the input keeps every byte.
TEST(Offline, AnOutputThatIsTheInputIsRefusedAndTheInputKept) {
  TestScanner scanner;
  const auto input = scanner.dir / "acq.frames";
  std::vector<RawFrame> frames;
  for (std::uint64_t t = 0; t < 100; ++t) frames.push_back(scanner.frame(0, 0, 0, 1000 + 7 * t, 500));
  write_frames(input, frames, 0);
  const std::string before = read_text(input);
  const auto link = scanner.dir / "link.frames";
  std::filesystem::create_symlink(input, link);
  const auto hard = scanner.dir / "hard.frames";
  std::filesystem::create_hard_link(input, hard);
  const auto config = scanner.write_config();
  for (const auto& output : {input, link, hard}) {
    const Result r = run(scanner.dir, PETDAQ_OFFLINE_BIN,
                         {"--config", config.string(), "--input", input.string(), "--output",
                          output.string()});
    EXPECT_EQ(r.exit_code, 2) << output;
    EXPECT_NE(r.err.find("is the input file"), std::string::npos) << r.err;
    EXPECT_EQ(read_text(input), before) << output;
  }
}

}  // namespace
}  // namespace petdaq

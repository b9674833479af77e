// petdaq-offline and petdaq-dump as programs: a generated frame file in, a .plm out that holds
// exactly the batch result; bad configurations and inputs exit 2 with a message.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/histograms.h"
#include "core/plm_file.h"
#include "core/settings.h"
#include "test_scanner.h"
#include "tests/support/files.h"
#include "tests/support/process.h"

namespace petdaq {
namespace {

using test::read_text;
using test::TestScanner;

struct Result {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

Result run(const std::filesystem::path& dir, const std::string& program,
           const std::vector<std::string>& args) {
  std::vector<std::string> argv{program};
  argv.insert(argv.end(), args.begin(), args.end());
  const auto out = dir / "stdout.txt", err = dir / "stderr.txt";
  Result r;
  r.exit_code = test::run_command(argv, out, err, std::chrono::minutes(9));
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

// --threads: the CPU backend on 1 and on 3 threads writes the same file, byte for byte after
// the header (whose creation time differs); slices big enough to go parallel, and seams
// reported.
TEST(Offline, ThreadsDoNotChangeTheOutput) {
  std::mt19937_64 rng(31);
  TestScanner scanner;
  Settings& s = scanner.settings;
  s.coincidence.policy = Policy::take_all_goods;
  s.stream.max_slice_frames = 1 << 18;
  s.stream.max_pending_frames = 1 << 20;
  test::AcquisitionOptions o;
  o.events = 250000;
  o.mean_gap_ticks = 60;
  const auto frames = test::random_acquisition(scanner, rng, o);
  const auto config = scanner.write_config();
  const auto input = scanner.dir / "acq.frames";
  write_frames(input, test::arrival_order(frames, 500, rng), 0);
  std::string files[2];
  const char* threads[2] = {"1", "3"};
  for (int k = 0; k < 2; ++k) {
    const auto output = scanner.dir / ("acq-" + std::string(threads[k]) + ".plm");
    const Result r = run(scanner.dir, PETDAQ_OFFLINE_BIN,
                         {"--config", config.string(), "--input", input.string(), "--output",
                          output.string(), "--backend", "cpu", "--threads", threads[k], "--quiet"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find(std::string(threads[k]) + " backend thread"), std::string::npos) << r.out;
    if (k == 1) {
      const std::size_t at = r.out.find("threads          3 (");
      ASSERT_NE(at, std::string::npos) << r.out;
      std::istringstream line(r.out.substr(at + 20));
      std::uint64_t split = 0, seams = 0;
      std::string word;
      line >> split >> word >> word >> seams;
      EXPECT_GT(split, 0u) << r.out;
      EXPECT_GT(seams, 0u) << r.out;
    }
    files[k] = read_text(output);
  }
  ASSERT_GT(files[0].size(), kPlmHeaderBytes + 1000);
  ASSERT_EQ(files[0].size(), files[1].size());
  EXPECT_TRUE(files[0].substr(kPlmHeaderBytes) == files[1].substr(kPlmHeaderBytes));

  // The same frames through a pipe: not one byte of it is taken before the frames are read.
  const auto piped = scanner.dir / "piped.plm";
  const Result through_pipe = run(
      scanner.dir, "/bin/sh",
      {"-c", "cat \"$0\" | \"$1\" --config \"$2\" --input /dev/stdin --output \"$3\" "
             "--backend cpu --threads 1 --quiet",
       input.string(), PETDAQ_OFFLINE_BIN, config.string(), piped.string()});
  ASSERT_EQ(through_pipe.exit_code, 0) << through_pipe.err;
  const std::string piped_file = read_text(piped);
  ASSERT_EQ(piped_file.size(), files[0].size());
  EXPECT_TRUE(piped_file.substr(kPlmHeaderBytes) == files[0].substr(kPlmHeaderBytes))
      << "a pipe gives other records than the file";

  // --writers: three writer threads write the same file; to a pipe (which cannot seek) one
  // thread writes whatever is asked.
  const auto written = scanner.dir / "writers-3.plm";
  const Result three = run(scanner.dir, PETDAQ_OFFLINE_BIN,
                           {"--config", config.string(), "--input", input.string(), "--output",
                            written.string(), "--backend", "cpu", "--threads", "1", "--writers",
                            "3", "--quiet"});
  ASSERT_EQ(three.exit_code, 0) << three.err;
  EXPECT_NE(three.out.find("output writing   3 threads"), std::string::npos) << three.out;
  const std::string written_file = read_text(written);
  ASSERT_EQ(written_file.size(), files[0].size());
  EXPECT_TRUE(written_file.substr(kPlmHeaderBytes) == files[0].substr(kPlmHeaderBytes))
      << "three writers give another file";
  const auto to_pipe = scanner.dir / "to-pipe.plm";
  const Result piped_out = run(
      scanner.dir, "/bin/sh",
      {"-c", "\"$0\" --config \"$1\" --input \"$2\" --output /dev/stdout --backend cpu "
             "--threads 1 --writers 3 --quiet | cat > \"$3\"",
       PETDAQ_OFFLINE_BIN, config.string(), input.string(), to_pipe.string()});
  ASSERT_EQ(piped_out.exit_code, 0) << piped_out.err;
  const std::string pipe_file = read_text(to_pipe);
  ASSERT_GT(pipe_file.size(), files[0].size());  // the summary follows the file on stdout
  EXPECT_TRUE(pipe_file.substr(kPlmHeaderBytes, files[0].size() - kPlmHeaderBytes) ==
              files[0].substr(kPlmHeaderBytes))
      << "a pipe written by the writer gives another file";
  EXPECT_NE(pipe_file.find("output writing   1 thread,", files[0].size()), std::string::npos)
      << "the pipe was not written by one thread";

  // --readers: one reader thread and five read the same frames.
  for (const char* readers : {"1", "5"}) {
    const auto output = scanner.dir / ("readers-" + std::string(readers) + ".plm");
    const Result r = run(scanner.dir, PETDAQ_OFFLINE_BIN,
                         {"--config", config.string(), "--input", input.string(), "--output",
                          output.string(), "--backend", "cpu", "--threads", "1", "--readers",
                          readers, "--quiet"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find(std::string(readers) == "1" ? std::string("on 1 reader thread)")
                                                     : std::string(readers) + " reader threads: read "),
              std::string::npos)
        << r.out;
    const std::string file = read_text(output);
    ASSERT_EQ(file.size(), files[0].size());
    EXPECT_TRUE(file.substr(kPlmHeaderBytes) == files[0].substr(kPlmHeaderBytes))
        << readers << " readers give other records";
  }

  const Result bad = run(scanner.dir, PETDAQ_OFFLINE_BIN,
                         {"--config", config.string(), "--input", input.string(), "--output",
                          (scanner.dir / "x.plm").string(), "--threads", "999"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--threads"), std::string::npos) << bad.err;
  const Result bad_readers = run(scanner.dir, PETDAQ_OFFLINE_BIN,
                                 {"--config", config.string(), "--input", input.string(),
                                  "--output", (scanner.dir / "x.plm").string(), "--readers", "65"});
  EXPECT_EQ(bad_readers.exit_code, 2);
  EXPECT_NE(bad_readers.err.find("--readers"), std::string::npos) << bad_readers.err;
  const Result bad_writers = run(scanner.dir, PETDAQ_OFFLINE_BIN,
                                 {"--config", config.string(), "--input", input.string(),
                                  "--output", (scanner.dir / "x.plm").string(), "--writers", "65"});
  EXPECT_EQ(bad_writers.exit_code, 2);
  EXPECT_NE(bad_writers.err.find("--writers"), std::string::npos) << bad_writers.err;
}

// A classic pcap file (microsecond times, Ethernet) of IPv4/UDP datagrams, written byte by
// byte: global header, then per packet a 16-byte record header and the packet.
void write_pcap(const std::filesystem::path& file, const std::vector<std::vector<std::uint8_t>>& payloads) {
  std::vector<std::uint8_t> out(24, 0);
  bytes::store_le32(&out[0], 0xA1B2C3D4);  // magic, microseconds
  bytes::store_le16(&out[4], 2);           // version 2.4
  bytes::store_le16(&out[6], 4);
  bytes::store_le32(&out[16], 65535);      // snap length
  bytes::store_le32(&out[20], 1);          // LINKTYPE_ETHERNET
  std::uint32_t t_us = 0;
  for (const auto& payload : payloads) {
    std::vector<std::uint8_t> p(14 + 20 + 8 + payload.size(), 0);
    p[12] = 0x08;  // EtherType IPv4
    std::uint8_t* ip = &p[14];
    ip[0] = 0x45;  // version 4, 20-byte header
    bytes::store_be16(ip + 2, static_cast<std::uint16_t>(20 + 8 + payload.size()));
    ip[8] = 64;
    ip[9] = 17;  // UDP
    ip[12] = 10; ip[15] = 7;   // 10.0.0.7
    ip[16] = 10; ip[19] = 1;   // 10.0.0.1
    std::uint8_t* udp = ip + 20;
    bytes::store_be16(udp + 0, 40000);
    bytes::store_be16(udp + 2, 5600);
    bytes::store_be16(udp + 4, static_cast<std::uint16_t>(8 + payload.size()));
    std::copy(payload.begin(), payload.end(), udp + 8);
    std::uint8_t record[16] = {};
    bytes::store_le32(record + 0, 1700000000);
    bytes::store_le32(record + 4, t_us += 10);
    bytes::store_le32(record + 8, static_cast<std::uint32_t>(p.size()));
    bytes::store_le32(record + 12, static_cast<std::uint32_t>(p.size()));
    out.insert(out.end(), record, record + 16);
    out.insert(out.end(), p.begin(), p.end());
  }
  std::ofstream(file, std::ios::binary).write(reinterpret_cast<const char*>(out.data()),
                                              static_cast<std::streamsize>(out.size()));
}

TEST(Offline, APcapCaptureGivesWhatItsFramesGive) {
  std::mt19937_64 rng(5);
  TestScanner scanner;
  scanner.settings.stream.max_slice_frames = 1000;
  test::AcquisitionOptions o;
  o.events = 5000;
  const auto frames = test::random_acquisition(scanner, rng, o);
  const auto config = scanner.write_config();
  // The same frames as a frame file and as a capture of datagrams of 37 frames; the last
  // datagram has 3 bytes past its last whole frame.
  write_frames(scanner.dir / "acq.frames", frames, 0);
  std::vector<std::vector<std::uint8_t>> payloads;
  for (std::size_t at = 0; at < frames.size(); at += 37) {
    const std::size_t n = std::min<std::size_t>(37, frames.size() - at);
    const auto* b = reinterpret_cast<const std::uint8_t*>(&frames[at]);
    payloads.emplace_back(b, b + n * kFrameBytes);
  }
  payloads.back().insert(payloads.back().end(), {1, 2, 3});
  write_pcap(scanner.dir / "acq.pcap", payloads);

  const Result a = run(scanner.dir, PETDAQ_OFFLINE_BIN,
                       {"--config", config.string(), "--input", (scanner.dir / "acq.frames").string(),
                        "--output", (scanner.dir / "a.plm").string(), "--backend", "cpu",
                        "--histograms", (scanner.dir / "a.pdh").string()});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const Result b = run(scanner.dir, PETDAQ_OFFLINE_BIN,
                       {"--config", config.string(), "--input", (scanner.dir / "acq.pcap").string(),
                        "--output", (scanner.dir / "b.plm").string(), "--backend", "cpu",
                        "--histograms", (scanner.dir / "b.pdh").string()});
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_NE(b.out.find("frames           " + std::to_string(frames.size())), std::string::npos) << b.out;
  const std::string pa = read_text(scanner.dir / "a.plm"), pb = read_text(scanner.dir / "b.plm");
  ASSERT_GT(pa.size(), kPlmHeaderBytes + 1000);
  EXPECT_EQ(pa.substr(kPlmHeaderBytes), pb.substr(kPlmHeaderBytes));

  // The histograms of both runs hold the same bins (the counters differ: rx.* and trailing
  // bytes come from the capture's datagrams).
  const auto ha = read_histogram_file(scanner.dir / "a.pdh");
  const auto hb = read_histogram_file(scanner.dir / "b.pdh");
  const HistogramFile fa = parse_histogram_file(ha.data(), ha.size());
  const HistogramFile fb = parse_histogram_file(hb.data(), hb.size());
  const HistDescriptor& first = fa.descriptors.front();
  const HistDescriptor& last = fa.descriptors.back();
  const std::size_t from = first.data_offset, to = last.data_offset + last.elements() * last.element_bytes;
  EXPECT_TRUE(std::equal(ha.begin() + from, ha.begin() + to, hb.begin() + from));
  const test::BatchResult want = test::batch_process(scanner, frames);
  std::uint64_t singles = 0;
  const HistDescriptor& cs = *fb.find("crystal_singles");
  for (std::uint64_t i = 0; i < cs.elements(); ++i) singles += fb.value(cs, i);
  EXPECT_EQ(singles, want.counters[Counter::single_accepted]);
  EXPECT_NE(fb.metadata.find("\"rx.trailing_bytes\":3"), std::string_view::npos);
  EXPECT_NE(fb.metadata.find("\"rx.datagrams\":" + std::to_string(payloads.size())),
            std::string_view::npos);
}

std::uint64_t histogram_sum(const std::filesystem::path& file, const char* name) {
  const std::vector<std::uint8_t> bytes = read_histogram_file(file);
  const HistogramFile f = parse_histogram_file(bytes.data(), bytes.size());
  const HistDescriptor* d = f.find(name);
  if (!d) return ~0ull;
  std::uint64_t sum = 0;
  for (std::uint64_t i = 0; i < d->elements(); ++i) sum += f.value(*d, i);
  return sum;
}

// A counter as the file's JSON document holds it (cumulative when the file was written).
std::uint64_t file_counter(const std::filesystem::path& file, const std::string& name) {
  const std::vector<std::uint8_t> bytes = read_histogram_file(file);
  const HistogramFile f = parse_histogram_file(bytes.data(), bytes.size());
  const std::string key = "\"" + name + "\":";
  const std::size_t at = f.metadata.find(key);
  if (at == std::string_view::npos) return ~0ull;
  return std::stoull(std::string(f.metadata.substr(at + key.size(), 20)));
}

TEST(Offline, HistogramsOfEachRunGoToTheirOwnFile) {
  std::mt19937_64 rng(8);
  TestScanner scanner;
  scanner.settings.stream.max_future_ps = 100'000 * scanner.settings.scanner.tick_ps;
  test::AcquisitionOptions o;
  o.events = 4000;
  o.start_ticks = 5'000'000;
  const auto run_a = test::random_acquisition(scanner, rng, o);
  o.events = 3000;
  o.start_ticks = 2000;  // the scanner's clock was reset
  const auto run_b = test::random_acquisition(scanner, rng, o);
  std::vector<RawFrame> frames = run_a;
  frames.insert(frames.end(), run_b.begin(), run_b.end());
  const auto config = scanner.write_config();
  write_frames(scanner.dir / "acq.frames", frames, 0);
  const Result r = run(scanner.dir, PETDAQ_OFFLINE_BIN,
                       {"--config", config.string(), "--input", (scanner.dir / "acq.frames").string(),
                        "--output", (scanner.dir / "acq.plm").string(), "--backend", "cpu",
                        "--histograms", (scanner.dir / "acq.pdh").string(), "--quiet"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("stream.runs      1"), std::string::npos) << r.out;
  // Each file holds its own run: its totals are that run's counts, and so are its counters
  // (`counters`; `counters_since_start` are the totals over both runs), and each run is near
  // its batch (frames held while the reset is confirmed; no frame of the new run is a time
  // jump, since each source's frames go on from its own latest time, DESIGN section 6).
  const auto first = scanner.dir / "acq.pdh", second = scanner.dir / "acq-run1.pdh";
  // The summary names both files.
  EXPECT_NE(r.out.find("histograms       " + first.string() + "\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("histograms       " + second.string() + "\n"), std::string::npos) << r.out;
  const auto since_start = [](const std::filesystem::path& file, const std::string& name) {
    const std::vector<std::uint8_t> bytes = read_histogram_file(file);
    const HistogramFile f = parse_histogram_file(bytes.data(), bytes.size());
    const std::string_view all = f.metadata.substr(f.metadata.find("\"counters_since_start\""));
    const std::string key = "\"" + name + "\":";
    return std::stoull(std::string(all.substr(all.find(key) + key.size(), 20)));
  };
  for (const auto& [hist, counter] : {std::pair{"crystal_singles", "single.accepted"},
                                      {"crystal_energy_rejected", "single.energy_rejected"},
                                      {"dt_prompt", "coinc.prompts"},
                                      {"dt_delayed", "coinc.delayed"}}) {
    EXPECT_EQ(histogram_sum(first, hist), file_counter(first, counter)) << hist;
    EXPECT_EQ(histogram_sum(second, hist), file_counter(second, counter)) << hist;
    EXPECT_EQ(since_start(second, counter),
              file_counter(first, counter) + file_counter(second, counter)) << counter;
  }
  const test::BatchResult a = test::batch_process(scanner, run_a);
  const test::BatchResult b = test::batch_process(scanner, run_b);
  EXPECT_NEAR(static_cast<double>(histogram_sum(first, "crystal_singles")),
              static_cast<double>(a.counters[Counter::single_accepted]), 30);
  EXPECT_NEAR(static_cast<double>(histogram_sum(second, "crystal_singles")),
              static_cast<double>(b.counters[Counter::single_accepted]), 30);
  EXPECT_EQ(file_counter(second, "stream.time_jump"), 0u);
}

// Buffers larger than the memory the process may take (here RLIMIT_AS at 2 GiB, slices of
// 2^30 frames): a message naming the keys and exit 2, not a bare std::bad_alloc.
TEST(Offline, BuffersLargerThanMemoryAreAClearErrorNamingTheKeys) {
  TestScanner scanner;
  scanner.settings.stream.max_slice_frames = 1u << 30;
  scanner.settings.stream.max_pending_frames = 1u << 30;
  const auto input = scanner.dir / "acq.frames";
  write_frames(input, {scanner.frame(0, 0, 0, 1000, 500)}, 0);
  const auto config = scanner.write_config();
  const auto err = scanner.dir / "err.txt";
  const std::string cmd = "ulimit -v 2097152; exec " + quote(PETDAQ_OFFLINE_BIN) + " --config " +
                          quote(config.string()) + " --input " + quote(input.string()) +
                          " --output " + quote((scanner.dir / "out.plm").string()) +
                          " > /dev/null 2> " + quote(err.string());
  const int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 2);
  const std::string text = read_text(err);
  EXPECT_NE(text.find("not enough memory for the engine buffers"), std::string::npos) << text;
  EXPECT_NE(text.find("stream.max_slice_frames"), std::string::npos) << text;
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

  // A file that is not frames (here JSON text): a message and exit 1, not an empty result.
  const auto text = scanner.dir / "truth.json";
  std::ofstream(text) << "{\n  \"format\": \"petdaq-sim truth 1\",\n  \"seed\": 1,\n  \"frames\": 12\n}\n";
  r = run(scanner.dir, PETDAQ_OFFLINE_BIN,
          {"--config", good.string(), "--input", text.string(), "--output", output.string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("no valid frame"), std::string::npos) << r.err;

  r = run(scanner.dir, PETDAQ_OFFLINE_BIN, {"--config", good.string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--input is required"), std::string::npos) << r.err;

  r = run(scanner.dir, PETDAQ_OFFLINE_BIN,
          {"--config", good.string(), "--input", input.string(), "--output", output.string(),
           "--backend", "fpga"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("fpga"), std::string::npos) << r.err;

  // A .plm cut inside a message (a file still being written): petdaq-dump reads up to the
  // last complete message, prints exactly what the whole file holds up to there, and says
  // that a partial message follows.
  r = run(scanner.dir, PETDAQ_OFFLINE_BIN,
          {"--config", good.string(), "--input", input.string(), "--output", output.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string plm = read_text(output);
  ASSERT_GT(plm.size(), kPlmHeaderBytes + kMessageHeaderBytes + 10);
  PlmReader whole(output);
  MessageHeader first;
  std::vector<CoincRecord> first_records;
  ASSERT_TRUE(whole.next(first, first_records));
  const std::size_t first_end = whole.offset();
  ASSERT_GT(plm.size(), first_end + 10);
  const auto cut = scanner.dir / "cut.plm";
  std::ofstream(cut, std::ios::binary) << plm.substr(0, first_end + 10);
  r = run(scanner.dir, PETDAQ_DUMP_BIN, {"--messages", cut.string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("partial message"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("# partial message at byte " + std::to_string(first_end) + " (10 bytes)"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("# messages prompt 1 delayed 0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("# records prompt " + std::to_string(first_records.size())),
            std::string::npos) << r.out;
  // Corruption inside the file is still an error.
  std::string corrupt = plm;
  corrupt[first_end] ^= 0xFF;  // the second message's magic
  std::ofstream(cut, std::ios::binary) << corrupt;
  r = run(scanner.dir, PETDAQ_DUMP_BIN, {cut.string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("bad message magic"), std::string::npos) << r.err;
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

// The .plm is written on a thread of its own; a write that fails there still ends the run
// with the file's name and the reason, exit status 2.
TEST(Offline, AFailedWriteExitsTwoWithAMessage) {
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full on this system";
  TestScanner scanner;
  const auto input = scanner.dir / "acq.frames";
  std::vector<RawFrame> frames;
  for (std::uint64_t t = 0; t < 20000; ++t)
    frames.push_back(scanner.frame(t % 2, 0, 0, 1000 + 7 * t, 500));
  write_frames(input, frames, 0);
  const Result r = run(scanner.dir, PETDAQ_OFFLINE_BIN,
                       {"--config", scanner.write_config().string(), "--input", input.string(),
                        "--output", "/dev/full", "--quiet"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("/dev/full: write failed"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace petdaq

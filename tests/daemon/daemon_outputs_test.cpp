// petdaqd's optional outputs end to end: the `histograms` and `singles` topics (DESIGN
// section 7) — frames over UDP, the singles published equal the batch singles in order,
// batches tile time, the live histograms' totals equal the counters, the run's histogram
// file lands next to the list-mode files — and raw capture (output.raw): the files hold the
// frames exactly as sent, rotated by size.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>

#include <gtest/gtest.h>

#include "core/histograms.h"
#include "core/image.h"
#include "core/test_scanner.h"
#include "daemon_harness.h"
#include "tests/support/files.h"
#include "tests/support/wait.h"

namespace petdaq::test {
namespace {

using namespace std::chrono_literals;

TEST(HistogramsTopic, SinglesAndHistogramsMatchTheBatchAndTheCounters) {
  TestScanner scanner;
  auto& st = scanner.settings.stream;
  st.max_slice_frames = 1u << 16;
  st.max_pending_frames = 1u << 18;
  st.max_carry_singles = 1u << 16;
  DaemonConfig daemon;
  daemon.udp_port = free_udp_port();
  daemon.zmq_endpoint = "ipc://" + (scanner.dir / "pub.sock").string();
  daemon.file_directory = scanner.dir / "out";
  daemon.file_rotate_bytes = 64u << 20;
  daemon.output_extra =
      "  histograms:\n    enabled: true\n    interval_ms: 100\n    rate_bin_ms: 0.01\n"
      "  singles:\n    enabled: true\n";
  std::filesystem::create_directories(daemon.file_directory);
  const auto config = scanner.write_config();
  std::ofstream(config, std::ios::app) << daemon_yaml(daemon);

  std::mt19937_64 rng(21);
  AcquisitionOptions o;
  o.events = 40000;
  const std::vector<RawFrame> frames = random_acquisition(scanner, rng, o);
  const BatchResult ref = batch_process(scanner, frames);

  DaemonProcess d(config, scanner.dir / "petdaqd.log");
  Subscriber sub(daemon.zmq_endpoint);
  ASSERT_TRUE(sub.wait_rates([](const std::string&) { return true; }, 20s).has_value()) << d.log();
  const auto datagrams = make_datagrams(frames, Framing::raw, 50, 4);
  UdpSender tx;
  tx.send(datagrams, daemon.udp_port);
  ASSERT_TRUE(sub.wait_rates([&](const std::string& j) {
                  return json_counter(j, "rx.datagrams") >= datagrams.size();
                }, 30s).has_value()) << d.log();
  d.signal(SIGTERM);
  ASSERT_EQ(d.wait_for(15s).value_or(-1), 0) << d.log();
  ASSERT_TRUE(sub.wait_drained(10s)) << "the subscriber did not see the daemon go";
  const auto messages = sub.messages();

  // Singles: kind 3, 16-byte records, consecutive ids, tiling time, equal to the batch.
  std::vector<Single> singles;
  const Published* prev = nullptr;
  std::uint64_t id = 0;
  for (const Published& p : messages) {
    if (p.topic != topic::singles) continue;
    EXPECT_EQ(p.header.kind, 3u);
    EXPECT_EQ(p.header.record_size, 16u);
    EXPECT_EQ(p.header.message_id, id++);
    ASSERT_EQ(p.body.size(), p.header.record_count * 16u);
    if (prev && prev->header.run_id == p.header.run_id)
      EXPECT_EQ(prev->header.t_end, p.header.t_begin);
    for (std::size_t at = 0; at < p.body.size(); at += 16) {
      singles.push_back(decode_single(p.body.data() + at));
      EXPECT_GE(singles.back().time, p.header.t_begin);
      EXPECT_LT(singles.back().time, p.header.t_end);
    }
    prev = &p;
  }
  ASSERT_EQ(singles.size(), ref.singles.size());
  EXPECT_EQ(std::memcmp(singles.data(), ref.singles.data(), singles.size() * sizeof(Single)), 0);

  // Histograms: several messages; the last one's totals equal the final counters.
  std::string rates;
  for (auto it = messages.rbegin(); it != messages.rend() && rates.empty(); ++it)
    if (it->topic == topic::rates) rates.assign(it->body.begin(), it->body.end());
  const Published* last = nullptr;
  std::size_t histogram_messages = 0;
  for (const Published& p : messages)
    if (p.topic == topic::histograms) {
      last = &p;
      ++histogram_messages;
      EXPECT_EQ(p.header.kind, 4u);
    }
  ASSERT_NE(last, nullptr);
  EXPECT_GE(histogram_messages, 2u);
  const HistogramFile h = parse_histogram_file(last->body.data(), last->body.size());
  auto sum = [&](const HistogramFile& f, const char* name) {
    const HistDescriptor* d = f.find(name);
    EXPECT_NE(d, nullptr) << name;
    std::uint64_t s = 0;
    for (std::uint64_t i = 0; d && i < d->elements(); ++i) s += f.value(*d, i);
    return s;
  };
  EXPECT_EQ(sum(h, "crystal_singles"), json_counter(rates, "single.accepted"));
  EXPECT_EQ(sum(h, "crystal_singles"), ref.counters[Counter::single_accepted]);
  EXPECT_EQ(sum(h, "crystal_energy_rejected"), json_counter(rates, "single.energy_rejected"));
  EXPECT_EQ(sum(h, "dt_prompt"), json_counter(rates, "coinc.prompts"));
  EXPECT_EQ(sum(h, "dt_delayed"), json_counter(rates, "coinc.delayed"));
  EXPECT_EQ(sum(h, "rate_prompts"), ref.prompts.size());
  EXPECT_NE(h.metadata.find("\"backend\":\"cpu\""), std::string_view::npos);

  // The run's file, next to the .plm files, holds the same totals.
  std::vector<std::filesystem::path> pdh;
  for (const auto& e : std::filesystem::directory_iterator(daemon.file_directory))
    if (e.path().extension() == ".pdh") pdh.push_back(e.path());
  ASSERT_EQ(pdh.size(), 1u) << d.log();
  const std::vector<std::uint8_t> bytes = read_bytes(pdh[0]);
  const HistogramFile file = parse_histogram_file(bytes.data(), bytes.size());
  EXPECT_EQ(sum(file, "crystal_singles"), ref.counters[Counter::single_accepted]);
  EXPECT_EQ(sum(file, "dt_prompt"), ref.prompts.size());
  EXPECT_EQ(sum(file, "flood"), sum(h, "flood"));

  // The derived singles-rate randoms: τ (N² − Σ N_i²) / T over the run (every pair of
  // different crystals is good), T from the first prompt to the last single; the daemon's
  // ∫S² dt comes from its 10 µs rate bins: within 1 % of the constant-rate form (0.04 % here).
  const HistDescriptor* randoms = file.find("bdm_pair_randoms_singles_rate");
  ASSERT_NE(randoms, nullptr);
  double got = 0;
  for (std::uint64_t i = 0; i < randoms->elements(); ++i) got += file.number(*randoms, i);
  const HistDescriptor& cs = *file.find("crystal_singles");
  double n = 0, squares = 0;
  for (std::uint64_t i = 0; i < cs.elements(); ++i) {
    const double v = static_cast<double>(file.value(cs, i));
    n += v;
    squares += v * v;
  }
  const double tick_s = scanner.settings.scanner.tick_ps * 1e-12;
  const double tau = (static_cast<double>(scanner.ticks(scanner.settings.coincidence.window_ps)) + 0.5) * tick_s;
  const double t = static_cast<double>(ref.singles.back().time + 1 - ref.prompts.front().time_a) * tick_s;
  const double want = tau * (n * n - squares) / t;
  EXPECT_GT(want, 10.0);
  EXPECT_NEAR(got / want, 1.0, 0.01) << got << " vs " << want;
}

TEST(RawCapture, FilesHoldTheFramesAsSentRotatedBySize) {
  TestScanner scanner;
  DaemonConfig daemon;
  daemon.udp_port = free_udp_port();
  daemon.zmq_endpoint = "ipc://" + (scanner.dir / "pub.sock").string();
  const auto raw_dir = scanner.dir / "raw";
  std::filesystem::create_directories(raw_dir);
  daemon.output_extra = "  raw:\n    enabled: true\n    directory: \"" + raw_dir.string() +
                        "\"\n    rotate_bytes: 1048576\n";
  const auto config = scanner.write_config();
  std::ofstream(config, std::ios::app) << daemon_yaml(daemon);

  std::mt19937_64 rng(4);
  AcquisitionOptions o;
  o.events = 60000;  // ~100 000 frames: two files of 1 MiB and a rest
  o.bad_fraction = 0.05;  // bad frames are captured too
  const std::vector<RawFrame> frames = random_acquisition(scanner, rng, o);
  const auto datagrams = make_datagrams(frames, Framing::raw, 40, 4);
  std::vector<std::uint8_t> sent;
  for (const Datagram& g : datagrams) sent.insert(sent.end(), g.begin(), g.end());

  DaemonProcess d(config, scanner.dir / "petdaqd.log");
  Subscriber sub(daemon.zmq_endpoint);
  ASSERT_TRUE(sub.wait_rates([](const std::string&) { return true; }, 20s).has_value()) << d.log();
  UdpSender tx;
  tx.send(datagrams, daemon.udp_port);
  const auto rates = sub.wait_rates([&](const std::string& j) {
    return json_counter(j, "rx.datagrams") >= datagrams.size();
  }, 30s);
  ASSERT_TRUE(rates.has_value()) << d.log();
  // While petdaqd runs, its files already hold every frame received: the sink hands its
  // buffer to the file at least every 0.2 s, not only at exit.
  const auto on_disk = [&] {
    std::uintmax_t bytes = 0;
    for (const auto& e : std::filesystem::directory_iterator(raw_dir)) bytes += e.file_size();
    return bytes;
  };
  EXPECT_TRUE(wait_until([&] { return on_disk() >= sent.size(); }, 10s))
      << on_disk() << " of " << sent.size() << " bytes on disk while petdaqd runs";
  d.signal(SIGTERM);
  ASSERT_EQ(d.wait_for(15s).value_or(-1), 0) << d.log();
  ASSERT_TRUE(sub.wait_drained(10s)) << "the subscriber did not see the daemon go";
  std::string last;
  for (const Published& p : sub.messages())
    if (p.topic == topic::rates) last.assign(p.body.begin(), p.body.end());

  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(raw_dir)) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  ASSERT_EQ(files.size(), (sent.size() + (1u << 20) - 1) / (1u << 20)) << d.log();
  std::vector<std::uint8_t> captured;
  for (const auto& f : files) {
    const std::vector<std::uint8_t> bytes = read_bytes(f);
    if (&f != &files.back()) EXPECT_EQ(bytes.size(), 1u << 20) << f;
    captured.insert(captured.end(), bytes.begin(), bytes.end());
  }
  ASSERT_EQ(captured.size(), sent.size());
  EXPECT_TRUE(captured == sent);
  EXPECT_EQ(json_counter(last, "out.raw_bytes"), sent.size());
  EXPECT_EQ(json_counter(last, "out.raw_lost_frames"), 0u);
  EXPECT_EQ(json_counter(last, "rx.ring_full"), 0u);
}

TEST(RawCapture, AMissingDirectoryIsRefusedAtStartUp) {
  TestScanner scanner;
  DaemonConfig daemon;
  daemon.udp_port = free_udp_port();
  daemon.zmq_endpoint = "ipc://" + (scanner.dir / "pub.sock").string();
  daemon.output_extra = "  raw:\n    enabled: true\n    directory: \"" +
                        (scanner.dir / "nowhere").string() + "\"\n";
  const auto config = scanner.write_config();
  std::ofstream(config, std::ios::app) << daemon_yaml(daemon);
  const auto [status, log] = run_daemon_to_exit({"--config", config.string()}, scanner.dir / "d.log");
  EXPECT_NE(status, 0);
  EXPECT_NE(log.find("output.raw.directory"), std::string::npos) << log;
}

// The `image` topic (DESIGN section 7, "Image"): several messages; the last one's run image,
// trace and tallies equal the image rule applied to the batch records; the run's .pdim file
// next to the list-mode files holds the same image.
TEST(ImageTopic, TheRunsImageEqualsTheRuleOnTheBatchRecords) {
  TestScanner scanner;
  auto& st = scanner.settings.stream;
  st.max_slice_frames = 1u << 16;
  st.max_pending_frames = 1u << 18;
  st.max_carry_singles = 1u << 16;
  scanner.settings.coincidence.delayed.offset_ps = 20'000;
  DaemonConfig daemon;
  daemon.udp_port = free_udp_port();
  daemon.zmq_endpoint = "ipc://" + (scanner.dir / "pub.sock").string();
  daemon.file_directory = scanner.dir / "out";
  daemon.file_rotate_bytes = 64u << 20;
  daemon.output_extra =
      "  image:\n    enabled: true\n    interval_ms: 100\n    voxel_mm: 4\n    dim_x: 48\n"
      "    dim_y: 48\n    dim_z: 48\n    subtract_delayed: true\n    trace_bin_ms: 0.01\n"
      "    trace_bins: 64\n";
  std::filesystem::create_directories(daemon.file_directory);
  const auto config = scanner.write_config();
  std::ofstream(config, std::ios::app) << daemon_yaml(daemon);

  std::mt19937_64 rng(23);
  AcquisitionOptions o;
  o.events = 40000;
  const std::vector<RawFrame> frames = random_acquisition(scanner, rng, o);
  const BatchResult ref = batch_process(scanner, frames);

  DaemonProcess d(config, scanner.dir / "petdaqd.log");
  Subscriber sub(daemon.zmq_endpoint);
  ASSERT_TRUE(sub.wait_rates([](const std::string&) { return true; }, 20s).has_value()) << d.log();
  const auto datagrams = make_datagrams(frames, Framing::raw, 50, 4);
  UdpSender tx;
  tx.send(datagrams, daemon.udp_port);
  ASSERT_TRUE(sub.wait_rates([&](const std::string& j) {
                  return json_counter(j, "rx.datagrams") >= datagrams.size();
                }, 30s).has_value()) << d.log();
  d.signal(SIGTERM);
  ASSERT_EQ(d.wait_for(15s).value_or(-1), 0) << d.log();
  ASSERT_TRUE(sub.wait_drained(10s)) << "the subscriber did not see the daemon go";
  const auto messages = sub.messages();

  const Published* last = nullptr;
  std::size_t image_messages = 0;
  for (const Published& p : messages)
    if (p.topic == topic::image) {
      EXPECT_EQ(p.header.kind, 6u);
      EXPECT_EQ(p.header.record_size, p.body.size());
      last = &p;
      ++image_messages;
    }
  ASSERT_NE(last, nullptr) << d.log();
  EXPECT_GE(image_messages, 2u);
  const ImageFile f = parse_image_file(last->body.data(), last->body.size());

  // The rule on the batch's records (the daemon's settings: the scanner's and output.image).
  Settings s = load_settings(config);
  ImageSet want(s);
  want.add_records(ref.prompts.data(), ref.prompts.size(), false);
  want.add_records(ref.delayed.data(), ref.delayed.size(), true);
  ASSERT_GT(want.tally(ImageTally::prompts_in), 1000u);
  ASSERT_GT(want.tally(ImageTally::delayed_in), 0u);
  for (int k = 0; k < kImageTallies; ++k)
    EXPECT_EQ(f.tallies[k], want.tally(static_cast<ImageTally>(k))) << k;
  ASSERT_EQ(f.voxel_count(), want.layout().voxel_count);
  std::uint64_t mismatches = 0;
  for (std::uint64_t v = 0; v < f.voxel_count(); ++v) mismatches += f.run_voxel(v) != want.voxels()[v];
  EXPECT_EQ(mismatches, 0u);
  double weight = 0;
  for (std::uint32_t i = 0; i < f.trace_count; ++i) weight += f.sample(i).weight;
  EXPECT_EQ(weight, static_cast<double>(want.tally(ImageTally::prompts_in)) -
                        static_cast<double>(want.tally(ImageTally::delayed_in)));

  // The run's file holds the bytes of the message published at the run's end, whose run
  // image is the last one's.
  std::vector<std::filesystem::path> pdim;
  for (const auto& e : std::filesystem::directory_iterator(daemon.file_directory))
    if (e.path().extension() == ".pdim") pdim.push_back(e.path());
  ASSERT_EQ(pdim.size(), 1u) << d.log();
  const std::vector<std::uint8_t> file = read_image_file(pdim[0]);
  bool published = false;
  for (const Published& p : messages)
    published = published || (p.topic == topic::image && p.body == file);
  EXPECT_TRUE(published) << "the .pdim file is no published message";
  const ImageFile ff = parse_image_file(file.data(), file.size());
  for (std::uint64_t v = 0; v < ff.voxel_count(); ++v) mismatches += ff.run_voxel(v) != want.voxels()[v];
  EXPECT_EQ(mismatches, 0u);
}

}  // namespace
}  // namespace petdaq::test

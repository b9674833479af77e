// petdaq-replay: the packer on its own, then the tool end to end against a UDP receiver.
#include <gtest/gtest.h>
#include <pcap/pcap.h>

#include <fstream>
#include <map>
#include <random>
#include <set>

#include "proto/datagram.h"
#include "proto/frame.h"
#include "tests/tools/tool_harness.h"
#include "tools/replay/input.h"
#include "tools/replay/packer.h"
#include "tools/replay/pacer.h"

namespace petdaq {
namespace {

using test::bin_dir;
using test::report_fields;
using test::ScratchDir;
using test::UdpReceiver;

// Frames with increasing times spread over `bdms` boards at random, every byte known.
std::vector<RawFrame> make_frames(std::size_t n, std::uint32_t bdms, std::uint32_t seed = 1) {
  std::mt19937 rng(seed);
  std::vector<RawFrame> out(n);
  std::uint64_t t = 1'000'000;
  for (std::size_t i = 0; i < n; ++i) {
    FrameFields f{};
    f.head_marker = 0xA;
    f.du = static_cast<std::uint8_t>(rng() % 4);
    f.bdm = static_cast<std::uint8_t>(rng() % bdms);
    t += rng() % 50;
    f.time_ticks = t;
    f.x = static_cast<std::uint8_t>(rng());
    f.y = static_cast<std::uint8_t>(rng());
    f.energy_raw = static_cast<std::uint16_t>(rng());
    f.temp_int_degC = 35;
    f.temp_frac_16ths = static_cast<std::uint8_t>(i % 16);
    f.tail_marker = 0x5;
    encode_frame(f, out[i].bytes);
  }
  return out;
}

void write_file(const std::filesystem::path& p, const void* data, std::size_t bytes) {
  std::ofstream f(p, std::ios::binary);
  f.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
}

std::vector<std::uint8_t> frames_of(const std::vector<RawFrame>& frames,
                                    std::uint32_t source, std::uint32_t sources) {
  std::vector<std::uint8_t> out;
  for (const auto& f : frames) {
    if (frame_bdm(f.bytes) % sources == source) out.insert(out.end(), f.bytes, f.bytes + 16);
  }
  return out;
}

// ---------------- the packer ----------------

TEST(ReplayPacker, FillsOneDatagramPerSourceAndFlushesTheRestAtTheEnd) {
  const auto frames = make_frames(1000, 3);
  replay::PackerConfig pc;
  pc.payload_bytes = 16 * 10 + 5;  // room for 10 frames; the 5 spare bytes stay unused
  pc.source_count = 3;
  pc.in_flight = 4;
  replay::Packer packer(pc);
  EXPECT_EQ(packer.frames_per_datagram(), 10u);
  std::map<std::uint32_t, std::vector<std::uint8_t>> got;
  std::size_t datagrams = 0, full = 0;
  auto emit = [&](const replay::Datagram& d) {
    ++datagrams;
    EXPECT_EQ(d.bytes, d.frames * 16);
    EXPECT_LE(d.frames, 10u);
    full += d.frames == 10;
    got[d.source].insert(got[d.source].end(), d.data, d.data + d.bytes);
    packer.release(d.buffer);
  };
  for (const auto& f : frames) packer.add(f.bytes, emit);
  packer.flush(emit);
  for (std::uint32_t s = 0; s < 3; ++s) EXPECT_EQ(got[s], frames_of(frames, s, 3)) << s;
  // Only the last datagram of each source may be partial.
  EXPECT_GE(full, datagrams - 3);
}

TEST(ReplayPacker, SequencedHeadersCountPerSource) {
  const auto frames = make_frames(500, 2);
  replay::PackerConfig pc;
  pc.framing = Framing::sequenced;
  pc.payload_bytes = 16 + 16 * 7;
  pc.source_count = 2;
  replay::Packer packer(pc);
  std::uint32_t next_seq[2] = {0, 0};
  std::size_t frames_seen = 0;
  auto emit = [&](const replay::Datagram& d) {
    const DatagramView v = parse_datagram(d.data, d.bytes, Framing::sequenced);
    EXPECT_EQ(v.status, DatagramStatus::ok);
    EXPECT_EQ(v.header.source_id, d.source);
    EXPECT_EQ(v.header.sequence, next_seq[d.source]++);
    EXPECT_EQ(v.frame_count, d.frames);
    EXPECT_EQ(v.trailing_bytes, 0u);
    frames_seen += v.frame_count;
    packer.release(d.buffer);
  };
  for (const auto& f : frames) packer.add(f.bytes, emit);
  packer.flush(emit);
  EXPECT_EQ(frames_seen, frames.size());
}

TEST(ReplayPacker, AQuietSourceIsSentAfterTheFlushTime) {
  // Source 1 gets one frame, then only source 0 sends for a long time.
  replay::PackerConfig pc;
  pc.payload_bytes = 16 * 100;
  pc.source_count = 2;
  pc.flush_ticks = 1000;
  replay::Packer packer(pc);
  std::vector<std::pair<std::uint32_t, std::uint64_t>> closed;  // source, time
  auto emit = [&](const replay::Datagram& d) {
    closed.emplace_back(d.source, d.data_time_ticks);
    packer.release(d.buffer);
  };
  auto frame = [](std::uint8_t bdm, std::uint64_t t) {
    RawFrame f{};
    f.bytes[1] = bdm;
    bytes::store_be64(f.bytes + 2, t);
    return f;
  };
  const RawFrame lone = frame(1, 100);
  packer.add(lone.bytes, emit);
  for (std::uint64_t t = 110; t < 1000; t += 10) {
    const RawFrame f = frame(0, t);
    packer.add(f.bytes, emit);
  }
  EXPECT_TRUE(closed.empty());
  for (std::uint64_t t = 1000; t < 1400; t += 10) {
    const RawFrame f = frame(0, t);
    packer.add(f.bytes, emit);
  }
  const auto lone_closed = std::find_if(closed.begin(), closed.end(),
                                        [](const auto& c) { return c.first == 1; });
  ASSERT_NE(lone_closed, closed.end());
  EXPECT_GE(lone_closed->second, 1100u);              // waited at least the flush time
  EXPECT_LE(lone_closed->second, 1100u + 250u + 10u);  // checked every quarter flush time
}

TEST(ReplayPacker, RefusesAPayloadTooSmallForOneFrame) {
  replay::PackerConfig pc;
  pc.framing = Framing::sequenced;
  pc.payload_bytes = 31;
  EXPECT_THROW(replay::Packer{pc}, std::invalid_argument);
  pc.framing = Framing::raw;
  pc.payload_bytes = 70000;
  EXPECT_THROW(replay::Packer{pc}, std::invalid_argument);
}

// ---------------- pacing ----------------

using std::chrono::milliseconds;
using std::chrono::nanoseconds;

TEST(ReplayPacer, RateStartsEmptyAndSpacesDatagramsByTheirFrames) {
  replay::Pacer p = replay::Pacer::rate(1000.0, 100.0);  // 1000 frames/s, 100 frames deep
  const replay::Clock::time_point t0{};
  p.start(t0);
  // 10 frames need 10 ms of tokens.
  auto due = p.due(10, 0, t0);
  EXPECT_NEAR(std::chrono::duration<double>(due - t0).count(), 0.010, 1e-6);
  p.commit(10, due, due);
  EXPECT_NEAR(p.behind_last_s(), 0.0, 1e-6);
  // Right after, the next 10 frames are due another 10 ms later.
  auto due2 = p.due(10, 0, due);
  EXPECT_NEAR(std::chrono::duration<double>(due2 - t0).count(), 0.020, 1e-6);
  p.commit(10, due2, due2);
}

TEST(ReplayPacer, AStallLongerThanTheBucketShowsAsBehind) {
  replay::Pacer p = replay::Pacer::rate(1000.0, 100.0);
  const replay::Clock::time_point t0{};
  p.start(t0);
  // Stalled for 1 s: only 100 frames of tokens are kept.
  const auto late = t0 + milliseconds(1000);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(p.due(10, 0, late), late) << i;  // the bucket's 100 frames go at once
    p.commit(10, late, late);
  }
  const auto next = p.due(10, 0, late);
  EXPECT_NEAR(std::chrono::duration<double>(next - late).count(), 0.010, 1e-6);
  // 100 frames sent in 1 s at 1000 frames/s: 0.9 s behind the ideal line; the first 10 of
  // them went out 0.99 s behind.
  EXPECT_NEAR(p.behind_last_s(), 0.9, 1e-6);
  EXPECT_NEAR(p.behind_max_s(), 0.99, 1e-6);
}

TEST(ReplayPacer, SpeedScalesTheInputTimeLine) {
  replay::Pacer p = replay::Pacer::speed(4.0);
  const replay::Clock::time_point t0{};
  p.start(t0);
  EXPECT_EQ(p.due(1, 8'000'000, t0), t0 + nanoseconds(2'000'000));  // 8 ms of input: 2 ms
  p.commit(1, t0 + milliseconds(2), t0 + milliseconds(5));           // sent 3 ms late
  EXPECT_NEAR(p.behind_last_s(), 0.003, 1e-9);
  replay::Pacer m = replay::Pacer::max();
  m.start(t0);
  EXPECT_EQ(m.due(1000, 123'456'789, t0 + milliseconds(1)), t0 + milliseconds(1));
}

// ---------------- pcap decoding ----------------

// Ethernet + IPv4 + UDP around `payload`.
std::vector<std::uint8_t> udp_packet(std::uint16_t src_port, std::uint16_t dst_port,
                                     const std::vector<std::uint8_t>& payload,
                                     std::uint16_t frag_field = 0x4000 /* don't fragment */) {
  std::vector<std::uint8_t> p(14 + 20 + 8 + payload.size());
  // Ethernet: destination, source, ethertype IPv4.
  p[12] = 0x08;
  p[13] = 0x00;
  std::uint8_t* ip = p.data() + 14;
  ip[0] = 0x45;  // version 4, 5 words
  bytes::store_be16(ip + 2, static_cast<std::uint16_t>(20 + 8 + payload.size()));
  bytes::store_be16(ip + 6, frag_field);
  ip[8] = 64;   // ttl
  ip[9] = 17;   // UDP
  ip[12] = 10; ip[13] = 0; ip[14] = 0; ip[15] = 7;  // source 10.0.0.7
  ip[16] = 10; ip[17] = 0; ip[18] = 0; ip[19] = 1;  // destination 10.0.0.1
  std::uint8_t* udp = ip + 20;
  bytes::store_be16(udp + 0, src_port);
  bytes::store_be16(udp + 2, dst_port);
  bytes::store_be16(udp + 4, static_cast<std::uint16_t>(8 + payload.size()));
  std::copy(payload.begin(), payload.end(), udp + 8);
  return p;
}

std::vector<std::uint8_t> arp_packet() {
  std::vector<std::uint8_t> p(42, 0);
  p[12] = 0x08;
  p[13] = 0x06;  // ARP
  return p;
}

std::vector<std::uint8_t> tcp_packet() {
  std::vector<std::uint8_t> p = udp_packet(1, 2, std::vector<std::uint8_t>(20, 0));
  p[14 + 9] = 6;  // TCP
  return p;
}

struct PcapPacket {
  std::vector<std::uint8_t> bytes;
  std::int64_t time_us;
};

void write_pcap(const std::filesystem::path& file, const std::vector<PcapPacket>& packets) {
  pcap_t* dead = pcap_open_dead(DLT_EN10MB, 65535);
  ASSERT_NE(dead, nullptr);
  pcap_dumper_t* dumper = pcap_dump_open(dead, file.c_str());
  ASSERT_NE(dumper, nullptr) << pcap_geterr(dead);
  for (const auto& p : packets) {
    pcap_pkthdr h{};
    h.ts.tv_sec = 1700000000 + p.time_us / 1'000'000;
    h.ts.tv_usec = p.time_us % 1'000'000;
    h.caplen = h.len = static_cast<bpf_u_int32>(p.bytes.size());
    pcap_dump(reinterpret_cast<u_char*>(dumper), &h, p.bytes.data());
  }
  pcap_dump_close(dumper);
  pcap_close(dead);
}

TEST(ReplayCapture, KeepsUdpPayloadsAndCountsWhatItSkips) {
  ScratchDir dir;
  const std::vector<std::uint8_t> a(100, 0x11), b(33, 0x22);
  auto fragment = udp_packet(5000, 5600, a, 0x2000);  // more fragments follow
  write_pcap(dir / "c.pcap", {{udp_packet(5000, 5600, a), 0},
                              {arp_packet(), 10},
                              {tcp_packet(), 20},
                              {fragment, 30},
                              {udp_packet(5001, 5600, b), 1500}});
  const replay::Capture cap = replay::load_capture(dir / "c.pcap");
  ASSERT_EQ(cap.datagrams.size(), 2u);
  EXPECT_EQ(cap.skipped_not_udp, 2u);
  EXPECT_EQ(cap.skipped_fragment, 1u);
  EXPECT_EQ(cap.source_names, (std::vector<std::string>{"10.0.0.7:5000", "10.0.0.7:5001"}));
  EXPECT_EQ(cap.datagrams[1].time_ns, 1'500'000);
  EXPECT_EQ(std::vector<std::uint8_t>(cap.payloads.begin() + cap.datagrams[1].offset,
                                      cap.payloads.begin() + cap.datagrams[1].offset + 33),
            b);
}

TEST(ReplayCapture, TruncatedPacketsAreSkippedNotRead) {
  const auto p = udp_packet(5000, 5600, std::vector<std::uint8_t>(64, 1));
  replay::UdpView v;
  // Captured with a snap length that cuts the payload.
  EXPECT_EQ(replay::decode_packet(DLT_EN10MB, p.data(), 50, p.size(), v),
            replay::PacketVerdict::truncated);
  EXPECT_EQ(replay::decode_packet(DLT_EN10MB, p.data(), 10, p.size(), v),
            replay::PacketVerdict::truncated);
  EXPECT_EQ(replay::decode_packet(DLT_EN10MB, p.data(), p.size(), p.size(), v),
            replay::PacketVerdict::udp);
  EXPECT_EQ(v.payload_bytes, 64u);
  EXPECT_EQ(replay::decode_packet(9999, p.data(), p.size(), p.size(), v),
            replay::PacketVerdict::unknown_link);
}

TEST(ReplayCapture, AFileThatIsNotACaptureIsAClearError) {
  ScratchDir dir;
  write_file(dir / "x.pcap", "not a capture at all", 20);
  EXPECT_THROW(replay::load_capture(dir / "x.pcap"), std::runtime_error);
}

// ---------------- the tool over UDP ----------------

std::string replay_bin() { return (bin_dir() / "petdaq-replay").string(); }

struct ReplayRun {
  int rc;
  std::string err;
  std::map<std::string, std::string> report;
};

ReplayRun run_replay(const ScratchDir& dir, std::vector<std::string> args) {
  args.insert(args.begin(), replay_bin());
  args.push_back("--quiet");
  const int rc = test::run_command(args, dir / "replay.out", dir / "replay.err");
  const std::string err = test::read_text(dir / "replay.err");
  return {rc, err, report_fields(err)};
}

// Concatenated payload bytes per source port, and the port of each BDM.
std::map<std::uint16_t, std::vector<std::uint8_t>> by_port(
    const std::vector<UdpReceiver::Datagram>& got, Framing framing,
    std::map<std::uint16_t, std::vector<std::uint32_t>>* sequences = nullptr) {
  std::map<std::uint16_t, std::vector<std::uint8_t>> out;
  for (const auto& d : got) {
    const DatagramView v = parse_datagram(d.bytes.data(), d.bytes.size(), framing);
    EXPECT_EQ(v.status, DatagramStatus::ok);
    EXPECT_EQ(v.trailing_bytes, 0u);
    if (sequences) (*sequences)[d.source_port].push_back(v.header.sequence);
    out[d.source_port].insert(out[d.source_port].end(), v.frames, v.frames + v.frame_count * 16);
  }
  return out;
}

void expect_streams_match_file(const std::map<std::uint16_t, std::vector<std::uint8_t>>& ports,
                               const std::vector<RawFrame>& frames, std::uint32_t sources) {
  ASSERT_EQ(ports.size(), sources);
  std::set<std::uint32_t> seen;
  for (const auto& [port, stream] : ports) {
    ASSERT_GE(stream.size(), 16u);
    const std::uint32_t source = frame_bdm(stream.data()) % sources;
    EXPECT_TRUE(seen.insert(source).second) << "two ports carry source " << source;
    EXPECT_EQ(stream, frames_of(frames, source, sources)) << "port " << port;
  }
}

TEST(ReplayTool, RawDatagramsCarryTheFileFramesPerBdm) {
  ScratchDir dir;
  const auto frames = make_frames(20000, 6);
  write_file(dir / "f.frames", frames.data(), frames.size() * 16);
  UdpReceiver rx;
  const auto r = run_replay(dir, {(dir / "f.frames").string(), "--to", rx.address(), "--rate",
                                  "2000000"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto got = rx.settle();
  for (const auto& d : got) EXPECT_LE(d.size, 8972u);
  expect_streams_match_file(by_port(got, Framing::raw), frames, 6);
  EXPECT_EQ(r.report.at("frames"), "20000");
  EXPECT_EQ(r.report.at("datagrams"), std::to_string(got.size()));
  EXPECT_EQ(r.report.at("bytes"), std::to_string(20000 * 16));
  EXPECT_EQ(r.report.at("send_errors"), "0");
}

// Several sender threads: each source stays on one thread, so every source's stream is still
// the file's frames of that source in order, and all of them arrive.
TEST(ReplayTool, SenderThreadsKeepEachSourceInOrder) {
  ScratchDir dir;
  const auto frames = make_frames(20000, 6);
  write_file(dir / "f.frames", frames.data(), frames.size() * 16);
  UdpReceiver rx;
  const auto r = run_replay(dir, {(dir / "f.frames").string(), "--to", rx.address(), "--rate",
                                  "2000000", "--threads", "3"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto got = rx.settle();
  expect_streams_match_file(by_port(got, Framing::raw), frames, 6);
  EXPECT_NE(r.err.find("3 sender thread(s)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("all 3 threads: " + std::to_string(got.size()) + " datagrams, 20000 frames"),
            std::string::npos)
      << r.err;
}

TEST(ReplayTool, ConfigEndpointsAreTheDestinationsUnlessToOverrides) {
  ScratchDir dir;
  const auto frames = make_frames(20000, 6);
  write_file(dir / "f.frames", frames.data(), frames.size() * 16);
  UdpReceiver rx_a, rx_b, rx_to;
  const std::string config = (dir / "petdaq.yaml").string();
  {
    std::ofstream out(config);
    out << "calibration: {position_lut: p.npy, energy_correction: e.npy}\n"
        << "input:\n  endpoints: [\"" << rx_a.address() << "\", \"" << rx_b.address() << "\"]\n";
  }
  auto r = run_replay(dir, {"--config", config, "--input", (dir / "f.frames").string(), "--rate",
                            "2000000"});
  ASSERT_EQ(r.rc, 0) << r.err;
  // Source s goes to endpoint s % 2: BDMs 0, 2, 4 to the first, 1, 3, 5 to the second.
  const std::size_t datagrams_a = rx_a.settle().size(), datagrams_b = rx_b.settle().size();
  const auto got_a = by_port(rx_a.settle(), Framing::raw);
  const auto got_b = by_port(rx_b.settle(), Framing::raw);
  ASSERT_EQ(got_a.size(), 3u);
  ASSERT_EQ(got_b.size(), 3u);
  for (const auto& [port, stream] : got_a) EXPECT_EQ(frame_bdm(stream.data()) % 2, 0u);
  for (const auto& [port, stream] : got_b) EXPECT_EQ(frame_bdm(stream.data()) % 2, 1u);

  r = run_replay(dir, {"--config", config, "--input", (dir / "f.frames").string(), "--to",
                       rx_to.address(), "--rate", "2000000"});
  ASSERT_EQ(r.rc, 0) << r.err;
  expect_streams_match_file(by_port(rx_to.settle(), Framing::raw), frames, 6);
  EXPECT_EQ(rx_a.settle().size(), datagrams_a);  // nothing more to the config's endpoints
  EXPECT_EQ(rx_b.settle().size(), datagrams_b);
}

TEST(ReplayTool, SequencedDatagramsOfStandardMtuNumberEachSource) {
  ScratchDir dir;
  const auto frames = make_frames(20000, 4, 7);
  write_file(dir / "f.frames", frames.data(), frames.size() * 16);
  UdpReceiver rx;
  const auto r = run_replay(dir, {(dir / "f.frames").string(), "--to", rx.address(), "--rate",
                                  "2000000", "--framing", "sequenced", "--payload-bytes", "1472"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto got = rx.settle();
  std::size_t full = 0;
  for (const auto& d : got) {
    EXPECT_LE(d.size, 1472u);
    full += d.size == 1472;  // 16 header bytes + 91 frames
  }
  EXPECT_GE(full, got.size() - 4);
  std::map<std::uint16_t, std::vector<std::uint32_t>> seqs;
  expect_streams_match_file(by_port(got, Framing::sequenced, &seqs), frames, 4);
  for (const auto& [port, s] : seqs) {
    for (std::size_t i = 0; i < s.size(); ++i) ASSERT_EQ(s[i], i) << "port " << port;
  }
}

TEST(ReplayTool, SourcesOptionSharesSocketsBetweenBdms) {
  ScratchDir dir;
  const auto frames = make_frames(5000, 6, 3);
  write_file(dir / "f.frames", frames.data(), frames.size() * 16);
  UdpReceiver rx;
  const auto r = run_replay(dir, {(dir / "f.frames").string(), "--to", rx.address(), "--max",
                                  "--sources", "2", "--payload-bytes", "1472"});
  ASSERT_EQ(r.rc, 0) << r.err;
  expect_streams_match_file(by_port(rx.settle(), Framing::raw), frames, 2);
}

TEST(ReplayTool, TruncatedFileSendsTheWholeFramesAndReportsTheRest) {
  ScratchDir dir;
  const auto frames = make_frames(300, 2, 5);
  std::vector<std::uint8_t> bytes(frames.front().bytes, frames.front().bytes + 300 * 16);
  bytes.insert(bytes.end(), {1, 2, 3, 4, 5, 6, 7});
  write_file(dir / "t.frames", bytes.data(), bytes.size());
  UdpReceiver rx;
  const auto r = run_replay(dir, {(dir / "t.frames").string(), "--to", rx.address(), "--max"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.err.find("7 trailing bytes after 300 whole frames"), std::string::npos) << r.err;
  expect_streams_match_file(by_port(rx.settle(), Framing::raw), frames, 2);
}

TEST(ReplayTool, CapturePayloadsAreResentByteForByteAtTheirRecordedPace) {
  ScratchDir dir;
  // Two senders: one raw, one sequenced, as captured from two boards; plus an ARP and a TCP
  // packet that must be skipped and counted.
  const auto frames = make_frames(40, 2, 9);
  std::vector<std::uint8_t> raw(frames[0].bytes, frames[0].bytes + 20 * 16);
  std::vector<std::uint8_t> seq(16 + 20 * 16);
  encode_sequenced_header({kSequencedMagic, kSequencedVersion, 1, 0, 20}, seq.data());
  std::copy(frames[20].bytes, frames[20].bytes + 20 * 16, seq.begin() + 16);
  std::vector<std::uint8_t> seq2 = seq;
  encode_sequenced_header({kSequencedMagic, kSequencedVersion, 1, 1, 20}, seq2.data());
  write_pcap(dir / "c.pcap", {{udp_packet(40000, 5600, raw), 0},
                              {arp_packet(), 50'000},
                              {udp_packet(40001, 5600, seq), 100'000},
                              {tcp_packet(), 150'000},
                              {udp_packet(40001, 5600, seq2), 300'000}});
  UdpReceiver rx;
  const auto r = run_replay(dir, {(dir / "c.pcap").string(), "--to", rx.address(), "--speed", "1"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto got = rx.settle();
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].bytes, raw);
  EXPECT_EQ(got[1].bytes, seq);
  EXPECT_EQ(got[2].bytes, seq2);
  EXPECT_NE(got[0].source_port, got[1].source_port);
  EXPECT_EQ(got[1].source_port, got[2].source_port);
  EXPECT_EQ(r.report.at("skipped_packets"), "2");
  // The capture spans 300 ms; at speed 1 the replay takes as long (kernel time stamps).
  const double span_s = (got[2].kernel_ns - got[0].kernel_ns) * 1e-9;
  EXPECT_GT(span_s, 0.29);
  EXPECT_LT(span_s, 0.60);
}

TEST(ReplayTool, SpeedFollowsTheFrameTimestamps) {
  ScratchDir dir;
  // 2000 frames over 0.4 s of data time at 1 ns per tick, one BDM.
  std::vector<RawFrame> frames(2000);
  for (std::size_t i = 0; i < frames.size(); ++i) {
    FrameFields f{};
    f.head_marker = 0xA;
    f.tail_marker = 0x5;
    f.time_ticks = 200'000 * i;
    encode_frame(f, frames[i].bytes);
  }
  write_file(dir / "s.frames", frames.data(), frames.size() * 16);
  UdpReceiver rx;
  const auto r = run_replay(dir, {(dir / "s.frames").string(), "--to", rx.address(), "--speed",
                                  "2", "--tick-ps", "1000", "--payload-bytes", "1600",
                                  "--flush-us", "0"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto got = rx.settle();
  ASSERT_EQ(got.size(), 20u);
  const double span_s = (got.back().kernel_ns - got.front().kernel_ns) * 1e-9;
  // Datagram k closes at data time (100k+99)*0.2 ms; first to last: 0.38 s of data, 0.19 s
  // at speed 2.
  EXPECT_GT(span_s, 0.18);
  EXPECT_LT(span_s, 0.35);
}

TEST(ReplayTool, SpeedWithoutATickIsRefusedWithAHint) {
  ScratchDir dir;
  const auto frames = make_frames(10, 1);
  write_file(dir / "f.frames", frames.data(), frames.size() * 16);
  const auto r = run_replay(dir, {(dir / "f.frames").string(), "--to", "127.0.0.1:9", "--speed", "1"});
  EXPECT_EQ(r.rc, 2);  // a usage error
  EXPECT_NE(r.err.find("--tick-ps"), std::string::npos) << r.err;
}

TEST(ReplayTool, BadInputsAreClearErrorsNotCrashes) {
  ScratchDir dir;
  auto r = run_replay(dir, {(dir / "missing.frames").string(), "--max"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("cannot open"), std::string::npos) << r.err;
  write_file(dir / "empty.frames", "", 0);
  r = run_replay(dir, {(dir / "empty.frames").string(), "--max"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("no whole frame"), std::string::npos) << r.err;
  const auto frames = make_frames(10, 1);
  write_file(dir / "f.frames", frames.data(), frames.size() * 16);
  r = run_replay(dir, {(dir / "f.frames").string(), "--max", "--to", "no-such-host.invalid:5600"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("no-such-host.invalid"), std::string::npos) << r.err;
  r = run_replay(dir, {(dir / "f.frames").string(), "--max", "--to", "127.0.0.1:99999"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("port must be"), std::string::npos) << r.err;
}

TEST(ReplayTool, NobodyListeningIsCountedAsSendErrors) {
  ScratchDir dir;
  std::string closed_port;
  {
    UdpReceiver probe;  // take a free port, then let it go
    closed_port = probe.address();
  }
  const auto frames = make_frames(20000, 1);
  write_file(dir / "f.frames", frames.data(), frames.size() * 16);
  const auto r = run_replay(dir, {(dir / "f.frames").string(), "--to", closed_port, "--rate",
                                  "1000000", "--payload-bytes", "1472"});
  EXPECT_EQ(r.rc, 3) << r.err;  // datagrams refused
  EXPECT_NE(r.report.at("send_errors"), "0");
  EXPECT_NE(r.err.find("Connection refused"), std::string::npos) << r.err;
}

TEST(ReplayTool, FixedRateOfOneMillionFramesPerSecondHoldsWithinTwoPercent) {
  ScratchDir dir;
  // 200 000 frames sent 10 times: 2 M frames, 2 s at 1 M frames/s.
  const auto frames = make_frames(200'000, 24, 11);
  write_file(dir / "r.frames", frames.data(), frames.size() * 16);
  UdpReceiver rx(false);
  const auto r = run_replay(dir, {(dir / "r.frames").string(), "--to", rx.address(), "--rate",
                                  "1000000", "--loop", "10"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto got = rx.settle();
  EXPECT_EQ(r.report.at("frames"), "2000000");
  const double tool_rate = std::stod(r.report.at("frames_per_s"));
  EXPECT_NEAR(tool_rate, 1e6, 0.02e6) << r.err;

  // The receiver's view: frames after the first datagram over the first-to-last interval.
  std::uint64_t bytes = 0;
  for (const auto& d : got) bytes += d.size;
  EXPECT_EQ(bytes, 2'000'000u * 16) << "datagrams lost on loopback";
  ASSERT_GE(got.size(), 2u);
  const double span_s = (got.back().kernel_ns - got.front().kernel_ns) * 1e-9;
  const double rx_rate = double(bytes - got.front().size) / 16.0 / span_s;
  EXPECT_NEAR(rx_rate, 1e6, 0.02e6);
  std::printf("replay at 1 M frames/s: tool %.0f frames/s, receiver %.0f frames/s over %.3f s\n",
              tool_rate, rx_rate, span_s);
}

}  // namespace
}  // namespace petdaq

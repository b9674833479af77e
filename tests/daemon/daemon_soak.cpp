// petdaqd for minutes under mixed traffic (a bench, not run by ctest): sequenced datagrams
// of good frames (with a few bad frames inside) and, every second, garbage datagrams,
// duplicates and wild sequence headers; one stalled and one healthy subscriber; a SIGHUP
// every 10 s; and the file sink's disk refusing writes for the middle third of the run
// (RLIMIT_FSIZE on the daemon, which makes writes fail as a full disk does). Prints resident
// memory and a few counters once a second; at the end, the final counters and whether the
// healthy subscriber's prompts equal the batch result of every good frame sent.
//
//   petdaqd_soak [--seconds S] [--events-per-s N]
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>

#include "core/test_scanner.h"
#include "daemon_harness.h"

using namespace petdaq;
using namespace petdaq::test;
using namespace std::chrono_literals;

int main(int argc, char** argv) {
  int seconds = 120;
  std::size_t events_per_s = 20000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--seconds")) seconds = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--events-per-s")) events_per_s = std::strtoul(argv[i + 1], nullptr, 10);
    else return std::fprintf(stderr, "usage: petdaqd_soak [--seconds S] [--events-per-s N]\n"), 2;
  }
  TestScanner scanner;
  auto& st = scanner.settings.stream;
  st.max_slice_frames = 1u << 16;
  st.max_pending_frames = 1u << 18;
  st.max_carry_singles = 1u << 16;
  DaemonConfig c;
  c.udp_port = free_udp_port();
  c.zmq_endpoint = "ipc://" + (scanner.dir / "pub.sock").string();
  c.framing = Framing::sequenced;
  c.send_hwm = 1000;
  c.rates_interval_ms = 500;
  c.file_directory = scanner.dir / "plm";
  c.file_rotate_bytes = 4u << 20;
  std::filesystem::create_directories(c.file_directory);
  const auto config = scanner.write_config();
  std::ofstream(config, std::ios::app) << daemon_yaml(c);

  // The whole acquisition up front, sent a second's worth at a time.
  std::mt19937_64 rng(2024);
  AcquisitionOptions o;
  o.events = events_per_s * static_cast<std::size_t>(seconds);
  o.mean_gap_ticks = 300;
  const std::vector<RawFrame> frames = random_acquisition(scanner, rng, o);
  const std::vector<Datagram> datagrams = make_datagrams(frames, Framing::sequenced, 50, 4);
  std::fprintf(stderr, "soak: %zu frames in %zu datagrams over %d s\n", frames.size(),
               datagrams.size(), seconds);

  DaemonProcess d(config, scanner.dir / "petdaqd.log");
  Subscriber healthy(c.zmq_endpoint);
  Subscriber stalled(c.zmq_endpoint, 1, false);
  if (!healthy.wait_rates([](const std::string&) { return true; }, 20s))
    return std::fprintf(stderr, "soak: no rates; log:\n%s\n", d.log().c_str()), 1;

  UdpSender tx;
  std::uniform_int_distribution<std::size_t> any(0, datagrams.size() - 1);
  const std::size_t per_second = (datagrams.size() + seconds - 1) / seconds;
  std::printf("  t_s  rss_MiB  rx.frames  seq_dup  seq_wild  bad_header  file_errors  file_dropped_MiB  subscribers\n");
  std::uint64_t rss_min = ~0ull, rss_max = 0;
  for (int s = 0; s < seconds; ++s) {
    const std::size_t begin = std::min(datagrams.size(), per_second * s);
    const std::size_t end = std::min(datagrams.size(), begin + per_second);
    // Bad traffic, mixed in: garbage of every size, an old datagram again, a wild header.
    std::vector<Datagram> bad;
    bad.push_back(Datagram(15, 0xAB));
    Datagram noise(1 + rng() % 9000);
    for (auto& b : noise) b = static_cast<std::uint8_t>(rng());
    bad.push_back(noise);
    if (begin > 0) {
      bad.push_back(datagrams[any(rng) % begin]);
      Datagram wild = datagrams[any(rng) % begin];
      SequencedHeader h = decode_sequenced_header(wild.data());
      h.sequence += 1'000'000;
      encode_sequenced_header(h, wild.data());
      bad.push_back(wild);
    }
    tx.send({datagrams.begin() + static_cast<std::ptrdiff_t>(begin),
             datagrams.begin() + static_cast<std::ptrdiff_t>(end)},
            c.udp_port, static_cast<double>(per_second) * 1.05);
    tx.send(bad, c.udp_port);
    if (s % 10 == 9) d.signal(SIGHUP);
    if (s == seconds / 3 || s == 2 * seconds / 3) {
      rlimit r{};
      r.rlim_cur = s == seconds / 3 ? 64 * 1024 : RLIM_INFINITY;
      r.rlim_max = RLIM_INFINITY;
      prlimit(d.pid(), RLIMIT_FSIZE, &r, nullptr);
    }
    const std::uint64_t rss = vm_rss_kib(d.pid());
    if (s >= 5) rss_min = std::min(rss_min, rss), rss_max = std::max(rss_max, rss);
    const std::string j = healthy.last_rates().value_or("");
    std::printf("%5d  %7.1f  %9llu  %7llu  %8llu  %10llu  %11llu  %16.1f  %11.0f\n", s + 1,
                static_cast<double>(rss) / 1024,
                static_cast<unsigned long long>(json_counter(j, "rx.frames")),
                static_cast<unsigned long long>(json_counter(j, "rx.seq_duplicate")),
                static_cast<unsigned long long>(json_counter(j, "rx.seq_wild")),
                static_cast<unsigned long long>(json_counter(j, "rx.bad_header")),
                static_cast<unsigned long long>(json_counter(j, "out.file_errors")),
                static_cast<double>(json_counter(j, "out.file_dropped_bytes")) / (1 << 20),
                json_number(j, "subscribers"));
    std::fflush(stdout);
  }
  d.signal(SIGTERM);
  const auto status = d.wait_for(30s);
  if (!healthy.wait_drained(10s)) std::fprintf(stderr, "the subscriber did not see petdaqd go\n");
  const auto messages = healthy.messages();
  std::string last;
  for (auto it = messages.rbegin(); it != messages.rend() && last.empty(); ++it)
    if (it->topic == topic::rates) last.assign(it->body.begin(), it->body.end());
  const Stream prompts = collect(messages, MessageKind::prompts);
  const BatchResult ref = batch_process(scanner, frames);
  const bool equal = prompts.records == ref.prompts;
  std::printf("\nexit status %d; resident memory after 5 s: %.1f .. %.1f MiB\n", status.value_or(-1),
              static_cast<double>(rss_min) / 1024, static_cast<double>(rss_max) / 1024);
  std::printf("healthy subscriber: %zu prompts, batch result %zu: %s; message ids %s\n",
              prompts.records.size(), ref.prompts.size(), equal ? "equal" : "DIFFERENT",
              prompts.ids_consecutive ? "consecutive" : "with gaps");
  std::printf("final counters: %s\n", last.substr(last.find("\"counters\"")).c_str());
  return status.value_or(-1) == 0 && equal ? 0 : 1;
}

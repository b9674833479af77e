// petdaqd for minutes under mixed traffic (a bench, not run by ctest): sequenced datagrams
// of good frames (with a few bad frames inside) and, every second, garbage datagrams,
// duplicates and wild sequence headers; the live histograms on (a large message every
// --histogram-interval-ms) with one stalled and one healthy subscriber; a SIGHUP every 10 s;
// and the file sink's disk refusing writes for the middle third of the run (RLIMIT_FSIZE on
// the daemon, which makes writes fail as a full disk does). Prints resident memory and a few
// counters once a second; at the end, the final counters, the growth of resident memory
// over the second half of the run, and whether the healthy subscriber's prompts equal the
// batch result of every good frame sent. Exits 1 when they differ or resident memory grew
// more than --max-growth-mib over the second half.
//
//   petdaqd_soak [--seconds S] [--events-per-s N] [--histogram-interval-ms MS]
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>

#include "common/cli.h"
#include "core/test_scanner.h"
#include "daemon_harness.h"

using namespace petdaq;
using namespace petdaq::test;
using namespace std::chrono_literals;

int main(int argc, char** argv) {
  int seconds = 120;
  std::size_t events_per_s = 20000;
  double histogram_interval_ms = 1000;
  double max_growth_mib = 64;
  cli::App app("petdaqd_soak",
               "petdaqd for minutes under mixed traffic, histograms on, one stalled and one "
               "healthy subscriber, SIGHUPs and a refusing disk; prints resident memory and "
               "counters once a second.");
  app.add_option("--seconds", seconds, "how long to run")->type_name("S")->check(CLI::Range(10, 86400));
  app.add_option("--events-per-s", events_per_s, "annihilations per second")
      ->type_name("N")
      ->check(CLI::Range(std::size_t{1}, std::size_t{10'000'000}));
  app.add_option("--histogram-interval-ms", histogram_interval_ms,
                 "how often the histograms message is published")
      ->type_name("MS")
      ->check(CLI::Range(10.0, 60000.0));
  app.add_option("--max-growth-mib", max_growth_mib,
                 "resident memory growth over the second half that fails the run")
      ->type_name("MiB")
      ->check(CLI::NonNegativeNumber);
  if (const auto rc = app.parse_or_exit(argc, argv)) return *rc;
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
  c.output_extra = "  histograms:\n    enabled: true\n    interval_ms: " +
                   std::to_string(histogram_interval_ms) + "\n";
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
  std::uint64_t rss_half = 0, rss_end = 0, rss_half_max = 0;
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
    if (s == seconds / 2) rss_half = rss;
    if (s >= seconds / 2) rss_half_max = std::max(rss_half_max, rss);
    rss_end = rss;
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
  const double growth_mib =
      (static_cast<double>(rss_half_max) - static_cast<double>(rss_half)) / 1024;
  std::printf("resident memory over the second half: %.1f MiB at %d s, peak %.1f MiB, %.1f MiB at "
              "the end: growth %.1f MiB (limit %.1f)\n",
              static_cast<double>(rss_half) / 1024, seconds / 2,
              static_cast<double>(rss_half_max) / 1024, static_cast<double>(rss_end) / 1024,
              growth_mib, max_growth_mib);
  std::printf("stalled subscriber: out.zmq_over_budget %llu, out.zmq_stalled_dropped %llu\n",
              static_cast<unsigned long long>(json_counter(last, "out.zmq_over_budget")),
              static_cast<unsigned long long>(json_counter(last, "out.zmq_stalled_dropped")));
  const std::size_t at = last.find("\"counters\"");
  std::printf("final counters: %s\n", at == std::string::npos ? "(none)" : last.substr(at).c_str());
  return status.value_or(-1) == 0 && equal && growth_mib <= max_growth_mib ? 0 : 1;
}

#include "daemon/rates.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include <fmt/format.h>

namespace petdaq::daemon {

void LatencyWindow::add(double ms) {
  max_ms_ = std::max(max_ms_, ms);
  if (seen_++ % stride_ != 0) return;
  if (count_ == kCapacity) {
    for (std::size_t i = 0; i < kCapacity / 2; ++i) samples_[i] = samples_[2 * i];
    count_ = kCapacity / 2;
    stride_ *= 2;
  }
  samples_[count_++] = ms;
}

LatencyWindow::Stats LatencyWindow::take() {
  Stats s;
  s.samples = seen_;
  s.max_ms = max_ms_;
  if (count_ > 0) {
    auto at = [&](double q) {
      const auto k = static_cast<std::size_t>(q * static_cast<double>(count_ - 1) + 0.5);
      std::nth_element(samples_.begin(), samples_.begin() + k, samples_.begin() + count_);
      return samples_[k];
    };
    s.p50_ms = at(0.50);
    s.p99_ms = at(0.99);
  }
  count_ = 0;
  seen_ = 0;
  stride_ = 1;
  max_ms_ = 0;
  return s;
}

RatesReporter::RatesReporter(const Counters& counters)
    : counters_(counters), bdm_before_(counters.bdm_count(), 0) {
  json_.reserve(4096 + 64 * std::size_t{counters.bdm_count()} + 48 * kCounterCount);
  summary_.reserve(256);
}

double RatesReporter::rate(Counter c, double interval_s) const {
  if (interval_s <= 0) return 0;
  return static_cast<double>(now_[c] - before_[c]) / interval_s;
}

namespace {
// JSON has no NaN or infinity.
double finite(double v) { return std::isfinite(v) ? v : 0.0; }
}  // namespace

const std::string& RatesReporter::build(const RatesSnapshot& s) {
  for (std::size_t i = 0; i < kCounterCount; ++i) now_.value[i] = counters_.get(static_cast<Counter>(i));
  const double dt = s.interval_s;
  const double prompts = rate(Counter::coinc_prompts, dt);
  const double delayed = rate(Counter::coinc_delayed, dt);
  const double trues = prompts - delayed;
  const double randoms_fraction = prompts > 0 ? delayed / prompts : 0.0;
  const double necr = prompts > 0 ? trues * trues / prompts : 0.0;

  json_.clear();
  auto out = std::back_inserter(json_);
  fmt::format_to(out,
                 "{{\"version\":1,\"time_unix_ns\":{},\"uptime_s\":{:.3f},\"backend\":\"{}\","
                 "\"run_id\":{},\"interval_s\":{:.6f},",
                 s.time_unix_ns, s.uptime_s, s.backend, s.run_id, dt);
  fmt::format_to(out,
                 "\"rates\":{{\"frames\":{:.3f},\"singles\":{:.3f},\"prompts\":{:.3f},"
                 "\"delayed\":{:.3f},\"trues\":{:.3f},\"multiples\":{:.3f},"
                 "\"randoms_fraction\":{:.6f},\"necr\":{:.3f}}},",
                 rate(Counter::rx_frames, dt), rate(Counter::single_accepted, dt), prompts,
                 delayed, trues, rate(Counter::coinc_multiples, dt), finite(randoms_fraction),
                 finite(necr));
  fmt::format_to(out, "\"bdm\":{{\"transaxial\":{},\"axial\":{},\"singles_per_s\":[",
                 s.bdm_transaxial, s.bdm_axial);
  const std::uint32_t bdm_count = counters_.bdm_count();
  for (std::uint32_t b = 0; b < bdm_count; ++b) {
    const std::uint64_t n = counters_.bdm_singles(b);
    const double r = dt > 0 ? static_cast<double>(n - bdm_before_[b]) / dt : 0.0;
    bdm_before_[b] = n;
    fmt::format_to(out, "{}{:.3f}", b ? "," : "", r);
  }
  json_ += "],\"temperature_degC\":[";
  for (std::uint32_t b = 0; b < bdm_count; ++b) {
    if (b) json_ += ',';
    const double t = s.temperature_degC ? s.temperature_degC[b] : NAN;
    if (std::isfinite(t))
      fmt::format_to(out, "{:.4f}", t);
    else
      json_ += "null";
  }
  json_ += "]},\"counters\":{";
  for (std::size_t i = 0; i < kCounterCount; ++i)
    fmt::format_to(out, "{}\"{}\":{}", i ? "," : "", counter_name(static_cast<Counter>(i)),
                   now_.value[i]);
  fmt::format_to(out,
                 "}},\"queues\":{{\"ring_chunks\":{},\"ring_free\":{},\"pending_frames\":{},"
                 "\"subscribers\":{}}},"
                 "\"latency_ms\":{{\"p50\":{:.3f},\"p99\":{:.3f},\"max\":{:.3f}}}}}",
                 s.ring_chunks, s.ring_free, s.pending_frames,
                 now_[Counter::out_zmq_connects] - now_[Counter::out_zmq_disconnects],
                 s.latency.p50_ms,
                 s.latency.p99_ms, s.latency.max_ms);

  summary_.clear();
  fmt::format_to(std::back_inserter(summary_),
                 "run {} | frames {:.3g}/s singles {:.3g}/s prompts {:.3g}/s delayed {:.3g}/s | "
                 "drops ring {} kernel {} | latency p99 {:.1f} ms",
                 s.run_id, rate(Counter::rx_frames, dt), rate(Counter::single_accepted, dt),
                 prompts, delayed, now_[Counter::rx_ring_full], now_[Counter::rx_kernel_drops],
                 s.latency.p99_ms);
  before_ = now_;
  return json_;
}

}  // namespace petdaq::daemon

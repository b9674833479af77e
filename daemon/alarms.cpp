#include "daemon/alarms.h"

#include <cmath>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "proto/rates_schema.h"

namespace petdaq::daemon {

namespace {

using Json = nlohmann::ordered_json;
namespace rd = rates_doc;

double number_or(const Json& j, double fallback) {
  return j.is_number() ? j.get<double>() : fallback;
}

// The scanner's live fraction of the interval: `deadtime.live_fraction_interval` (DESIGN
// section 7), absent from documents of code without the overload rule.
std::optional<double> live_fraction(const Json& doc) {
  const auto d = doc.find(rd::doc::deadtime);
  if (d == doc.end() || !d->is_object()) return std::nullopt;
  const auto v = d->find(rd::deadtime::live_fraction_interval);
  if (v == d->end() || !v->is_number()) return std::nullopt;
  return v->get<double>();
}

}  // namespace

std::optional<double> rates_live_fraction(const Json& doc) { return live_fraction(doc); }

void AlarmMonitor::raise(const std::string& name, const std::string& subject,
                         std::string message, double value, double threshold) {
  Alarm a{name, subject, std::move(message), value, threshold, now_ns_};
  seen_[{name, subject}] = std::move(a);
}

void AlarmMonitor::evaluate(Json& doc, std::uint64_t time_unix_ns) {
  now_ns_ = time_unix_ns;
  seen_.clear();
  const AlarmSettings& a = settings_;
  const double dt = number_or(doc.value(rd::doc::interval_s, Json()), 0.0);

  // Losses: the growth of the loss counters over the interval.
  const auto counters = doc.find(rd::doc::counters);
  if (counters != doc.end() && counters->is_object()) {
    auto growth = [&](const auto& names) {
      double sum = 0;
      for (const char* name : names) {
        const auto v = counters->find(name);
        if (v == counters->end() || !v->is_number_unsigned()) continue;
        const auto now = v->get<std::uint64_t>();
        // Counters start at 0 with the daemon: the first document's growth is all of them.
        std::uint64_t& before = counters_before_[name];
        if (now > before) sum += static_cast<double>(now - before);
        before = now;
      }
      return sum;
    };
    const double lost = growth(kDataLossCounters);
    const double lost_files = growth(kFileLossCounters);
    const double per_s = dt > 0 ? lost / dt : lost;
    if (lost > 0 && per_s > a.max_losses_per_s)
      raise("data_loss", "scanner",
            fmt::format("{:.0f} frames or datagrams lost in {:.1f} s (drop counters)", lost, dt),
            per_s, a.max_losses_per_s);
    if (lost_files > 0)
      raise("file_loss", "scanner",
            fmt::format("{:.0f} bytes or frames not written to disk", lost_files), lost_files, 0);
  }

  if (const auto live = live_fraction(doc); live && *live < a.min_live_fraction)
    raise("live_fraction", "scanner",
          fmt::format("live fraction {:.4f}: the daemon is shedding an overload as dead time",
                      *live),
          *live, a.min_live_fraction);

  const auto bdm = doc.find(rd::doc::bdm);
  if (bdm != doc.end() && bdm->is_object()) {
    const Json& rates = bdm->value(rd::bdm::singles_per_s, Json::array());
    double total = 0;
    for (const Json& r : rates) total += number_or(r, 0);
    for (std::size_t b = 0; b < rates.size(); ++b) {
      const double r = number_or(rates[b], 0);
      const std::string subject = fmt::format("bdm {}", b);
      // A board silent while the others send; nothing is judged while the scanner is idle.
      if (a.board_min_singles_per_s > 0 && total > 0 && r < a.board_min_singles_per_s)
        raise("board_rate_low", subject,
              fmt::format("BDM {} singles {:.4g}/s below {:.4g}/s", b, r,
                          a.board_min_singles_per_s),
              r, a.board_min_singles_per_s);
      if (a.board_max_singles_per_s > 0 && r > a.board_max_singles_per_s)
        raise("board_rate_high", subject,
              fmt::format("BDM {} singles {:.4g}/s above {:.4g}/s", b, r,
                          a.board_max_singles_per_s),
              r, a.board_max_singles_per_s);
    }
    const Json& temperatures = bdm->value(rd::bdm::temperature_degC, Json::array());
    for (std::size_t b = 0; b < temperatures.size(); ++b) {
      if (!temperatures[b].is_number()) continue;
      const double t = temperatures[b].get<double>();
      if (t < a.board_min_temperature_degC || t > a.board_max_temperature_degC)
        raise("board_temperature", fmt::format("bdm {}", b),
              fmt::format("BDM {} at {:.1f} °C, outside [{:.1f}, {:.1f}] °C", b, t,
                          a.board_min_temperature_degC, a.board_max_temperature_degC),
              t, t > a.board_max_temperature_degC ? a.board_max_temperature_degC
                                                  : a.board_min_temperature_degC);
    }
    const Json& lagging = bdm->value(rd::bdm::lagging, Json::array());
    if (a.lagging_board)
      for (std::size_t b = 0; b < lagging.size(); ++b)
        if (lagging[b].is_boolean() && lagging[b].get<bool>())
          raise("lagging_board", fmt::format("bdm {}", b),
                fmt::format("BDM {} is lagging: its frames behind the horizon are dropped", b),
                1, 0);
  }

  if (crystals_) {
    const auto [hot, dead] = *crystals_;
    if (hot > a.max_hot_crystals)
      raise("hot_crystals", "scanner",
            fmt::format("{} hot crystals (above {:.0f}x their DU's median)", hot,
                        a.hot_crystal_factor),
            hot, a.max_hot_crystals);
    if (dead > a.max_dead_crystals)
      raise("dead_crystals", "scanner",
            fmt::format("{} dead or weak crystals (below 1/{:.0f} of their DU's median)", dead,
                        a.hot_crystal_factor),
            dead, a.max_dead_crystals);
  }

  // Raise what is new, keep the start time of what goes on, clear what is gone.
  for (auto& [key, alarm] : seen_) {
    const auto was = active_.find(key);
    if (was == active_.end()) {
      spdlog::warn("alarm raised: {} ({}): {}", alarm.name, alarm.subject, alarm.message);
    } else {
      alarm.since_unix_ns = was->second.since_unix_ns;
    }
  }
  for (const auto& [key, alarm] : active_)
    if (!seen_.contains(key))
      spdlog::info("alarm cleared: {} ({})", alarm.name, alarm.subject);
  active_.swap(seen_);

  active_list_.clear();
  Json list = Json::array();
  for (const auto& [key, alarm] : active_) {
    active_list_.push_back(alarm);
    list.push_back({{rd::alarm::name, alarm.name},
                    {rd::alarm::subject, alarm.subject},
                    {rd::alarm::message, alarm.message},
                    {rd::alarm::value, std::isfinite(alarm.value) ? alarm.value : 0.0},
                    {rd::alarm::threshold, alarm.threshold},
                    {rd::alarm::since_unix_ns, alarm.since_unix_ns}});
  }
  doc[rd::doc::alarms] = std::move(list);
}

}  // namespace petdaq::daemon

// A brute-force reading of DESIGN section 5, the oracle for the coincidence engine. Written
// to be obviously right rather than fast: whole input at once, explicit lists of members and
// candidate pairs, records sorted by (earlier single, later single) at the end. It shares no
// code with core/window_policy.h or core/coincidence.cpp; it only reads the parameter
// fields.
#pragma once

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <vector>

#include "core/coincidence.h"
#include "proto/records.h"

namespace petdaq::oracle {

struct Result {
  std::vector<CoincRecord> prompts;
  std::vector<CoincRecord> delayed;
  std::uint64_t multiples = 0;
  std::uint64_t delayed_multiples = 0;
};

// "a single at exactly t_open + W is inside" for closed windows, outside for half_open.
inline bool in_window(const CoincidenceParams& p, std::uint64_t t_start, std::uint64_t t) {
  if (t < t_start) return false;
  if (p.closed) return t <= t_start + p.window_ticks;
  return t < t_start + p.window_ticks;
}

inline bool is_good(const CoincidenceParams& p, const Single& a, const Single& b) {
  if (a.crystal == b.crystal) return false;
  const long sector_a = static_cast<long>((a.crystal % p.crystals_per_ring) / p.crystals_per_sector);
  const long sector_b = static_cast<long>((b.crystal % p.crystals_per_ring) / p.crystals_per_sector);
  const long sectors = static_cast<long>(p.sectors);
  long diff = sector_a - sector_b;
  if (diff < 0) diff = -diff;
  const long circular = std::min(diff, sectors - diff);
  return circular >= static_cast<long>(p.min_sector_difference);
}

struct Emitted {
  std::size_t earlier;  // index of the earlier single (the opener for delayed)
  std::size_t later;
  CoincRecord record;
};

// One window: `opener` and `members` (indices into singles, opener not included), the
// candidate pairs chosen by `all_pairs`; appends what the policy emits.
inline void decide(const std::vector<Single>& s, const CoincidenceParams& p, std::size_t opener,
                   const std::vector<std::size_t>& members, bool all_pairs, bool delayed,
                   std::vector<Emitted>& out) {
  std::vector<std::size_t> window = {opener};
  window.insert(window.end(), members.begin(), members.end());
  const std::size_t k = window.size();

  std::vector<std::pair<std::size_t, std::size_t>> candidates;
  for (std::size_t x = 0; x < k; ++x)
    for (std::size_t y = x + 1; y < k; ++y)
      if (all_pairs || x == 0) candidates.push_back({window[x], window[y]});

  std::vector<std::pair<std::size_t, std::size_t>> goods;
  for (const auto& c : candidates)
    if (is_good(p, s[c.first], s[c.second])) goods.push_back(c);

  auto energy_sum = [&](const std::pair<std::size_t, std::size_t>& c) {
    const float sum = s[c.first].energy + s[c.second].energy;
    return sum;
  };
  // Largest sum; among equal sums the pair first in (earlier, later) order.
  auto best_of = [&](const std::vector<std::pair<std::size_t, std::size_t>>& list) {
    std::pair<std::size_t, std::size_t> best = list.front();
    for (const auto& c : list) {
      const float sc = energy_sum(c);
      const float sb = energy_sum(best);
      if (sc > sb || (sc == sb && c < best)) best = c;
    }
    return best;
  };

  std::vector<std::pair<std::size_t, std::size_t>> chosen;
  switch (p.policy) {
    case Policy::kill_multiples:
      if (k == 2 && goods.size() == 1) chosen = goods;
      break;
    case Policy::take_all_goods:
      chosen = goods;
      break;
    case Policy::take_winner_of_goods:
      if (!goods.empty()) chosen.push_back(best_of(goods));
      break;
    case Policy::take_winner_if_good: {
      if (candidates.empty()) break;
      const auto winner = best_of(candidates);
      if (is_good(p, s[winner.first], s[winner.second])) chosen.push_back(winner);
      break;
    }
    case Policy::take_winner_if_all_good:
      if (!candidates.empty() && goods.size() == candidates.size())
        chosen.push_back(best_of(candidates));
      break;
    case Policy::kill_all_if_multiple_goods:
      if (goods.size() == 1) chosen = goods;
      break;
  }

  for (const auto& c : chosen) {
    const Single& a = s[c.first];
    const Single& b = s[c.second];
    CoincRecord r;
    r.time_a = a.time;
    r.dt = static_cast<std::int32_t>(static_cast<std::int64_t>(b.time) -
                                     static_cast<std::int64_t>(a.time));
    r.crystal_a = a.crystal;
    r.crystal_b = b.crystal;
    r.energy_a = a.energy;
    r.energy_b = b.energy;
    r.flags = 0;
    if (delayed) r.flags |= 1u;
    if (k >= 3) r.flags |= 2u;
    r.flags |= static_cast<std::uint32_t>(std::min<std::size_t>(k, 255)) << 8;
    out.push_back({c.first, c.second, r});
  }
}

inline std::vector<CoincRecord> in_order(std::vector<Emitted> list) {
  std::stable_sort(list.begin(), list.end(), [](const Emitted& x, const Emitted& y) {
    return std::tie(x.earlier, x.later) < std::tie(y.earlier, y.later);
  });
  std::vector<CoincRecord> records;
  for (const auto& e : list) records.push_back(e.record);
  return records;
}

// `s` is sorted in the (time, crystal, energy) order.
inline Result coincidences(const std::vector<Single>& s, const CoincidenceParams& p) {
  const std::size_t n = s.size();

  std::vector<std::size_t> openers;
  if (p.mode == WindowMode::every_single) {
    for (std::size_t i = 0; i < n; ++i) openers.push_back(i);
  } else {
    std::size_t i = 0;
    while (i < n) {
      openers.push_back(i);
      std::size_t last = i;
      for (std::size_t j = i + 1; j < n && in_window(p, s[i].time, s[j].time); ++j) last = j;
      i = last + 1;
    }
  }

  Result result;
  std::vector<Emitted> prompts;
  std::vector<Emitted> delayed;
  for (const std::size_t o : openers) {
    // The input is sorted, so the scans can stop at the first single past the window.
    std::vector<std::size_t> members;
    for (std::size_t j = o + 1; j < n && s[j].time <= s[o].time + p.window_ticks; ++j)
      if (in_window(p, s[o].time, s[j].time)) members.push_back(j);
    if (members.size() + 1 >= 3) ++result.multiples;
    decide(s, p, o, members, p.mode == WindowMode::first_open, false, prompts);

    if (!p.delayed) continue;
    const std::uint64_t start = s[o].time + p.delayed_offset_ticks;
    std::vector<std::size_t> delayed_members;
    for (std::size_t j = o + 1; j < n && s[j].time <= start + p.window_ticks; ++j)
      if (in_window(p, start, s[j].time)) delayed_members.push_back(j);
    if (delayed_members.size() + 1 >= 3) ++result.delayed_multiples;
    decide(s, p, o, delayed_members, false, true, delayed);
  }
  result.prompts = in_order(std::move(prompts));
  result.delayed = in_order(std::move(delayed));
  return result;
}

}  // namespace petdaq::oracle

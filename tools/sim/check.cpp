#include "tools/sim/check.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/calibration.h"
#include "core/coincidence.h"
#include "core/convert.h"
#include "core/order.h"
#include "core/randoms.h"
#include "proto/frame.h"
#include "proto/records.h"
#include "tools/sim/truth.h"

namespace petdaq::sim {

namespace {

std::vector<std::uint8_t> read_bytes(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + file.string());
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

bool same_single(const Single& a, const Single& b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

// The estimators work on rates; the acquisition's counts go in as rates and come back as
// counts over its duration.
void estimate_randoms(const Settings& settings, CheckResult& r) {
  if (!(r.duration_s > 0)) return;
  const RandomsSettings rs = RandomsSettings::from(settings);
  std::vector<double> bdm_rate(r.bdm_singles.size());
  for (std::size_t b = 0; b < bdm_rate.size(); ++b) bdm_rate[b] = r.rate(r.bdm_singles[b]);
  const double g = random_pair_good_fraction(rs, bdm_rate);
  r.randoms_singles_rate = singles_rate_randoms(rs, bdm_rate) * r.duration_s;
  const SinglesPromptsEstimate sp =
      singles_prompts_randoms(rs, r.rate(r.singles), r.rate(r.prompts), g);
  r.randoms_singles_prompts = sp.modelled ? sp.randoms_per_s * r.duration_s : NAN;
  const WindowModelRates m = window_model_rates(rs, sp.unpaired_per_s, sp.pairs_per_s, g);
  r.model_delayed = sp.modelled ? m.delayed_per_s * r.duration_s : NAN;
  r.model_multiples = sp.modelled ? m.multiples_per_s * r.duration_s : NAN;
}

}  // namespace

CheckResult check_acquisition(const std::filesystem::path& dir,
                              const CoincidenceSettings* override_coincidence) {
  Settings settings = load_settings(dir / "petdaq.yaml");
  if (override_coincidence) settings.coincidence = *override_coincidence;
  const Calibration cal = load_calibration(settings);
  const ConvertTables tables = make_convert_tables(settings, cal);
  const Geometry& g = tables.geometry;

  const std::vector<std::uint8_t> frame_bytes = read_bytes(dir / "frames.bin");
  const std::vector<std::uint8_t> truth_bytes = read_bytes(dir / "truth.bin");
  if (frame_bytes.size() % kFrameBytes || truth_bytes.size() % kTruthBytes ||
      frame_bytes.size() / kFrameBytes != truth_bytes.size() / kTruthBytes)
    throw std::runtime_error(dir.string() + ": frames.bin and truth.bin disagree in length");
  const std::size_t n = frame_bytes.size() / kFrameBytes;
  std::vector<RawFrame> frames(n);
  if (n) std::memcpy(frames.data(), frame_bytes.data(), frame_bytes.size());
  std::vector<TruthRecord> truth(n);
  for (std::size_t i = 0; i < n; ++i) truth[i] = decode_truth(&truth_bytes[i * kTruthBytes]);

  CheckResult r;
  r.frames = n;
  {
    std::ifstream in(dir / "truth.json");
    if (!in) throw std::runtime_error("cannot open " + (dir / "truth.json").string());
    try {
      r.duration_s = nlohmann::json::parse(in).at("duration_s").get<double>();
    } catch (const nlohmann::json::exception& e) {
      throw std::runtime_error((dir / "truth.json").string() + ": " + e.what());
    }
  }

  // Convert as the pipeline does; keep, for every single, the frame it came from.
  std::vector<Single> singles(n);
  CounterDelta delta;
  std::vector<std::uint64_t> bdm_singles(g.bdm_count()), bdm_rejected(g.bdm_count());
  const std::size_t n_singles = convert_frames(frames.data(), n, tables, singles.data(), delta,
                                               bdm_singles.data(), bdm_rejected.data());
  singles.resize(n_singles);
  std::vector<std::uint32_t> frame_of;
  frame_of.reserve(n_singles);
  for (std::size_t i = 0; i < n; ++i) {
    Single s;
    if (convert_frame(frames[i].bytes, tables, s) == FrameStatus::single) {
      if (frame_of.size() >= n_singles || !same_single(s, singles[frame_of.size()]))
        throw std::logic_error("convert_frames and convert_frame disagree");
      frame_of.push_back(static_cast<std::uint32_t>(i));
    }
  }
  if (frame_of.size() != n_singles) throw std::logic_error("convert_frames lost singles");
  r.singles = n_singles;
  r.energy_rejected = delta[Counter::single_energy_rejected];
  r.no_crystal = delta[Counter::frame_no_crystal];
  for (Counter c : {Counter::frame_bad_marker, Counter::frame_bad_bdm, Counter::frame_bad_du,
                    Counter::frame_bad_position, Counter::frame_no_crystal, Counter::frame_bad_time})
    r.bad_frames += delta[c];

  // The engine's order, and the same order over (single, frame) to map records back.
  std::vector<Single> sorted = singles, scratch(n_singles);
  sort_singles(sorted.data(), n_singles, scratch.data());
  std::vector<std::uint32_t> order(n_singles);
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
    if (single_less(singles[a], singles[b])) return true;
    if (single_less(singles[b], singles[a])) return false;
    return a < b;
  });
  for (std::size_t i = 0; i < n_singles; ++i)
    if (!same_single(sorted[i], singles[order[i]]))
      throw std::logic_error("sort_singles disagrees with the (time, crystal, energy) order");

  const CoincidenceParams params = CoincidenceParams::from(settings);
  const std::size_t capacity = 2 * n_singles + 16;
  std::vector<CoincRecord> prompt_store(capacity), delayed_store(capacity);
  RecordBuffer prompts{prompt_store.data(), capacity};
  RecordBuffer delayed{delayed_store.data(), capacity};
  CoincidenceCounts counts;
  find_coincidences(sorted.data(), n_singles, params, std::numeric_limits<std::uint64_t>::max(),
                    true, prompts, delayed, counts);
  if (prompts.overflow || delayed.overflow)
    throw std::logic_error("record buffers too small for the check");
  r.prompts = prompts.size;
  r.delayed = delayed.size;
  r.multiples = counts.multiples;
  r.delayed_multiples = counts.delayed_multiples;
  r.bdm_singles = bdm_singles;
  estimate_randoms(settings, r);

  auto position_of = [&](std::uint64_t time, std::uint32_t crystal, float energy) {
    const Single key{time, crystal, energy};
    const auto it = std::lower_bound(sorted.begin(), sorted.end(), key, single_less);
    if (it == sorted.end() || !same_single(*it, key))
      throw std::logic_error("a coincidence names a single that is not in the input");
    return static_cast<std::size_t>(it - sorted.begin());
  };
  auto truth_at = [&](std::size_t pos) -> const TruthRecord& { return truth[frame_of[order[pos]]]; };

  std::vector<std::pair<std::size_t, std::size_t>> found;
  found.reserve(prompts.size);
  for (std::size_t i = 0; i < prompts.size; ++i) {
    const CoincRecord& c = prompts.data[i];
    const std::size_t a = position_of(c.time_a, c.crystal_a, c.energy_a);
    const std::size_t b = position_of(c.time_a + static_cast<std::uint64_t>(std::int64_t{c.dt}),
                                      c.crystal_b, c.energy_b);
    found.emplace_back(std::min(a, b), std::max(a, b));
    const TruthRecord& ta = truth_at(a);
    const TruthRecord& tb = truth_at(b);
    if (ta.kind == PhotonKind::background || tb.kind == PhotonKind::background) {
      ++r.randoms;
      ++r.randoms_with_background;
    } else if (ta.event_id != tb.event_id) {
      ++r.randoms;
    } else if (ta.kind == PhotonKind::scattered || tb.kind == PhotonKind::scattered) {
      ++r.scatters;
    } else {
      ++r.trues;
      r.trues_mispositioned += ((ta.flags | tb.flags) & truth_flag::mispositioned) != 0;
    }
  }
  std::sort(found.begin(), found.end());

  // The decays a perfect sorter would pair: both photons became singles.
  struct Photon {
    std::uint64_t event;
    std::size_t pos;
  };
  std::vector<Photon> photons;
  photons.reserve(n_singles);
  for (std::size_t pos = 0; pos < n_singles; ++pos) {
    const TruthRecord& t = truth_at(pos);
    if (t.kind != PhotonKind::background) photons.push_back({t.event_id, pos});
  }
  std::sort(photons.begin(), photons.end(),
            [](const Photon& a, const Photon& b) { return a.event < b.event || (a.event == b.event && a.pos < b.pos); });
  for (std::size_t k = 0; k + 1 < photons.size(); ++k) {
    if (photons[k].event != photons[k + 1].event) continue;
    const std::size_t i = photons[k].pos, j = photons[k + 1].pos;
    ++k;
    if (sorted[i].crystal == sorted[j].crystal) continue;
    ++r.truth_pairs;
    const bool hit = std::binary_search(found.begin(), found.end(), std::make_pair(i, j));
    r.truth_pairs_found += hit;
    // Alone: nothing within W before the first, nothing but the partner within W after it.
    const bool isolated = j == i + 1 && params.within(sorted[i].time, sorted[j].time) &&
                          (i == 0 || !params.within(sorted[i - 1].time, sorted[i].time)) &&
                          (j + 1 == n_singles || !params.within(sorted[i].time, sorted[j + 1].time));
    if (isolated) {
      ++r.truth_pairs_isolated;
      r.truth_pairs_isolated_found += hit;
    }
  }
  return r;
}

}  // namespace petdaq::sim

#include "tools/web/messages.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/histograms.h"
#include "proto/rates_schema.h"
#include "tools/top/rates.h"

namespace petdaq::web {

namespace {

using nlohmann::json;
namespace rd = rates_doc;

[[noreturn]] void refuse(const std::string& why) { throw MalformedRates(why); }

const json* member(const json& parent, const char* key) {
  const auto it = parent.find(key);
  return it == parent.end() ? nullptr : &*it;
}

// A member that must be an object when present.
const json* object_member(const json& parent, const char* key) {
  const json* v = member(parent, key);
  if (v && !v->is_object()) refuse(std::string(key) + " is not an object");
  return v;
}

std::string path(const char* object) { return std::string(object) + "."; }

// `where`: the member's path in the document up to its name ("rates."), for the messages.
std::optional<double> number(const json& parent, const std::string& where, const char* key) {
  const json* v = member(parent, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) refuse(std::string(where) + key + " is not a number");
  const double d = v->get<double>();
  if (!std::isfinite(d)) refuse(std::string(where) + key + " is not finite");
  return d;
}

double required_number(const json& parent, const std::string& where, const char* key) {
  const auto v = number(parent, where, key);
  if (!v) refuse(std::string(where) + key + " is missing");
  return *v;
}

std::optional<std::uint64_t> count(const json& parent, const std::string& where,
                                   const char* key) {
  const json* v = member(parent, key);
  if (!v) return std::nullopt;
  if (!v->is_number_unsigned()) refuse(std::string(where) + key + " is not a count");
  return v->get<std::uint64_t>();
}

}  // namespace

RatesUpdate RatesMessageBuilder::build(std::string_view document) {
  json doc = json::parse(document, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) refuse("not valid JSON");
  if (!doc.is_object()) refuse("not a JSON object");
  const auto version = count(doc, "", rd::doc::version);
  if (!version) refuse(std::string(rd::doc::version) + " is missing");
  if (*version != static_cast<std::uint64_t>(rd::kVersion))
    refuse(std::string(rd::doc::version) + " " + std::to_string(*version) + " is not supported");

  json out = json::object();
  out["type"] = "rates";
  // The page gets the document's members under their names in the document.
  out[rd::doc::run_id] = count(doc, "", rd::doc::run_id).value_or(0);
  const std::uint64_t time_unix_ns = count(doc, "", rd::doc::time_unix_ns).value_or(0);
  out[rd::doc::time_unix_ns] = time_unix_ns;
  out[rd::doc::uptime_s] = number(doc, "", rd::doc::uptime_s).value_or(0);
  out[rd::doc::interval_s] = number(doc, "", rd::doc::interval_s).value_or(0);
  const json* backend = member(doc, rd::doc::backend);
  if (backend && !backend->is_string()) refuse(std::string(rd::doc::backend) + " is not a string");
  out[rd::doc::backend] = backend ? backend->get<std::string>() : std::string();

  const json* rates = object_member(doc, rd::doc::rates);
  if (!rates) refuse(std::string(rd::doc::rates) + " is missing");
  const std::string in_rates = path(rd::doc::rates);
  RatePoint p;
  p.t_unix_s = static_cast<double>(time_unix_ns) * 1e-9;
  p.singles = required_number(*rates, in_rates, rd::rates::singles);
  p.prompts = required_number(*rates, in_rates, rd::rates::prompts);
  p.delayed = required_number(*rates, in_rates, rd::rates::delayed);
  // Derived the daemon's way (docs/daemon.md) when a publisher leaves them out.
  const std::optional<double> trues = number(*rates, in_rates, rd::rates::trues);
  p.trues = trues.value_or(p.prompts - p.delayed);
  // Which randoms estimate the trues subtract: the document's, "delayed" when derived here.
  const json* method = member(*rates, rd::rates::randoms_method);
  if (method && !method->is_string())
    refuse(in_rates + rd::rates::randoms_method + " is not a string");
  out[rd::rates::randoms_method] = method ? method->get<std::string>()
                                   : trues ? std::string()
                                           : std::string("delayed");
  p.necr = number(*rates, in_rates, rd::rates::necr)
               .value_or(p.prompts > 0 ? p.trues * p.trues / p.prompts : 0.0);
  out[rd::doc::rates] = {
      {rd::rates::frames, number(*rates, in_rates, rd::rates::frames).value_or(0)},
      {rd::rates::singles, p.singles},
      {rd::rates::prompts, p.prompts},
      {rd::rates::delayed, p.delayed},
      {rd::rates::trues, p.trues},
      {rd::rates::multiples, number(*rates, in_rates, rd::rates::multiples).value_or(0)},
      {rd::rates::randoms_fraction, number(*rates, in_rates, rd::rates::randoms_fraction)
                                        .value_or(p.prompts > 0 ? p.delayed / p.prompts : 0.0)},
      {rd::rates::necr, p.necr}};

  json bdm_out = nullptr;
  std::vector<std::uint64_t> socket_losses;
  if (const json* bdm = object_member(doc, rd::doc::bdm)) {
    const std::string in_bdm = path(rd::doc::bdm);
    const std::uint64_t trans = count(*bdm, in_bdm, rd::bdm::transaxial).value_or(0);
    const std::uint64_t axial = count(*bdm, in_bdm, rd::bdm::axial).value_or(0);
    const json* singles = member(*bdm, rd::bdm::singles_per_s);
    const std::string singles_path = in_bdm + rd::bdm::singles_per_s;
    if (!singles || !singles->is_array()) refuse(singles_path + " is not an array");
    if (singles->size() != trans * axial) {
      refuse(singles_path + " has " + std::to_string(singles->size()) +
             " entries, transaxial x axial is " + std::to_string(trans * axial));
    }
    json s = json::array();
    for (const json& v : *singles) {
      if (!v.is_number()) refuse(singles_path + " holds a value that is not a number");
      s.push_back(v.get<double>());
    }
    json t = json::array();
    if (const json* temps = member(*bdm, rd::bdm::temperature_degC)) {
      const std::string temps_path = in_bdm + rd::bdm::temperature_degC;
      if (!temps->is_array() || temps->size() != singles->size())
        refuse(temps_path + " is not an array of one entry per BDM");
      for (const json& v : *temps) {
        if (!v.is_number() && !v.is_null())
          refuse(temps_path + " holds a value that is neither a number nor null");
        t.push_back(v);
      }
    }
    bdm_out = {{rd::bdm::transaxial, trans},
               {rd::bdm::axial, axial},
               {rd::bdm::singles_per_s, std::move(s)},
               {rd::bdm::temperature_degC, std::move(t)}};
    // Lagging boards (DESIGN section 6): one flag per BDM (absent from older daemons).
    if (const json* lag = member(*bdm, rd::bdm::lagging)) {
      const std::string lag_path = in_bdm + rd::bdm::lagging;
      if (!lag->is_array() || lag->size() != singles->size())
        refuse(lag_path + " is not an array of one entry per BDM");
      json l = json::array();
      for (const json& v : *lag) {
        if (!v.is_boolean()) refuse(lag_path + " holds a value that is not a boolean");
        l.push_back(v.get<bool>());
      }
      bdm_out[rd::bdm::lagging] = std::move(l);
    }
    // Boards whose receiving socket lost datagrams since the previous document (absent from
    // older daemons): "dropping", by petdaq-top's rule.
    bool any_losses = false;
    socket_losses.assign(singles->size(), 0);
    for (const auto key : {rd::bdm::ring_full, rd::bdm::socket_kernel_drops})
      if (const json* l = member(*bdm, key)) {
        const std::string l_path = in_bdm + std::string(key);
        if (!l->is_array() || l->size() != singles->size())
          refuse(l_path + " is not an array of one entry per BDM");
        for (std::size_t b = 0; b < l->size(); ++b) {
          if (!(*l)[b].is_number_unsigned()) refuse(l_path + " holds a value that is not a count");
          socket_losses[b] += (*l)[b].get<std::uint64_t>();
        }
        any_losses = true;
      }
    if (any_losses) {
      json d = json::array();
      for (const bool losing : top::boards_losing(previous_socket_losses_, socket_losses))
        d.push_back(losing);
      bdm_out["dropping"] = std::move(d);
    } else {
      socket_losses.clear();
    }
  }
  out[rd::doc::bdm] = std::move(bdm_out);

  // Counters arrive as an object; the page gets every counter, and the non-zero loss
  // counters (the rule petdaq-top uses) with their growth since the previous document.
  std::map<std::string, std::uint64_t, std::less<>> counters;
  if (const json* c = object_member(doc, rd::doc::counters)) {
    for (const auto& [name, v] : c->items()) {
      if (!v.is_number_unsigned()) refuse(path(rd::doc::counters) + name + " is not a count");
      counters.emplace(name, v.get<std::uint64_t>());
    }
  }
  json all = json::object();
  json problems = json::array();
  for (const auto& [name, value] : counters) {
    all[name] = value;
    if (value == 0 || !top::is_problem_counter(name)) continue;
    const auto before = previous_counters_.find(name);
    // A counter that went back means petdaqd restarted: its growth is unknown, not negative.
    const std::uint64_t increase =
        before != previous_counters_.end() && value >= before->second ? value - before->second : 0;
    problems.push_back({{"name", name}, {"value", value}, {"increase", increase}});
  }
  out[rd::doc::counters] = std::move(all);
  out["problems"] = std::move(problems);

  // The daemon's active alarms (docs/operations.md), passed on as strings only.
  json alarms = json::array();
  if (const auto a = doc.find(rd::doc::alarms); a != doc.end() && a->is_array()) {
    for (const json& alarm : *a) {
      if (!alarm.is_object()) continue;
      auto text = [&](const char* key) {
        const auto it = alarm.find(key);
        return it != alarm.end() && it->is_string() ? it->get<std::string>() : std::string();
      };
      alarms.push_back({{rd::alarm::name, text(rd::alarm::name)},
                        {rd::alarm::subject, text(rd::alarm::subject)},
                        {rd::alarm::message, text(rd::alarm::message)}});
    }
  }
  out[rd::doc::alarms] = std::move(alarms);

  json queues = nullptr;
  if (const json* q = object_member(doc, rd::doc::queues)) {
    queues = json::object();
    for (const char* key : {rd::queues::ring_chunks, rd::queues::ring_free,
                            rd::queues::pending_frames}) {
      if (const auto v = count(*q, path(rd::doc::queues), key)) queues[key] = *v;
    }
  }
  out[rd::doc::queues] = std::move(queues);
  json latency = nullptr;
  if (const json* l = object_member(doc, rd::doc::latency_ms)) {
    latency = json::object();
    for (const char* key : {rd::latency_ms::p50, rd::latency_ms::p99, rd::latency_ms::max}) {
      if (const auto v = number(*l, path(rd::doc::latency_ms), key)) latency[key] = *v;
    }
  }
  out[rd::doc::latency_ms] = std::move(latency);
  // The dead time of an overload (DESIGN section 6), as published.
  json dead = nullptr;
  if (const json* d = object_member(doc, rd::doc::deadtime)) {
    dead = json::object();
    for (const char* key : {rd::deadtime::dead_s_run, rd::deadtime::live_fraction_run,
                            rd::deadtime::live_fraction_interval})
      if (const auto v = number(*d, path(rd::doc::deadtime), key)) dead[key] = *v;
    if (const json* sh = member(*d, rd::deadtime::shedding); sh && sh->is_boolean())
      dead[rd::deadtime::shedding] = *sh;
  }
  out[rd::doc::deadtime] = std::move(dead);

  previous_counters_ = std::move(counters);
  previous_socket_losses_ = std::move(socket_losses);
  return {out.dump(), p};
}

namespace {
json point_json(const RatePoint& p) {
  return {{"t", p.t_unix_s},         {"singles", p.singles}, {"prompts", p.prompts},
          {"delayed", p.delayed},    {"trues", p.trues},     {"necr", p.necr}};
}
}  // namespace

std::string history_message(const std::deque<RatePoint>& points) {
  json list = json::array();
  for (const RatePoint& p : points) list.push_back(point_json(p));
  return json{{"type", "history"}, {"points", std::move(list)}}.dump();
}

namespace {

[[noreturn]] void refuse_histograms(const std::string& why) {
  throw HistogramFileError(why);
}

// Ceiling of a / b for b > 0.
std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }

// The smallest bin (>= 1) that makes `tiles` images of side x side pixels (summed over
// blocks of bin x bin) fit in max_side per image and max_pixels in all.
std::uint32_t image_bin(std::uint64_t width, std::uint64_t height, std::uint64_t tiles,
                        std::uint64_t max_side, std::uint64_t max_pixels) {
  std::uint64_t bin = std::max<std::uint64_t>(
      1, ceil_div(std::max(width, height), std::max<std::uint64_t>(1, max_side)));
  while (bin < std::max(width, height) &&
         tiles * ceil_div(width, bin) * ceil_div(height, bin) > std::max<std::uint64_t>(1, max_pixels))
    ++bin;
  return static_cast<std::uint32_t>(bin);
}

// An image as the page draws it: row-major counts, their sum and maximum.
struct Image {
  std::uint64_t width = 0, height = 0;
  std::vector<std::uint64_t> counts;
  Image(std::uint64_t w, std::uint64_t h) : width(w), height(h), counts(w * h, 0) {}
  json to_json(std::uint32_t bin) const {
    std::uint64_t total = 0, max = 0;
    for (const std::uint64_t c : counts) {
      total += c;
      max = std::max(max, c);
    }
    return {{"width", width}, {"height", height}, {"bin", bin},
            {"total", total}, {"max", max},       {"counts", counts}};
  }
};

// A scanner dimension of the file's JSON document.
std::uint64_t dimension(const json& scanner, const char* key) {
  const json* v = member(scanner, key);
  if (!v || !v->is_number_unsigned() || v->get<std::uint64_t>() < 1 ||
      v->get<std::uint64_t>() > 65536)
    refuse_histograms(std::string("scanner.") + key + " is missing or not in 1 ... 65536");
  return v->get<std::uint64_t>();
}

const HistDescriptor& histogram(const HistogramFile& f, Hist h, std::uint32_t rank) {
  const HistDescriptor* d = f.find(hist_name(h));
  if (!d) refuse_histograms(std::string(hist_name(h)) + " is missing");
  if (d->rank != rank)
    refuse_histograms(std::string(hist_name(h)) + " has rank " + std::to_string(d->rank) +
                      ", expected " + std::to_string(rank));
  return *d;
}

void expect_extent(const HistDescriptor& d, int axis, std::uint64_t expected, const char* what) {
  if (d.shape[axis] != expected)
    refuse_histograms(std::string(d.name_view()) + " axis " + std::to_string(axis) + " has " +
                      std::to_string(d.shape[axis]) + " bins, the scanner's " + what + " is " +
                      std::to_string(expected));
}

// A 1-D histogram summed over `rows` rows of `d` (rank 1: one row), merged into at most
// max_bins bins; bin i spans [lo + i * width, lo + (i + 1) * width) in unit.
json spectrum(const HistogramFile& f, const HistDescriptor& d, std::uint64_t rows,
              std::size_t max_bins) {
  const std::uint64_t n = d.shape[d.rank - 1];
  const std::uint64_t merge = std::max<std::uint64_t>(1, ceil_div(n, std::max<std::size_t>(1, max_bins)));
  std::vector<std::uint64_t> counts(ceil_div(n, merge), 0);
  std::uint64_t total = 0;
  for (std::uint64_t r = 0; r < rows; ++r) {
    for (std::uint64_t i = 0; i < n; ++i) {
      const std::uint64_t v = f.value(d, r * n + i);
      counts[i / merge] += v;
      total += v;
    }
  }
  return {{"unit", std::string(d.unit_view())}, {"lo", d.lo},     {"width", d.width * static_cast<double>(merge)},
          {"merged", merge},                    {"total", total}, {"counts", std::move(counts)}};
}

}  // namespace

std::string histograms_message(std::string_view body, const HistogramLimits& limits,
                               FiguresCache* figures) {
  const HistogramFile f =
      parse_histogram_file(reinterpret_cast<const std::uint8_t*>(body.data()), body.size());
  const json meta = json::parse(f.metadata, nullptr, /*allow_exceptions=*/false);
  if (meta.is_discarded() || !meta.is_object()) refuse_histograms("its JSON document is not an object");
  const json* scanner = member(meta, "scanner");
  if (!scanner || !scanner->is_object()) refuse_histograms("its JSON document has no scanner");
  const std::uint64_t bdm_t = dimension(*scanner, "bdm_transaxial");
  const std::uint64_t bdm_a = dimension(*scanner, "bdm_axial");
  const std::uint64_t du_t = dimension(*scanner, "du_transaxial");
  const std::uint64_t du_a = dimension(*scanner, "du_axial");
  const std::uint64_t cr_t = dimension(*scanner, "crystal_transaxial");
  const std::uint64_t cr_a = dimension(*scanner, "crystal_axial");
  const std::uint64_t p = dimension(*scanner, "position_size");

  // The shapes must be the scanner's: checked on the descriptors (whose extents the reader
  // bounded by the body's length) before any product of the geometry is used.
  const HistDescriptor& flood = histogram(f, Hist::flood, 4);
  expect_extent(flood, 0, bdm_t * bdm_a, "BDM count");
  expect_extent(flood, 1, du_t * du_a, "DU count per BDM");
  expect_extent(flood, 2, p, "position_size");
  expect_extent(flood, 3, p, "position_size");
  const std::uint64_t crystals_per_ring = bdm_t * du_t * cr_t;
  const std::uint64_t rings = bdm_a * du_a * cr_a;
  const HistDescriptor& singles = histogram(f, Hist::crystal_singles, 1);
  if (crystals_per_ring > 0xffffffffu || rings > 0xffffffffu)
    refuse_histograms("the scanner has more crystals than crystal_singles");
  expect_extent(singles, 0, crystals_per_ring * rings, "crystal count");
  const HistDescriptor& energy = histogram(f, Hist::energy_keV, 2);
  expect_extent(energy, 0, crystals_per_ring * rings, "crystal count");
  const HistDescriptor& dt = histogram(f, Hist::dt_prompt, 1);

  json out = json::object();
  out["type"] = "histograms";
  out["run_id"] = f.header.run_id;
  out["created_unix_ns"] = f.header.created_unix_ns;
  const json* backend = member(meta, "backend");
  out["backend"] = backend && backend->is_string() ? *backend : json(nullptr);
  out["scanner"] = {{"bdm_transaxial", bdm_t}, {"bdm_axial", bdm_a},
                    {"du_transaxial", du_t},   {"du_axial", du_a},
                    {"crystal_transaxial", cr_t}, {"crystal_axial", cr_a},
                    {"position_size", p}};
  const json* window = member(meta, "energy_window_keV");
  out["energy_window_keV"] =
      window && window->is_array() && window->size() == 2 && (*window)[0].is_number() &&
              (*window)[1].is_number()
          ? *window
          : json(nullptr);

  // Flood maps: every DU's as one tile of a mosaic (columns: transaxial position of the DU
  // round the ring, rows: axial position), and all DUs summed.
  const std::uint64_t columns = bdm_t * du_t, mosaic_rows = bdm_a * du_a;
  const std::uint32_t tile_bin = image_bin(p, p, columns * mosaic_rows, limits.max_tile_side,
                                           limits.max_mosaic_pixels);
  const std::uint64_t tile = ceil_div(p, tile_bin);
  const std::uint32_t sum_bin = image_bin(p, p, 1, limits.max_sum_side, limits.max_image_pixels);
  const std::uint64_t sum_side = ceil_div(p, sum_bin);
  Image mosaic(columns * tile, mosaic_rows * tile);
  Image summed(sum_side, sum_side);
  std::uint64_t index = 0;
  for (std::uint64_t b = 0; b < bdm_t * bdm_a; ++b) {
    for (std::uint64_t d = 0; d < du_t * du_a; ++d) {
      const std::uint64_t col = (b % bdm_t) * du_t + d / du_a;
      const std::uint64_t row = (b / bdm_t) * du_a + d % du_a;
      for (std::uint64_t y = 0; y < p; ++y) {
        for (std::uint64_t x = 0; x < p; ++x, ++index) {
          const std::uint64_t v = f.value(flood, index);
          mosaic.counts[(row * tile + y / tile_bin) * mosaic.width + col * tile + x / tile_bin] += v;
          summed.counts[(y / sum_bin) * sum_side + x / sum_bin] += v;
        }
      }
    }
  }
  json tiles = mosaic.to_json(tile_bin);
  tiles["tile"] = tile;
  tiles["columns"] = columns;
  tiles["rows"] = mosaic_rows;
  out["flood_tiles"] = std::move(tiles);
  out["flood_sum"] = summed.to_json(sum_bin);

  // Accepted singles per crystal: rows are rings (axial), columns the crystals round a ring
  // (crystal id = ring * crystals_per_ring + position in the ring).
  const std::uint32_t map_bin = image_bin(crystals_per_ring, rings, 1, 0xffffffffu, limits.max_image_pixels);
  Image map(ceil_div(crystals_per_ring, map_bin), ceil_div(rings, map_bin));
  for (std::uint64_t c = 0; c < crystals_per_ring * rings; ++c) {
    const std::uint64_t ring = c / crystals_per_ring, at = c % crystals_per_ring;
    map.counts[(ring / map_bin) * map.width + at / map_bin] += f.value(singles, c);
  }
  out["crystal_singles"] = map.to_json(map_bin);

  out["energy_keV"] = spectrum(f, energy, energy.shape[0], limits.max_spectrum_bins);
  out["dt_prompt"] = spectrum(f, dt, 1, limits.max_spectrum_bins);
  const HistDescriptor* delayed = f.find(hist_name(Hist::dt_delayed));
  out["dt_delayed"] = delayed && delayed->rank == 1
                          ? spectrum(f, *delayed, 1, limits.max_spectrum_bins)
                          : json(nullptr);
  // Signed Δt (files from version 3) and the figures fitted on them and on the spectra.
  for (const Hist h : {Hist::tof_prompt, Hist::tof_delayed}) {
    const HistDescriptor* d = f.find(hist_name(h));
    out[hist_name(h)] = d && d->rank == 1 ? spectrum(f, *d, 1, limits.max_spectrum_bins) : json(nullptr);
  }
  out["figures"] = figures_view(f, crystals_per_ring, rings, figures);
  return out.dump();
}

std::string_view state_name(FeedState s) {
  switch (s) {
    case FeedState::waiting: return "waiting";
    case FeedState::live: return "live";
    case FeedState::no_data: return "no-data";
  }
  return "waiting";
}

std::string status_message(const ServerStatus& s) {
  json counters = json::object();
  for (std::size_t i = 0; i < kWebCounterCount; ++i)
    counters[std::string(kWebCounterNames[i])] = s.counters ? s.counters->get(i) : 0;
  json out = {{"type", "status"},
              {"state", state_name(s.state)},
              {"stale_after_s", s.stale_after_s},
              {"endpoint", s.endpoint},
              {"clients", s.clients},
              {"counters", std::move(counters)}};
  out["age_s"] = s.age_s >= 0 ? json(s.age_s) : json(nullptr);
  return out.dump();
}

}  // namespace petdaq::web

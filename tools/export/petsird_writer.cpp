#include "tools/export/petsird_writer.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>

#include "core/geometry.h"
#include "core/histograms.h"
#include "core/plm_file.h"
#include "proto/bytes.h"
#include "proto/signed_tof.h"
#include "tools/export/crystal_position.h"
#include "tools/export/petsird_schema.h"

namespace petdaq::exporter {

namespace {

// Speed of light in mm/ps: PETSIRD gives TOF as (t1 − t2) · c / 2 in mm.
constexpr double kLightMmPerPs = 0.299792458;

// PETSIRD 0.9.1's enums, by their position in the model (their values in the schema).
namespace petsird_enum {
constexpr std::int64_t singles_histogram_none = 0;
constexpr std::int64_t singles_histogram_all = 2;
constexpr std::int64_t single_event_other = 2;
constexpr std::int64_t coincidence_reject_higher_multiples = 0;
constexpr std::int64_t coincidence_multiples_as_all_coincidences = 1;
constexpr std::int64_t coincidence_other = 3;
constexpr std::int64_t higher_reject_higher_multiples = 0;
}  // namespace petsird_enum

// The TimeBlock union's cases, in the model's order.
enum class TimeBlockCase : std::uint64_t { event = 0, dead_time = 4, singles_histogram = 5 };

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  const std::int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

}  // namespace

// ---- layout ----

PetsirdLayout::PetsirdLayout(const ScannerSettings& s) : s_(s) {
  const Geometry g = Geometry::from(s);
  modules_ = g.bdm_count();
  per_panel_ = g.du_transaxial * g.crystal_transaxial;
  rows_per_bdm_ = g.du_axial * g.crystal_axial;
  elements_ = per_panel_ * rows_per_bdm_;
  crystals_per_ring_ = g.crystals_per_ring();
}

std::uint32_t PetsirdLayout::module_of(std::uint32_t crystal) const {
  const std::uint32_t in_ring = crystal % crystals_per_ring_, ring = crystal / crystals_per_ring_;
  const std::uint32_t bdms_across = crystals_per_ring_ / per_panel_;
  return (ring / rows_per_bdm_) * bdms_across + in_ring / per_panel_;
}

std::uint32_t PetsirdLayout::element_of(std::uint32_t crystal) const {
  const std::uint32_t in_ring = crystal % crystals_per_ring_, ring = crystal / crystals_per_ring_;
  return (ring % rows_per_bdm_) * per_panel_ + in_ring % per_panel_;
}

namespace {

// Axial centre of BDM row `b_axial` (DESIGN section 3's axial layout, as crystal_place()).
double bdm_centre_z_mm(const ScannerSettings& s, std::uint32_t b_axial) {
  const Geometry g = Geometry::from(s);
  const double du_len = g.crystal_axial * s.crystal_pitch_axial_mm;
  const double bdm_len = g.du_axial * du_len + (g.du_axial - 1.0) * s.du_gap_mm;
  const double axial_length = g.bdm_axial * bdm_len + (g.bdm_axial - 1.0) * s.bdm_gap_mm;
  return b_axial * (bdm_len + s.bdm_gap_mm) + 0.5 * bdm_len - 0.5 * axial_length;
}

}  // namespace

std::array<float, 12> PetsirdLayout::module_transform(std::uint32_t module) const {
  const std::uint32_t bdms_across = crystals_per_ring_ / per_panel_;
  const std::uint32_t b_trans = module % bdms_across, b_axial = module / bdms_across;
  const double angle = 2.0 * std::numbers::pi * b_trans / bdms_across;
  const auto c = static_cast<float>(std::cos(angle)), sn = static_cast<float>(std::sin(angle));
  const auto z = static_cast<float>(bdm_centre_z_mm(s_, b_axial));
  return {c, -sn, 0, 0,  //
          sn, c, 0, 0,   //
          0, 0, 1, z};
}

std::array<float, 12> PetsirdLayout::element_transform(std::uint32_t element) const {
  // The element's crystal in module 0 (first BDM across, first BDM row), whose transform is
  // a pure axial shift: its centre less that shift is the element's place in the module.
  const std::uint32_t crystal = (element / per_panel_) * crystals_per_ring_ + element % per_panel_;
  const CrystalPlace p = crystal_place(s_, crystal);
  const double z = p.centre_mm[2] - bdm_centre_z_mm(s_, 0);
  return {1, 0, 0, static_cast<float>(p.centre_mm[0]),  //
          0, 1, 0, static_cast<float>(p.centre_mm[1]),  //
          0, 0, 1, static_cast<float>(z)};
}

// ---- TOF bins ----

PetsirdTofBins::PetsirdTofBins(std::int64_t window_ticks, std::uint32_t width_ticks)
    : width_(width_ticks), half_(width_ticks / 2) {
  if (width_ticks == 0) throw std::invalid_argument("TOF bin width must be at least 1 tick");
  first_ = floor_div(-window_ticks + half_, width_);
  last_ = floor_div(window_ticks + half_, width_);
}

bool PetsirdTofBins::index(std::int64_t signed_dt, std::uint32_t& bin) const {
  const std::int64_t k = floor_div(signed_dt + half_, width_);
  if (k < first_ || k > last_) return false;
  bin = static_cast<std::uint32_t>(k - first_);
  return true;
}

std::vector<double> PetsirdTofBins::edges_ticks() const {
  std::vector<double> edges;
  for (std::int64_t k = first_; k <= last_ + 1; ++k)
    edges.push_back(static_cast<double>(k * width_ - half_) - 0.5);
  return edges;
}

// ---- writer ----

PetsirdWriter::PetsirdWriter(const std::filesystem::path& file, const Settings& settings,
                             double tick_ps, PetsirdOptions options)
    : out_(file, kPetsirdSchema),
      settings_(settings),
      tick_ps_(tick_ps),
      options_(options),
      layout_(settings.scanner),
      tof_(static_cast<std::int64_t>(ps_to_ticks(settings.coincidence.window_ps, tick_ps)),
           options.tof_bin_ticks),
      delay_ticks_(static_cast<std::int64_t>(
          ps_to_ticks(settings.coincidence.delayed.offset_ps, tick_ps))),
      delayed_stored_(settings.coincidence.delayed.enabled) {
  if (options_.time_block_ms == 0) throw std::invalid_argument("time block must be at least 1 ms");
  write_header();
}

PetsirdWriter::~PetsirdWriter() = default;

void PetsirdWriter::write_header() {
  const ScannerSettings& s = settings_.scanner;
  const Geometry g = Geometry::from(s);
  // Header.scanner: ScannerInformation, field by field in the model's order.
  out_.string("petdaq " + std::to_string(g.bdm_transaxial) + "x" + std::to_string(g.bdm_axial) +
              " BDM ring, " + std::to_string(g.crystal_count()) + " crystals");
  // scannerGeometry.replicatedModules: one module type.
  out_.varuint(1);
  {
    // ReplicatedDetectorModule.object: DetectorModule
    //   detectingElements: ReplicatedBoxSolidVolume
    //     object: BoxSolidVolume { shape: BoxShape { corners: Coordinate*8 }, materialId }
    const float dx = static_cast<float>(0.5 * s.crystal_depth_mm);
    const float dy = static_cast<float>(0.5 * s.crystal_pitch_transaxial_mm);
    const float dz = static_cast<float>(0.5 * s.crystal_pitch_axial_mm);
    // The model leaves the corner order open; this is its generator's: the inner face (x < 0,
    // towards the axis) as a loop, then the outer face in the same order.
    constexpr int loop_y[4] = {-1, -1, 1, 1}, loop_z[4] = {-1, 1, 1, -1};
    for (float x : {-dx, dx})
      for (int i = 0; i < 4; ++i) {
        out_.f32(x);
        out_.f32(static_cast<float>(loop_y[i]) * dy);
        out_.f32(static_cast<float>(loop_z[i]) * dz);
      }
    out_.varuint(0);  // materialId: bulkMaterials[0]
    out_.varuint(layout_.elements_per_module());
    for (std::uint32_t e = 0; e < layout_.elements_per_module(); ++e)
      for (float v : layout_.element_transform(e)) out_.f32(v);
    out_.varuint(0);  // nonDetectingElements
    // ReplicatedDetectorModule.transforms
    out_.varuint(layout_.modules());
    for (std::uint32_t m = 0; m < layout_.modules(); ++m)
      for (float v : layout_.module_transform(m)) out_.f32(v);
  }
  out_.presence(false);  // scannerGeometry.nonDetectingVolumes
  // bulkMaterials: the crystals' material is not in petdaq's configuration.
  out_.varuint(1);
  out_.varuint(0);                               // id
  out_.string("scintillator (not specified)");  // name
  out_.f32(0.0f);                                // density: unknown
  out_.varuint(0);                               // atoms
  out_.varuint(0);                               // massFractions
  out_.presence(false);                          // gantryAlignment
  // tofBinEdges[1][1]: BinEdges in mm of (t1 − t2) · c / 2.
  const double mm_per_tick = tick_ps_ * kLightMmPerPs / 2;
  const std::vector<double> edges = tof_.edges_ticks();
  out_.varuint(1);
  out_.varuint(1);
  out_.varuint(edges.size());
  for (double e : edges) out_.f32(static_cast<float>(e * mm_per_tick));
  // tofResolution[1][1]: CTR FWHM in mm.
  out_.varuint(1);
  out_.varuint(1);
  out_.f32(static_cast<float>(settings_.coincidence.time_resolution_ps * kLightMmPerPs / 2));
  // eventEnergyBinEdges[1]: the energy window, one bin.
  out_.varuint(1);
  out_.varuint(2);
  out_.f32(static_cast<float>(settings_.energy_window.low_keV));
  out_.f32(static_cast<float>(settings_.energy_window.high_keV));
  // energyResolutionAt511[1]: not in petdaq's configuration (0: unknown).
  out_.varuint(1);
  out_.f32(0.0f);
  if (options_.singles_histograms) {
    out_.varint(petsird_enum::singles_histogram_all);  // singlesHistogramLevel
    out_.varuint(1);  // singlesHistogramEnergyBinEdges[1]: the energy window
    out_.varuint(2);
    out_.f32(static_cast<float>(settings_.energy_window.low_keV));
    out_.f32(static_cast<float>(settings_.energy_window.high_keV));
  } else {
    out_.varint(petsird_enum::singles_histogram_none);
    out_.varuint(0);
  }
  out_.varint(petsird_enum::single_event_other);      // singleEventPolicy (none stored)
  // promptEventPolicy: kill_multiples keeps no window of 3 or more; take_all_goods with
  // first_open windows keeps every good pair of a multiple; the others keep chosen pairs.
  const auto& c = settings_.coincidence;
  std::int64_t prompt_policy = petsird_enum::coincidence_other;
  if (c.policy == Policy::kill_multiples)
    prompt_policy = petsird_enum::coincidence_reject_higher_multiples;
  else if (c.policy == Policy::take_all_goods && c.window_mode == WindowMode::first_open)
    prompt_policy = petsird_enum::coincidence_multiples_as_all_coincidences;
  out_.varint(prompt_policy);
  // delayedEventPolicy: delayed windows pair the opener with each member only.
  out_.varint(c.policy == Policy::kill_multiples ? petsird_enum::coincidence_reject_higher_multiples
                                                 : petsird_enum::coincidence_other);
  out_.varint(petsird_enum::higher_reject_higher_multiples);  // tripleEventPolicy
  out_.varint(petsird_enum::higher_reject_higher_multiples);  // quadrupleEventPolicy
  out_.boolean(false);            // singleEventsAreStored
  out_.boolean(true);             // promptEventsAreStored
  out_.boolean(delayed_stored_);  // delayedEventsAreStored
  out_.boolean(false);            // tripleEventsAreStored
  out_.boolean(false);            // quadrupleEventsAreStored
  // detectionEfficiencies: none applied.
  out_.string("");
  out_.f32(1.0f);          // calibrationFactor
  out_.presence(false);    // detectionBinEfficiencies
  out_.presence(false);    // modulePairSGIDLUT
  out_.presence(false);    // modulePairEfficienciesVectors
  out_.presence(false);    // Header.exam
}

double PetsirdWriter::run_ms(const Run& run, std::uint64_t ticks) const {
  const double since = ticks >= run.start_ticks ? static_cast<double>(ticks - run.start_ticks)
                                                : -static_cast<double>(run.start_ticks - ticks);
  return run.offset_ms + since * tick_ps_ * 1e-9;
}

void PetsirdWriter::begin_run(std::uint64_t run_id, std::uint64_t t_begin) {
  double offset_ms = 0;
  if (have_run_) {
    // The run before ends with its last time block; the new one starts at the next.
    flush_through(static_cast<std::uint64_t>(std::ceil(end_ms_ / options_.time_block_ms)));
    offset_ms = static_cast<double>(next_block_) * options_.time_block_ms;
  }
  runs_[run_id] = Run{t_begin, offset_ms};
  current_run_ = run_id;
  have_run_ = true;
  watermark_ms_[0] = watermark_ms_[1] = end_ms_ = offset_ms;
}

void PetsirdWriter::add(const MessageHeader& m, const CoincRecord* records, std::size_t n) {
  const int kind = m.kind == static_cast<std::uint16_t>(MessageKind::delayed) ? 1 : 0;
  if (!have_run_ || m.run_id != current_run_) begin_run(m.run_id, m.t_begin);
  const Run& run = runs_.at(current_run_);
  const double block_ms = options_.time_block_ms;
  const std::uint32_t crystals = layout_.detection_bins();
  for (std::size_t i = 0; i < n; ++i) {
    const CoincRecord& r = records[i];
    if (r.crystal_a >= crystals || r.crystal_b >= crystals) {
      ++refused_crystal_;
      continue;
    }
    // The delayed single's time less the delay D, so that both kinds share the TOF bins.
    CoincRecord shifted = r;
    if (kind == 1) shifted.dt = static_cast<std::int32_t>(r.dt - delay_ticks_);
    Event e{layout_.detection_bin(tof_lower_crystal(r)), layout_.detection_bin(tof_higher_crystal(r)),
            0};
    if (!tof_.index(signed_dt_ticks(shifted), e.tof)) {
      ++refused_tof_;
      continue;
    }
    const double at = std::max(0.0, run_ms(run, r.time_a));
    const auto k = static_cast<std::uint64_t>(at / block_ms);
    // A block already written (a record before its message's t_begin) keeps its events in
    // the first open block rather than losing them.
    pending_[std::max(k, next_block_)].events[kind].push_back(e);
    ++written_[kind];
  }
  watermark_ms_[kind] = std::max(watermark_ms_[kind], run_ms(run, m.t_end));
  end_ms_ = std::max(end_ms_, watermark_ms_[kind]);
  const double ready = delayed_stored_ ? std::min(watermark_ms_[0], watermark_ms_[1]) : watermark_ms_[0];
  flush_through(static_cast<std::uint64_t>(ready / block_ms));
}

void PetsirdWriter::add_dead(const MessageHeader& m, const DeadInterval* intervals, std::size_t n) {
  dead_seen_ = true;
  for (std::size_t i = 0; i < n; ++i)
    if (intervals[i].t_end > intervals[i].t_begin)
      dead_.push_back({m.run_id, intervals[i].t_begin, intervals[i].t_end});
}

void PetsirdWriter::add_singles(std::uint64_t run_id, std::vector<std::uint64_t> per_crystal) {
  if (!options_.singles_histograms)
    throw std::logic_error("singles histograms not announced in the PETSIRD header");
  if (per_crystal.size() != layout_.detection_bins())
    throw std::invalid_argument("crystal_singles has " + std::to_string(per_crystal.size()) +
                                " crystals, the scanner " +
                                std::to_string(layout_.detection_bins()));
  singles_[run_id] = std::move(per_crystal);
}

void PetsirdWriter::write_time_interval(std::uint64_t first_block, std::uint64_t end_block) {
  const std::uint64_t start = first_block * options_.time_block_ms;
  const std::uint64_t stop = end_block * options_.time_block_ms;
  if (stop > UINT32_MAX)
    throw std::runtime_error("acquisition longer than PETSIRD's 32-bit time in ms");
  out_.varuint(start);
  out_.varuint(stop);
}

void PetsirdWriter::write_event_block(std::uint64_t k, const Block* b) {
  out_.varuint(1);  // a stream block of one TimeBlock
  out_.union_index(static_cast<std::uint64_t>(TimeBlockCase::event));
  write_time_interval(k, k + 1);
  out_.varuint(0);  // singleEvents: not stored
  for (int kind = 0; kind < 2; ++kind) {
    if (kind == 1 && !delayed_stored_) {
      out_.varuint(0);  // delayedEvents: not stored
      continue;
    }
    out_.varuint(1);  // [typeOfModule1]
    out_.varuint(1);  // [typeOfModule2]
    const std::size_t n = b ? b->events[kind].size() : 0;
    out_.varuint(n);
    for (std::size_t i = 0; i < n; ++i) {
      const Event& e = b->events[kind][i];
      out_.varuint(e.bin0);  // detectionBins: a fixed vector of 2, no length
      out_.varuint(e.bin1);
      out_.varuint(e.tof);
    }
  }
  out_.varuint(0);  // tripleEvents
  out_.varuint(0);  // quadrupleEvents
  ++event_blocks_;
}

void PetsirdWriter::flush_through(std::uint64_t end_block) {
  while (next_block_ < end_block) {
    auto it = pending_.begin();
    if (it != pending_.end() && it->first == next_block_) {
      write_event_block(next_block_, &it->second);
      pending_.erase(it);
    } else {
      write_event_block(next_block_, nullptr);
    }
    ++next_block_;
  }
}

void PetsirdWriter::write_dead_block(std::uint64_t first, std::uint64_t end, float alive) {
  out_.varuint(1);
  out_.union_index(static_cast<std::uint64_t>(TimeBlockCase::dead_time));
  write_time_interval(first, end);
  // AliveTimeFractions: every detection bin's singles alive (the dead time is scanner-wide,
  // not a detector's), and every module pair's coincidence alive time the block's fraction.
  out_.varuint(1);
  out_.varuint(layout_.detection_bins());
  for (std::uint32_t i = 0; i < layout_.detection_bins(); ++i) out_.f32(1.0f);
  out_.presence(true);
  out_.varuint(1);
  out_.varuint(1);
  out_.varuint(layout_.modules());
  out_.varuint(layout_.modules());
  for (std::uint64_t i = 0; i < std::uint64_t{layout_.modules()} * layout_.modules(); ++i)
    out_.f32(alive);
  ++dead_blocks_;
}

void PetsirdWriter::finish() {
  if (finished_) return;
  finished_ = true;
  const double block_ms = options_.time_block_ms;
  flush_through(static_cast<std::uint64_t>(std::ceil(end_ms_ / block_ms)));
  if (dead_seen_ && next_block_ > 0) {
    // Dead milliseconds per event time block, from the intervals merged on the time line.
    std::vector<std::pair<double, double>> spans;
    for (const DeadSpan& d : dead_) {
      const auto run = runs_.find(d.run);
      if (run == runs_.end()) {
        ++dead_unplaced_;
        continue;
      }
      spans.emplace_back(run_ms(run->second, d.t_begin), run_ms(run->second, d.t_end));
    }
    std::sort(spans.begin(), spans.end());
    std::map<std::uint64_t, double> dead_ms;
    double covered_to = 0;
    for (auto [b, e] : spans) {
      b = std::max({b, covered_to, 0.0});
      e = std::min(e, static_cast<double>(next_block_) * block_ms);
      if (e <= b) continue;
      covered_to = e;
      for (auto k = static_cast<std::uint64_t>(b / block_ms); k * block_ms < e; ++k)
        dead_ms[k] += std::min(e, (k + 1) * block_ms) - std::max(b, k * block_ms);
    }
    std::uint64_t k = 0;
    for (const auto& [block, ms] : dead_ms) {
      if (block > k) write_dead_block(k, block, 1.0f);  // a stretch with no dead time
      write_dead_block(block, block + 1, static_cast<float>(std::max(0.0, 1.0 - ms / block_ms)));
      k = block + 1;
    }
    if (k < next_block_) write_dead_block(k, next_block_, 1.0f);
  }
  // Singles histograms: one block per run, over the run's time blocks.
  for (const auto& [run_id, counts] : singles_) {
    const auto run = runs_.find(run_id);
    if (run == runs_.end()) {
      ++singles_unplaced_;
      continue;
    }
    const auto first = static_cast<std::uint64_t>(run->second.offset_ms / block_ms);
    std::uint64_t end = next_block_;
    for (const auto& [other_id, other] : runs_)
      if (other.offset_ms > run->second.offset_ms)
        end = std::min(end, static_cast<std::uint64_t>(other.offset_ms / block_ms));
    out_.varuint(1);
    out_.union_index(static_cast<std::uint64_t>(TimeBlockCase::singles_histogram));
    write_time_interval(first, std::max(end, first + 1));
    out_.varuint(1);  // singlesHistograms[1]: uint64[singlesDetectionBin], by detection bin
    out_.varuint(counts.size());
    std::vector<std::uint64_t> by_bin(counts.size());
    for (std::uint32_t c = 0; c < counts.size(); ++c) by_bin[layout_.detection_bin(c)] = counts[c];
    for (std::uint64_t n : by_bin) out_.varuint(n);
    ++singles_blocks_;
  }
  out_.varuint(0);  // end of the timeBlocks stream
  out_.close();
}

std::string PetsirdWriter::summary() const {
  return std::to_string(prompts()) + " prompts, " + std::to_string(delayed()) + " delayed in " +
         std::to_string(event_blocks_) + " event time blocks, " + std::to_string(dead_blocks_) +
         " dead-time blocks, " + std::to_string(singles_blocks_) + " singles-histogram blocks";
}

std::vector<std::string> PetsirdWriter::losses() const {
  std::vector<std::string> lines;
  if (refused_crystal_ || refused_tof_)
    lines.push_back("refused (not written): " + std::to_string(refused_crystal_) +
                    " records with a crystal id outside the scanner, " +
                    std::to_string(refused_tof_) + " with a Δt outside the TOF bins");
  if (dead_unplaced_)
    lines.push_back(std::to_string(dead_unplaced_) +
                    " dead intervals of runs with no coincidence message left out");
  if (singles_unplaced_)
    lines.push_back("singles histograms of " + std::to_string(singles_unplaced_) +
                    " run(s) with no coincidence message left out");
  return lines;
}

RunSingles crystal_singles(const std::vector<std::uint8_t>& histogram_file, std::uint32_t crystals) {
  const HistogramFile hf = parse_histogram_file(histogram_file.data(), histogram_file.size());
  const HistDescriptor* d = hf.find("crystal_singles");
  if (!d || d->rank != 1 || d->shape[0] != crystals)
    throw std::invalid_argument("no crystal_singles histogram of " + std::to_string(crystals) +
                                " crystals");
  RunSingles out{hf.header.run_id, {}};
  for (std::uint32_t c = 0; c < crystals; ++c) out.counts.push_back(hf.value(*d, c));
  return out;
}

PetsirdFileCounts petsird_from_plm(
    const std::filesystem::path& plm, PetsirdWriter& w,
    const std::function<void(double fraction, const PetsirdFileCounts&)>& progress) {
  PlmReader reader(plm);
  std::error_code ec;
  const auto file_bytes = std::filesystem::file_size(plm, ec);
  PetsirdFileCounts counts;
  MessageHeader m;
  std::vector<std::uint8_t> body;
  std::vector<CoincRecord> records;
  std::vector<DeadInterval> dead;
  while (reader.next_message(m, body, true)) {
    const std::string where = plm.string() + ": message " + std::to_string(m.message_id) +
                              " of kind " + std::to_string(m.kind);
    if (m.kind == static_cast<std::uint16_t>(MessageKind::prompts) ||
        m.kind == static_cast<std::uint16_t>(MessageKind::delayed)) {
      if (m.record_size != sizeof(CoincRecord))
        throw PlmError(where + ": record size " + std::to_string(m.record_size) + ", expected 32");
      records.resize(m.record_count);
      for (std::uint32_t i = 0; i < m.record_count; ++i)
        records[i] = decode_record(body.data() + std::size_t{i} * sizeof(CoincRecord));
      w.add(m, records.data(), records.size());
      ++counts.messages;
      counts.records += m.record_count;
    } else if (m.kind == static_cast<std::uint16_t>(MessageKind::deadtime)) {
      if (m.record_size != sizeof(DeadInterval))
        throw PlmError(where + ": record size " + std::to_string(m.record_size) + ", expected 24");
      dead.resize(m.record_count);
      for (std::uint32_t i = 0; i < m.record_count; ++i) {
        const std::uint8_t* p = body.data() + std::size_t{i} * sizeof(DeadInterval);
        dead[i] = {bytes::load_le64(p), bytes::load_le64(p + 8), bytes::load_le64(p + 16)};
      }
      w.add_dead(m, dead.data(), dead.size());
      ++counts.dead_messages;
    } else {
      ++counts.skipped_messages;
    }
    if (progress)
      progress(ec || file_bytes == 0 ? -1.0 : double(reader.offset()) / double(file_bytes), counts);
  }
  counts.partial_tail_bytes = reader.partial_tail_bytes();
  return counts;
}

}  // namespace petdaq::exporter

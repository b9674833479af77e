#include "tools/sim/truth_json.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <stdexcept>

#include "tools/sim/plan.h"

namespace petdaq::sim {

void write_truth_json(const std::filesystem::path& file, const SimSummary& s,
                      const SimOptions& o, const Settings& settings) {
  const bool phantom = has_phantom(o);
  const double window_s = settings.coincidence.window_ps * 1e-12;
  const double singles_per_s = s.duration_s > 0 ? s.frames_in_window / s.duration_s : 0;
  const nlohmann::ordered_json truth = {
      {"format", "petdaq-sim truth 1"},
      {"seed", o.seed},
      {"detector_seed", o.detector_seed},
      {"activity_MBq", o.activity_MBq},
      {"half_life_s", o.half_life_s},
      {"source", o.source == SourceShape::point  ? "point"
                 : o.source == SourceShape::line ? "line"
                                                 : "cylinder"},
      {"source_position_mm",
       {o.source_position_mm[0], o.source_position_mm[1], o.source_position_mm[2]}},
      {"source_length_mm", o.source == SourceShape::line ? o.source_length_mm : 0.0},
      // position(T) = source_position_mm + amplitude_mm · sin(2π (T − time_origin_ticks) ·
      // tick_ps · 1e-12 / period_s) along `axis`, T the acquisition time in ticks
      {"motion",
       {{"amplitude_mm", o.motion_amplitude_mm},
        {"period_s", o.motion_period_s},
        {"axis", std::string(1, "xyz"[o.motion_axis])}}},
      {"phantom", !phantom ? "none"
                  : o.phantom == PhantomKind::polyethylene_cylinder ? "polyethylene_cylinder"
                                                                     : "water_cylinder"},
      {"phantom_radius_mm", o.phantom_radius_mm},
      {"phantom_length_mm", o.phantom_length_mm},
      {"line_source_mm",
       {{"offset", o.source == SourceShape::line ? o.line_offset_mm : 0.0},
        {"radius", o.source == SourceShape::line ? o.line_radius_mm : 0.0},
        {"length", o.source == SourceShape::line ? o.line_length_mm : 0.0}}},
      {"background", o.background},
      {"crystal_efficiency_spread", o.crystal_efficiency_spread},
      {"duration_s", s.duration_s},
      {"tick_ps", settings.scanner.tick_ps},
      {"time_origin_ticks", s.time_origin_ticks},
      {"disorder_ticks", s.disorder_ticks},
      {"packets", s.packets},
      {"front_end",
       {{"dead_time_ns", o.dead_time_ns},
        {"dead_time_model", o.dead_time_paralysable ? "paralysable" : "non-paralysable"},
        {"dead_time_unit", o.dead_time_per_board ? "bdm" : "du"},
        {"pile_up_ns", o.pile_up_ns},
        {"photons_detected", s.photons_detected},
        {"lost_dead_time", s.lost_dead_time},
        {"lost_dead_time_by_kind",
         {{"annihilation", s.lost_dead_time_by_kind[0]},
          {"scattered", s.lost_dead_time_by_kind[1]},
          {"background", s.lost_dead_time_by_kind[2]}}},
        {"merged_pile_up", s.merged_pile_up},
        {"merged_pile_up_by_kind",
         {{"annihilation", s.merged_pile_up_by_kind[0]},
          {"scattered", s.merged_pile_up_by_kind[1]},
          {"background", s.merged_pile_up_by_kind[2]}}},
        {"frames_piled_up", s.frames_piled_up},
        {"piled_out_of_window", s.piled_out_of_window}}},
      {"decays", s.decays},
      {"background_events", s.background_events},
      {"frames", s.frames},
      {"frames_by_kind",
       {{"annihilation", s.frames_annihilation},
        {"scattered", s.frames_scattered},
        {"background", s.frames_background}}},
      {"frames_mispositioned", s.frames_mispositioned},
      {"frames_no_crystal", s.frames_no_crystal},
      {"frames_in_energy_window", s.frames_in_window},
      {"energy_window_keV", {settings.energy_window.low_keV, settings.energy_window.high_keV}},
      {"coincidence_window_ps", settings.coincidence.window_ps},
      {"decays_with_two_frames", s.pairs},
      {"decays_with_two_frames_scattered", s.pairs_scattered},
      {"perfect_sorter",
       {{"trues", s.pairs_in_window - s.pairs_in_window_scattered},
        {"scattered", s.pairs_in_window_scattered},
        {"randoms_estimate", singles_per_s * singles_per_s * window_s * s.duration_s}}}};
  std::ofstream out(file);
  out << truth.dump(2) << "\n";
  if (!out) throw std::runtime_error("petdaq-sim: cannot write " + file.string());
}

}  // namespace petdaq::sim

// simulate(): the acquisition's plan, the calibration tables and config it writes, and the
// loop that takes generated blocks in order, merges each BDM's frames across block
// boundaries and hands them to the packetizer.
#include "tools/sim/sim.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <limits>
#include <memory>
#include <stdexcept>
#include <thread>

#include "core/calibration.h"
#include "tools/sim/block_generator.h"
#include "tools/sim/block_pipeline.h"
#include "tools/sim/detector.h"
#include "tools/sim/frame_files.h"
#include "tools/sim/front_end.h"
#include "tools/sim/packetizer.h"
#include "tools/sim/plan.h"
#include "tools/sim/truth_json.h"

namespace petdaq::sim {

Settings settings_for_output(const std::filesystem::path& config,
                             const std::filesystem::path& output_dir, std::string* yaml_text) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(config.string());
  } catch (const YAML::Exception& e) {
    throw SettingsError(config.string() + ": " + e.what());
  }
  if (!root.IsDefined() || root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  YAML::Node cal = root["calibration"];
  cal["position_lut"] = "position_lut.npy";
  cal["energy_correction"] = "energy_correction.npy";
  cal["time_offsets"] = "time_offsets.npy";
  YAML::Emitter emitter;
  emitter << YAML::Comment("Written by petdaq-sim: the scanner of " + config.filename().string() +
                           ", with the calibration tables of this acquisition")
          << root;
  std::string text = std::string(emitter.c_str()) + "\n";
  Settings settings = parse_settings(text, output_dir);
  if (yaml_text) *yaml_text = std::move(text);
  return settings;
}

SimSummary simulate(const std::filesystem::path& config, const std::filesystem::path& output_dir,
                    const SimOptions& options) {
  std::string yaml_text;
  const Settings settings = settings_for_output(config, output_dir, &yaml_text);
  const DetectorModel model(settings, options);
  const Geometry& g = model.geometry();

  const Plan plan = make_plan(settings, options, model);

  if (options.write_files) {
    std::filesystem::create_directories(output_dir);
    write_npy(output_dir / "position_lut.npy", NpyDtype<std::uint8_t>::name,
              {g.bdm_count(), g.du_per_bdm(), g.position_size, g.position_size},
              model.position_lut(), model.position_lut_bytes());
    write_npy(output_dir / "energy_correction.npy",
              {g.bdm_count(), g.du_per_bdm(), g.crystals_per_du(), options.energy_bins},
              model.energy_correction(options.energy_bins, settings.calibration.energy_bin_width));
    write_npy(output_dir / "time_offsets.npy", {g.crystal_count()}, model.time_offsets());
    if (model.has_efficiency_spread())
      write_npy(output_dir / "crystal_efficiency.npy", {g.crystal_count()}, model.crystal_efficiency());
    std::ofstream yaml(output_dir / "petdaq.yaml");
    yaml << yaml_text;
    if (!yaml) throw std::runtime_error("petdaq-sim: cannot write " + (output_dir / "petdaq.yaml").string());
  }

  const unsigned threads =
      options.threads ? options.threads : std::max(1u, std::thread::hardware_concurrency());
  const BlockGenerator generator(settings, options, model, plan);
  std::unique_ptr<FileSink> file_sink;
  CountingSink counting_sink;
  FrameSink* sink = &counting_sink;
  if (options.write_files) {
    file_sink = std::make_unique<FileSink>(output_dir / "frames.bin", output_dir / "truth.bin");
    sink = file_sink.get();
  }
  Packetizer packetizer(g.bdm_count(), options, plan.tick_ps, *sink);
  FrontEnd front_end(model, options, plan, settings.energy_window.low_keV,
                     settings.energy_window.high_keV);
  const auto to_packetizer = [&](std::uint32_t b, const SimFrame& f) { packetizer.add(b, f); };

  SimSummary summary;
  summary.time_origin_ticks = plan.origin_ticks;
  summary.disorder_ticks = plan.disorder_ticks;
  const auto started = std::chrono::steady_clock::now();
  const std::uint64_t block_limit = plan.block_limit();
  std::vector<std::vector<SimFrame>> carry(g.bdm_count()), next_carry(g.bdm_count());
  {
    BlockPipeline pipeline(generator, threads, block_limit);
    for (std::uint64_t k = 0; k < block_limit; ++k) {
      Block& block = pipeline.acquire(k);
      block.stats.add_to(summary);
      summary.blocks = k + 1;
      const bool last = k + 1 == block_limit || (options.frames && summary.frames >= options.frames);
      // No frame of a later block can have a key below this.
      const std::uint64_t cut = last ? std::numeric_limits<std::uint64_t>::max()
                                     : plan.origin_ticks + block.end_ticks - plan.guard_ticks;
      for (std::uint32_t b = 0; b < g.bdm_count(); ++b) {
        const SimFrame* run = block.frames.data() + block.bdm_begin[b];
        const SimFrame* run_end = block.frames.data() + block.bdm_begin[b + 1];
        const SimFrame* old = carry[b].data();
        const SimFrame* old_end = old + carry[b].size();
        next_carry[b].clear();
        // Merge the carry-over and the new run (ties: the earlier block first).
        while (old != old_end || run != run_end) {
          const SimFrame& f = (run == run_end || (old != old_end && !(run->key < old->key))) ? *old++ : *run++;
          if (f.key >= cut)
            next_carry[b].push_back(f);
          else if (front_end.active())
            front_end.add(b, f);
          else
            packetizer.add(b, f);
        }
        std::swap(carry[b], next_carry[b]);
      }
      packetizer.advance(front_end.active() ? front_end.advance(cut, to_packetizer) : cut);
      summary.duration_s = double(block.end_ticks) * plan.tick_ps * 1e-12;
      pipeline.release(k);
      if (options.progress)
        options.progress(plan.total_ticks ? double(k + 1) / double(block_limit) : -1.0, summary);
      if (last) break;
    }
  }
  packetizer.finish();
  const FrontEndStats& fe = front_end.stats();
  summary.photons_detected = summary.frames;
  summary.lost_dead_time = fe.lost_dead_time;
  summary.merged_pile_up = fe.merged_pile_up;
  for (int k = 0; k < 3; ++k) {
    summary.lost_dead_time_by_kind[k] = fe.lost_dead_time_by_kind[k + 1];
    summary.merged_pile_up_by_kind[k] = fe.merged_pile_up_by_kind[k + 1];
  }
  summary.frames_piled_up = fe.frames_piled_up;
  summary.piled_out_of_window = fe.piled_out_of_window;
  summary.frames -= fe.lost_dead_time + fe.merged_pile_up;
  summary.packets = packetizer.packets_sent();
  summary.generate_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (file_sink) file_sink->close();
  if (options.write_files) write_truth_json(output_dir / "truth.json", summary, options, settings);
  return summary;
}

}  // namespace petdaq::sim

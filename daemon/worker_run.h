// The worker's run room: the published run its outputs describe. Its id (the slicer's run
// number on top of a base, so that run ids go on across the engines a reload builds), the
// acquisition span its slices covered (the first prompt's time and the end of the last slice:
// what the histograms, the image and the live fraction cover), what its histograms' counters
// count from, the .plm file its first message went to (its .pdh is named after it), and its
// dead time, kept for the rates documents after it ended until the next run has a prompt.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

#include "core/backend.h"
#include "core/histograms.h"
#include "daemon/file_sink.h"
#include "daemon/run_id.h"

namespace petdaq::daemon {

class RunState {
 public:
  // The published id of the running engine's slicer run `slicer_run`.
  std::uint64_t published(std::uint64_t slicer_run) const { return base_ + slicer_run; }
  // The run of the last delivered slice.
  std::uint64_t last() const { return last_; }

  // A slice of published run `run` was delivered.
  void slice(std::uint64_t run, const SliceResult& result) {
    last_ = run;
    if (!first_prompt_ && result.prompt_count) first_prompt_ = result.prompts[0].time_a;
    slice_end_ = result.t_end;
  }
  // The file the run's first message goes to names its .pdh (`file` null: no list-mode file).
  void note_file(const FileSink* file) {
    if (file && file_stem_.empty()) file_stem_ = file->current_file().stem().string();
  }
  // The next run's histograms count from `counters` (the counters now); its first message
  // names its .pdh again.
  void restart_outputs(const CounterBase& counters) {
    counter_base_ = counters;
    file_stem_.clear();
  }
  // The run ended: the next one has no span yet.
  void end_span() {
    first_prompt_.reset();
    slice_end_ = 0;
  }
  // A reload's new engine: its slicer's runs are published from the one after the last.
  std::uint64_t next_engine() {
    const std::uint64_t next = last_ + 1;
    base_ = next;
    last_ = next;
    return next;
  }

  // The raw time of the run's first prompt (none yet: no span).
  const std::optional<std::uint64_t>& first_prompt() const { return first_prompt_; }
  // The end of the run's last slice (0: none).
  std::uint64_t slice_end() const { return slice_end_; }
  const CounterBase& counter_base() const { return counter_base_; }
  // The stem of the .plm holding the run's first message (empty: none yet).
  const std::string& file_stem() const { return file_stem_; }

  // The run's dead time and live fraction up to raw time `until`, from its `dead_ticks` so
  // far, while the run has a first prompt before `until`.
  void note_dead_time(std::uint64_t until, std::uint64_t dead_ticks, double tick_ps) {
    if (!first_prompt_ || until <= *first_prompt_) return;
    dead_s_ = static_cast<double>(dead_ticks) * tick_ps * 1e-12;
    live_fraction_ = std::clamp(
        1.0 - static_cast<double>(dead_ticks) / static_cast<double>(until - *first_prompt_), 0.0,
        1.0);
  }
  double dead_s() const { return dead_s_; }
  double live_fraction() const { return live_fraction_; }

 private:
  std::uint64_t base_ = first_run_id();
  std::uint64_t last_ = base_;
  std::optional<std::uint64_t> first_prompt_;
  std::uint64_t slice_end_ = 0;
  CounterBase counter_base_{};
  std::string file_stem_;
  double dead_s_ = 0;
  double live_fraction_ = 1;
};

}  // namespace petdaq::daemon

// The worker's outputs (docs/daemon.md): the systemd watchdog and the periodic messages —
// `rates` with its alarms and acquisition, `histograms`, `image`, `acquisition` and `deadtime` —
// and the reports at exit, on the worker thread.
#include "daemon/worker.h"

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "core/crystal_health.h"
#include "core/histograms.h"
#include "daemon/file_names.h"
#include "daemon/notify.h"
#include "daemon/rate_limited_log.h"
#include "daemon/worker_engine.h"

namespace petdaq::daemon {

namespace {
// The header of a message whose body is one record of `bytes`: a histogram or image file, a
// JSON document (DESIGN section 7).
MessageHeader one_record_header(MessageKind kind, std::uint64_t message_id, std::uint64_t run_id,
                                std::size_t bytes) {
  MessageHeader m;
  m.kind = static_cast<std::uint16_t>(kind);
  m.message_id = message_id;
  m.run_id = run_id;
  m.record_count = 1;
  m.record_size = static_cast<std::uint32_t>(bytes);
  return m;
}
}  // namespace

namespace {
RateLimitedWarning g_dead_time_warning;
RateLimitedWarning g_lagging_warning;
}  // namespace

// The systemd watchdog and the `rates` document when due: from the loop, and after every
// published slice, so that working off a backlog (many slices inside one chunk's push)
// neither starves the watchdog nor silences the rates.
void Worker::keep_alive(Clock::time_point now, bool force_rates) {
  if (watchdog_interval_.count() > 0 && now - last_watchdog_ >= watchdog_interval_) {
    notify_watchdog();
    last_watchdog_ = now;
  }
  const auto interval = std::chrono::duration<double, std::milli>(
      engine_->settings.output.rates_interval_ms);
  if (force_rates || now - last_rates_ >= interval) publish_rates(now);
}

void Worker::tick(Clock::time_point now, bool force_rates) {
  PhaseScope phase(&phases_, Phase::tick);
  if (acquisitions_ && acquisitions_->version() != acquisition_version_) publish_acquisition();
  keep_alive(now, force_rates);
  const auto histogram_interval = std::chrono::duration<double, std::milli>(
      engine_->settings.output.histograms.interval_ms);
  if (now - last_histograms_ >= histogram_interval) {
    last_histograms_ = now;
    // The run of the last delivered slice: the run the backend's bins belong to.
    publish_histograms(last_run_, false);
  }
  if (raw_) {
    PhaseScope p(&phases_, Phase::raw_capture);
    raw_->flush_if_due(now);
  }
  const auto image_interval =
      std::chrono::duration<double, std::milli>(engine_->settings.output.image.interval_ms);
  if (now - last_image_ >= image_interval) {
    last_image_ = now;
    publish_image(last_run_, false);
  }
}

// The `image` message of the running backend (DESIGN section 7, "Image"): the run's image,
// the sliding window, the centroid trace and the axial profiles; at the end of a run also a
// file next to the list-mode files (output.file.enabled).
void Worker::publish_image(std::uint64_t run_id, bool write_file) {
  PhaseScope phase(&phases_, Phase::histograms);
  const Settings& s = engine_->settings;
  const ImageSet* image = engine_->timed->image();
  if (!image || !image_window_) return;
  ImageSpan span;
  if (run_first_prompt_) {
    span.run_first_tick = *run_first_prompt_;
    span.run_end_tick = std::max(run_slice_end_, *run_first_prompt_);
  }
  image_window_->update(image->voxels(), span.run_first_tick, span.run_end_tick);
  span.window_first_tick = image_window_->window_first_tick();
  span.window_end_tick = span.run_end_tick;
  encode_image_file(*image, s, run_id, image_window_->window(), span, image_bytes_);
  MessageHeader m =
      one_record_header(MessageKind::image, image_message_id_++, run_id, image_bytes_.size());
  m.t_begin = span.run_first_tick;
  m.t_end = span.run_end_tick;
  publisher_.send(topic::image, m, image_bytes_.data(), image_bytes_.size());
  if (write_file && s.output.file.enabled) {
    const auto path = stamped_file(s.output.file.directory, fmt::format("run{}.pdim", run_id));
    try {
      write_image_file(path, image_bytes_);
      spdlog::info("image of run {}: {}", run_id, path.string());
    } catch (const ImageFileError& e) {
      spdlog::error("image of run {}: {}", run_id, e.what());
    }
  }
}

// The `histograms` message of the running backend (DESIGN section 7); at the end of a run
// also a file next to the list-mode files (output.file.enabled).
void Worker::publish_histograms(std::uint64_t run_id, bool write_file) {
  PhaseScope phase(&phases_, Phase::histograms);
  const Settings& s = engine_->settings;
  const HistogramSet* h = engine_->timed->histograms();
  if (!h) return;
  std::string meta = histogram_metadata_json(s, run_id, engine_->backend->name(), &counters_,
                                             &run_counter_base_);
  {
    // The run's dead time (DESIGN section 6): its live fraction corrects the histograms' rates.
    const double tick_s = s.scanner.tick_ps * 1e-12;
    const double dead_s = static_cast<double>(dead_->run_dead_ticks()) * tick_s;
    const double span_s =
        run_first_prompt_ && run_slice_end_ > *run_first_prompt_
            ? static_cast<double>(run_slice_end_ - *run_first_prompt_) * tick_s
            : 0.0;
    const double live = span_s > 0 ? std::clamp(1.0 - dead_s / span_s, 0.0, 1.0) : 1.0;
    if (!meta.empty() && meta.back() == '}') meta.pop_back();
    meta += fmt::format(",\"dead_s\":{:.9g},\"live_fraction\":{:.9g}}}", dead_s, live);
  }
  encode_histogram_file(*h, s, run_id, meta, histogram_bytes_,
                        run_first_prompt_ ? HistogramSpan{*run_first_prompt_, run_slice_end_}
                                          : HistogramSpan{});
  const MessageHeader m = one_record_header(MessageKind::histograms, histogram_message_id_++,
                                            run_id, histogram_bytes_.size());
  publisher_.send(topic::histograms, m, histogram_bytes_.data(), histogram_bytes_.size());
  const CrystalHealth health = judge_crystals(
      h->layout().geometry, [h](std::uint32_t c) { return h->at(Hist::crystal_singles, c); },
      s.alarms.hot_crystal_factor);
  alarms_.set_crystal_health(health.hot, health.dead);
  if (write_file && s.output.file.enabled) {
    // Beside the .plm that holds the run's first message, named after it; a run that
    // published nothing gets a name of its own.
    const auto path = run_file_stem_.empty()
                          ? stamped_file(s.output.file.directory, fmt::format("run{}.pdh", run_id))
                          : s.output.file.directory /
                                fmt::format("{}-run{}.pdh", run_file_stem_, run_id);
    try {
      write_histogram_file(path, histogram_bytes_);
      spdlog::info("histograms of run {}: {}", run_id, path.string());
      if (catalogue_) catalogue_->file_written(path, "pdh", run_id);
    } catch (const HistogramFileError& e) {
      spdlog::error("histograms of run {}: {}", run_id, e.what());
    }
  }
}

// The `acquisition` message (kind 7, its JSON document as the body): published, and written
// into the list-mode file, at each change; every later file starts with it while it is open.
void Worker::publish_acquisition() {
  acquisition_version_ = acquisitions_->version();
  acquisition_ = acquisitions_->current();
  const std::optional<Acquisition> latest = acquisitions_->latest();
  if (!latest) return;
  nlohmann::json doc = latest->to_json();
  doc["open"] = acquisition_.has_value();
  const std::string body = doc.dump();
  const MessageHeader m =
      one_record_header(MessageKind::acquisition, acquisition_message_id_++,
                        published_run_id(engine_->slicer->run_id()), body.size());
  publisher_.send(topic::acquisition, m, body.data(), body.size());
  if (file_) {
    if (acquisition_) {
      file_->set_preamble(m, body);
    } else {
      file_->write(m, body.data(), body.size());
      file_->set_preamble(m, std::string());
    }
  }
}

void Worker::publish_rates(Clock::time_point now) {
  PhaseScope phase(&phases_, Phase::rates);
  RatesSnapshot s;
  s.time_unix_ns = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count());
  // Read after the phases were last charged: they add up to no more than worker_s.
  const Clock::time_point at = Clock::now();
  s.uptime_s = std::chrono::duration<double>(at - started_).count();
  s.interval_s = std::chrono::duration<double>(now - last_rates_).count();
  s.backend = engine_->backend->name();
  s.run_id = published_run_id(engine_->slicer->run_id());
  s.bdm_transaxial = engine_->settings.scanner.bdm_transaxial;
  s.bdm_axial = engine_->settings.scanner.bdm_axial;
  s.temperature_degC = temperature_degC_.data();
  s.ring_chunks = ring_.chunk_count();
  s.ring_free = ring_.free_approx();
  s.ring_used_max = ring_.take_used_high();
  s.sealed_max = std::exchange(sealed_high_, 0);
  s.staging_max = std::exchange(staging_high_, staging_count_);
  s.pending_frames = engine_->slicer->pending_frames();
  s.latency = latency_.take();
  const RandomsSettings randoms = RandomsSettings::from(engine_->settings);
  s.randoms = &randoms;
  s.dead_time = &engine_->calibration.dead_time;
  const std::uint64_t horizon = engine_->slicer->horizon();
  const std::uint64_t from = rates_horizon_ ? rates_horizon_ : run_first_prompt_.value_or(0);
  if (from != 0 && horizon > from)
    s.acquisition_s =
        static_cast<double>(horizon - from) * engine_->settings.scanner.tick_ps * 1e-12;
  {
    const double tick_s = engine_->settings.scanner.tick_ps * 1e-12;
    const std::uint64_t dead_interval = dead_->take_interval_dead_ticks();
    s.shedding = dead_->shedding();
    if (run_first_prompt_) note_run_dead_time(horizon);
    s.dead_s_run = dead_s_run_;
    s.live_fraction_run = live_fraction_run_;
    if (s.acquisition_s > 0)
      s.live_fraction_interval =
          std::clamp(1.0 - static_cast<double>(dead_interval) * tick_s / s.acquisition_s, 0.0, 1.0);
    else if (s.shedding)
      s.live_fraction_interval = 0;
  }
  note_lagging();
  s.lagging = lagging_.data();
  if (run_first_prompt_) rates_horizon_ = horizon;
  last_rates_ = now;
  s.phases = &phases_;
  s.worker_s = phases_.wall_seconds(at);
  rusage usage{};
  if (getrusage(RUSAGE_THREAD, &usage) == 0) {
    auto seconds = [](const timeval& tv) {
      return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) * 1e-6;
    };
    s.worker_cpu_s = seconds(usage.ru_utime) + seconds(usage.ru_stime);
    s.worker_involuntary_switches = static_cast<std::uint64_t>(usage.ru_nivcsw);
  }
  s.alarms = &alarms_;
  s.acquisition = acquisition_ ? &*acquisition_ : nullptr;
  const std::string& json = rates_.build(s);
  phases_.take_interval_max();
  MessageHeader h;
  h.kind = 0;
  h.message_id = rates_message_id_++;
  h.run_id = s.run_id;
  publisher_.send(topic::rates, h, json.data(), json.size());
  notify_status(rates_.summary());
  if (print_rates_) fmt::print(stderr, "petdaqd: {}\n", rates_.summary());
  if (rates_observer_) rates_observer_(json);
  if (catalogue_) catalogue_->rates(json);
}

void Worker::note_run_dead_time(std::uint64_t until) {
  if (!run_first_prompt_ || until <= *run_first_prompt_) return;
  const std::uint64_t dead = dead_->run_dead_ticks();
  dead_s_run_ = static_cast<double>(dead) * engine_->settings.scanner.tick_ps * 1e-12;
  live_fraction_run_ = std::clamp(
      1.0 - static_cast<double>(dead) / static_cast<double>(until - *run_first_prompt_), 0.0, 1.0);
}

void Worker::publish_dead_intervals() {
  DeadInterval d;
  while (dead_->take_closed(d)) {
    MessageHeader h;
    h.kind = static_cast<std::uint16_t>(MessageKind::deadtime);
    h.message_id = deadtime_message_id_++;
    h.run_id = last_run_;
    h.t_begin = d.t_begin;
    h.t_end = d.t_end;
    h.record_count = 1;
    h.record_size = sizeof(DeadInterval);
    publisher_.send(topic::deadtime, h, &d, sizeof d);
    if (file_) file_->write(h, &d, sizeof d);
    g_dead_time_warning.warn(
        "overload: {:.3f} ms of acquisition time shed as dead time for every board ({} frames; "
        "the ring held more than input.shed_high_fraction of its chunks)",
        static_cast<double>(d.t_end - d.t_begin) * engine_->settings.scanner.tick_ps * 1e-9,
        d.frames_dropped);
  }
}

void Worker::note_lagging() {
  const Slicer& slicer = *engine_->slicer;
  const double max_lag_ms = engine_->settings.stream.max_lag_ms;
  for (std::uint32_t b = 0; b < lagging_.size(); ++b) {
    const std::uint8_t now = slicer.source_lagging(b) ? 1 : 0;
    if (now == lagging_[b]) continue;
    lagging_[b] = now;
    if (now)
      g_lagging_warning.warn(
          "BDM {} is lagging: its data time fell more than stream.max_lag_ms = {} ms behind the "
          "other boards' (or its wait filled stream.lag_stage_fraction of the stage); it no "
          "longer holds the horizon, and its frames behind it are dropped (stream.late, "
          "bdm.late[{}])",
          b, max_lag_ms, b);
    else
      spdlog::info("BDM {} caught up: it holds the horizon again ({} of its frames late so far)", b,
                   counters_.bdm_late(b));
  }
}

std::string Worker::phase_report() const {
  std::string out = fmt::format("{:.3f} s of wall time", phases_.wall_seconds());
  for (std::size_t i = 0; i < kPhaseCount; ++i) {
    const auto p = static_cast<Phase>(i);
    const PhaseTimer::Stats& st = phases_.stats(p);
    if (st.calls == 0) continue;
    fmt::format_to(std::back_inserter(out), ", {} {:.3f} s {} calls max {:.2f} ms", phase_name(p),
                   static_cast<double>(st.total_ns) * 1e-9, st.calls,
                   static_cast<double>(st.max_ns) * 1e-6);
  }
  return out;
}

std::string Worker::final_report() const {
  std::string out;
  for (std::size_t i = 0; i < kCounterCount; ++i) {
    const auto c = static_cast<Counter>(i);
    fmt::format_to(std::back_inserter(out), "{}{}={}", i ? " " : "", counter_name(c),
                   counters_.get(c));
  }
  return out;
}

}  // namespace petdaq::daemon

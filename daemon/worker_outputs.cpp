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
#include "daemon/loss_conversion.h"
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
RateLimitedWarning g_socket_loss_warning;
RateLimitedWarning g_lagging_warning;
}  // namespace

// The systemd watchdog and the `rates` document when due: from the loop, and after every
// published slice, so that working off a backlog (many slices inside one chunk's push)
// neither starves the watchdog nor silences the rates.
void Worker::keep_alive(Clock::time_point now, bool force_rates) {
  status_.watchdog.keep_alive(now);
  const auto interval = std::chrono::duration<double, std::milli>(
      engine_->settings.output.rates_interval_ms);
  if (force_rates || now - status_.rates.last >= interval) publish_rates(now);
}

void Worker::tick(Clock::time_point now, bool force_rates) {
  PhaseScope phase(&phases_, Phase::tick);
  if (status_.acquisition.changed()) publish_acquisition();
  keep_alive(now, force_rates);
  const auto histogram_interval = std::chrono::duration<double, std::milli>(
      engine_->settings.output.histograms.interval_ms);
  // The run of the last delivered slice: the run the backend's bins belong to.
  if (now - views_.histograms.last >= histogram_interval && publish_histograms(run_.last(), false))
    views_.histograms.last = now;
  if (out_.raw) {
    PhaseScope p(&phases_, Phase::raw_capture);
    out_.raw->flush_if_due(now);
  }
  const auto image_interval =
      std::chrono::duration<double, std::milli>(engine_->settings.output.image.interval_ms);
  if (now - views_.image.last >= image_interval && publish_image(run_.last(), false))
    views_.image.last = now;
}

// The `image` message of the running backend (DESIGN section 7, "Image"): the run's image,
// the sliding window, the centroid trace and the axial profiles; at the end of a run also a
// file next to the list-mode files (output.file.enabled).
bool Worker::publish_image(std::uint64_t run_id, bool run_end) {
  PhaseScope phase(&phases_, Phase::histograms);
  const Settings& s = engine_->settings;
  LiveImage& view = views_.image;
  if (!view.window) return true;
  const ImageSet* image = run_end ? engine_->timed->image() : engine_->timed->image_snapshot();
  if (!image) return false;
  ImageSpan span;
  if (const auto& first = run_.first_prompt()) {
    span.run_first_tick = *first;
    span.run_end_tick = std::max(run_.slice_end(), *first);
  }
  view.window->update(image->voxels(), span.run_first_tick, span.run_end_tick);
  span.window_first_tick = view.window->window_first_tick();
  span.window_end_tick = span.run_end_tick;
  encode_image_file(*image, s, run_id, view.window->window(), span, view.bytes);
  MessageHeader m =
      one_record_header(MessageKind::image, view.message_id++, run_id, view.bytes.size());
  m.t_begin = span.run_first_tick;
  m.t_end = span.run_end_tick;
  out_.publisher.send(topic::image, m, view.bytes.data(), view.bytes.size());
  if (run_end && s.output.file.enabled) {
    const auto path = stamped_file(s.output.file.directory, fmt::format("run{}.pdim", run_id));
    try {
      write_image_file(path, view.bytes);
      spdlog::info("image of run {}: {}", run_id, path.string());
    } catch (const ImageFileError& e) {
      spdlog::error("image of run {}: {}", run_id, e.what());
    }
  }
  return true;
}

// The `histograms` message of the running backend (DESIGN section 7); at the end of a run
// also a file next to the list-mode files (output.file.enabled).
bool Worker::publish_histograms(std::uint64_t run_id, bool run_end) {
  PhaseScope phase(&phases_, Phase::histograms);
  const Settings& s = engine_->settings;
  if (!s.output.histograms.enabled) return true;
  const HistogramSet* h =
      run_end ? engine_->timed->histograms() : engine_->timed->histograms_snapshot();
  if (!h) return false;
  LiveHistograms& view = views_.histograms;
  const std::optional<std::uint64_t>& first = run_.first_prompt();
  const std::uint64_t slice_end = run_.slice_end();
  std::string meta = histogram_metadata_json(s, run_id, engine_->backend->name(), &counters_,
                                             &run_.counter_base());
  {
    // The run's dead time (DESIGN section 6): its live fraction corrects the histograms' rates.
    const double tick_s = s.scanner.tick_ps * 1e-12;
    const double dead_s = static_cast<double>(overload_.dead->run_dead_ticks()) * tick_s;
    const double span_s =
        first && slice_end > *first ? static_cast<double>(slice_end - *first) * tick_s : 0.0;
    const double live = span_s > 0 ? std::clamp(1.0 - dead_s / span_s, 0.0, 1.0) : 1.0;
    if (!meta.empty() && meta.back() == '}') meta.pop_back();
    meta += fmt::format(",\"dead_s\":{:.9g},\"live_fraction\":{:.9g}}}", dead_s, live);
  }
  encode_histogram_file(*h, s, run_id, meta, view.bytes,
                        first ? HistogramSpan{*first, slice_end} : HistogramSpan{});
  const MessageHeader m =
      one_record_header(MessageKind::histograms, view.message_id++, run_id, view.bytes.size());
  out_.publisher.send(topic::histograms, m, view.bytes.data(), view.bytes.size());
  const CrystalHealth health = judge_crystals(
      h->layout().geometry, [h](std::uint32_t c) { return h->at(Hist::crystal_singles, c); },
      s.alarms.hot_crystal_factor);
  status_.alarms.set_crystal_health(health.hot, health.dead);
  if (run_end && s.output.file.enabled) {
    // Beside the .plm that holds the run's first message, named after it; a run that
    // published nothing gets a name of its own.
    const std::string& stem = run_.file_stem();
    const auto path = stem.empty()
                          ? stamped_file(s.output.file.directory, fmt::format("run{}.pdh", run_id))
                          : s.output.file.directory / fmt::format("{}-run{}.pdh", stem, run_id);
    try {
      write_histogram_file(path, view.bytes);
      spdlog::info("histograms of run {}: {}", run_id, path.string());
      if (out_.catalogue) out_.catalogue->file_written(path, "pdh", run_id);
    } catch (const HistogramFileError& e) {
      spdlog::error("histograms of run {}: {}", run_id, e.what());
    }
  }
  return true;
}

// The `acquisition` message (kind 7, its JSON document as the body): published, and written
// into the list-mode file, at each change; every later file starts with it while it is open.
void Worker::publish_acquisition() {
  AcquisitionState& a = status_.acquisition;
  a.version = a.control->version();
  a.open = a.control->current();
  const std::optional<Acquisition> latest = a.control->latest();
  if (!latest) return;
  nlohmann::json doc = latest->to_json();
  doc["open"] = a.open.has_value();
  const std::string body = doc.dump();
  const MessageHeader m =
      one_record_header(MessageKind::acquisition, a.message_id++,
                        published_run_id(engine_->slicer->run_id()), body.size());
  out_.publisher.send(topic::acquisition, m, body.data(), body.size());
  if (FileSink* const file = out_.file.get()) {
    if (a.open) {
      file->set_preamble(m, body);
    } else {
      file->write(m, body.data(), body.size());
      file->set_preamble(m, std::string());
    }
  }
}

void Worker::publish_rates(Clock::time_point now) {
  PhaseScope phase(&phases_, Phase::rates);
  RatesState& r = status_.rates;
  RatesSnapshot s;
  s.time_unix_ns = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count());
  // Read after the phases were last charged: they add up to no more than worker_s.
  const Clock::time_point at = Clock::now();
  s.uptime_s = std::chrono::duration<double>(at - r.started).count();
  s.interval_s = std::chrono::duration<double>(now - r.last).count();
  s.backend = engine_->backend->name();
  s.run_id = published_run_id(engine_->slicer->run_id());
  s.bdm_transaxial = engine_->settings.scanner.bdm_transaxial;
  s.bdm_axial = engine_->settings.scanner.bdm_axial;
  s.temperature_degC = r.temperature_degC.data();
  s.ring_chunks = ring_.chunk_count();
  s.ring_free = ring_.free_approx();
  s.ring_used_max = ring_.take_used_high();
  s.sealed_max = staging_.take_sealed_high();
  s.staging_max = staging_.take_staging_high();
  s.pending_frames = engine_->slicer->pending_frames();
  s.latency = latency_.take();
  const RandomsSettings randoms = RandomsSettings::from(engine_->settings);
  s.randoms = &randoms;
  s.dead_time = &engine_->calibration.dead_time;
  const std::uint64_t horizon = engine_->slicer->horizon();
  const std::uint64_t from = r.horizon ? r.horizon : run_.first_prompt().value_or(0);
  if (from != 0 && horizon > from)
    s.acquisition_s =
        static_cast<double>(horizon - from) * engine_->settings.scanner.tick_ps * 1e-12;
  {
    const double tick_s = engine_->settings.scanner.tick_ps * 1e-12;
    const std::uint64_t dead_interval = overload_.dead->take_interval_dead_ticks();
    s.shedding = overload_.dead->shedding();
    if (run_.first_prompt()) note_run_dead_time(horizon);
    s.dead_s_run = run_.dead_s();
    s.live_fraction_run = run_.live_fraction();
    if (s.acquisition_s > 0)
      s.live_fraction_interval =
          std::clamp(1.0 - static_cast<double>(dead_interval) * tick_s / s.acquisition_s, 0.0, 1.0);
    else if (s.shedding)
      s.live_fraction_interval = 0;
  }
  note_lagging();
  s.lagging = r.lagging.data();
  if (run_.first_prompt()) r.horizon = horizon;
  r.last = now;
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
  s.alarms = &status_.alarms;
  s.acquisition = status_.acquisition.open ? &*status_.acquisition.open : nullptr;
  const std::string& json = r.reporter.build(s);
  phases_.take_interval_max();
  MessageHeader h;
  h.kind = 0;
  h.message_id = r.message_id++;
  h.run_id = s.run_id;
  out_.publisher.send(topic::rates, h, json.data(), json.size());
  notify_status(r.reporter.summary());
  if (r.print) fmt::print(stderr, "petdaqd: {}\n", r.reporter.summary());
  if (r.observer) r.observer(json);
  if (out_.catalogue) out_.catalogue->rates(json);
}

void Worker::note_run_dead_time(std::uint64_t until) {
  run_.note_dead_time(until, overload_.dead->run_dead_ticks(), engine_->settings.scanner.tick_ps);
}

void Worker::note_loss(const Chunk::Loss& loss) {
  Slicer& slicer = *engine_->slicer;
  const LossConversion c =
      convert_loss(loss_stretch(loss.from, loss.to, engine_->max_disorder_ticks),
                   slicer.latest_time(), loss_budget_, slicer, *overload_.dead);
  if (c.fate == LossFate::unconverted) return counters_.add(Counter::stream_loss_unconverted);
  if (c.fate == LossFate::dead_already) return;
  g_socket_loss_warning.warn(
      "a receiving socket lost datagrams: {:.3f} ms of acquisition time made dead for every "
      "board (stream.loss_intervals; bdm.socket_kernel_drops and bdm.ring_full name the boards)",
      static_cast<double>(c.held.end - c.held.begin) * engine_->settings.scanner.tick_ps * 1e-9);
  publish_dead_intervals();
}

void Worker::publish_dead_intervals() {
  DeadInterval d;
  while (overload_.dead->take_closed(d)) {
    MessageHeader h;
    h.kind = static_cast<std::uint16_t>(MessageKind::deadtime);
    h.message_id = overload_.message_id++;
    h.run_id = run_.last();
    h.t_begin = d.t_begin;
    h.t_end = d.t_end;
    h.record_count = 1;
    h.record_size = sizeof(DeadInterval);
    out_.publisher.send(topic::deadtime, h, &d, sizeof d);
    if (out_.file) out_.file->write(h, &d, sizeof d);
    g_dead_time_warning.warn(
        "{:.3f} ms of acquisition time dead for every board ({} frames dropped before the "
        "slicer): an overload (the ring held more than input.shed_high_fraction of its chunks) "
        "or a receiving socket's losses (stream.loss_intervals)",
        static_cast<double>(d.t_end - d.t_begin) * engine_->settings.scanner.tick_ps * 1e-9,
        d.frames_dropped);
  }
}

void Worker::note_lagging() {
  const Slicer& slicer = *engine_->slicer;
  const double max_lag_ms = engine_->settings.stream.max_lag_ms;
  std::vector<std::uint8_t>& lagging = status_.rates.lagging;
  for (std::uint32_t b = 0; b < lagging.size(); ++b) {
    const std::uint8_t now = slicer.source_lagging(b) ? 1 : 0;
    if (now == lagging[b]) continue;
    lagging[b] = now;
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

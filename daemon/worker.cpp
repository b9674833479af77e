// The worker thread (docs/daemon.md): takes sealed ring chunks, drives the slicer and the
// backend, publishes results, reloads settings, times its phases. Over 400 lines because the
// loop, its phases and the reload that swaps the engine share the worker's state.
#include "daemon/worker.h"


#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "core/crystal_health.h"
#include "core/histograms.h"
#include "daemon/file_names.h"
#include "daemon/notify.h"
#include "daemon/rate_limited_log.h"
#include "daemon/timed_backend.h"
#include "engine/select_backend.h"
#include "proto/frame.h"

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

// ---- the engine: backend + slicer for one set of settings ----

struct Worker::Engine {
  Settings settings;
  Calibration calibration;
  std::unique_ptr<Backend> backend;
  // The backend as the slicer and the worker call it: its calls timed as worker phases.
  std::unique_ptr<TimedBackend> timed;
  std::unique_ptr<Slicer> slicer;
  std::string explanation;
  std::uint64_t max_future_ticks = 0;

  Engine(const Settings& s, Calibration c, BackendKind kind, ResultSink& sink, Counters& counters,
         PhaseTimer& phases, ResultMemory* memory)
      : settings(s), calibration(std::move(c)) {
    backend = make_backend(kind, settings, calibration, explanation);
    timed = std::make_unique<TimedBackend>(*backend, phases);
    timed->set_result_memory(memory);
    // Live slices at the backend's preferred size (the CPU backend's fit its caches); the
    // records do not depend on it.
    slicer = std::make_unique<Slicer>(settings, *timed, sink, counters,
                                      timed->preferred_slice_frames());
    max_future_ticks = petdaq::max_future_ticks(settings);
  }
};

Worker::Worker(const Settings& settings, Calibration calibration, BackendKind backend,
               HostRing& ring, Counters& counters, Publisher& publisher, bool print_rates,
               MessageArena* arena)
    : backend_kind_(backend),
      ring_(ring),
      counters_(counters),
      publisher_(publisher),
      print_rates_(print_rates),
      arena_(arena),
      rates_(counters),
      alarms_(settings.alarms),
      lagging_(counters.bdm_count(), 0),
      temperature_degC_(counters.bdm_count(), NAN),
      pending_(4 * std::size_t{ring.chunk_count()}),
      staging_(ring.chunk_count()) {
  engine_ = std::make_unique<Engine>(settings, std::move(calibration), backend_kind_, *this,
                                     counters_, phases_, arena_);
  publish_delayed_ = publishes_delayed(settings);
  publish_singles_ = settings.output.singles.enabled;
  file_singles_ = settings.output.file.enabled && settings.output.file.singles;
  dead_ = std::make_unique<DeadTime>(settings.input.shed_high_fraction,
                                     settings.input.shed_low_fraction, ring.chunk_count(),
                                     make_source_rule(settings), counters_);
  if (settings.output.file.enabled) file_ = std::make_unique<FileSink>(settings, counters_);
  if (settings.output.raw.enabled) raw_ = std::make_unique<RawSink>(settings.output.raw, counters_);
  watchdog_interval_ = watchdog_interval();
  if (settings.output.image.enabled)
    image_window_ = std::make_unique<ImageWindow>(settings, make_image_layout(settings));
}

Worker::~Worker() {
  if (thread_.joinable()) stop();
}

void Worker::set_catalogue(Catalogue* catalogue) {
  catalogue_ = catalogue;
  if (!catalogue) return;
  if (file_)
    file_->set_file_observer([catalogue](const std::filesystem::path& p, bool opened) {
      if (opened)
        catalogue->file_opened(p, "plm");
      else
        catalogue->file_closed(p);
    });
  if (raw_)
    raw_->set_file_observer([catalogue](const std::filesystem::path& p, bool opened) {
      if (opened)
        catalogue->file_opened(p, "frames");
      else
        catalogue->file_closed(p);
    });
}

const std::string& Worker::backend_explanation() const { return engine_->explanation; }

void Worker::start() {
  started_ = last_rates_ = last_poll_ = last_watchdog_ = last_histograms_ = last_image_ =
      Clock::now();
  phases_ = PhaseTimer(started_);
  thread_ = std::thread([this] {
    try {
      loop();
    } catch (const std::exception& e) {
      spdlog::critical("worker stopped: {}", e.what());
      failed_.store(true, std::memory_order_release);
      ::kill(::getpid(), SIGTERM);
    }
  });
}

void Worker::reload(const Settings& reread) {
  {
    std::lock_guard lock(reload_mutex_);
    reload_settings_ = reread;
  }
  reload_requested_.store(true, std::memory_order_release);
}

void Worker::stop() {
  stop_.store(true, std::memory_order_release);
  if (thread_.joinable()) thread_.join();
}

void Worker::loop() {
  const auto poll_every = std::chrono::milliseconds(2);
  PhaseTimer* const t = &phases_;
  for (;;) {
    // What no phase below covers is charged to `loop`.
    PhaseScope iteration(t, Phase::loop);
    const bool stopping = stop_.load(std::memory_order_acquire);
    if (reload_requested_.exchange(false, std::memory_order_acq_rel)) apply_reload();
    // Once stopping, the receivers are already stopped: take what is left, then finish.
    Chunk* c = nullptr;
    {
      PhaseScope p(t, Phase::wait_chunk);
      c = stopping ? ring_.try_sealed() : ring_.wait_sealed(std::chrono::milliseconds(1));
    }
    if (c) take_chunk(c);
    {
      PhaseScope p(t, Phase::release);
      release_staged(false);
    }
    const auto now = Clock::now();
    if (now - last_poll_ >= poll_every) {
      {
        PhaseScope p(t, Phase::slicer_poll);
        engine_->slicer->poll(now);
      }
      last_poll_ = now;
      PhaseScope p(t, Phase::latency);
      retire_latency(now, false);
    }
    if (stopping && !c) break;
    tick(now, false);
  }
  {
    PhaseScope p(t, Phase::finish);
    engine_->slicer->finish();
  }
  {
    PhaseScope p(t, Phase::release);
    release_staged(true);
  }
  retire_latency(Clock::now(), true);
  // An acquisition the daemon's stop closed: its end goes into the last file too.
  if (acquisitions_ && acquisitions_->version() != acquisition_version_) publish_acquisition();
  if (file_) file_->close();
  if (raw_) raw_->close();
  tick(Clock::now(), true);
}

void Worker::take_chunk(Chunk* c) {
  PhaseScope phase(&phases_, Phase::chunk_scan);
  sealed_high_ = std::max(sealed_high_, ring_.sealed_approx() + 1);
  Slicer& slicer = *engine_->slicer;
  const ChunkSummary& sum = c->summary;
  std::uint64_t last_time = 0;
  const std::uint32_t bdm_count = counters_.bdm_count();
  const RawFrame* frames = c->frames();
  for (std::uint32_t i = 0; i < sum.present_count; ++i) {
    const SourceSpan& s = sum.sources[sum.present[i]];
    // One temperature reading per source and chunk is plenty for a once-a-second display.
    const FrameFields f = decode_frame(frames[s.first_index].bytes);
    if (f.bdm < bdm_count) temperature_degC_[f.bdm] = frame_temperature_degC(f);
  }
  // Raw capture: the frames as received, before the slicer drops or holds any.
  if (raw_) {
    PhaseScope p(&phases_, Phase::raw_capture);
    raw_->write(c->frames(), c->frame_count);
  }
  // Overload: the frames in dead time go (DESIGN section 6); the chunk keeps the others.
  const bool was_shedding = dead_->shedding();
  {
    const std::size_t chunks = ring_.chunk_count();
    std::size_t in_use = chunks - std::min(chunks, ring_.free_approx());
    // A board that lags fills the ring too (its chunks wait for the horizon it holds): it is
    // declared lagging first, and only a backlog that remains is shed as dead time.
    if (!dead_->shedding() && in_use >= dead_->high_chunks() && slicer.release_lagging_source())
      in_use = 0;
    dead_->filter(*c, in_use, ring_.sealed_approx(), slicer.latest_time());
  }
  const bool dead_closed = was_shedding && !dead_->shedding();
  if (c->frame_count == 0) {
    ring_.release(c);
    if (dead_closed) {
      slicer.skip_dead(dead_->last_end());
      publish_dead_intervals();
    }
    return;
  }
  for (std::uint32_t i = 0; i < sum.present_count; ++i)
    last_time = std::max(last_time, sum.sources[sum.present[i]].max_time);
  std::uint64_t ticket = 0;
  {
    PhaseScope p(&phases_, Phase::slicer_push);
    ticket = slicer.push_block(c->frames(), c->frame_count, sum, Clock::now());
    // The dead interval is behind the sources now: the horizon goes on from its end.
    if (dead_closed) slicer.skip_dead(dead_->last_end());
  }
  if (dead_closed) publish_dead_intervals();
  if (pending_count_ == pending_.size()) {
    // More chunks in the slicer than entries (it is far behind): the newest joins the last
    // entry, whose older arrival time makes its sample an upper bound.
    Pending& last = pending_[pending_count_ - 1];
    last.last_time = std::max(last.last_time, last_time);
  } else {
    pending_[pending_count_++] = {c->first_rx, last_time};
  }
  // The chunk goes back to the ring once the backend's copy of it is done, not when its
  // slice resolves.
  if (ticket == 0 || slicer.staged(ticket)) {
    ring_.release(c);
  } else {
    staging_[(staging_head_ + staging_count_) % staging_.size()] = {c, ticket};
    ++staging_count_;
    staging_high_ = std::max(staging_high_, staging_count_);
  }
}

void Worker::release_staged(bool wait) {
  Slicer& slicer = *engine_->slicer;
  while (staging_count_ > 0) {
    const Staging& s = staging_[staging_head_];
    if (wait) {
      slicer.wait_staged(s.ticket);
    } else if (!slicer.staged(s.ticket)) {
      break;
    }
    ring_.release(s.chunk);
    staging_head_ = (staging_head_ + 1) % staging_.size();
    --staging_count_;
  }
}

void Worker::retire_latency(Clock::time_point now, bool all) {
  const std::uint64_t horizon = engine_->slicer->horizon();
  // A latest time past the time-jump limit is a wild timestamp the slicer drops: the horizon
  // will never pass it.
  const std::uint64_t wild = horizon + engine_->max_future_ticks;
  std::size_t kept = 0;
  for (std::size_t i = 0; i < pending_count_; ++i) {
    if (all || pending_[i].last_time < horizon || (horizon > 0 && pending_[i].last_time > wild))
      latency_.add(std::chrono::duration<double, std::milli>(now - pending_[i].rx).count());
    else
      pending_[kept++] = pending_[i];
  }
  pending_count_ = kept;
}

void Worker::on_slice(std::uint64_t slicer_run, const SliceResult& result) {
  PhaseScope phase(&phases_, Phase::publish);
  const std::uint64_t run = published_run_id(slicer_run);
  last_run_ = run;
  if (catalogue_ && run != catalogue_run_) {  // the run's first slice
    catalogue_run_ = run;
    catalogue_->run_started(run);
  }
  if (!run_first_prompt_ && result.prompt_count) run_first_prompt_ = result.prompts[0].time_a;
  // The run's .pdh is named after the .plm file its first message goes to.
  if (file_ && run_file_stem_.empty()) run_file_stem_ = file_->current_file().stem().string();
  run_slice_end_ = result.t_end;
  // Stamped with the publisher's id: the list-mode file holds the headers as published.
  const MessageHeader prompts = publisher_.stamp(builder_.build(MessageKind::prompts, run, result));
  const std::size_t prompt_bytes = result.prompt_count * sizeof(CoincRecord);
  publisher_.send(topic::prompts, prompts, result.prompts, prompt_bytes);
  if (file_) file_->write(prompts, result.prompts, prompt_bytes);
  if (publish_delayed_) {
    const MessageHeader delayed =
        publisher_.stamp(builder_.build(MessageKind::delayed, run, result));
    const std::size_t delayed_bytes = result.delayed_count * sizeof(CoincRecord);
    publisher_.send(topic::delayed, delayed, result.delayed, delayed_bytes);
    if (file_) file_->write(delayed, result.delayed, delayed_bytes);
  }
  if (result.singles) {  // output.singles.enabled and/or output.file.singles
    const MessageHeader singles = builder_.build(MessageKind::singles, run, result);
    const std::size_t single_bytes = result.single_count * sizeof(Single);
    if (publish_singles_) publisher_.send(topic::singles, singles, result.singles, single_bytes);
    if (file_ && file_singles_) file_->write(singles, result.singles, single_bytes);
  }
  // The pieces the backend wrote this slice into are the messages' now (or free).
  if (arena_)
    for (const void* lent : {static_cast<const void*>(result.prompts),
                             static_cast<const void*>(result.delayed),
                             static_cast<const void*>(result.singles)})
      if (lent && arena_->owns(lent)) arena_->let_go(lent);
  keep_alive(Clock::now(), false);
}

void Worker::on_run_end(std::uint64_t slicer_run, RunEnd reason) {
  PhaseScope phase(&phases_, Phase::run_end);
  if (reason == RunEnd::clock_reset)
    spdlog::info("run {} ended: the scanner's clock was reset (every live source sent frames "
                 "more than stream.max_future_ps before the horizon, and nothing else, for "
                 "stream.reset_confirm_ms = {} ms)",
                 published_run_id(slicer_run), engine_->settings.stream.reset_confirm_ms);
  else
    spdlog::info("run {} ended: {}", published_run_id(slicer_run),
                 stop_.load(std::memory_order_acquire) ? "petdaqd is stopping"
                                                       : "the configuration was reloaded");
  publish_histograms(published_run_id(slicer_run), true);
  note_run_dead_time(run_slice_end_);
  // The old run's dead intervals do not apply to the next run's clock.
  dead_->new_run();
  publish_dead_intervals();
  // The next run's histograms count from here; so do its counters in them.
  run_counter_base_ = counter_base(counters_);
  run_file_stem_.clear();
  publish_image(published_run_id(slicer_run), true);
  if (image_window_) image_window_->reset();
  if (catalogue_) {
    Catalogue::CounterValues values;
    for (std::size_t i = 0; i < kCounterCount; ++i)
      values[i] = counters_.get(static_cast<Counter>(i));
    catalogue_->run_ended(published_run_id(slicer_run),
                          reason == RunEnd::clock_reset                  ? "clock reset"
                          : stop_.load(std::memory_order_acquire) ? "daemon stopped"
                                                                  : "reload",
                          values);
  }
  run_first_prompt_.reset();
  run_slice_end_ = 0;
  rates_horizon_ = 0;
  // A clock reset: the chunks of the old run will never be passed by the new horizon.
  retire_latency(Clock::now(), true);
}

void Worker::apply_reload() {
  PhaseScope phase(&phases_, Phase::reload);
  std::optional<Settings> reread;
  {
    std::lock_guard lock(reload_mutex_);
    reread.swap(reload_settings_);
  }
  if (!reread) return;
  const ReloadPlan plan = plan_reload(engine_->settings, *reread);
  for (const std::string& s : plan.restart)
    spdlog::warn("reload: `{}` changed; it takes effect only after a restart", s);
  if (!plan.instant.empty()) {
    engine_->settings.alarms = plan.applied.alarms;
    alarms_.set_settings(plan.applied.alarms);
    spdlog::info("reload: alarm thresholds applied");
  }
  if (plan.live.empty()) {
    if (plan.instant.empty()) spdlog::info("reload: nothing that can change live changed");
    return;
  }
  // The slicer cannot change windows in the middle of a run: finish this run, then start a
  // new one (new run_id) with a new slicer and backend.
  {
    PhaseScope p(&phases_, Phase::finish);
    engine_->slicer->finish();
  }
  {
    PhaseScope p(&phases_, Phase::release);
    release_staged(true);  // the tickets are the old backend's
  }
  retire_latency(Clock::now(), true);
  dead_->new_run();
  publish_dead_intervals();
  const std::uint64_t next_run = last_run_ + 1;
  try {
    auto next = std::make_unique<Engine>(plan.applied, engine_->calibration, backend_kind_,
                                         *this, counters_, phases_, arena_);
    engine_.reset();
    engine_ = std::move(next);
    run_base_ = next_run;
    last_run_ = next_run;
    publish_delayed_ = publishes_delayed(plan.applied);
    counters_.add(Counter::stream_runs);
    spdlog::info("reload: applied {}; run {} starts ({})", fmt::join(plan.live, ", "), next_run,
                 engine_->explanation);
  } catch (const std::exception& e) {
    spdlog::error("reload: cannot rebuild the engine, keeping the running one: {}", e.what());
  }
}

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

// The worker thread (docs/daemon.md): takes sealed ring chunks, drives the slicer and the
// backend, hands results to the outputs (daemon/worker_outputs.cpp), reloads settings.
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

#include "backends/select_backend.h"
#include "core/crystal_health.h"
#include "core/histograms.h"
#include "core/stream_limits.h"
#include "daemon/file_names.h"
#include "daemon/notify.h"
#include "daemon/rate_limited_log.h"
#include "daemon/timed_backend.h"
#include "daemon/worker_engine.h"
#include "proto/frame.h"

namespace petdaq::daemon {


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
    if (next_engine_.valid()) {
      if (stopping || next_engine_.wait_for(std::chrono::seconds(0)) == std::future_status::ready)
        switch_engine();
    } else if (reload_requested_.exchange(false, std::memory_order_acq_rel)) {
      apply_reload();  // one reload at a time: a later request waits for this build
    }
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
  bool dropped = false;
  {
    const std::size_t chunks = ring_.chunk_count();
    std::size_t in_use = chunks - std::min(chunks, ring_.free_approx());
    // A board that lags fills the ring too: its chunks wait in the slicer for the horizon it
    // holds. Where the backlog is mostly such chunks, the board is declared lagging first;
    // where it is mostly chunks sealed and waiting for the worker, the worker is too slow
    // (an overload) and every board sheds dead time.
    const std::size_t waiting = ring_.sealed_approx();
    if (!dead_->shedding() && in_use >= dead_->high_chunks() && staging_count_ > waiting &&
        slicer.release_lagging_source())
      in_use = 0;
    dropped = dead_->filter(*c, in_use, waiting, slicer.latest_time(),
                            engine_->max_future_ticks);
  }
  const bool dead_closed = was_shedding && !dead_->shedding();
  if (c->frame_count == 0) {
    ring_.release(c);
    // The shed frames still move their boards' clocks on (after the kept ones are in).
    if (dropped) slicer.skip_dead(dead_->last_reached());
    if (dead_closed) publish_dead_intervals();
    return;
  }
  for (std::uint32_t i = 0; i < sum.present_count; ++i)
    last_time = std::max(last_time, sum.sources[sum.present[i]].max_time);
  std::uint64_t ticket = 0;
  {
    PhaseScope p(&phases_, Phase::slicer_push);
    ticket = slicer.push_block(c->frames(), c->frame_count, sum, Clock::now());
    if (dropped) slicer.skip_dead(dead_->last_reached());
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
  const auto wild = [&](std::uint64_t t) {
    return horizon > 0 && is_time_jump(t, horizon, engine_->max_future_ticks);
  };
  std::size_t kept = 0;
  for (std::size_t i = 0; i < pending_count_; ++i) {
    if (all || pending_[i].last_time < horizon || wild(pending_[i].last_time))
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
  // The slicer cannot change windows in the middle of a run: this run goes on while the next
  // engine (new slicer and backend) is built on its own thread, then ends, and a new run
  // (new run_id) starts on the new engine. Building takes a backend's allocations (up to a
  // few hundred milliseconds); intake never waits for it.
  next_live_ = plan.live;
  // The calibration tables (tens of MB) are copied there too: the running engine only reads
  // them, and it stays until the new one is in place.
  next_engine_ = std::async(std::launch::async,
                            [this, applied = plan.applied, calibration = &engine_->calibration] {
                              return std::make_unique<Engine>(applied, *calibration, backend_kind_,
                                                              *this, counters_, phases_, arena_);
                            });
}

void Worker::switch_engine() {
  PhaseScope phase(&phases_, Phase::reload);
  std::unique_ptr<Engine> next;
  try {
    next = next_engine_.get();
  } catch (const std::exception& e) {
    spdlog::error("reload: cannot build the new engine, keeping the running one: {}", e.what());
    return;
  }
  if (stop_.load(std::memory_order_acquire)) return;  // stopping: the running run ends as is
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
  // The old engine's buffers are freed off this thread too.
  if (retired_engine_.valid()) retired_engine_.wait();
  retired_engine_ = std::async(std::launch::async, [old = std::move(engine_)]() mutable { old.reset(); });
  engine_ = std::move(next);
  run_base_ = next_run;
  last_run_ = next_run;
  publish_delayed_ = publishes_delayed(engine_->settings);
  counters_.add(Counter::stream_runs);
  spdlog::info("reload: applied {}; run {} starts ({})", fmt::join(next_live_, ", "), next_run,
               engine_->explanation);
}


}  // namespace petdaq::daemon

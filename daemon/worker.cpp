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
#include "core/thread_placement.h"
#include "core/timed_backend.h"
#include "daemon/file_names.h"
#include "daemon/notify.h"
#include "daemon/rate_limited_log.h"
#include "daemon/worker_engine.h"
#include "proto/frame.h"

namespace petdaq::daemon {


Worker::Worker(const Settings& settings, Calibration calibration, BackendKind backend,
               HostRing& ring, Counters& counters, Publisher& publisher, bool print_rates,
               MessageArena* arena)
    : ring_(ring),
      counters_(counters),
      loss_budget_(settings.input.loss_dead_fraction, settings.scanner.tick_ps),
      staging_(ring.chunk_count()),
      latency_(4 * std::size_t{ring.chunk_count()}),
      out_(publisher, arena),
      status_(counters, settings.alarms, print_rates),
      reload_(backend) {
  engine_ = std::make_unique<Engine>(settings, std::move(calibration), reload_.backend_kind, *this,
                                     counters_, phases_, out_.arena);
  out_.publish_delayed = publishes_delayed(settings);
  out_.publish_singles = settings.output.singles.enabled;
  out_.file_singles = settings.output.file.enabled && settings.output.file.singles;
  overload_.dead = std::make_unique<DeadTime>(settings.input.shed_high_fraction,
                                              settings.input.shed_low_fraction, ring.chunk_count(),
                                              make_source_rule(settings), counters_);
  if (settings.output.file.enabled) out_.file = std::make_unique<FileSink>(settings, counters_);
  if (settings.output.raw.enabled)
    out_.raw = std::make_unique<RawSink>(settings.output.raw, counters_);
  if (settings.output.image.enabled)
    views_.image.window = std::make_unique<ImageWindow>(settings, make_image_layout(settings));
}

Worker::~Worker() {
  if (thread_.joinable()) stop();
}

void Worker::set_catalogue(Catalogue* catalogue) { out_.set_catalogue(catalogue); }

const std::string& Worker::backend_explanation() const { return engine_->explanation; }

void Worker::start(const std::vector<int>& cpus) {
  const Clock::time_point started = Clock::now();
  status_.rates.started = status_.rates.last = views_.histograms.last = views_.image.last = started;
  status_.watchdog.start(started);
  phases_ = PhaseTimer(started);
  thread_ = std::thread([this, started, cpus] {
    name_this_thread("petdaq-worker");
    confine_this_thread(cpus);
    try {
      loop(started);
    } catch (const std::exception& e) {
      spdlog::critical("worker stopped: {}", e.what());
      failed_.store(true, std::memory_order_release);
      ::kill(::getpid(), SIGTERM);
    }
  });
}

void Worker::reload(const Settings& reread) {
  reload_.request(reread);
}

void Worker::stop() {
  stop_.store(true, std::memory_order_release);
  if (thread_.joinable()) thread_.join();
}

void Worker::loop(Clock::time_point started) {
  const auto poll_every = std::chrono::milliseconds(2);
  Clock::time_point last_poll = started;
  PhaseTimer* const t = &phases_;
  for (;;) {
    // What no phase below covers is charged to `loop`.
    PhaseScope iteration(t, Phase::loop);
    const bool stopping = stop_.load(std::memory_order_acquire);
    if (reload_.next_engine.valid()) {
      if (stopping ||
          reload_.next_engine.wait_for(std::chrono::seconds(0)) == std::future_status::ready)
        switch_engine();
    } else if (reload_.requested.exchange(false, std::memory_order_acq_rel)) {
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
    if (now - last_poll >= poll_every) {
      {
        PhaseScope p(t, Phase::slicer_poll);
        engine_->slicer->poll(now);
      }
      last_poll = now;
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
  if (status_.acquisition.changed()) publish_acquisition();
  if (out_.file) out_.file->close();
  if (out_.raw) out_.raw->close();
  tick(Clock::now(), true);
}

void Worker::take_chunk(Chunk* c) {
  PhaseScope phase(&phases_, Phase::chunk_scan);
  staging_.note_sealed(ring_.sealed_approx() + 1);
  Slicer& slicer = *engine_->slicer;
  const ChunkSummary& sum = c->summary;
  std::uint64_t last_time = 0;
  const std::uint32_t bdm_count = counters_.bdm_count();
  const RawFrame* frames = c->frames();
  for (std::uint32_t i = 0; i < sum.present_count; ++i) {
    const SourceSpan& s = sum.sources[sum.present[i]];
    // One temperature reading per source and chunk is plenty for a once-a-second display.
    const FrameFields f = decode_frame(frames[s.first_index].bytes);
    if (f.bdm < bdm_count) status_.rates.temperature_degC[f.bdm] = frame_temperature_degC(f);
  }
  // Raw capture: the frames as received, before the slicer drops or holds any.
  if (out_.raw) {
    PhaseScope p(&phases_, Phase::raw_capture);
    out_.raw->write(c->frames(), c->frame_count);
  }
  // Overload: the frames in dead time go (DESIGN section 6); the chunk keeps the others.
  DeadTime& dead = *overload_.dead;
  const bool was_shedding = dead.shedding();
  bool dropped = false;
  // A receiver that is behind makes its boards late; they are not lagging (DESIGN section 6).
  for (std::uint32_t i = 0; i < sum.present_count; ++i)
    slicer.set_receiver_behind(sum.present[i], c->receiver_behind);
  // Datagrams the receiver lost before this chunk's: that time is dead for every board
  // (DESIGN section 6, "Losses at a socket"): the slicer drops the frames of it it holds,
  // the filter below those that come.
  for (std::uint32_t i = 0; i < c->loss_count; ++i) note_loss(c->losses[i]);
  {
    const std::size_t chunks = ring_.chunk_count();
    std::size_t in_use = chunks - std::min(chunks, ring_.free_approx());
    std::size_t waiting = ring_.sealed_approx();
    // The frames staged while a board whose receiver is behind holds the horizon are the
    // daemon's backlog too: they count as that share of the ring.
    const auto staged = static_cast<std::size_t>(slicer.receiver_wait_share() * static_cast<double>(chunks));
    in_use = std::max(in_use, staged);
    waiting = std::max(waiting, staged);
    // A board that lags fills the ring too (its chunks wait for the horizon it holds): it is
    // declared lagging first, and only a backlog that remains is shed as dead time. Once per
    // backlog: if the ring is still above the mark after one board was released, the backlog
    // is an overload and every board sheds (not board after board declared lagging). A
    // backlog of chunks waiting for the worker is an overload from the start.
    if (in_use <= dead.low_chunks()) overload_.lag_released = false;
    if (!dead.shedding() && in_use >= dead.high_chunks() && !overload_.lag_released &&
        backlog_waits_for_horizon(in_use, waiting) && slicer.release_lagging_source()) {
      overload_.lag_released = true;
      in_use = 0;
    }
    dropped = dead.filter(*c, in_use, waiting, slicer.latest_time(), engine_->max_future_ticks);
  }
  const bool dead_closed = was_shedding && !dead.shedding();
  if (c->frame_count == 0) {
    ring_.release(c);
    // The shed frames still move their boards' clocks on (after the kept ones are in).
    if (dropped) slicer.skip_dead(dead.last_reached());
    if (dead_closed) publish_dead_intervals();
    return;
  }
  for (std::uint32_t i = 0; i < sum.present_count; ++i)
    last_time = std::max(last_time, sum.sources[sum.present[i]].max_time);
  std::uint64_t ticket = 0;
  {
    PhaseScope p(&phases_, Phase::slicer_push);
    ticket = slicer.push_block(c->frames(), c->frame_count, sum, Clock::now());
    if (dropped) slicer.skip_dead(dead.last_reached());
  }
  if (dead_closed) publish_dead_intervals();
  latency_.pushed(c->first_rx, last_time);
  // The chunk goes back to the ring once the backend's copy of it is done, not when its
  // slice resolves.
  if (ticket == 0 || slicer.staged(ticket)) {
    ring_.release(c);
  } else {
    staging_.stage(c, ticket);
  }
}

void Worker::release_staged(bool wait) {
  Slicer& slicer = *engine_->slicer;
  staging_.release(
      [&](std::uint64_t ticket) {
        if (!wait) return slicer.staged(ticket);
        slicer.wait_staged(ticket);
        return true;
      },
      [&](Chunk* c) { ring_.release(c); });
}

void Worker::retire_latency(Clock::time_point now, bool all) {
  latency_.retire(now, engine_->slicer->horizon(), engine_->max_future_ticks, all);
}

void Worker::on_slice(std::uint64_t slicer_run, const SliceResult& result) {
  PhaseScope phase(&phases_, Phase::publish);
  const std::uint64_t run = published_run_id(slicer_run);
  run_.slice(run, result);
  out_.note_run(run);
  // The run's .pdh is named after the .plm file its first message goes to.
  run_.note_file(out_.file.get());
  Publisher& publisher = out_.publisher;
  FileSink* const file = out_.file.get();
  // Stamped with the publisher's id: the list-mode file holds the headers as published.
  const MessageHeader prompts =
      publisher.stamp(out_.builder.build(MessageKind::prompts, run, result));
  const std::size_t prompt_bytes = result.prompt_count * sizeof(CoincRecord);
  publisher.send(topic::prompts, prompts, result.prompts, prompt_bytes);
  if (file) file->write(prompts, result.prompts, prompt_bytes);
  if (out_.publish_delayed) {
    const MessageHeader delayed =
        publisher.stamp(out_.builder.build(MessageKind::delayed, run, result));
    const std::size_t delayed_bytes = result.delayed_count * sizeof(CoincRecord);
    publisher.send(topic::delayed, delayed, result.delayed, delayed_bytes);
    if (file) file->write(delayed, result.delayed, delayed_bytes);
  }
  if (result.singles) {  // output.singles.enabled and/or output.file.singles
    const MessageHeader singles = out_.builder.build(MessageKind::singles, run, result);
    const std::size_t single_bytes = result.single_count * sizeof(Single);
    if (out_.publish_singles) publisher.send(topic::singles, singles, result.singles, single_bytes);
    if (file && out_.file_singles) file->write(singles, result.singles, single_bytes);
  }
  // The pieces the backend wrote this slice into are the messages' now (or free).
  if (MessageArena* const arena = out_.arena) arena->let_go_lent(result);
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
  note_run_dead_time(run_.slice_end());
  // The old run's dead intervals do not apply to the next run's clock.
  overload_.dead->new_run();
  publish_dead_intervals();
  // The next run's histograms count from here; so do its counters in them.
  run_.restart_outputs(counter_base(counters_));
  publish_image(published_run_id(slicer_run), true);
  if (views_.image.window) views_.image.window->reset();
  if (Catalogue* const catalogue = out_.catalogue) {
    Catalogue::CounterValues values;
    for (std::size_t i = 0; i < kCounterCount; ++i)
      values[i] = counters_.get(static_cast<Counter>(i));
    catalogue->run_ended(published_run_id(slicer_run),
                         reason == RunEnd::clock_reset           ? "clock reset"
                         : stop_.load(std::memory_order_acquire) ? "daemon stopped"
                                                                 : "reload",
                         values);
  }
  run_.end_span();
  status_.rates.horizon = 0;
  // A clock reset: the chunks of the old run will never be passed by the new horizon.
  retire_latency(Clock::now(), true);
}

void Worker::apply_reload() {
  PhaseScope phase(&phases_, Phase::reload);
  const std::optional<Settings> reread = reload_.take();
  if (!reread) return;
  const ReloadPlan plan = plan_reload(engine_->settings, *reread);
  for (const std::string& s : plan.restart)
    spdlog::warn("reload: `{}` changed; it takes effect only after a restart", s);
  if (!plan.instant.empty()) {
    engine_->settings.alarms = plan.applied.alarms;
    status_.alarms.set_settings(plan.applied.alarms);
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
  reload_.next_live = plan.live;
  // The calibration tables (tens of MB) are copied there too: the running engine only reads
  // them, and it stays until the new one is in place.
  reload_.next_engine =
      std::async(std::launch::async,
                 [this, applied = plan.applied, calibration = &engine_->calibration] {
                   return std::make_unique<Engine>(applied, *calibration, reload_.backend_kind,
                                                   *this, counters_, phases_, out_.arena);
                 });
}

void Worker::switch_engine() {
  PhaseScope phase(&phases_, Phase::reload);
  std::unique_ptr<Engine> next;
  try {
    next = reload_.next_engine.get();
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
  overload_.dead->new_run();
  publish_dead_intervals();
  // The old engine's buffers are freed off this thread too.
  if (reload_.retired_engine.valid()) reload_.retired_engine.wait();
  reload_.retired_engine =
      std::async(std::launch::async, [old = std::move(engine_)]() mutable { old.reset(); });
  engine_ = std::move(next);
  const std::uint64_t next_run = run_.next_engine();
  out_.publish_delayed = publishes_delayed(engine_->settings);
  counters_.add(Counter::stream_runs);
  spdlog::info("reload: applied {}; run {} starts ({})", fmt::join(reload_.next_live, ", "),
               next_run, engine_->explanation);
}


}  // namespace petdaq::daemon

// A backend as the slicer sees it on petdaqd's worker thread or petdaq-offline's main
// thread: every call forwarded to the real backend, the ones that may take time marked as
// that thread's phases (core/phase_timer.h). The real backend gets the same timer for the
// host waits inside its calls.
#pragma once

#include "core/backend.h"
#include "core/phase_timer.h"

namespace petdaq {

class TimedBackend final : public Backend {
 public:
  TimedBackend(Backend& inner, PhaseTimer& timer) : inner_(inner), timer_(timer) {
    inner_.set_phase_timer(&timer_);
  }
  ~TimedBackend() override { inner_.set_phase_timer(nullptr); }
  TimedBackend(const TimedBackend&) = delete;
  TimedBackend& operator=(const TimedBackend&) = delete;

  const char* name() const override { return inner_.name(); }
  std::size_t max_slice_frames() const override { return inner_.max_slice_frames(); }
  std::size_t max_staged_frames() const override { return inner_.max_staged_frames(); }
  std::size_t max_in_flight() const override { return inner_.max_in_flight(); }
  bool works_in_collect() const override { return inner_.works_in_collect(); }
  std::size_t preferred_slice_frames() const override { return inner_.preferred_slice_frames(); }
  std::size_t in_flight() const override { return inner_.in_flight(); }
  unsigned threads() const override { return inner_.threads(); }
  void defer_staging(bool on) override { inner_.defer_staging(on); }
  std::unique_ptr<HostAllocator> make_stage_allocator() const override {
    return inner_.make_stage_allocator();
  }

  std::uint64_t stage(const RawFrame* frames, std::size_t count) override {
    PhaseScope p(&timer_, Phase::backend_stage);
    return inner_.stage(frames, count);
  }
  bool staged(std::uint64_t ticket) override {
    PhaseScope p(&timer_, Phase::staged_poll);
    return inner_.staged(ticket);
  }
  void wait_staged(std::uint64_t ticket) override {
    PhaseScope p(&timer_, Phase::stage_wait);
    inner_.wait_staged(ticket);
  }
  void submit(const SliceRequest& request) override {
    PhaseScope p(&timer_, Phase::submit);
    inner_.submit(request);
  }
  const SliceResult& collect() override {
    PhaseScope p(&timer_, Phase::collect);
    return inner_.collect();
  }
  const ImageSet* image() override {
    PhaseScope p(&timer_, Phase::histograms_copy);
    return inner_.image();
  }
  const HistogramSet* histograms() override {
    PhaseScope p(&timer_, Phase::histograms_copy);
    return inner_.histograms();
  }
  const ImageSet* image_snapshot() override {
    PhaseScope p(&timer_, Phase::histograms_copy);
    return inner_.image_snapshot();
  }
  const HistogramSet* histograms_snapshot() override {
    PhaseScope p(&timer_, Phase::histograms_copy);
    return inner_.histograms_snapshot();
  }
  void set_result_memory(ResultMemory* memory) override { inner_.set_result_memory(memory); }

 private:
  Backend& inner_;
  PhaseTimer& timer_;
};

}  // namespace petdaq

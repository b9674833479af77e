// A backend whose results come back slices later, as a device backend's do: the CPU backend
// works each slice at submit(), and collect() hands the results out in order, up to `depth`
// slices after their submit. The slicer then sees a pipeline (works_in_collect() is false),
// with the CPU backend's records.
#pragma once

#include <algorithm>
#include <cstddef>
#include <deque>
#include <stdexcept>
#include <vector>

#include "core/backend.h"
#include "core/cpu_backend.h"
#include "core/geometry.h"

namespace petdaq::test {

class LaterBackend final : public Backend {
 public:
  LaterBackend(const Settings& s, const Calibration& cal, std::size_t depth)
      : inner_(s, cal), depth_(depth), bdms_(Geometry::from(s.scanner).bdm_count()) {}

  const char* name() const override { return "later"; }
  std::size_t max_slice_frames() const override { return inner_.max_slice_frames(); }
  std::size_t max_staged_frames() const override { return inner_.max_staged_frames(); }
  std::size_t max_in_flight() const override { return depth_; }
  std::uint64_t stage(const RawFrame* frames, std::size_t count) override {
    return inner_.stage(frames, count);
  }
  bool staged(std::uint64_t ticket) override { return inner_.staged(ticket); }
  void wait_staged(std::uint64_t ticket) override { inner_.wait_staged(ticket); }
  void submit(const SliceRequest& request) override {
    if (queue_.size() >= depth_) throw std::logic_error("LaterBackend: submit beyond its depth");
    inner_.submit(request);
    queue_.push_back(Held::of(inner_.collect(), bdms_));
    most_in_flight_ = std::max(most_in_flight_, queue_.size());
  }
  const SliceResult& collect() override {
    if (queue_.empty()) throw std::logic_error("LaterBackend: no slice submitted");
    current_ = std::move(queue_.front());
    queue_.pop_front();
    return current_.point();
  }
  std::size_t in_flight() const override { return queue_.size(); }

  // The most slices that were in flight at once.
  std::size_t most_in_flight() const { return most_in_flight_; }

 private:
  // A result with copies of what its pointers point to.
  struct Held {
    SliceResult result;
    std::vector<CoincRecord> prompts, delayed;
    std::vector<std::uint64_t> bdm_singles, bdm_energy_rejected;
    std::vector<Single> singles;

    static Held of(const SliceResult& r, std::size_t bdms) {
      Held h;
      h.result = r;
      h.prompts.assign(r.prompts, r.prompts + r.prompt_count);
      h.delayed.assign(r.delayed, r.delayed + r.delayed_count);
      if (r.singles) h.singles.assign(r.singles, r.singles + r.single_count);
      h.bdm_singles.assign(r.bdm_singles, r.bdm_singles + (r.bdm_singles ? bdms : 0));
      h.bdm_energy_rejected.assign(r.bdm_energy_rejected,
                                   r.bdm_energy_rejected + (r.bdm_energy_rejected ? bdms : 0));
      return h;
    }
    const SliceResult& point() {
      result.prompts = prompts.data();
      result.delayed = delayed.data();
      result.singles = result.singles ? singles.data() : nullptr;
      result.bdm_singles = result.bdm_singles ? bdm_singles.data() : nullptr;
      result.bdm_energy_rejected = result.bdm_energy_rejected ? bdm_energy_rejected.data() : nullptr;
      return result;
    }
  };

  CpuBackend inner_;
  std::size_t depth_;
  std::size_t bdms_;
  std::deque<Held> queue_;
  Held current_;
  std::size_t most_in_flight_ = 0;
};

}  // namespace petdaq::test

// The CPU reference backend: staged frames wait in a store; a slice takes those below its
// bound, and convert, order and coincidence run on the calling thread, with the carry-over
// kept between slices. Every buffer is sized at construction.
#pragma once

#include <memory>

#include "core/backend.h"

namespace petdaq {

struct Settings;
struct Calibration;

class CpuBackend final : public Backend {
 public:
  CpuBackend(const Settings& settings, const Calibration& calibration);
  ~CpuBackend() override;

  const char* name() const override { return "cpu"; }
  std::size_t max_slice_frames() const override;
  std::size_t max_staged_frames() const override;
  std::size_t max_in_flight() const override { return 1; }
  std::uint64_t stage(const RawFrame* frames, std::size_t count) override;
  bool staged(std::uint64_t) override { return true; }  // stage() copies at once
  void wait_staged(std::uint64_t) override {}
  void submit(const SliceRequest& request) override;
  const SliceResult& collect() override;
  std::size_t in_flight() const override;
  const HistogramSet* histograms() override;

  // Cumulative time spent in each stage, for benchmarks (a few clock reads per slice).
  struct StageSeconds {
    double convert = 0;
    double sort = 0;  // sort of the new singles and merge with the carry-over
    double coincidence = 0;
  };
  const StageSeconds& stage_seconds() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace petdaq

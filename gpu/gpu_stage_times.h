// Per-stage device times of the GPU backend's slices, for the benchmark and the rates
// report. Measured with CUDA events that are recorded on every slice anyway (no extra
// synchronisation).
#pragma once

#include "core/backend.h"

namespace petdaq {

struct GpuStageTimes {
  float copy_in_ms = 0;      // raw frames, pinned host -> device
  float convert_ms = 0;      // fused convert + count + compaction
  float sort_ms = 0;         // carry-over placement and radix sort
  float coincidence_ms = 0;  // windows, scans, record fill, summary, carry-over kept
  float slice_ms = 0;        // from the start of copy-in to the end of the slice's last kernel
  float copy_out_ms = 0;     // records, device -> pinned host (queued by collect())
};

// The stage times of the slice collected last. False when `backend` is not the GPU backend.
bool gpu_last_stage_times(const Backend& backend, GpuStageTimes& out);

}  // namespace petdaq

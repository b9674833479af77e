// The GPU backend's state, in parts that each own theirs (gpu/gpu_backend_impl.h holds one of
// each): its sizes, its calibration tables on the device, the stage's tickets, buffers and
// partition, its streams, the slices in flight, what collect() gives back and the live
// outputs. Every part's buffers and events are taken when it is built or at the backend's
// start-up and freed with it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/backend.h"
#include "core/convert.h"
#include "core/frame_source.h"
#include "core/histograms.h"
#include "core/image.h"
#include "gpu/cuda_support.h"
#include "gpu/gpu_stage_times.h"

namespace petdaq::gpu_impl {

// Events that mark staged copies; a ticket older than the ring is known complete through
// a later one (one copy stream).
constexpr std::uint64_t kStageEvents = 256;

// The sizes every buffer is taken at (from stream.*, the calibration and the geometry).
struct Capacities {
  std::size_t max_slice_frames = 0;
  std::size_t max_staged = 0;
  std::size_t max_carry = 0;
  std::uint64_t sort_capacity = 0;  // carry-over + new singles
  std::uint64_t tile_capacity = 0;
  std::uint64_t prompt_capacity = 0;
  std::uint64_t delayed_capacity = 0;
  std::uint32_t bdm_count = 0;
};

// What key_bits_for() needs beside the workspace's key layout.
struct KeyWidth {
  std::uint64_t time_offset_range = 0;  // largest minus smallest calibration time offset
  // The bound the last slice of this run took (kNoBound: none yet), below which no frame
  // staged since comes (core/backend.h): the span of the next slice's new singles.
  std::uint64_t previous_bound = kNoBound;
};

// The convert tables with their device pointers, and the device copies they point at.
struct DeviceCalibration {
  ConvertTables tables;  // device pointers
  cuda::device_unique_ptr<std::uint8_t> d_lut;
  cuda::device_unique_ptr<float> d_energy;
  cuda::device_unique_ptr<std::int32_t> d_offsets;
};

// stage()'s tickets: an event per staged copy, in a ring; the last ticket given and the
// last one known complete.
struct StageTickets {
  cuda::Event events[kStageEvents];
  std::uint64_t issued = 0;
  std::uint64_t staged_through = 0;
};

// The partition: CUB's temporary storage, the slice whose partition count is not yet on the
// host, and count_taken()'s count.
struct Partition {
  // The last submitted slice's count is not yet on the host (pending); its index
  // (next_submit numbering).
  bool pending = false;
  std::uint64_t pending_slice = 0;
  cuda::device_unique_ptr<std::uint8_t> d_temp;
  std::size_t temp_bytes = 0;
  // count_taken_kernel's result: counted in device memory (atomics to mapped host memory
  // would cross the bus once per block), then copied to pinned host memory; `counted`: it
  // is on the host.
  cuda::device_unique_ptr<unsigned long long> d_taken;
  cuda::pinned_unique_ptr<unsigned long long> h_taken;
  cuda::Event counted{false};
};

// The stage, in two parts, so that stage() never needs a count only the device has:
// * the frames earlier slices left (kept), at [0, kept_count) of kept[kept_current]; each
//   partition writes the frames it leaves to the other kept buffer;
// * the frames staged since the last submit (arrivals), at [0, arrivals_count) of
//   arrivals[arrivals_current], where stage() copies them; the two arrival buffers
//   alternate from submit to submit, so that a slice's copies never wait for the partition
//   of the slice before.
// A partition reads kept + arrivals in that order (the frames' arrival order). Until the
// last partition's count is on the host (Partition::pending), kept_count is that
// partition's input size: an upper bound.
struct StageBuffers {
  cuda::device_unique_ptr<RawFrame> kept[2];
  cuda::device_unique_ptr<RawFrame> arrivals[2];
  int kept_current = 0;
  int arrivals_current = 0;
  std::size_t kept_count = 0;
  std::size_t arrivals_count = 0;
  // arrivals_read[i]: the last partition that read arrivals[i] has run (the copies that
  // refill it wait for it).
  cuda::Event arrivals_read[2] = {cuda::Event{false}, cuda::Event{false}};
};

struct Streams {
  cuda::Stream copy, compute, out;
  // The partition (and, on the backlog path, the counts the worker thread waits on) go
  // before the slices' kernels.
  cuda::Stream partition{cuda::Stream::HighPriority{}};
};

// What collect() returns and the memory it copies records into when the caller lends it.
struct Collected {
  ResultMemory* memory = nullptr;
  SliceResult result;
  GpuStageTimes stage_times;
};

// A copy of device bins to their host set, queued without waiting (histograms_snapshot(),
// image_snapshot()): `pending` until `copied` has passed. The host bins are page-locked
// (declared after the set they lock, so unlocked before it is freed).
struct SnapshotCopy {
  cuda::HostRegistration locked;
  cuda::Event copied{false};
  bool pending = false;
};

// The live outputs beside the records.
struct LiveOutputs {
  // Histograms (output.histograms.enabled): device bins, copied to h_histograms on request.
  HistogramLayout histogram_layout;
  cuda::device_unique_ptr<std::uint8_t> d_histograms;
  std::unique_ptr<HistogramSet> h_histograms;
  SnapshotCopy histograms_copy;
  // Image (output.image.enabled): device bins and crystal table, copied to h_image on
  // request; image_layout points at the device table.
  ImageLayout image_layout;
  cuda::device_unique_ptr<std::uint8_t> d_image;
  cuda::device_unique_ptr<std::int32_t> d_crystal_um;
  std::unique_ptr<ImageSet> h_image;
  SnapshotCopy image_copy;
  bool singles = false;  // the `singles` topic (output.wants_singles())
};

}  // namespace petdaq::gpu_impl

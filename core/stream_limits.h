// The stream's limits (DESIGN section 6), each written once for the slicer, both backends,
// the daemon and the tools: the time-jump window around the horizon, the share of a slice
// new frames may fill, the frames a backend stages, a slice's record buffers, and the
// carry-over's limit. Host and
// device alike (the GPU backend compiles the carry rule).
#pragma once

#include <cstdint>

#include "proto/host_device.h"

namespace petdaq {

// Unsigned arithmetic that stops at the ends instead of wrapping.
PETDAQ_HD std::uint64_t sat_add(std::uint64_t a, std::uint64_t b) {
  return a > ~std::uint64_t{0} - b ? ~std::uint64_t{0} : a + b;
}
PETDAQ_HD std::uint64_t sat_sub(std::uint64_t a, std::uint64_t b) { return a > b ? a - b : 0; }

// The time-jump rule: a frame more than stream.max_future_ps (in ticks) after the horizon is a
// time jump, one more than that before it jumped far backwards (a clock reset, or late).
PETDAQ_HD std::uint64_t time_jump_limit(std::uint64_t horizon, std::uint64_t max_future_ticks) {
  return sat_add(horizon, max_future_ticks);
}
PETDAQ_HD std::uint64_t far_back_limit(std::uint64_t horizon, std::uint64_t max_future_ticks) {
  return sat_sub(horizon, max_future_ticks);
}
PETDAQ_HD bool is_time_jump(std::uint64_t key, std::uint64_t horizon,
                            std::uint64_t max_future_ticks) {
  return key > time_jump_limit(horizon, max_future_ticks);
}
PETDAQ_HD bool is_far_back(std::uint64_t key, std::uint64_t horizon,
                           std::uint64_t max_future_ticks) {
  return key < far_back_limit(horizon, max_future_ticks);
}

// New frames one slice takes between two cuts: half of the backend's max_slice_frames, so
// that the other half is room for the frames earlier cuts left staged and a slice rarely
// needs the backend's split.
PETDAQ_HD std::uint64_t slice_new_frames(std::uint64_t max_slice_frames) {
  return max_slice_frames / 2;
}

// Frames a backend holds staged: stream.max_pending_frames, and never less than one slice.
PETDAQ_HD std::uint64_t staged_frames_limit(std::uint64_t max_pending_frames,
                                            std::uint64_t max_slice_frames) {
  return max_pending_frames > max_slice_frames ? max_pending_frames : max_slice_frames;
}

// Records of each kind one slice's buffer holds: stream.max_records_per_single (at least one)
// for each single the slice may order, its new frames and its carry-over.
PETDAQ_HD std::uint64_t slice_record_capacity(std::uint64_t singles_capacity,
                                              std::uint64_t max_records_per_single) {
  return singles_capacity * (max_records_per_single > 0 ? max_records_per_single : 1);
}

// Carry overflow (core/backend.h): a non-final slice whose carry-over, the singles from
// `carry_start` of `n`, would exceed stream.max_carry_singles resolves everything instead.
PETDAQ_HD bool carry_overflows(std::uint64_t n, std::uint64_t carry_start,
                               std::uint64_t max_carry) {
  return n - (carry_start < n ? carry_start : n) > max_carry;
}

}  // namespace petdaq

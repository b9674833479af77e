// The source of a frame and which slice it belongs to (DESIGN section 6): one definition
// for the receivers (chunk summaries), the slicer, and both backends' partition of their
// staged frames by a slice's time bound.
#pragma once

#include <cstdint>
#include <limits>

#include "proto/host_device.h"
#include "proto/frame.h"

namespace petdaq {

// Are a frame's head and tail markers the configured ones (always, when they are not
// checked)? The first test of both the source rule below and convert_frame().
PETDAQ_HD bool markers_ok(const std::uint8_t* frame, bool check, std::uint8_t head,
                          std::uint8_t tail) {
  return !check || ((frame[frame_offset::head_du] >> 4) == head &&
                    (frame[frame_offset::temp_frac_tail] & 0x0F) == tail);
}

// A frame's source is its BDM byte, when its markers (if checked) and BDM are good. A frame
// with no source never moves a horizon; the backend counts it as bad in the next slice.
struct SourceRule {
  bool check_markers = true;
  std::uint8_t head_marker = 0xA;
  std::uint8_t tail_marker = 0x5;
  std::uint32_t bdm_count = 0;

  // The source of a frame, or -1 when it cannot be attributed to one.
  PETDAQ_HD int source_of(const std::uint8_t* frame) const {
    if (!markers_ok(frame, check_markers, head_marker, tail_marker)) return -1;
    const std::uint8_t bdm = frame[frame_offset::bdm];
    return bdm < bdm_count ? bdm : -1;
  }
};

inline constexpr std::uint64_t kNoBound = std::numeric_limits<std::uint64_t>::max();

// Does a slice with raw-time bound `bound` take this staged frame? Frames without a source
// always go to the next slice; the others when their raw time is below the bound (all of
// them under kNoBound, the end of a run).
PETDAQ_HD bool slice_takes(const std::uint8_t* frame, const SourceRule& rule,
                           std::uint64_t bound) {
  return bound == kNoBound || rule.source_of(frame) < 0 || frame_time(frame) < bound;
}

// The corrected-time horizon that belongs to a raw-time bound: every frame at or after the
// bound has a corrected time at or after it (offsets from the calibration).
PETDAQ_HD std::uint64_t corrected_horizon(std::uint64_t raw_bound, std::int64_t min_time_offset) {
  if (raw_bound == kNoBound) return kNoBound;
  if (min_time_offset < 0) {
    const auto o = static_cast<std::uint64_t>(-min_time_offset);
    return raw_bound > o ? raw_bound - o : 0;
  }
  const auto o = static_cast<std::uint64_t>(min_time_offset);
  return raw_bound > kNoBound - o ? kNoBound : raw_bound + o;
}

}  // namespace petdaq

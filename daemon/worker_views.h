// The worker's views room: the live histograms (output.histograms) and the live image
// (output.image), published every interval and written at the end of each run. Each reports
// the memory it holds besides the backend's own set (the start-up memory check).
#pragma once

#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/histograms.h"
#include "core/image.h"
#include "core/settings.h"

namespace petdaq::daemon {

// The `histograms` message: its reused body and ids, when it was last published.
struct LiveHistograms {
  using Clock = std::chrono::steady_clock;
  // The encoded body: the histogram block and its header and metadata (within a MiB).
  static std::size_t memory_bytes(const Settings& s) {
    return s.output.histograms.enabled ? make_histogram_layout(s).bytes + (1u << 20) : 0;
  }
  std::vector<std::uint8_t> bytes;  // reused: sized by the first message
  std::uint64_t message_id = 0;
  Clock::time_point last;
};

// The `image` message: the sliding window's snapshots, the reused body and its ids, when it
// was last published.
struct LiveImage {
  using Clock = std::chrono::steady_clock;
  // The window's snapshots (ceil(window_s / interval) + 2 images and their ticks, as
  // ImageWindow takes them), the window itself, and the encoded body at its largest (the run
  // and window images, the axial profiles, every trace sample).
  static std::size_t memory_bytes(const Settings& s) {
    if (!s.output.image.enabled) return 0;
    const ImageLayout l = make_image_layout(s);
    const auto slots = static_cast<std::size_t>(
        std::ceil(s.output.image.window_s * 1000.0 / s.output.image.interval_ms)) + 2;
    const std::size_t image = l.voxel_count * sizeof(std::int32_t);
    return slots * (image + sizeof(std::uint64_t)) + image + kImageHeaderBytes + 2 * image +
           2 * std::size_t{l.nz} * 8 + std::size_t{l.trace_bins} * kTraceSampleDoubles * 8;
  }
  std::unique_ptr<ImageWindow> window;  // null: output.image off
  std::vector<std::uint8_t> bytes;      // reused: sized by the first message
  std::uint64_t message_id = 0;
  Clock::time_point last;
};

struct LiveViews {
  LiveHistograms histograms;
  LiveImage image;
};

}  // namespace petdaq::daemon

// The page's "image" message (schema in docs/tools.md) from an `image` message body (DESIGN
// section 7, "Image"): the sliding-window image's slices through its brightest voxel and its
// projections along each axis, the window's axial profile and the centroid trace.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace petdaq::web {

inline constexpr const char* kImageNote =
    "TOF back-projection, not a reconstruction: no attenuation, scatter or normalisation";

struct ImageLimits {
  std::uint32_t max_side = 256;          // a view's side: voxels summed in blocks beyond it
  std::size_t max_trace_samples = 1200;  // the trace's last samples (a minute at 20 Hz)
};

// Throws ImageFileError (core/image.h) for a body that is not an image file.
std::string image_message(std::string_view body, const ImageLimits& limits = {});

}  // namespace petdaq::web

#include "tools/web/image_message.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/image.h"
#include "proto/bytes.h"

namespace petdaq::web {

namespace {

using nlohmann::json;

// A 2-D view of `w` x `h` values (row-major), summed in blocks of bin x bin down to
// max_side; negative sums (more delayed than prompts) show as 0.
json view(const std::vector<double>& v, std::uint32_t w, std::uint32_t h, std::uint32_t max_side,
          const char* horizontal, const char* vertical) {
  const std::uint32_t bin = std::max<std::uint32_t>(1, (std::max(w, h) + max_side - 1) / max_side);
  const std::uint32_t bw = (w + bin - 1) / bin, bh = (h + bin - 1) / bin;
  std::vector<double> out(std::size_t{bw} * bh, 0.0);
  for (std::uint32_t y = 0; y < h; ++y)
    for (std::uint32_t x = 0; x < w; ++x) out[(y / bin) * bw + x / bin] += v[std::size_t{y} * w + x];
  double total = 0, max = 0;
  json counts = json::array();
  for (double& c : out) {
    c = std::max(c, 0.0);
    total += c;
    max = std::max(max, c);
    counts.push_back(c);
  }
  return {{"width", bw}, {"height", bh}, {"bin", bin}, {"total", total}, {"max", max},
          {"horizontal", horizontal}, {"vertical", vertical}, {"counts", std::move(counts)}};
}

}  // namespace

std::string image_message(std::string_view body, const ImageLimits& limits) {
  const ImageFile f = parse_image_file(reinterpret_cast<const std::uint8_t*>(body.data()), body.size());
  const std::uint32_t nx = f.dims[0], ny = f.dims[1], nz = f.dims[2];
  const auto at = [&](std::uint32_t x, std::uint32_t y, std::uint32_t z) {
    return static_cast<double>(f.window_voxel((std::uint64_t{z} * ny + y) * nx + x));
  };
  // The brightest voxel of the window.
  std::uint64_t best = 0;
  for (std::uint64_t i = 1; i < f.voxel_count(); ++i)
    if (f.window_voxel(i) > f.window_voxel(best)) best = i;
  const std::uint32_t mx = static_cast<std::uint32_t>(best % nx);
  const std::uint32_t my = static_cast<std::uint32_t>((best / nx) % ny);
  const std::uint32_t mz = static_cast<std::uint32_t>(best / (std::uint64_t{nx} * ny));
  std::vector<double> s_xy(std::size_t{nx} * ny), s_zx(std::size_t{nz} * nx), s_zy(std::size_t{nz} * ny);
  std::vector<double> p_xy(s_xy.size(), 0.0), p_zx(s_zx.size(), 0.0), p_zy(s_zy.size(), 0.0);
  double total = 0;
  for (std::uint32_t z = 0; z < nz; ++z)
    for (std::uint32_t y = 0; y < ny; ++y)
      for (std::uint32_t x = 0; x < nx; ++x) {
        const double v = at(x, y, z);
        total += v;
        // Rows of the transaxial views run from +y at the top, as seen from the front.
        const std::uint32_t row_y = ny - 1 - y;
        p_xy[std::size_t{row_y} * nx + x] += v;
        p_zx[std::size_t{x} * nz + z] += v;
        p_zy[std::size_t{row_y} * nz + z] += v;
        if (z == mz) s_xy[std::size_t{row_y} * nx + x] = v;
        if (y == my) s_zx[std::size_t{x} * nz + z] = v;
        if (x == mx) s_zy[std::size_t{row_y} * nz + z] = v;
      }
  const std::uint32_t side = limits.max_side;
  json out = {{"type", "image"},
              {"note", kImageNote},
              {"run_id", f.run_id},
              {"voxel_mm", f.voxel_mm},
              {"dims", {nx, ny, nz}},
              {"origin_mm", {f.origin_mm[0], f.origin_mm[1], f.origin_mm[2]}},
              {"randoms_subtracted", (f.flags & kImageFlagSubtractDelayed) != 0},
              {"window_s", (f.span.window_end_tick - f.span.window_first_tick) * f.tick_ps * 1e-12},
              {"run_s", (f.span.run_end_tick - f.span.run_first_tick) * f.tick_ps * 1e-12},
              {"window_counts", total},
              {"prompts_in", f.tallies[static_cast<int>(ImageTally::prompts_in)]},
              {"prompts_out", f.tallies[static_cast<int>(ImageTally::prompts_out)]},
              {"delayed_in", f.tallies[static_cast<int>(ImageTally::delayed_in)]},
              {"max_voxel_mm",
               {f.origin_mm[0] + (mx + 0.5) * f.voxel_mm, f.origin_mm[1] + (my + 0.5) * f.voxel_mm,
                f.origin_mm[2] + (mz + 0.5) * f.voxel_mm}}};
  out["slices"] = {{"xy", view(s_xy, nx, ny, side, "x", "y")},
                   {"zx", view(s_zx, nz, nx, side, "z", "x")},
                   {"zy", view(s_zy, nz, ny, side, "z", "y")}};
  out["projections"] = {{"xy", view(p_xy, nx, ny, side, "x", "y")},
                        {"zx", view(p_zx, nz, nx, side, "z", "x")},
                        {"zy", view(p_zy, nz, ny, side, "z", "y")}};
  json z_mm = json::array(), axial = json::array();
  for (std::uint32_t z = 0; z < nz; ++z) {
    z_mm.push_back(f.origin_mm[2] + (z + 0.5) * f.voxel_mm);
    axial.push_back(std::bit_cast<double>(bytes::load_le64(f.axial_window + 8ull * z)));
  }
  out["axial"] = {{"z_mm", std::move(z_mm)}, {"counts", std::move(axial)}};
  json t = json::array(), x = json::array(), y = json::array(), z = json::array();
  json ex = json::array(), ey = json::array(), ez = json::array(), w = json::array();
  const std::uint32_t first =
      f.trace_count > limits.max_trace_samples ? f.trace_count - static_cast<std::uint32_t>(limits.max_trace_samples) : 0;
  for (std::uint32_t i = first; i < f.trace_count; ++i) {
    const TraceSample s = f.sample(i);
    t.push_back(s.t_s);
    x.push_back(s.mean_mm[0]);
    y.push_back(s.mean_mm[1]);
    z.push_back(s.mean_mm[2]);
    ex.push_back(s.error_mm[0]);
    ey.push_back(s.error_mm[1]);
    ez.push_back(s.error_mm[2]);
    w.push_back(s.weight);
  }
  out["trace"] = {{"bin_ms", f.trace_bin_ms}, {"t_s", t}, {"x_mm", x}, {"y_mm", y}, {"z_mm", z},
                  {"x_err_mm", ex}, {"y_err_mm", ey}, {"z_err_mm", ez}, {"weight", w}};
  return out.dump();
}

}  // namespace petdaq::web

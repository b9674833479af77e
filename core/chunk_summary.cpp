#include "core/chunk_summary.h"

#include <algorithm>

#include "core/geometry.h"
#include "core/settings.h"

namespace petdaq {

SourceRule make_source_rule(const Settings& s) {
  SourceRule r;
  r.check_markers = s.frame.check_markers;
  r.head_marker = s.frame.head_marker;
  r.tail_marker = s.frame.tail_marker;
  r.bdm_count = Geometry::from(s.scanner).bdm_count();
  return r;
}

std::uint64_t max_chunk_span_ticks(const Settings& s) {
  return std::max<std::uint64_t>(1, max_future_ticks(s) / 2);
}

std::size_t next_block(const RawFrame* frames, std::size_t n, std::size_t max_frames,
                       std::uint64_t max_span_ticks, const SourceRule& rule, ChunkSummary& out,
                       std::size_t group) {
  out.clear();
  std::size_t taken = 0;
  while (taken < n && taken < max_frames) {
    const std::size_t k = std::min({group, n - taken, max_frames - taken});
    out.add(frames + taken, k, static_cast<std::uint32_t>(taken), rule);
    taken += k;
    if (out.span_ticks() > max_span_ticks) break;
  }
  return taken;
}

}  // namespace petdaq

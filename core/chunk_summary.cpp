#include "core/chunk_summary.h"

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

}  // namespace petdaq

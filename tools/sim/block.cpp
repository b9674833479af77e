#include "tools/sim/block.h"

namespace petdaq::sim {

// Groups the block's frames by BDM, each BDM in key order (ties in generation order).
void group_by_bdm(Block& out, std::uint32_t n_bdm) {
  out.bdm_begin.assign(n_bdm + 1, 0);
  for (const SimFrame& f : out.generated) ++out.bdm_begin[f.raw.bytes[frame_offset::bdm] + 1];
  for (std::uint32_t b = 0; b < n_bdm; ++b) out.bdm_begin[b + 1] += out.bdm_begin[b];
  out.frames.resize(out.generated.size());
  std::vector<std::uint32_t> fill(out.bdm_begin.begin(), out.bdm_begin.end() - 1);
  for (const SimFrame& f : out.generated) out.frames[fill[f.raw.bytes[frame_offset::bdm]]++] = f;
  // Frames are generated in event order; their keys are only slightly out of order
  // (time of flight, resolution, delays, disorder): insertion sort is linear here.
  for (std::uint32_t b = 0; b < n_bdm; ++b) {
    SimFrame* first = out.frames.data() + out.bdm_begin[b];
    SimFrame* last = out.frames.data() + out.bdm_begin[b + 1];
    for (SimFrame* i = first + 1; i < last; ++i) {
      if (!(i->key < (i - 1)->key)) continue;
      SimFrame tmp = *i;
      SimFrame* j = i;
      do {
        *j = *(j - 1);
        --j;
      } while (j > first && tmp.key < (j - 1)->key);
      *j = tmp;
    }
  }
}

}  // namespace petdaq::sim

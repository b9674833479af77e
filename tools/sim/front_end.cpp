#include "tools/sim/front_end.h"

#include <algorithm>
#include <cmath>

#include "proto/frame.h"

namespace petdaq::sim {

FrontEnd::FrontEnd(const DetectorModel& model, const SimOptions& options, const Plan& plan,
                   double low_keV, double high_keV)
    : model_(model), low_keV_(low_keV), high_keV_(high_keV) {
  const Geometry& g = model.geometry();
  dead_ticks_ = static_cast<std::uint64_t>(std::llround(options.dead_time_ns * 1e3 / plan.tick_ps));
  pile_up_ticks_ =
      static_cast<std::uint64_t>(std::llround(options.pile_up_ns * 1e3 / plan.tick_ps));
  active_ = dead_ticks_ > 0 || pile_up_ticks_ > 0;
  paralysable_ = options.dead_time_paralysable;
  per_board_ = options.dead_time_per_board;
  disorder_ticks_ = plan.disorder_ticks;
  du_per_bdm_ = g.du_per_bdm();
  crystals_per_du_ = g.crystals_per_du();
  in_.resize(g.bdm_count());
  ready_.resize(g.bdm_count());
  pulse_.resize(std::size_t{g.bdm_count()} * du_per_bdm_);
  dead_until_.assign(per_board_ ? g.bdm_count() : pulse_.size(), 0);
}

void FrontEnd::process(std::uint32_t b, std::uint64_t limit, bool end) {
  // The BDM's frames come in key order, their stamps disordered by at most the disorder
  // bound: every frame with a stamp below `limit` is here. Take those, in time order.
  std::vector<SimFrame>& in = in_[b];
  batch_.clear();
  std::size_t kept = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (end || frame_time(in[i].raw.bytes) < limit)
      batch_.push_back(in[i]);
    else
      in[kept++] = in[i];
  }
  in.resize(kept);
  std::stable_sort(batch_.begin(), batch_.end(), [](const SimFrame& x, const SimFrame& y) {
    return frame_time(x.raw.bytes) < frame_time(y.raw.bytes);
  });
  for (const SimFrame& f : batch_) feed(f);
  // A pulse is complete once no frame still to come can fall in its shaping time.
  for (std::uint32_t d = 0; d < du_per_bdm_; ++d) {
    Pulse& p = pulse_[b * du_per_bdm_ + d];
    if (p.open && (end || p.t0 + pile_up_ticks_ <= limit)) close(p, b * du_per_bdm_ + d);
  }
  std::stable_sort(ready_[b].begin(), ready_[b].end(),
                   [](const SimFrame& x, const SimFrame& y) { return x.key < y.key; });
}

void FrontEnd::feed(const SimFrame& f) {
  const std::uint32_t bdm = f.raw.bytes[frame_offset::bdm];
  const std::uint32_t du = f.raw.bytes[frame_offset::head_du] & 0x0F;
  const std::uint32_t bdm_du = bdm * du_per_bdm_ + du;
  std::uint64_t& dead_until = dead_until_[per_board_ ? bdm : bdm_du];
  const std::uint64_t t = frame_time(f.raw.bytes);
  const auto kind = static_cast<std::size_t>(f.truth.kind) & 3;
  Pulse& p = pulse_[bdm_du];
  if (p.open && t >= p.t0 + pile_up_ticks_) close(p, bdm_du);
  const double raw = bytes::load_be16(f.raw.bytes + frame_offset::energy);
  if (p.open) {  // inside the shaping time of this DU's pulse: the light adds up
    p.raw_sum += raw;
    p.raw_x += raw * f.raw.bytes[frame_offset::x];
    p.raw_y += raw * f.raw.bytes[frame_offset::y];
    p.keV_sum += f.truth.energy_keV;
    ++p.photons;
    ++stats_.merged_pile_up;
    ++stats_.merged_pile_up_by_kind[kind];
    if (paralysable_) dead_until = std::max(dead_until, t + dead_ticks_);
    return;
  }
  if (t < dead_until) {
    ++stats_.lost_dead_time;
    ++stats_.lost_dead_time_by_kind[kind];
    if (paralysable_) dead_until = t + dead_ticks_;
    return;
  }
  p.open = true;
  p.t0 = t;
  p.first = f;
  p.raw_sum = raw;
  p.raw_x = raw * f.raw.bytes[frame_offset::x];
  p.raw_y = raw * f.raw.bytes[frame_offset::y];
  p.keV_sum = f.truth.energy_keV;
  p.photons = 1;
  dead_until = t + dead_ticks_;
}

void FrontEnd::close(Pulse& p, std::uint32_t bdm_du) {
  p.open = false;
  SimFrame f = p.first;
  if (p.photons > 1) {
    ++stats_.frames_piled_up;
    const bool first_in_window = (f.truth.flags & truth_flag::no_crystal) == 0 &&
                                 f.truth.energy_keV >= low_keV_ && f.truth.energy_keV <= high_keV_;
    const double w = p.raw_sum > 0 ? 1.0 / p.raw_sum : 0.0;
    const std::uint32_t x = static_cast<std::uint32_t>(p.raw_x * w + 0.5);
    const std::uint32_t y = static_cast<std::uint32_t>(p.raw_y * w + 0.5);
    f.raw.bytes[frame_offset::x] = static_cast<std::uint8_t>(x);
    f.raw.bytes[frame_offset::y] = static_cast<std::uint8_t>(y);
    bytes::store_be16(f.raw.bytes + frame_offset::energy,
                      static_cast<std::uint16_t>(std::min(p.raw_sum, 65535.0)));
    f.truth.energy_keV = static_cast<float>(p.keV_sum);
    f.truth.pile_up = static_cast<std::uint8_t>(std::min<std::uint32_t>(p.photons - 1, 255));
    const Geometry& g = model_.geometry();
    const std::uint32_t seen = *model_.label_address(bdm_du, x, y);
    const std::uint32_t label = g.label_of_local_crystal(g.address_of(f.truth.crystal).crystal);
    f.truth.flags &= static_cast<std::uint8_t>(~(truth_flag::no_crystal | truth_flag::mispositioned));
    if (seen >= crystals_per_du_)
      f.truth.flags |= truth_flag::no_crystal;
    else if (seen != label)
      f.truth.flags |= truth_flag::mispositioned;
    const bool sum_in_window = (f.truth.flags & truth_flag::no_crystal) == 0 &&
                               p.keV_sum >= low_keV_ && p.keV_sum <= high_keV_;
    stats_.piled_out_of_window += first_in_window && !sum_in_window;
  }
  ready_[bdm_du / du_per_bdm_].push_back(f);
}

}  // namespace petdaq::sim

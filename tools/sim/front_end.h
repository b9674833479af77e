// The boards' front end between the crystals and the frames they send: pulse pile-up per DU
// (photons within the shaping time of a pulse's first one make one frame with the summed
// energy at the light-weighted position) and dead time per DU or per board, paralysable or
// not. Applied on the simulator's main thread to each BDM's frames across block boundaries,
// in time order, so the result does not depend on the threads (docs/simulator.md).
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "tools/sim/block.h"
#include "tools/sim/detector.h"
#include "tools/sim/plan.h"
#include "tools/sim/sim.h"

namespace petdaq::sim {

struct FrontEndStats {
  std::uint64_t lost_dead_time = 0;    // photons that came while their unit was dead
  std::uint64_t merged_pile_up = 0;    // photons summed into an earlier photon's frame
  std::uint64_t frames_piled_up = 0;   // frames holding two photons or more
  std::uint64_t piled_out_of_window = 0;  // ... whose first photon alone was in the window, the sum not
  std::uint64_t lost_dead_time_by_kind[4] = {};  // by PhotonKind (index 1..3)
  std::uint64_t merged_pile_up_by_kind[4] = {};
};

class FrontEnd {
 public:
  FrontEnd(const DetectorModel& model, const SimOptions& options, const Plan& plan,
           double low_keV, double high_keV);

  // False when neither dead time nor pile-up is on: frames go straight to the packetizer.
  bool active() const { return active_; }

  // The next frame of one BDM, in that BDM's key order.
  void add(std::uint32_t bdm, const SimFrame& f) { in_[bdm].push_back(f); }

  // Every frame with key < cut has been added (cut = max: the end). Decides the fate of every
  // frame it can, hands the frames sent with key < the returned cut to out(bdm, frame), each
  // BDM in key order, and returns that cut.
  template <class Out>
  std::uint64_t advance(std::uint64_t cut, Out&& out) {
    const bool end = cut == std::numeric_limits<std::uint64_t>::max();
    const std::uint64_t limit = end ? cut : (cut > disorder_ticks_ ? cut - disorder_ticks_ : 0);
    const std::uint64_t out_cut =
        end ? cut : (limit > pile_up_ticks_ ? limit - pile_up_ticks_ : 0);
    for (std::uint32_t b = 0; b < in_.size(); ++b) {
      process(b, limit, end);
      std::vector<SimFrame>& ready = ready_[b];
      std::size_t kept = 0;
      for (std::size_t i = 0; i < ready.size(); ++i) {
        if (ready[i].key < out_cut)
          out(b, ready[i]);
        else
          ready[kept++] = ready[i];
      }
      ready.resize(kept);
    }
    return out_cut;
  }

  const FrontEndStats& stats() const { return stats_; }

 private:
  struct Pulse {
    bool open = false;
    std::uint64_t t0 = 0;
    SimFrame first{};
    double raw_sum = 0, raw_x = 0, raw_y = 0, keV_sum = 0;
    std::uint32_t photons = 0;
  };

  // Feeds the frames of BDM b with a time stamp below `limit` to the per-DU state, in time
  // order; closes the pulses no later frame can join; sorts `ready_[b]` by key.
  void process(std::uint32_t b, std::uint64_t limit, bool end);
  void feed(const SimFrame& f);
  void close(Pulse& p, std::uint32_t bdm_du);

  const DetectorModel& model_;
  bool active_ = false;
  bool paralysable_ = false;
  bool per_board_ = false;
  std::uint64_t dead_ticks_ = 0, pile_up_ticks_ = 0, disorder_ticks_ = 0;
  double low_keV_ = 0, high_keV_ = 0;
  std::uint32_t du_per_bdm_ = 1, crystals_per_du_ = 1;
  std::vector<std::vector<SimFrame>> in_, ready_;
  std::vector<SimFrame> batch_;
  std::vector<Pulse> pulse_;              // per BDM * DU
  std::vector<std::uint64_t> dead_until_;  // per unit (DU or BDM)
  FrontEndStats stats_;
};

}  // namespace petdaq::sim

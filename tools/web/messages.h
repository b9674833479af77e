// The messages petdaq-web sends to the page over its WebSocket (schema in docs/tools.md),
// built from what petdaqd publishes. Kept apart from the server so the tests build them from
// given documents and compare field by field.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <vector>
#include <stdexcept>
#include <string>
#include <string_view>

#include "tools/web/figures_view.h"
#include "tools/web/web_counters.h"

namespace petdaq::web {

// A `rates` body that is not a version-1 rates document (docs/daemon.md); what() says why.
class MalformedRates : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One sample of the history the page plots.
struct RatePoint {
  double t_unix_s = 0;  // the document's time_unix_ns (the daemon's clock)
  double singles = 0, prompts = 0, delayed = 0, trues = 0, necr = 0;
};

struct RatesUpdate {
  std::string message;  // {"type":"rates",...}
  RatePoint point;
};

// Turns rates documents into the page's "rates" messages. Remembers the previous document's
// counters so each non-zero loss counter carries its growth since then.
class RatesMessageBuilder {
 public:
  // Throws MalformedRates; the builder's state is unchanged then.
  RatesUpdate build(std::string_view document);

 private:
  std::map<std::string, std::uint64_t, std::less<>> previous_counters_;
  // Per board, its receiving socket's losses (bdm.ring_full + bdm.socket_kernel_drops).
  std::vector<std::uint64_t> previous_socket_losses_;
};

// {"type":"history","points":[...]}: sent to a page when it connects, so its plots start
// with the last minutes instead of empty.
std::string history_message(const std::deque<RatePoint>& points);

// How much of a `histograms` message the page gets (a default scanner's bins are ~56 MB):
// images are summed over blocks of bin x bin pixels until they fit, spectra over
// neighbouring bins.
struct HistogramLimits {
  std::uint32_t max_tile_side = 64;         // one DU's flood map in the mosaic
  std::size_t max_mosaic_pixels = 1 << 17;  // all DUs' flood maps together
  std::uint32_t max_sum_side = 128;         // the flood map summed over all DUs
  std::size_t max_image_pixels = 1 << 17;   // the per-crystal singles map
  std::size_t max_spectrum_bins = 2048;     // each 1-D histogram
};

// {"type":"histograms",...} (docs/tools.md) from a `histograms` message body (DESIGN section
// 7), read with parse_histogram_file. Throws HistogramFileError (core/histograms.h) for a
// body that is not a histogram file, lacks the scanner's geometry in its JSON document, or
// whose flood, crystal_singles, energy_keV or dt_prompt histogram is missing or does not
// match that geometry. Its "figures" (CTR, energy resolution) reuse `figures`' per-crystal
// fits while they are recent (tools/web/figures_view.h).
std::string histograms_message(std::string_view body, const HistogramLimits& limits = {},
                               FiguresCache* figures = nullptr);

enum class FeedState { waiting, live, no_data };
std::string_view state_name(FeedState s);  // "waiting", "live", "no-data"

struct ServerStatus {
  FeedState state = FeedState::waiting;
  double age_s = -1;  // since the last rates document; -1 before the first
  double stale_after_s = 0;
  std::string endpoint;
  std::size_t clients = 0;
  const WebCounters* counters = nullptr;
};

// {"type":"status",...}: the feed's state and the server's counters, once a second and at
// every change of state. Also the body of GET /status.json.
std::string status_message(const ServerStatus& s);

}  // namespace petdaq::web

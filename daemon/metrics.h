// Prometheus metrics (docs/operations.md, "Prometheus"): `output.metrics.listen` serves
// /metrics in Prometheus's text format, written by prometheus-cpp's serializer. The daemon
// hands over each `rates` document it publishes (a copy, once per rates interval); a scrape
// turns the latest one into metric families on the exporter's own thread, so the data path
// never waits for a scraper.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <prometheus/metric_family.h>

namespace petdaq::daemon {

// The metric families of one `rates` document (DESIGN section 7): every counter as
// petdaq_<name>_total, the rates, per-board series labelled `bdm`, queues, latency, the
// worker's phases, the alarms (petdaq_alarm_active{alarm} for every alarm name), and any
// other numeric field as a gauge named by its path. Empty for a document it cannot parse.
std::vector<prometheus::MetricFamily> rates_metric_families(const std::string& rates_json);

// The HTTP side: a thread of its own answers `GET /metrics` (and `/`) with the latest
// document's families in Prometheus's text format (prometheus-cpp's TextSerializer), one
// request per connection, at most kMaxConnections at once, each closed after kTimeout.
class MetricsExporter {
 public:
  // Listens on `listen` (host:port); throws std::runtime_error naming the address when it
  // cannot.
  explicit MetricsExporter(const std::string& listen);
  ~MetricsExporter();
  MetricsExporter(const MetricsExporter&) = delete;
  MetricsExporter& operator=(const MetricsExporter&) = delete;

  // The latest `rates` document (any thread).
  void update(const std::string& rates_json);
  // The text a scrape gets now.
  std::string scrape() const;
  // The port bound (useful with port 0 in tests).
  int port() const;

 private:
  struct Server;
  mutable std::mutex mutex_;
  std::string json_;
  std::unique_ptr<Server> server_;
};

}  // namespace petdaq::daemon

#include "daemon/metrics.h"

#include <pthread.h>

#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <boost/asio/buffer.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <nlohmann/json.hpp>
#include <prometheus/text_serializer.h>

#include "core/thread_placement.h"
#include "daemon/alarms.h"
#include "proto/rates_schema.h"

namespace petdaq::daemon {

namespace {

using Json = nlohmann::json;
namespace rd = rates_doc;
using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

// A metric name of Prometheus's alphabet: [a-zA-Z_:][a-zA-Z0-9_:]*.
std::string metric_name(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == ':';
    out.push_back(ok ? c : '_');
  }
  if (!out.empty() && out[0] >= '0' && out[0] <= '9') out.insert(out.begin(), '_');
  return out;
}

// Families by name, so that labelled series of one name land in one family.
class Families {
 public:
  void add(const std::string& name, const std::string& help, MetricType type, double value,
           std::vector<ClientMetric::Label> labels = {}) {
    if (!std::isfinite(value)) return;
    auto [it, added] = index_.try_emplace(name, families_.size());
    if (added) families_.push_back(MetricFamily{name, help, type, {}});
    ClientMetric m;
    m.label = std::move(labels);
    if (type == MetricType::Counter)
      m.counter.value = value;
    else
      m.gauge.value = value;
    families_[it->second].metric.push_back(std::move(m));
  }
  std::vector<MetricFamily> take() { return std::move(families_); }

 private:
  std::map<std::string, std::size_t> index_;
  std::vector<MetricFamily> families_;
};

void gauge(Families& f, const std::string& name, const std::string& help, const Json& v,
           std::vector<ClientMetric::Label> labels = {}) {
  if (v.is_number()) f.add(name, help, MetricType::Gauge, v.get<double>(), std::move(labels));
  if (v.is_boolean()) f.add(name, help, MetricType::Gauge, v.get<bool>() ? 1 : 0, std::move(labels));
}

// Numbers and booleans of an object the exporter has no special rule for, named by their
// path; arrays of one entry per board are labelled `bdm`.
void flatten(Families& f, const std::string& prefix, const Json& v, std::size_t bdm_count,
             int depth = 0) {
  if (depth > 4) return;
  if (v.is_number() || v.is_boolean()) {
    gauge(f, prefix, "petdaqd rates document field " + prefix, v);
  } else if (v.is_object()) {
    for (const auto& [key, child] : v.items())
      flatten(f, prefix + "_" + metric_name(key), child, bdm_count, depth + 1);
  } else if (v.is_array() && bdm_count > 0 && v.size() == bdm_count) {
    for (std::size_t b = 0; b < v.size(); ++b)
      gauge(f, prefix, "petdaqd rates document field " + prefix + ", per BDM", v[b],
            {{"bdm", std::to_string(b)}});
  }
}

}  // namespace

std::vector<MetricFamily> rates_metric_families(const std::string& rates_json) {
  Json doc;
  try {
    doc = Json::parse(rates_json);
  } catch (const Json::exception&) {
    return {};
  }
  if (!doc.is_object()) return {};
  Families f;
  const Json none;
  auto at = [&](const char* key) -> const Json& {
    const auto it = doc.find(key);
    return it == doc.end() ? none : *it;
  };

  if (at(rd::doc::time_unix_ns).is_number())
    f.add("petdaq_rates_time_seconds", "Wall-clock time of the latest rates document (Unix s)",
          MetricType::Gauge, at(rd::doc::time_unix_ns).get<double>() * 1e-9);
  gauge(f, "petdaq_uptime_seconds", "Seconds since petdaqd started", at(rd::doc::uptime_s));
  gauge(f, "petdaq_run_id", "The current acquisition run", at(rd::doc::run_id));
  gauge(f, "petdaq_rates_interval_seconds", "Wall time the rates cover", at(rd::doc::interval_s));
  if (at(rd::doc::backend).is_string())
    f.add("petdaq_info", "petdaqd's backend", MetricType::Gauge, 1,
          {{"backend", at(rd::doc::backend).get<std::string>()}});

  if (const Json& counters = at(rd::doc::counters); counters.is_object())
    for (const auto& [key, v] : counters.items())
      if (v.is_number())
        f.add("petdaq_" + metric_name(key) + "_total", "petdaqd counter " + key + " (DESIGN section 8)",
              MetricType::Counter, v.get<double>());

  if (const Json& rates = at(rd::doc::rates); rates.is_object())
    for (const auto& [key, v] : rates.items()) {
      if (key == rd::rates::randoms_method && v.is_string()) {
        f.add("petdaq_randoms_method_info", "The randoms estimate behind trues", MetricType::Gauge,
              1, {{"method", v.get<std::string>()}});
      } else if (key == rd::rates::randoms_fraction) {
        gauge(f, "petdaq_randoms_fraction", "Randoms / prompts over the last interval", v);
      } else {
        gauge(f, "petdaq_" + metric_name(key) + "_per_second",
              "Rate of " + key + " over the last interval", v);
      }
    }

  std::size_t bdm_count = 0;
  if (const Json& bdm = at(rd::doc::bdm); bdm.is_object()) {
    const Json& singles = bdm.value(rd::bdm::singles_per_s, Json::array());
    bdm_count = singles.size();
    for (std::size_t b = 0; b < singles.size(); ++b)
      gauge(f, "petdaq_bdm_singles_per_second", "Singles rate of a detector board (BDM)",
            singles[b], {{"bdm", std::to_string(b)}});
    const Json& temperatures = bdm.value(rd::bdm::temperature_degC, Json::array());
    for (std::size_t b = 0; b < temperatures.size(); ++b)
      gauge(f, "petdaq_bdm_temperature_celsius", "Temperature a detector board (BDM) reports",
            temperatures[b], {{"bdm", std::to_string(b)}});
    for (const auto& [key, v] : bdm.items())
      if (key != rd::bdm::singles_per_s && key != rd::bdm::temperature_degC &&
          key != rd::bdm::transaxial && key != rd::bdm::axial)
        flatten(f, "petdaq_bdm_" + metric_name(key), v, bdm_count);
  }

  if (const Json& queues = at(rd::doc::queues); queues.is_object())
    for (const auto& [key, v] : queues.items())
      gauge(f, "petdaq_queue_" + metric_name(key), "Queue depth " + key + " (rates.queues)", v);

  if (const Json& latency = at(rd::doc::latency_ms); latency.is_object())
    for (const auto& [key, v] : latency.items())
      if (v.is_number())
        f.add("petdaq_slice_latency_" + metric_name(key) + "_seconds",
              "Slice latency " + key + " over the last interval", MetricType::Gauge,
              v.get<double>() * 1e-3);

  if (const Json& worker = at(rd::doc::worker); worker.is_object()) {
    gauge(f, "petdaq_worker_seconds", "The worker thread's wall time",
          worker.value(rd::worker::seconds, none));
    gauge(f, "petdaq_worker_cpu_seconds", "The worker thread's CPU time",
          worker.value(rd::worker::cpu_seconds, none));
    gauge(f, "petdaq_worker_involuntary_switches",
          "Times the kernel took the worker's core while it could run",
          worker.value(rd::worker::involuntary_switches, none));
    if (const Json& phases = worker.value(rd::worker::phases, Json::object()); phases.is_object())
      for (const auto& [phase, p] : phases.items()) {
        if (!p.is_object()) continue;
        gauge(f, "petdaq_worker_phase_seconds", "Worker time by phase since start",
              p.value(rd::phase::seconds, none), {{"phase", phase}});
        gauge(f, "petdaq_worker_phase_calls", "Worker phase calls since start",
              p.value(rd::phase::calls, none), {{"phase", phase}});
      }
  }

  // Every alarm name has a series, 0 or 1, so that a rule can fire on it and see it clear.
  std::map<std::string, int> active;
  for (const char* name : kAlarmNames) active[name] = 0;
  if (const Json& alarms = at(rd::doc::alarms); alarms.is_array())
    for (const Json& a : alarms) {
      if (!a.is_object() || !a.value(rd::alarm::name, none).is_string()) continue;
      const std::string name = a[rd::alarm::name].get<std::string>();
      active[name] = 1;
      f.add("petdaq_alarm", "An active alarm and its subject", MetricType::Gauge, 1,
            {{"alarm", name},
             {"subject", a.value(rd::alarm::subject, none).is_string()
                             ? a[rd::alarm::subject].get<std::string>()
                             : std::string()}});
    }
  for (const auto& [name, on] : active)
    f.add("petdaq_alarm_active", "1 while an alarm of this name is raised (docs/operations.md)",
          MetricType::Gauge, on, {{"alarm", name}});

  static const char* const kHandled[] = {
      rd::doc::version, rd::doc::time_unix_ns, rd::doc::uptime_s, rd::doc::backend,
      rd::doc::run_id,  rd::doc::interval_s,   rd::doc::counters, rd::doc::rates,
      rd::doc::bdm,     rd::doc::queues,       rd::doc::latency_ms, rd::doc::worker,
      rd::doc::alarms};
  for (const auto& [key, v] : doc.items()) {
    bool handled = false;
    for (const char* h : kHandled) handled = handled || key == h;
    if (!handled) flatten(f, "petdaq_" + metric_name(key), v, bdm_count);
  }
  return f.take();
}

namespace {
constexpr int kMaxConnections = 8;
constexpr auto kTimeout = std::chrono::seconds(5);
constexpr std::size_t kMaxRequestBytes = 8192;
}  // namespace

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

struct MetricsExporter::Server {
  const MetricsExporter& owner;
  asio::io_context io;
  tcp::acceptor acceptor{io};
  int connections = 0;
  std::thread thread;

  // One request: read up to the blank line, answer, close; the deadline closes a client
  // that says nothing.
  struct Connection : std::enable_shared_from_this<Connection> {
    Server& server;
    tcp::socket socket;
    asio::steady_timer deadline;
    asio::streambuf request{kMaxRequestBytes};
    std::string response;
    Connection(Server& s, tcp::socket sock)
        : server(s), socket(std::move(sock)), deadline(s.io) {}
    ~Connection() { --server.connections; }
    void start() {
      auto self = shared_from_this();
      deadline.expires_after(kTimeout);
      deadline.async_wait([self](const boost::system::error_code& ec) {
        if (!ec) {
          boost::system::error_code ignored;
          self->socket.close(ignored);
        }
      });
      asio::async_read_until(socket, request, "\r\n\r\n",
                             [self](const boost::system::error_code& ec, std::size_t) {
                               self->answer(ec);
                             });
    }
    void answer(const boost::system::error_code& ec) {
      if (ec) {
        deadline.cancel();
        return;
      }
      std::istream in(&request);
      std::string method, target;
      in >> method >> target;
      if (method != "GET" && method != "HEAD") {
        response = reply("405 Method Not Allowed", "text/plain", "only GET\n");
      } else if (target == "/metrics" || target.starts_with("/metrics?")) {
        response = reply("200 OK", "text/plain; version=0.0.4; charset=utf-8", server.owner.scrape(),
                         method == "HEAD");
      } else if (target == "/") {
        response = reply("200 OK", "text/html; charset=utf-8",
                         "<html><body><a href=\"/metrics\">petdaqd metrics</a></body></html>\n",
                         method == "HEAD");
      } else {
        response = reply("404 Not Found", "text/plain", "not found: try /metrics\n");
      }
      auto self = shared_from_this();
      asio::async_write(socket, asio::buffer(response),
                        [self](const boost::system::error_code&, std::size_t) {
                          boost::system::error_code ignored;
                          self->socket.shutdown(tcp::socket::shutdown_both, ignored);
                          self->deadline.cancel();
                        });
    }
    static std::string reply(const char* status, const char* type, const std::string& body,
                             bool head = false) {
      std::string r = std::string("HTTP/1.1 ") + status + "\r\nContent-Type: " + type +
                      "\r\nContent-Length: " + std::to_string(body.size()) +
                      "\r\nConnection: close\r\n\r\n";
      if (!head) r += body;
      return r;
    }
  };

  explicit Server(const MetricsExporter& o) : owner(o) {}
  void accept() {
    acceptor.async_accept([this](const boost::system::error_code& ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted) return;
      if (!ec) {
        if (connections >= kMaxConnections) {
          boost::system::error_code ignored;
          socket.close(ignored);  // the scraper tries again at its next interval
        } else {
          ++connections;
          std::make_shared<Connection>(*this, std::move(socket))->start();
        }
      }
      accept();
    });
  }
};

MetricsExporter::MetricsExporter(const std::string& listen) : server_(std::make_unique<Server>(*this)) {
  const auto colon = listen.rfind(':');
  if (colon == std::string::npos)
    throw std::runtime_error("cannot serve Prometheus metrics on '" + listen + "': not host:port");
  try {
    tcp::resolver resolver(server_->io);
    const auto found = resolver.resolve(listen.substr(0, colon), listen.substr(colon + 1),
                                        tcp::resolver::passive | tcp::resolver::numeric_service);
    const tcp::endpoint endpoint = found.begin()->endpoint();
    server_->acceptor.open(endpoint.protocol());
    server_->acceptor.set_option(tcp::acceptor::reuse_address(true));
    server_->acceptor.bind(endpoint);
    server_->acceptor.listen(16);
  } catch (const boost::system::system_error& e) {
    throw std::runtime_error("cannot serve Prometheus metrics on " + listen + ": " + e.what());
  }
  server_->accept();
  server_->thread = std::thread([this] {
    name_this_thread("petdaq-metrics");
    server_->io.run();
  });
}

MetricsExporter::~MetricsExporter() {
  asio::post(server_->io, [this] {
    boost::system::error_code ignored;
    server_->acceptor.close(ignored);
    server_->io.stop();
  });
  server_->thread.join();
}

void MetricsExporter::update(const std::string& rates_json) {
  std::lock_guard lock(mutex_);
  json_.assign(rates_json);
}

std::string MetricsExporter::scrape() const {
  std::string json;
  {
    std::lock_guard lock(mutex_);
    json = json_;
  }
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, rates_metric_families(json));
  return out.str();
}

int MetricsExporter::port() const { return server_->acceptor.local_endpoint().port(); }

}  // namespace petdaq::daemon

#include "daemon/control.h"

#include <chrono>
#include <stdexcept>

#include <spdlog/spdlog.h>

#include "core/thread_placement.h"
#include "daemon/curve.h"
#include "daemon/preflight.h"

namespace petdaq::daemon {

namespace {
// A request larger than this is refused by libzmq before it reaches the thread.
constexpr std::int64_t kMaxRequestBytes = 64 * 1024;
constexpr auto kPoll = std::chrono::milliseconds(100);

std::uint64_t unix_ns() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}
}  // namespace

std::string handle_control_request(const std::string& request, AcquisitionControl& acquisitions,
                                   const nlohmann::json& rates, Counters& counters,
                                   std::uint64_t now) {
  counters.add(Counter::ctl_commands, 1);
  nlohmann::json reply;
  try {
    nlohmann::json r;
    try {
      r = nlohmann::json::parse(request);
    } catch (const nlohmann::json::exception&) {
      throw std::invalid_argument("the request is not JSON");
    }
    if (!r.is_object() || !r.contains("command") || !r["command"].is_string())
      throw std::invalid_argument("the request must be an object with a string \"command\"");
    const std::string command = r["command"].get<std::string>();
    if (command == "start") {
      const Acquisition a = acquisitions.start(r, now);
      spdlog::info("acquisition {} '{}' started (subject '{}', isotope '{}', operator '{}')", a.id,
                   a.name, a.subject, a.isotope, a.operator_name);
      reply = {{"ok", true}, {"acquisition", a.to_json()}};
    } else if (command == "stop") {
      const Acquisition a = acquisitions.stop(now);
      spdlog::info("acquisition {} '{}' stopped after {:.1f} s", a.id, a.name,
                   static_cast<double>(a.ended_unix_ns - a.started_unix_ns) * 1e-9);
      reply = {{"ok", true}, {"acquisition", a.to_json()}};
    } else if (command == "annotate") {
      if (!r.contains("text") || !r["text"].is_string())
        throw std::invalid_argument("annotate needs a string \"text\"");
      const Acquisition a = acquisitions.annotate(r["text"].get<std::string>(), now);
      reply = {{"ok", true}, {"acquisition", a.to_json()}};
    } else if (command == "status") {
      const auto a = acquisitions.current();
      reply = {{"ok", true},
               {"acquisition", a ? a->to_json() : nlohmann::json(nullptr)},
               {"rates", rates}};
    } else {
      throw std::invalid_argument("unknown command '" + command +
                                  "' (start, stop, annotate, status)");
    }
  } catch (const std::invalid_argument& e) {
    counters.add(Counter::ctl_refused, 1);
    reply = {{"ok", false}, {"error", e.what()}};
  }
  return reply.dump();
}

ControlServer::ControlServer(const OutputSettings& output, AcquisitionControl& acquisitions,
                             Counters& counters)
    : acquisitions_(acquisitions), counters_(counters), socket_(context_, zmq::socket_type::rep) {
  const std::string& ep = output.control.endpoint;
  if (const auto holder = ipc_endpoint_in_use(ep))
    throw std::runtime_error("cannot bind the control endpoint " + ep + ": " + *holder);
  socket_.set(zmq::sockopt::linger, 0);
  socket_.set(zmq::sockopt::maxmsgsize, kMaxRequestBytes);
  socket_.set(zmq::sockopt::rcvtimeo, static_cast<int>(kPoll.count()));
  socket_.set(zmq::sockopt::sndtimeo, 1000);
  if (!output.zmq.curve_secret_key_file.empty()) {
    CurveKeys keys = load_curve_keys(output.zmq);
    zap_ = std::make_unique<ZapHandler>(context_, std::move(keys.client_public));
    socket_.set(zmq::sockopt::curve_server, true);
    socket_.set(zmq::sockopt::curve_secretkey, keys.server_secret_z85);
    socket_.set(zmq::sockopt::zap_domain, "petdaq");
  }
  try {
    socket_.bind(ep);
  } catch (const zmq::error_t& e) {
    throw std::runtime_error("cannot bind the control endpoint " + ep + ": " + e.what());
  }
  thread_ = std::thread([this] { run(); });
}

ControlServer::~ControlServer() { close(); }

void ControlServer::close() {
  stop_.store(true, std::memory_order_release);
  if (thread_.joinable()) thread_.join();
}

void ControlServer::update_rates(const std::string& json) {
  std::lock_guard lock(rates_mutex_);
  rates_.assign(json);
}

void ControlServer::run() {
  name_this_thread("petdaq-control");
  while (!stop_.load(std::memory_order_acquire)) {
    zmq::message_t request;
    zmq::recv_result_t got;
    try {
      got = socket_.recv(request);
    } catch (const zmq::error_t& e) {
      spdlog::error("control endpoint: {}", e.what());
      break;
    }
    if (!got) continue;  // the poll timeout: look at stop_ again
    nlohmann::json rates;
    {
      std::lock_guard lock(rates_mutex_);
      rates = nlohmann::json::parse(rates_, nullptr, false);
    }
    if (rates.is_discarded()) rates = nullptr;
    const std::string reply =
        handle_control_request(request.to_string(), acquisitions_, rates, counters_, unix_ns());
    try {
      socket_.send(zmq::buffer(reply), zmq::send_flags::none);
    } catch (const zmq::error_t& e) {
      spdlog::warn("control endpoint: reply not sent: {}", e.what());
    }
  }
}

}  // namespace petdaq::daemon

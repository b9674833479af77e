// The control endpoint (docs/operations.md, "Acquisitions"): a ZeroMQ REP socket at
// `output.control.endpoint` served by a thread of its own. petdaq-ctl sends one JSON request
// ({"command": "start" | "stop" | "annotate" | "status", ...}) and gets one JSON reply
// ({"ok": true, ...} or {"ok": false, "error": "..."}). Where output.zmq has CURVE keys the
// control socket is a CURVE server with the same keys and the same listed clients.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "core/counters.h"
#include "core/settings.h"
#include "daemon/acquisition.h"

namespace petdaq::daemon {

class ZapHandler;

// The reply to one request (its text); counts it in ctl.commands, a refusal also in
// ctl.refused. `rates`: the latest rates document, for `status`.
std::string handle_control_request(const std::string& request, AcquisitionControl& acquisitions,
                                   const nlohmann::json& rates, Counters& counters,
                                   std::uint64_t now_unix_ns);

class ControlServer {
 public:
  // Binds the endpoint; throws std::runtime_error naming it when it cannot.
  ControlServer(const OutputSettings& output, AcquisitionControl& acquisitions,
                Counters& counters);
  ~ControlServer();
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  // The latest rates document (any thread), for `status`.
  void update_rates(const std::string& json);
  // Answers no more requests (the daemon is stopping); update_rates() may still be called.
  void close();

 private:
  void run();

  AcquisitionControl& acquisitions_;
  Counters& counters_;
  zmq::context_t context_{1};
  std::unique_ptr<ZapHandler> zap_;
  zmq::socket_t socket_;
  std::mutex rates_mutex_;
  std::string rates_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace petdaq::daemon

// CURVE authentication of subscribers (RFC 26 CurveZMQ, RFC 27 ZAP): the publisher is a
// CURVE server with the secret key of output.zmq.curve_secret_key_file, and a ZAP handler
// admits only the client public keys listed in output.zmq.curve_client_keys_file. Without
// the keys the endpoint is open to anyone who can reach it.
#pragma once

#include <atomic>
#include <filesystem>
#include <set>
#include <string>
#include <thread>

#include <zmq.hpp>

#include "core/settings.h"

namespace petdaq::daemon {

struct CurveKeys {
  std::string server_secret_z85;          // 40 characters
  std::set<std::string> client_public;    // 32-byte binary keys
};

// Reads and checks both files; throws std::runtime_error naming the key and the file.
CurveKeys load_curve_keys(const ZmqSettings& zmq);

// Answers libzmq's ZAP requests on inproc://zeromq.zap.01 of `context` from its own thread:
// a CURVE client whose public key is listed is admitted, any other refused.
class ZapHandler {
 public:
  ZapHandler(zmq::context_t& context, std::set<std::string> client_public);
  ~ZapHandler();
  ZapHandler(const ZapHandler&) = delete;
  ZapHandler& operator=(const ZapHandler&) = delete;

 private:
  void run(zmq::socket_t& socket);

  std::set<std::string> allowed_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace petdaq::daemon

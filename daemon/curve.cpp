#include "daemon/curve.h"

#include <array>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <vector>

#include <zmq_addon.hpp>

namespace petdaq::daemon {

namespace {

constexpr std::size_t kZ85KeyChars = 40;
constexpr std::size_t kKeyBytes = 32;

// The key's 32 bytes, or empty when `text` is not a Z85 key.
std::string decode_key(const std::string& text) {
  if (text.size() != kZ85KeyChars) return "";
  std::array<std::uint8_t, kKeyBytes> key{};
  if (!zmq_z85_decode(key.data(), text.c_str())) return "";
  return {reinterpret_cast<const char*>(key.data()), key.size()};
}

// The lines that are neither blank nor comments ('#' first: Z85 itself uses '#'), trimmed.
std::vector<std::string> key_lines(const std::filesystem::path& file, const std::string& key) {
  std::ifstream in(file);
  if (!in) throw std::runtime_error(key + ": cannot read " + file.string());
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line)) {
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    const auto last = line.find_last_not_of(" \t\r");
    out.push_back(line.substr(first, last - first + 1));
  }
  return out;
}

}  // namespace

CurveKeys load_curve_keys(const ZmqSettings& zmq) {
  CurveKeys k;
  const std::string secret_key = "output.zmq.curve_secret_key_file";
  const std::string clients_key = "output.zmq.curve_client_keys_file";
  // A secret every local user can read is no secret (the group may read it: root:petdaq 0640).
  std::error_code ec;
  const auto perms = std::filesystem::status(zmq.curve_secret_key_file, ec).permissions();
  if (!ec && (perms & std::filesystem::perms::others_read) != std::filesystem::perms::none)
    throw std::runtime_error(secret_key + ": " + zmq.curve_secret_key_file.string() +
                             " is readable by every user; make it 0600 or 0640 (chmod o-r)");
  const auto secret = key_lines(zmq.curve_secret_key_file, secret_key);
  if (secret.size() != 1 || decode_key(secret[0]).empty())
    throw std::runtime_error(secret_key + ": " + zmq.curve_secret_key_file.string() +
                             " must hold one Z85 key of 40 characters");
  k.server_secret_z85 = secret[0];
  const auto clients = key_lines(zmq.curve_client_keys_file, clients_key);
  for (std::size_t i = 0; i < clients.size(); ++i) {
    const std::string key = decode_key(clients[i]);
    if (key.empty())
      throw std::runtime_error(clients_key + ": " + zmq.curve_client_keys_file.string() +
                               ": key " + std::to_string(i + 1) + " is not a Z85 key of 40 characters");
    k.client_public.insert(key);
  }
  if (k.client_public.empty())
    throw std::runtime_error(clients_key + ": " + zmq.curve_client_keys_file.string() +
                             " lists no client key");
  return k;
}

ZapHandler::ZapHandler(zmq::context_t& context, std::set<std::string> client_public)
    : allowed_(std::move(client_public)) {
  // Bound before the publisher binds, so no handshake happens without it.
  auto socket = std::make_shared<zmq::socket_t>(context, zmq::socket_type::rep);
  socket->set(zmq::sockopt::linger, 0);
  socket->bind("inproc://zeromq.zap.01");
  thread_ = std::thread([this, socket] {
    run(*socket);
    socket->close();
  });
}

ZapHandler::~ZapHandler() {
  stop_.store(true, std::memory_order_release);
  thread_.join();
}

void ZapHandler::run(zmq::socket_t& socket) {
  while (!stop_.load(std::memory_order_acquire)) {
    zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, std::chrono::milliseconds(100)) == 0) continue;
    std::vector<zmq::message_t> request;
    if (!zmq::recv_multipart(socket, std::back_inserter(request), zmq::recv_flags::dontwait))
      continue;
    // RFC 27: version, request id, domain, address, routing id, mechanism, credentials.
    const bool curve = request.size() >= 7 && request[5].to_string_view() == "CURVE";
    const bool admitted = curve && allowed_.count(request[6].to_string()) > 0;
    std::array<zmq::const_buffer, 6> reply = {
        zmq::str_buffer("1.0"),
        zmq::buffer(request.size() > 1 ? request[1].data() : nullptr,
                    request.size() > 1 ? request[1].size() : 0),
        admitted ? zmq::str_buffer("200") : zmq::str_buffer("400"),
        admitted ? zmq::str_buffer("OK") : zmq::str_buffer("client key not allowed"),
        zmq::str_buffer(""),
        zmq::str_buffer("")};
    zmq::send_multipart(socket, reply);
  }
}

}  // namespace petdaq::daemon

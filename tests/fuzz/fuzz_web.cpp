// petdaq-web's handling of what arrives from outside, on arbitrary bytes: first byte even,
// the rest are the frames of one ZeroMQ message to the intake (rates documents, histograms
// bodies, headers); odd, the rest go over a TCP connection to the running server as a
// browser's bytes would (HTTP requests, a WebSocket upgrade and its frames), and the answer
// is read to the end. Nothing may crash, read out of bounds or hang.
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>
#include <thread>
#include <vector>

#include "tools/web/intake.h"
#include "tools/web/server.h"

namespace {

using namespace petdaq::web;

struct Web {
  WebCounters counters;
  std::unique_ptr<Server> server;
  std::unique_ptr<Intake> intake;
  std::thread loop;
  std::uint16_t port = 0;
  Web() {
    ServerOptions o;
    o.listen = {boost::asio::ip::make_address("127.0.0.1"), 0};
    o.files["/"] = {"text/html; charset=utf-8", "<html>petdaq</html>"};
    o.max_connections = 16;
    o.max_message_bytes = 4096;
    o.allowed_origins = {"http://viewer.example:9000"};
    server = std::make_unique<Server>(o, counters);
    intake = std::make_unique<Intake>("inproc://nobody", *server, counters);
    port = server->local_endpoint().port();
    loop = std::thread([this] { server->run(); });
  }
};

Web& web() {
  static Web* w = new Web();  // lives for the whole run: the loop thread uses it
  return *w;
}

// Up to 4 frames: each a length byte then that many bytes; the fourth takes the rest.
void to_intake(const std::uint8_t* data, std::size_t size) {
  std::string_view frames[4];
  std::size_t n = 0;
  while (size > 0 && n < 4) {
    std::size_t len = n == 3 ? size - 1 : std::size_t{data[0]};
    ++data;
    --size;
    len = std::min(len, size);
    frames[n++] = std::string_view(reinterpret_cast<const char*>(data), len);
    data += len;
    size -= len;
  }
  web().intake->take(frames, n);
}

void to_server(const std::uint8_t* data, std::size_t size) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(web().port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    std::size_t done = 0;
    while (done < size) {
      const ssize_t w = ::send(fd, data + done, size - done, MSG_NOSIGNAL);
      if (w <= 0) break;
      done += static_cast<std::size_t>(w);
    }
    ::shutdown(fd, SHUT_WR);
    // The answer, to its end (the server closes after our end), within half a second.
    char buf[4096];
    for (int rounds = 0; rounds < 50; ++rounds) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 10) <= 0) continue;
      if (::recv(fd, buf, sizeof buf, 0) <= 0) break;
    }
  }
  ::close(fd);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  if (data[0] % 2 == 0)
    to_intake(data + 1, size - 1);
  else
    to_server(data + 1, size - 1);
  return 0;
}

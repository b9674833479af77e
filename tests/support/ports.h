// Loopback ports for tests: one nobody holds right now (bound to port 0, read back and
// released). Good enough for tests run side by side: the kernel hands ephemeral ports out in
// turn, so one just released is not handed out again at once.
#pragma once

#include <cstdint>

namespace petdaq::test {

std::uint16_t free_udp_port();
std::uint16_t free_tcp_port();

}  // namespace petdaq::test

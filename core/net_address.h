// IPv4 endpoints and networks as the configuration writes them (DESIGN section 9, `input`):
// "a.b.c.d:port" and "a.b.c.d/bits". The settings parse them once, when they load; the
// receiver and the source filter take the typed values. Text only: no sockets, no name
// resolution (a host name is refused, so a start never waits on DNS).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace petdaq {

// A dotted-quad IPv4 address ("10.1.2.3": four decimal parts 0..255 without leading zeros,
// as inet_pton takes it), in host byte order.
std::optional<std::uint32_t> parse_ipv4(std::string_view text);
std::string ipv4_to_string(std::uint32_t address);

struct UdpEndpoint {
  std::uint32_t address = 0;  // IPv4, host byte order
  std::uint16_t port = 0;

  std::string to_string() const;  // "a.b.c.d:port"
  bool operator==(const UdpEndpoint&) const = default;
};

// "a.b.c.d:port" with a port in 1..65535. On refusal `why` (when given) receives the rule
// it breaks, worded for a message about the key.
std::optional<UdpEndpoint> parse_udp_endpoint(std::string_view text, std::string* why = nullptr);

struct Ipv4Network {
  std::uint32_t address = 0;  // host byte order, already masked
  std::uint32_t mask = 0;     // host byte order

  // `address` in host byte order.
  bool contains(std::uint32_t a) const { return (a & mask) == address; }
  std::string to_string() const;  // "a.b.c.d/bits"
  bool operator==(const Ipv4Network&) const = default;
};

// "a.b.c.d/bits" with bits in 0..32, or "a.b.c.d" (one address, /32).
std::optional<Ipv4Network> parse_ipv4_network(std::string_view text);

}  // namespace petdaq

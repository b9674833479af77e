#include "core/net_address.h"

#include <bit>
#include <charconv>

namespace petdaq {
namespace {

// A decimal number with no sign (and no leading zero unless `leading_zero_ok`), in [0, max].
std::optional<unsigned> decimal(std::string_view text, unsigned max, bool leading_zero_ok) {
  if (text.empty() || (!leading_zero_ok && text.size() > 1 && text[0] == '0')) return std::nullopt;
  unsigned v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v > max) return std::nullopt;
  return v;
}

}  // namespace

std::optional<std::uint32_t> parse_ipv4(std::string_view text) {
  std::uint32_t address = 0;
  for (int part = 0; part < 4; ++part) {
    const auto dot = text.find('.');
    if ((part < 3) == (dot == std::string_view::npos)) return std::nullopt;
    const auto v = decimal(text.substr(0, dot), 255, false);
    if (!v) return std::nullopt;
    address = (address << 8) | *v;
    text = part < 3 ? text.substr(dot + 1) : std::string_view();
  }
  return address;
}

std::string ipv4_to_string(std::uint32_t a) {
  return std::to_string(a >> 24) + "." + std::to_string((a >> 16) & 0xFF) + "." +
         std::to_string((a >> 8) & 0xFF) + "." + std::to_string(a & 0xFF);
}

std::string UdpEndpoint::to_string() const {
  return ipv4_to_string(address) + ":" + std::to_string(port);
}

std::optional<UdpEndpoint> parse_udp_endpoint(std::string_view text, std::string* why) {
  const auto colon = text.rfind(':');
  const auto port = colon == std::string_view::npos || colon == 0
                        ? std::nullopt
                        : decimal(text.substr(colon + 1), 65535, true);
  if (!port || *port == 0) {
    if (why) *why = "must be address:port with a port in 1..65535";
    return std::nullopt;
  }
  const auto address = parse_ipv4(text.substr(0, colon));
  if (!address) {
    if (why) *why = "must be address:port with an IPv4 address a.b.c.d (names are not resolved)";
    return std::nullopt;
  }
  return UdpEndpoint{*address, static_cast<std::uint16_t>(*port)};
}

std::string Ipv4Network::to_string() const {
  return ipv4_to_string(address) + "/" + std::to_string(std::popcount(mask));
}

std::optional<Ipv4Network> parse_ipv4_network(std::string_view text) {
  const auto slash = text.find('/');
  const auto address = parse_ipv4(text.substr(0, slash));
  const auto bits = slash == std::string_view::npos ? std::optional<unsigned>(32)
                                                    : decimal(text.substr(slash + 1), 32, true);
  if (!address || !bits) return std::nullopt;
  Ipv4Network n;
  n.mask = *bits == 0 ? 0u : ~std::uint32_t{0} << (32 - *bits);
  n.address = *address & n.mask;
  return n;
}

}  // namespace petdaq

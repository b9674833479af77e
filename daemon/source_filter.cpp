#include "daemon/source_filter.h"

#include <arpa/inet.h>

#include <stdexcept>

namespace petdaq::daemon {

Ipv4Network parse_ipv4_network(const std::string& cidr) {
  const auto slash = cidr.find('/');
  const std::string addr_text = cidr.substr(0, slash);
  in_addr addr{};
  if (inet_pton(AF_INET, addr_text.c_str(), &addr) != 1)
    throw std::invalid_argument("'" + cidr + "' is not an IPv4 network a.b.c.d/bits");
  int bits = 32;
  if (slash != std::string::npos) {
    const std::string bits_text = cidr.substr(slash + 1);
    std::size_t used = 0;
    try {
      bits = std::stoi(bits_text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (bits_text.empty() || used != bits_text.size() || bits < 0 || bits > 32)
      throw std::invalid_argument("'" + cidr + "': prefix length must be 0..32");
  }
  Ipv4Network n;
  n.mask = bits == 0 ? 0u : ~std::uint32_t{0} << (32 - bits);
  n.address = ntohl(addr.s_addr) & n.mask;
  return n;
}

SourceFilter::SourceFilter(const std::vector<std::string>& cidrs) {
  networks_.reserve(cidrs.size());
  for (const std::string& c : cidrs) networks_.push_back(parse_ipv4_network(c));
}

}  // namespace petdaq::daemon

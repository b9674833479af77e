// input.allowed_sources: the IPv4 networks (CIDR "a.b.c.d/bits") whose datagrams are
// accepted. Anything else is counted in rx.foreign_source and dropped.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace petdaq::daemon {

struct Ipv4Network {
  std::uint32_t address = 0;  // host byte order, already masked
  std::uint32_t mask = 0;     // host byte order
};

// Throws std::invalid_argument naming the text when it is not a.b.c.d/bits.
Ipv4Network parse_ipv4_network(const std::string& cidr);

class SourceFilter {
 public:
  explicit SourceFilter(const std::vector<std::string>& cidrs);
  // address in host byte order.
  bool allows(std::uint32_t address) const {
    for (const Ipv4Network& n : networks_)
      if ((address & n.mask) == n.address) return true;
    return false;
  }

 private:
  std::vector<Ipv4Network> networks_;
};

}  // namespace petdaq::daemon

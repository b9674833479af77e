// input.allowed_sources: the IPv4 networks whose datagrams are accepted (parsed with the
// settings, core/net_address.h). Anything else is counted in rx.foreign_source and dropped.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "core/net_address.h"

namespace petdaq::daemon {

class SourceFilter {
 public:
  explicit SourceFilter(std::vector<Ipv4Network> networks) : networks_(std::move(networks)) {}
  // address in host byte order.
  bool allows(std::uint32_t address) const {
    for (const Ipv4Network& n : networks_)
      if (n.contains(address)) return true;
    return false;
  }

 private:
  std::vector<Ipv4Network> networks_;
};

}  // namespace petdaq::daemon

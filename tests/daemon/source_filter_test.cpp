// The source filter (daemon/source_filter.h): CIDR networks allowed to send.
#include "daemon/source_filter.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include "core/net_address.h"

namespace petdaq::daemon {
namespace {

TEST(SourceFilter, CidrMatching) {
  auto net = [](const char* s) { return parse_ipv4_network(s).value(); };
  SourceFilter f({net("127.0.0.1/32"), net("10.1.0.0/16")});
  auto ip = [](const char* s) {
    in_addr a{};
    inet_pton(AF_INET, s, &a);
    return ntohl(a.s_addr);
  };
  EXPECT_TRUE(f.allows(ip("127.0.0.1")));
  EXPECT_FALSE(f.allows(ip("127.0.0.2")));
  EXPECT_TRUE(f.allows(ip("10.1.255.3")));
  EXPECT_FALSE(f.allows(ip("10.2.0.1")));
  EXPECT_TRUE(SourceFilter({net("0.0.0.0/0")}).allows(ip("192.168.1.1")));
  EXPECT_FALSE(SourceFilter({}).allows(ip("127.0.0.1")));
}

}  // namespace
}  // namespace petdaq::daemon

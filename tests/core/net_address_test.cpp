// IPv4 endpoints and networks from text (core/net_address.h), against the C library's
// inet_pton as the independent reference.
#include "core/net_address.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <random>
#include <string>

namespace petdaq {
namespace {

std::optional<std::uint32_t> reference_ipv4(const std::string& text) {
  in_addr a{};
  if (inet_pton(AF_INET, text.c_str(), &a) != 1) return std::nullopt;
  return ntohl(a.s_addr);
}

TEST(NetAddress, Ipv4AgreesWithInetPtonOnRandomText) {
  std::mt19937 rng(7);
  const std::string alphabet = "0123456789....:/x- ";
  std::uniform_int_distribution<std::size_t> length(0, 16);
  std::uniform_int_distribution<std::size_t> pick(0, alphabet.size() - 1);
  std::uniform_int_distribution<int> part(0, 300);
  int accepted = 0;
  for (int i = 0; i < 200000; ++i) {
    std::string text;
    if (i % 2 == 0) {  // near-addresses: four parts, some out of range or with leading zeros
      for (int p = 0; p < 4; ++p) {
        if (p) text += '.';
        const int v = part(rng);
        if (v % 17 == 0) text += '0';
        text += std::to_string(v);
      }
      if (i % 6 == 0) text += alphabet[pick(rng)];
    } else {
      for (std::size_t n = length(rng); n > 0; --n) text += alphabet[pick(rng)];
    }
    const auto want = reference_ipv4(text);
    EXPECT_EQ(parse_ipv4(text), want) << "'" << text << "'";
    accepted += want.has_value();
    if (want) EXPECT_EQ(ipv4_to_string(*want), text);
  }
  EXPECT_GT(accepted, 10000);  // the comparison covered both outcomes
}

TEST(NetAddress, Endpoints) {
  EXPECT_EQ(parse_udp_endpoint("10.1.2.3:6001"), (UdpEndpoint{0x0A010203u, 6001}));
  EXPECT_EQ(parse_udp_endpoint("0.0.0.0:65535"), (UdpEndpoint{0, 65535}));
  EXPECT_EQ(parse_udp_endpoint("10.1.2.3:6001")->to_string(), "10.1.2.3:6001");
  std::string why;
  for (const char* bad : {"127.0.0.1", "127.0.0.1:", "127.0.0.1:0", "127.0.0.1:65536",
                          ":5600", "127.0.0.1:56x0", "127.0.0.1:-1", "127.0.0.1:+5"}) {
    why.clear();
    EXPECT_FALSE(parse_udp_endpoint(bad, &why)) << bad;
    EXPECT_EQ(why, "must be address:port with a port in 1..65535") << bad;
  }
  for (const char* bad : {"localhost:5600", "256.0.0.1:5600", "1.2.3:5600", "[::1]:5600"}) {
    why.clear();
    EXPECT_FALSE(parse_udp_endpoint(bad, &why)) << bad;
    EXPECT_EQ(why, "must be address:port with an IPv4 address a.b.c.d (names are not resolved)")
        << bad;
  }
}

TEST(NetAddress, NetworksMaskTheirAddress) {
  const auto n = parse_ipv4_network("10.1.2.3/16");
  ASSERT_TRUE(n);
  EXPECT_EQ(*n, (Ipv4Network{0x0A010000u, 0xFFFF0000u}));
  EXPECT_EQ(n->to_string(), "10.1.0.0/16");
  EXPECT_TRUE(n->contains(0x0A01FFFFu));
  EXPECT_FALSE(n->contains(0x0A020000u));
  EXPECT_EQ(parse_ipv4_network("1.2.3.4"), (Ipv4Network{0x01020304u, 0xFFFFFFFFu}));
  const auto all = parse_ipv4_network("0.0.0.0/0");
  ASSERT_TRUE(all);
  EXPECT_TRUE(all->contains(0xC0A80101u));
  EXPECT_EQ(all->to_string(), "0.0.0.0/0");
  for (const char* bad : {"10.0.0.0/33", "10.0.0/8", "256.0.0.0/8", "10.0.0.0/", "ten/8",
                          "10.0.0.0.0/8", "10.0.0.0/x", "10.0.0.0/-1", "/8"})
    EXPECT_FALSE(parse_ipv4_network(bad)) << bad;
}

// Every prefix length: the mask has exactly that many leading ones, and contains() agrees
// with a comparison of the leading bits.
TEST(NetAddress, EveryPrefixLength) {
  std::mt19937 rng(11);
  for (unsigned bits = 0; bits <= 32; ++bits) {
    const auto n = parse_ipv4_network("172.16.200.7/" + std::to_string(bits));
    ASSERT_TRUE(n) << bits;
    EXPECT_EQ(n->to_string(), ipv4_to_string(n->address) + "/" + std::to_string(bits));
    for (int i = 0; i < 1000; ++i) {
      const std::uint32_t a = rng();
      const bool same = bits == 0 || (a >> (32 - bits)) == (0xAC10C807u >> (32 - bits));
      EXPECT_EQ(n->contains(a), same) << bits << " " << ipv4_to_string(a);
    }
  }
}

}  // namespace
}  // namespace petdaq

// The number formatter of tools/common/si.h.
#include "tools/common/si.h"

#include <gtest/gtest.h>

namespace petdaq::cli {
namespace {

TEST(Si, NumbersHaveThreeDigitsAndAPrefix) {
  EXPECT_EQ(si(0), "0");
  EXPECT_EQ(si(7.25), "7.2");
  EXPECT_EQ(si(980), "980");
  EXPECT_EQ(si(1234), "1.23 k");
  EXPECT_EQ(si(12345), "12.3 k");
  EXPECT_EQ(si(123456), "123 k");
  EXPECT_EQ(si(2345678), "2.35 M");
  EXPECT_EQ(si(3.2e9), "3.20 G");
  EXPECT_EQ(si(-1500), "-1.50 k");
}

}  // namespace
}  // namespace petdaq::cli

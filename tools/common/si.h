// Numbers for people: three significant digits and an SI prefix ("980", "12.3 k", "2.35 M",
// "3.20 G"), as petdaq-top and petdaq-replay print rates and counts.
#pragma once

#include <cmath>
#include <cstdio>
#include <string>

namespace petdaq::cli {

inline std::string si(double value) {
  char buf[32];
  const double a = std::fabs(value);
  const char* prefix = "";
  double v = value;
  if (a >= 1e9) {
    v = value / 1e9;
    prefix = " G";
  } else if (a >= 1e6) {
    v = value / 1e6;
    prefix = " M";
  } else if (a >= 1e3) {
    v = value / 1e3;
    prefix = " k";
  }
  const double av = std::fabs(v);
  if (*prefix == '\0') {
    std::snprintf(buf, sizeof buf, av >= 100 || v == std::floor(v) ? "%.0f" : "%.1f", v);
  } else {
    std::snprintf(buf, sizeof buf, av >= 100 ? "%.0f%s" : av >= 10 ? "%.1f%s" : "%.2f%s", v,
                  prefix);
  }
  return buf;
}

}  // namespace petdaq::cli

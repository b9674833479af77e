// tools/common/progress.h: quiet for the first second, then one line a second in a log and a
// line redrawn in place (at most five times a second) on a terminal.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "tools/common/progress.h"

namespace petdaq {
namespace {

using cli::Progress;
using std::chrono::milliseconds;

std::string text_of(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string s;
  for (int c; (c = std::fgetc(f)) != EOF;) s += static_cast<char>(c);
  return s;
}

TEST(Progress, InALogOneLineASecondAfterTheFirstSecond) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  const auto t0 = Progress::Clock::time_point{} + std::chrono::hours(1);
  {
    Progress p("petdaq-x", true, f, false, t0);
    for (int ms = 0; ms <= 3500; ms += 100) p.update(ms / 4000.0, "n frames", t0 + milliseconds(ms));
  }
  // Lines at 1.0, 2.0 and 3.0 s; nothing before the first second.
  EXPECT_EQ(text_of(f),
            "petdaq-x: 1 s   25.0 %  3 s left  n frames\n"
            "petdaq-x: 2 s   50.0 %  2 s left  n frames\n"
            "petdaq-x: 3 s   75.0 %  1 s left  n frames\n");
  std::fclose(f);
}

TEST(Progress, OnATerminalOneLineRedrawnInPlaceThenCleared) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  const auto t0 = Progress::Clock::time_point{} + std::chrono::hours(1);
  {
    Progress p("petdaq-x", true, f, true, t0);
    for (int ms = 0; ms <= 1500; ms += 100) p.update(-1, "k", t0 + milliseconds(ms));
  }
  // Redrawn at 1.0, 1.2 and 1.4 s (at most every 200 ms), then the line is cleared.
  EXPECT_EQ(text_of(f), std::string("\rpetdaq-x: 1 s  k\033[K") + "\rpetdaq-x: 1 s  k\033[K" +
                            "\rpetdaq-x: 1 s  k\033[K" + "\r\033[K");
  std::fclose(f);
}

TEST(Progress, QuietMeansNothing) {
  std::FILE* f = std::tmpfile();
  const auto t0 = Progress::Clock::time_point{} + std::chrono::hours(1);
  {
    Progress p("petdaq-x", false, f, false, t0);
    p.update(0.5, "x", t0 + std::chrono::seconds(5));
  }
  EXPECT_EQ(text_of(f), "");
  std::fclose(f);
}

}  // namespace
}  // namespace petdaq

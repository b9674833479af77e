// The daemon's logging: rate-limited warnings (daemon/rate_limited_log.h) and whether stderr
// is the journal (daemon/notify.h).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "daemon/notify.h"
#include "daemon/rate_limited_log.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/wait.h"

namespace petdaq::daemon {
namespace {

using namespace std::chrono_literals;

// A warning held back by the rate limit is printed by the next flush once its interval has
// passed, with the occurrences since the line before, instead of waiting for the next one.
TEST(RateLimitedWarning, WhatWasHeldBackIsFlushed) {
  auto lines = std::make_shared<std::ostringstream>();
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(*lines);
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("test", sink));
  {
    RateLimitedWarning w(std::chrono::milliseconds(50));
    w.warn("host ring full: {} datagrams dropped", 1);
    w.warn("host ring full: {} datagrams dropped", 300);
    w.warn("host ring full: {} datagrams dropped", 30583);
    flush_held_back_warnings();  // too early: the interval has not passed
    const std::string so_far = lines->str();
    EXPECT_EQ(std::count(so_far.begin(), so_far.end(), '\n'), 1) << so_far;
    std::this_thread::sleep_for(60ms);  // time passing is the test: the interval runs out
    flush_held_back_warnings();
    flush_held_back_warnings();  // nothing more held back
  }
  spdlog::set_default_logger(previous);
  const std::string text = lines->str();
  EXPECT_NE(text.find("host ring full: 1 datagrams dropped (1 occurrences"), std::string::npos) << text;
  EXPECT_NE(text.find("host ring full: 30583 datagrams dropped (2 occurrences"), std::string::npos)
      << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2) << text;
}

// A counted warning gives the total since the line before, not one call's count: 1 at
// once, then the 300 + 30583 held back, flushed once the interval has passed.
TEST(RateLimitedWarning, ACountedWarningGivesTheTotalSinceTheLastLine) {
  auto lines = std::make_shared<std::ostringstream>();
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(*lines);
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("test", sink));
  {
    RateLimitedWarning w(std::chrono::milliseconds(50));
    w.warn_count(1, "host ring full, datagrams dropped");
    w.warn_count(300, "host ring full, datagrams dropped");
    w.warn_count(30583, "host ring full, datagrams dropped");
    auto line_count = [&] {
      const std::string t = lines->str();
      return std::count(t.begin(), t.end(), '\n');
    };
    test::wait_until([&] {
      flush_held_back_warnings();
      return line_count() >= 2;
    }, 5s, 1ms);
  }
  spdlog::set_default_logger(previous);
  const std::string text = lines->str();
  EXPECT_NE(text.find("host ring full, datagrams dropped: 1 since the last such warning"),
            std::string::npos) << text;
  EXPECT_NE(text.find("host ring full, datagrams dropped: 30883 since the last such warning"),
            std::string::npos) << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2) << text;
}

TEST(Logging, StderrIsTheJournalOnlyWhenJournalStreamNamesIt) {
  const test::ScratchDir dir;
  const std::filesystem::path path = dir / "stderr";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  ASSERT_GE(fd, 0);
  struct stat st {};
  ASSERT_EQ(fstat(fd, &st), 0);
  const int saved = dup(STDERR_FILENO);
  ASSERT_EQ(dup2(fd, STDERR_FILENO), STDERR_FILENO);
  const std::string ours = std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
  const std::string other = std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino + 1);
  unsetenv("JOURNAL_STREAM");
  const bool without = stderr_is_journal();
  setenv("JOURNAL_STREAM", ours.c_str(), 1);
  const bool with_ours = stderr_is_journal();
  setenv("JOURNAL_STREAM", other.c_str(), 1);
  const bool with_other = stderr_is_journal();
  setenv("JOURNAL_STREAM", "garbage", 1);
  const bool with_garbage = stderr_is_journal();
  unsetenv("JOURNAL_STREAM");
  dup2(saved, STDERR_FILENO);
  close(saved);
  close(fd);
  EXPECT_FALSE(without);
  EXPECT_TRUE(with_ours);
  EXPECT_FALSE(with_other);  // stderr was redirected away from the journal
  EXPECT_FALSE(with_garbage);
}

}  // namespace
}  // namespace petdaq::daemon

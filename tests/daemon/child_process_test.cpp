// The tests' child processes (tests/support/process.h, which DaemonProcess is): they die with
// the process that started them, even when it is killed, so no daemon outlives its test.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>

#include <gtest/gtest.h>

#include "tests/support/process.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/wait.h"

namespace petdaq::test {
namespace {

using namespace std::chrono_literals;

bool alive(pid_t pid) {
  if (::kill(pid, 0) != 0) return errno != ESRCH;
  // Reaped by init or not yet: a zombie is not running.
  char state = '?';
  if (FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r")) {
    if (std::fscanf(f, "%*d %*s %c", &state) != 1) state = '?';
    std::fclose(f);
  }
  return state != 'Z' && state != 'X';
}

// A test process (here a forked stand-in) starts a long-running child and is then killed
// with SIGKILL, so no destructor runs: the child dies too.
TEST(ChildProcess, DiesWhenTheProcessThatStartedItIsKilled) {
  const test::ScratchDir scratch;
  const std::filesystem::path& dir = scratch.path();
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t parent = ::fork();
  ASSERT_GE(parent, 0);
  if (parent == 0) {
    ::close(fds[0]);
    Child sleeper({"/bin/sleep", "300"}, dir / "sleep.out", dir / "sleep.err");
    const pid_t pid = sleeper.pid();
    if (::write(fds[1], &pid, sizeof pid) != sizeof pid) ::_exit(1);
    ::pause();  // until killed
    ::_exit(0);
  }
  ::close(fds[1]);
  pid_t grandchild = -1;
  ASSERT_EQ(::read(fds[0], &grandchild, sizeof grandchild), static_cast<ssize_t>(sizeof grandchild));
  ::close(fds[0]);
  ASSERT_TRUE(alive(grandchild));
  ::kill(parent, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(parent, &status, 0), parent);
  const bool gone = wait_until([&] { return !alive(grandchild); }, 5s, 10ms);
  if (!gone) ::kill(grandchild, SIGKILL);  // leave nothing behind either way
  EXPECT_TRUE(gone) << "the child of a killed test process is still running";
}

}  // namespace
}  // namespace petdaq::test

// Child processes for tests: a program run as a person would, its stdout and stderr in files,
// its exit status read with a deadline, and killed if a test leaves it running or if the
// test process itself dies (even by SIGKILL: PR_SET_PDEATHSIG), so that no daemon outlives
// the test that started it.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace petdaq::test {

// argv[0] is the program's path. stdout goes to `out`, stderr to `err` (the same path: one
// file with both, in the order written); stdin is /dev/null. Killed (SIGKILL) if still
// running when destroyed.
class Child {
 public:
  Child(const std::vector<std::string>& argv, const std::filesystem::path& out,
        const std::filesystem::path& err) {
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork failed for " + argv.at(0));
    if (pid_ == 0) {
      // SIGKILL when the thread that started it ends: Child objects live on a test's main
      // thread. A parent that died before the call is seen by getppid().
      if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent) ::_exit(127);
      const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int e = err == out ? o : ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int in = ::open("/dev/null", O_RDONLY);
      ::dup2(o, 1);
      ::dup2(e, 2);
      ::dup2(in, 0);
      ::execv(args[0], args.data());
      ::_exit(127);
    }
  }
  ~Child() {
    if (running()) {
      ::kill(pid_, SIGKILL);
      wait_for(std::chrono::seconds(5));
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }
  // Whether it has not exited yet (reaps it if it has).
  bool running() { return pid_ > 0 && !wait_for(std::chrono::milliseconds(0)); }
  // Sends `sig` unless it has exited (its pid may belong to another process by then).
  void signal(int sig) {
    if (running()) ::kill(pid_, sig);
  }
  // Exit code (128 + signal for a signal), or nullopt if still running after `limit`.
  std::optional<int> wait_for(std::chrono::milliseconds limit) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (!status_ && pid_ > 0) {
      int st = 0;
      const pid_t r = ::waitpid(pid_, &st, WNOHANG);
      if (r == pid_) {
        status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        break;
      }
      if (std::chrono::steady_clock::now() >= end) return std::nullopt;
      // waitpid has no time-out and SIGCHLD belongs to the whole test process: poll.
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return status_;
  }

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
};

// Runs a command to the end (at most `limit`); returns its exit code, or -1 on time-out
// (the command is then killed).
inline int run_command(const std::vector<std::string>& argv, const std::filesystem::path& out,
                       const std::filesystem::path& err,
                       std::chrono::milliseconds limit = std::chrono::seconds(60)) {
  Child c(argv, out, err);
  const auto rc = c.wait_for(limit);
  return rc ? *rc : -1;
}

}  // namespace petdaq::test

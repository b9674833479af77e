// Progress of a long run on stderr: on a terminal one line redrawn in place (at most five
// times a second); in a log (stderr not a terminal) one plain line a second. Nothing before
// the first second, so short runs stay quiet.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <string_view>

namespace petdaq::cli {

class Progress {
 public:
  using Clock = std::chrono::steady_clock;

  Progress(std::string_view program, bool enabled)
      : Progress(program, enabled, stderr, ::isatty(STDERR_FILENO) != 0, Clock::now()) {}
  // For tests: where the lines go, whether that is a terminal, and when the run started.
  Progress(std::string_view program, bool enabled, std::FILE* out, bool terminal,
           Clock::time_point start)
      : program_(program), enabled_(enabled), terminal_(terminal), out_(out), start_(start),
        next_(start) {}
  ~Progress() { done(); }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // `fraction` in [0, 1] or negative when unknown; `text` says what was done so far.
  void update(double fraction, std::string_view text) { update(fraction, text, Clock::now()); }
  void update(double fraction, std::string_view text, Clock::time_point now) {
    if (!enabled_) return;
    const double elapsed_s = std::chrono::duration<double>(now - start_).count();
    if (elapsed_s < 1.0 || now < next_) return;
    next_ = now + (terminal_ ? std::chrono::milliseconds(200) : std::chrono::milliseconds(1000));
    std::string line = program_ + ": " + format_s(elapsed_s);
    if (fraction >= 0) {
      char buf[64];
      const double left_s = fraction > 0 ? elapsed_s * (1 - fraction) / fraction : 0;
      std::snprintf(buf, sizeof buf, "  %5.1f %%  %.0f s left", 100 * fraction, left_s);
      line += buf;
    }
    line += "  ";
    line += text;
    if (terminal_) {
      std::fprintf(out_, "\r%s\033[K", line.c_str());
      shown_ = true;
    } else {
      std::fprintf(out_, "%s\n", line.c_str());
    }
    std::fflush(out_);
  }

  // Ends the line on a terminal (the next output starts on a clean line).
  void done() {
    if (shown_) std::fprintf(out_, "\r\033[K");
    shown_ = false;
  }

 private:
  static std::string format_s(double s) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f s", s);
    return buf;
  }

  std::string program_;
  bool enabled_;
  bool terminal_;
  std::FILE* out_;
  bool shown_ = false;
  Clock::time_point start_;
  Clock::time_point next_;
};

}  // namespace petdaq::cli

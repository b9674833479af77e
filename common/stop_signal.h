// SIGINT and SIGTERM ask a command-line tool to stop: it finishes the batch in hand,
// reports and exits. The tools poll stop_requested() in their loops.
#pragma once

#include <csignal>

namespace petdaq {

namespace stop_signal_detail {
inline volatile std::sig_atomic_t requested = 0;
extern "C" inline void on_stop_signal(int) { requested = 1; }
}  // namespace stop_signal_detail

inline bool stop_requested() { return stop_signal_detail::requested != 0; }

inline void install_stop_signals() {
  struct sigaction sa {};
  sa.sa_handler = stop_signal_detail::on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

}  // namespace petdaq

// petdaq-top: a live count-rate display of petdaqd's `rates` topic. See docs/tools.md.
#include <curses.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "common/cli.h"
#include "common/stop_signal.h"
#include "core/figures.h"
#include "core/settings.h"
#include "tools/common/si.h"
#include "proto/records.h"
#include "proto/topics.h"
#include "tools/top/crystals.h"
#include "tools/top/rates.h"

namespace {

using namespace petdaq;
using namespace petdaq::top;
using cli::si;
using Clock = std::chrono::steady_clock;

constexpr double kStaleAfter_s = 3.0;
constexpr std::size_t kHistory_s = 60;


enum class Mode { screen, plain, json };

struct Options {
  std::string endpoint;
  std::filesystem::path config;
  Mode mode = Mode::screen;
  bool crystals = false;
};

// What the display knows: the latest document, the history and the counters' last values.
struct State {
  std::optional<Rates> latest;
  std::optional<Clock::time_point> latest_at;
  std::deque<double> prompts_history, singles_history;  // one sample per document
  std::map<std::string, std::uint64_t> previous_counters;
  std::map<std::string, std::uint64_t> counter_increase;  // over the last document
  // Boards whose receiving socket lost datagrams since the last document (bdm_socket_losses).
  std::vector<std::uint64_t> previous_socket_losses;
  std::vector<bool> socket_losing;
  std::uint64_t documents = 0;
  std::uint64_t bad_messages = 0;
  std::string last_error;
  // The publisher's instance id (message header version 2) and how often it changed.
  std::uint32_t publisher_id = 0;
  std::uint64_t publisher_changes = 0;
  std::string publisher_note;  // the last change, said once on stderr outside the screen
  bool publisher_note_pending = false;
  // The crystals view: the latest histograms message and, per DU, the singles rate between
  // the last two messages of one run.
  std::optional<CrystalView> crystals;
  std::vector<double> du_singles_per_s;
  // The CTR and energy resolution of the latest histograms message (core/figures.h).
  std::optional<ScannerFigures> figures;

  void take(CrystalView v) {
    du_singles_per_s.assign(v.dus.size(), 0.0);
    if (crystals && crystals->run_id == v.run_id && crystals->dus.size() == v.dus.size() &&
        v.created_unix_ns > crystals->created_unix_ns) {
      const double dt_s = static_cast<double>(v.created_unix_ns - crystals->created_unix_ns) * 1e-9;
      for (std::size_t i = 0; i < v.dus.size(); ++i)
        du_singles_per_s[i] =
            static_cast<double>(v.dus[i].singles - std::min(v.dus[i].singles, crystals->dus[i].singles)) / dt_s;
    }
    crystals = std::move(v);
  }

  void take(Rates r, Clock::time_point now) {
    prompts_history.push_back(r.prompts);
    singles_history.push_back(r.singles);
    while (prompts_history.size() > kHistory_s) prompts_history.pop_front();
    while (singles_history.size() > kHistory_s) singles_history.pop_front();
    counter_increase.clear();
    for (const auto& [name, value] : r.counters) {
      const auto it = previous_counters.find(name);
      if (it != previous_counters.end() && value > it->second) {
        counter_increase[name] = value - it->second;
      }
      previous_counters[name] = value;
    }
    socket_losing = boards_losing(previous_socket_losses, r.bdm_socket_losses);
    previous_socket_losses = r.bdm_socket_losses;
    latest = std::move(r);
    latest_at = now;
    ++documents;
  }
};

std::string format(const char* fmt, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

std::string duration_text(double s) {
  const auto total = static_cast<long long>(std::max(0.0, s));
  const long long d = total / 86400, h = total / 3600 % 24, m = total / 60 % 60, sec = total % 60;
  return d ? format("%lldd %02lld:%02lld:%02lld", d, h, m, sec)
           : format("%02lld:%02lld:%02lld", h, m, sec);
}

std::string sparkline(const std::deque<double>& values, std::size_t width) {
  // ASCII levels: every terminal and every capture shows them the same.
  static constexpr char levels[] = " .:-=+*#%@";
  constexpr int n_levels = sizeof levels - 1;
  double peak = 0;
  for (double v : values) peak = std::max(peak, v);
  std::string out(width > values.size() ? width - values.size() : 0, ' ');
  const std::size_t skip = values.size() > width ? values.size() - width : 0;
  for (std::size_t i = skip; i < values.size(); ++i) {
    int level = 0;
    if (peak > 0 && values[i] > 0) {
      level = 1 + static_cast<int>((values[i] / peak) * (n_levels - 2) + 0.5);
    }
    out += levels[std::min(level, n_levels - 1)];
  }
  return out;
}

// One line: "ALARMS (n): first; second; ...".
std::string alarms_text(const Rates& r) {
  std::string out = "ALARMS (" + std::to_string(r.alarms.size()) + "): ";
  for (std::size_t i = 0; i < r.alarms.size(); ++i) out += (i ? "; " : "") + r.alarms[i];
  return out;
}

std::string problems_text(const State& st) {
  std::string out;
  if (!st.latest) return out;
  for (const auto& [name, value] : st.latest->counters) {
    if (value == 0 || !is_problem_counter(name)) continue;
    if (!out.empty()) out += ' ';
    out += name + "=" + std::to_string(value);
  }
  return out;
}

std::string rates_line(const Rates& r) {
  const std::string method = r.randoms_method.empty() ? "" : " (" + r.randoms_method + ")";
  return format("prompts %s/s  delayed %s/s  trues %s/s  randoms %.1f %%%s  multiples %s/s  "
                "NECR %s/s",
                si(r.prompts).c_str(), si(r.delayed).c_str(), si(r.trues).c_str(),
                r.randoms_fraction * 100.0, method.c_str(), si(r.multiples).c_str(),
                si(r.necr).c_str());
}

// Every randoms estimate side by side; empty for a document that has only the delayed one.
std::string randoms_line(const Rates& r) {
  if (!r.randoms) return {};
  std::string out = format("randoms %s/s by %s:  delayed %s/s", si(*r.randoms).c_str(),
                           r.randoms_method.c_str(), si(r.delayed).c_str());
  if (r.randoms_singles_rate) out += format("  singles-rate %s/s", si(*r.randoms_singles_rate).c_str());
  if (r.randoms_singles_prompts)
    out += format("  singles-prompts %s/s", si(*r.randoms_singles_prompts).c_str());
  return out;
}

std::string no_data_text(const Options& o) { return "no data from petdaqd at " + o.endpoint; }

std::string flagged_text(const FlaggedCrystal& f) {
  return format("crystal %u (BDM %u DU %u #%u) %s: %llu singles, DU median %.0f", f.crystal, f.bdm,
                f.du, f.local, f.hot ? "hot" : "dead", static_cast<unsigned long long>(f.singles),
                f.median);
}

std::string crystals_line(const State& st) {
  const CrystalView& v = *st.crystals;
  std::uint32_t hot = 0, dead = 0, judged = 0;
  for (const DuSingles& d : v.dus) {
    hot += d.hot;
    dead += d.dead;
    judged += d.judged ? 1 : 0;
  }
  double lo = 0, hi = 0;
  if (!st.du_singles_per_s.empty()) {
    lo = *std::min_element(st.du_singles_per_s.begin(), st.du_singles_per_s.end());
    hi = *std::max_element(st.du_singles_per_s.begin(), st.du_singles_per_s.end());
  }
  std::string out = format("run %llu crystals: %u hot, %u dead (%u of %zu DUs judged) | DU singles %s .. %s /s",
                           static_cast<unsigned long long>(v.run_id), hot, dead, judged,
                           v.dus.size(), si(lo).c_str(), si(hi).c_str());
  for (std::size_t i = 0; i < v.flagged.size() && i < 3; ++i) out += " | " + flagged_text(v.flagged[i]);
  return out;
}

// The CTR and the energy resolution of the latest histograms message, global fits only
// (docs/figures.md).
std::string figures_line(const State& st) {
  const ScannerFigures& f = *st.figures;
  std::string out = "CTR ";
  if (!f.has_signed_tof)
    out += "- (no signed dt in the histograms)";
  else if (!f.ctr.ok)
    out += "- (too few prompts)";
  else
    out += format("%.1f +- %.1f ps FWHM (centre %.1f ps, %s trues)", f.ctr.fwhm, f.ctr.fwhm_err,
                  f.ctr.centre, si(f.ctr.area).c_str());
  out += " | energy resolution ";
  if (f.energy.ok && f.energy.centre > 0)
    out += format("%.2f %% FWHM at %.1f keV", 100 * f.energy.fwhm / f.energy.centre, f.energy.centre);
  else
    out += "- (no photopeak)";
  return out;
}

// ---------------- full-screen display ----------------

enum Colour : short { kProblem = 1, kBar = 2, kWarn = 3, kTitle = 4 };

class Screen {
 public:
  Screen() {
    initscr();
    cbreak();
    noecho();
    nodelay(stdscr, TRUE);
    keypad(stdscr, TRUE);
    curs_set(0);
    if (has_colors()) {
      start_color();
      use_default_colors();
      init_pair(kProblem, COLOR_RED, -1);
      init_pair(kBar, COLOR_GREEN, -1);
      init_pair(kWarn, COLOR_YELLOW, -1);
      init_pair(kTitle, COLOR_CYAN, -1);
    }
  }
  ~Screen() { endwin(); }
  Screen(const Screen&) = delete;
  Screen& operator=(const Screen&) = delete;

  void draw(const Options& o, const State& st, bool paused, bool crystals, Clock::time_point now) {
    erase();
    int rows = 0, cols = 0;
    getmaxyx(stdscr, rows, cols);
    int y = 0;
    auto line = [&](const std::string& text, attr_t attr = A_NORMAL) {
      if (y >= rows) return;
      attron(attr);
      mvaddnstr(y, 0, text.c_str(), cols);
      attroff(attr);
      ++y;
    };

    const double age_s = st.latest_at ? std::chrono::duration<double>(now - *st.latest_at).count()
                                       : std::chrono::duration<double>(now - started_).count();
    // The pause marker comes first: a long endpoint must not push it off a narrow screen.
    std::string title = std::string("petdaq-top  ") + (paused ? "[paused: p resumes]  " : "") +
                        o.endpoint;
    if (st.latest) {
      const Rates& r = *st.latest;
      title += format("  backend %s  run %llu  uptime %s  updated %.1f s ago", r.backend.c_str(),
                      static_cast<unsigned long long>(r.run_id), duration_text(r.uptime_s).c_str(),
                      age_s);
    }
    line(title, A_BOLD | COLOR_PAIR(kTitle));

    if (age_s >= kStaleAfter_s) {
      line(st.latest ? format("%s (last update %.0f s ago)", no_data_text(o).c_str(), age_s)
                     : no_data_text(o),
           A_BOLD | A_REVERSE | COLOR_PAIR(kProblem));
    } else if (st.latest && !st.latest->alarms.empty()) {
      line(alarms_text(*st.latest), A_BOLD | A_REVERSE | COLOR_PAIR(kProblem));
    } else {
      line("");
    }
    if (!st.latest) {
      line("waiting for the first rates document ...  (q quits)");
      refresh();
      return;
    }
    const Rates& r = *st.latest;
    line(rates_line(r), A_BOLD);
    if (const std::string randoms = randoms_line(r); !randoms.empty()) line(randoms);
    if (st.figures) line(figures_line(st));
    if (crystals) {
      draw_crystals(st, y, rows, cols);
      refresh();
      return;
    }
    std::string second = format("singles %s/s  frames %s/s", si(r.singles).c_str(),
                                si(r.frames).c_str());
    if (r.latency_p50_ms) {
      second += format("  latency p50 %.1f ms  p99 %.1f ms  max %.1f ms", *r.latency_p50_ms,
                       r.latency_p99_ms.value_or(0), r.latency_max_ms.value_or(0));
    }
    if (r.ring_chunks) {
      second += format("  ring %llu/%llu free", static_cast<unsigned long long>(r.ring_free.value_or(0)),
                       static_cast<unsigned long long>(*r.ring_chunks));
    }
    if (r.pending_frames) {
      second += format("  pending %llu", static_cast<unsigned long long>(*r.pending_frames));
    }
    if (r.live_fraction_run) {
      // Dead time of an overload (DESIGN section 6): the live fraction corrects the rates.
      second += format("  live %.3f (run %.3f)%s", r.live_fraction_interval.value_or(1),
                       *r.live_fraction_run, r.shedding ? " SHEDDING" : "");
    }
    const auto lagging = std::count(r.bdm_lagging.begin(), r.bdm_lagging.end(), true);
    if (lagging > 0) second += format("  %lld BDM(s) LAGGING", static_cast<long long>(lagging));
    line(second);
    line("");
    const int spark_width = std::max(10, std::min<int>(int(kHistory_s), cols - 40));
    double peak_p = 0, peak_s = 0;
    for (double v : st.prompts_history) peak_p = std::max(peak_p, v);
    for (double v : st.singles_history) peak_s = std::max(peak_s, v);
    line(format("prompts %3zu s |%s| peak %s/s", st.prompts_history.size(),
                sparkline(st.prompts_history, spark_width).c_str(), si(peak_p).c_str()));
    line(format("singles %3zu s |%s| peak %s/s", st.singles_history.size(),
                sparkline(st.singles_history, spark_width).c_str(), si(peak_s).c_str()));
    line("");
    draw_bdms(r, st.socket_losing, y, rows, cols);
    line("");
    draw_counters(st, y, rows, cols);
    if (st.publisher_changes) {
      line(format("publisher changed %llu time(s); last: %s",
                  static_cast<unsigned long long>(st.publisher_changes), st.publisher_note.c_str()),
           COLOR_PAIR(kWarn));
    }
    if (st.bad_messages) {
      line(format("%llu unreadable messages; last: %s",
                  static_cast<unsigned long long>(st.bad_messages), st.last_error.c_str()),
           COLOR_PAIR(kWarn));
    }
    refresh();
  }

 private:
  // Per-DU singles rates and the hot and dead crystals (the `histograms` topic).
  void draw_crystals(const State& st, int& y, int rows, int cols) {
    auto line = [&](const std::string& text, attr_t attr = A_NORMAL) {
      if (y >= rows) return;
      attron(attr);
      mvaddnstr(y++, 0, text.c_str(), cols);
      attroff(attr);
    };
    line("");
    if (!st.crystals) {
      line("crystals view: no `histograms` message yet (output.histograms.enabled in petdaqd's "
           "config)  (c returns)");
      return;
    }
    const CrystalView& v = *st.crystals;
    line(crystals_line(st), A_BOLD);
    line(format("singles per DU (/s; H hot, D dead crystals): a crystal is hot above %.0fx its "
                "DU's median, dead below 1/%.0f",
                kHotDeadFactor, kHotDeadFactor),
         A_BOLD);
    const int cell = 22;
    const int per_row = std::max(1, cols / cell);
    for (std::size_t i = 0; i < v.dus.size(); i += per_row) {
      if (y >= rows - 2) {
        line("... (enlarge the terminal to see every DU)");
        break;
      }
      for (int k = 0; k < per_row && i + k < v.dus.size(); ++k) {
        const DuSingles& d = v.dus[i + k];
        const double rate = i + k < st.du_singles_per_s.size() ? st.du_singles_per_s[i + k] : 0;
        const attr_t attr = (d.hot || d.dead) ? A_BOLD | COLOR_PAIR(kProblem) : A_NORMAL;
        attron(attr);
        mvaddnstr(y, k * cell, format("b%02u d%u %7s H%u D%u%s", d.bdm, d.du, si(rate).c_str(),
                                      d.hot, d.dead, d.judged ? "" : " (few)")
                                   .c_str(),
                  std::max(0, cols - k * cell));
        attroff(attr);
      }
      ++y;
    }
    line("");
    for (const FlaggedCrystal& f : v.flagged) {
      if (y >= rows - 1) {
        line(format("... %zu flagged crystals in all", v.flagged.size()));
        break;
      }
      line(flagged_text(f), COLOR_PAIR(kProblem));
    }
  }

  void draw_bdms(const Rates& r, const std::vector<bool>& socket_losing, int& y, int rows, int cols) {
    const std::uint32_t ta = r.bdm_transaxial, ax = r.bdm_axial;
    const std::size_t count = r.bdm_singles_per_s.size();
    if (ta == 0 || ax == 0 || count < std::size_t{ta} * ax) {
      if (y < rows) mvaddnstr(y++, 0, "singles per BDM: not in the document", cols);
      return;
    }
    if (y < rows) {
      attron(A_BOLD);
      mvaddnstr(y++, 0,
                format("singles per BDM (/s) and board temperature: rows transaxial 0..%u, "
                       "columns axial 0..%u",
                       ta - 1, ax - 1)
                    .c_str(),
                cols);
      attroff(A_BOLD);
    }
    double peak = 0;
    for (double v : r.bdm_singles_per_s) peak = std::max(peak, v);
    const int cell = std::max(24, cols / int(ax));
    // "t03 a1 [#####     ] 12.3 k  41.2C" : 7 + bar + 2 + 8 + 7
    const int bar = std::clamp(cell - 26, 4, 40);
    for (std::uint32_t t = 0; t < ta; ++t) {
      if (y >= rows - 1) {
        mvaddnstr(y++, 0, "... (enlarge the terminal to see every BDM)", cols);
        return;
      }
      for (std::uint32_t a = 0; a < ax; ++a) {
        const std::size_t b = std::size_t{a} * ta + t;
        const double v = r.bdm_singles_per_s[b];
        const int x = int(a) * cell;
        if (x + 8 > cols) break;
        const int filled = peak > 0 ? static_cast<int>(v / peak * bar + 0.5) : 0;
        mvaddnstr(y, x, format("t%02u a%u [", t, a).c_str(), cols - x);
        attron(COLOR_PAIR(kBar));
        for (int i = 0; i < bar && x + 8 + i < cols; ++i) {
          mvaddch(y, x + 8 + i, i < filled ? '#' : ' ');
        }
        attroff(COLOR_PAIR(kBar));
        std::string tail = "] " + format("%7s", si(v).c_str());
        if (b < r.bdm_temperature_degC.size() && r.bdm_temperature_degC[b]) {
          tail += format(" %5.1fC", *r.bdm_temperature_degC[b]);
        } else {
          tail += "     -C";
        }
        // A lagging board (DESIGN section 6) does not hold the horizon; its late frames drop.
        if (b < r.bdm_lagging.size() && r.bdm_lagging[b]) tail += " LAG";
        // Its receiving socket lost datagrams since the last document: its data has gaps.
        if (b < socket_losing.size() && socket_losing[b]) tail += " DROP";
        if (x + 8 + bar < cols) mvaddnstr(y, x + 8 + bar, tail.c_str(), cols - (x + 8 + bar));
      }
      ++y;
    }
  }

  void draw_counters(const State& st, int& y, int rows, int cols) {
    const Rates& r = *st.latest;
    std::vector<std::string> problems;
    for (const auto& [name, value] : r.counters) {
      if (value == 0 || !is_problem_counter(name)) continue;
      std::string item = name + " " + std::to_string(value);
      if (const auto it = st.counter_increase.find(name); it != st.counter_increase.end()) {
        item += " (+" + std::to_string(it->second) + ")";
      }
      problems.push_back(item);
    }
    if (y >= rows) return;
    if (problems.empty()) {
      mvaddnstr(y++, 0, "drops and errors: none", cols);
      return;
    }
    attron(A_BOLD | COLOR_PAIR(kProblem));
    mvaddnstr(y++, 0, "drops and errors:", cols);
    int x = 2;
    for (const auto& item : problems) {
      if (x + int(item.size()) > cols && x > 2) {
        ++y;
        x = 2;
      }
      if (y >= rows) break;
      if (x < cols) mvaddnstr(y, x, item.c_str(), cols - x);
      x += int(item.size()) + 3;
    }
    ++y;
    attroff(A_BOLD | COLOR_PAIR(kProblem));
  }

  Clock::time_point started_ = Clock::now();
};

// ---------------- the subscription ----------------

// Receives one message if there is one. Returns the JSON text of a valid `rates` message;
// a `histograms` message goes into st.crystals (and `histograms` is set).
std::optional<std::string> receive(zmq::socket_t& sub, State& st, bool& received,
                                   bool& histograms) {
  std::vector<zmq::message_t> parts;
  received = false;
  histograms = false;
  for (;;) {
    zmq::message_t part;
    if (!sub.recv(part, parts.empty() ? zmq::recv_flags::dontwait : zmq::recv_flags::none)) {
      return std::nullopt;
    }
    received = true;
    const bool more = part.more();
    parts.push_back(std::move(part));
    if (!more) break;
  }
  auto refuse = [&](const std::string& why) -> std::optional<std::string> {
    ++st.bad_messages;
    st.last_error = why;
    return std::nullopt;
  };
  if (parts.size() != 3) return refuse(format("%zu frames instead of 3", parts.size()));
  if (parts[0].to_string_view() == topic::histograms) {
    try {
      const HistogramFile f = parse_histogram_file(parts[2].data<std::uint8_t>(), parts[2].size());
      st.take(analyse_crystals(f));
      st.figures = scanner_figures(f, /*per_crystal=*/false);
      histograms = true;
    } catch (const std::exception& e) {
      return refuse(std::string("histograms: ") + e.what());
    }
    return std::nullopt;
  }
  if (parts[0].to_string_view() != topic::rates) return refuse("topic is not 'rates'");
  if (parts[1].size() != kMessageHeaderBytes) return refuse("message header is not 64 bytes");
  const MessageHeader h = decode_message_header(parts[1].data<std::uint8_t>());
  if (h.magic != kMessageMagic || !message_version_supported(h.version)) {
    return refuse("message header has a wrong magic or version");
  }
  if (h.publisher_id != 0) {
    if (st.publisher_id != 0 && h.publisher_id != st.publisher_id) {
      ++st.publisher_changes;
      st.publisher_note = format("another publisher (publisher_id %08x, was %08x): petdaqd "
                                 "restarted, or another process serves the endpoint",
                                 h.publisher_id, st.publisher_id);
      st.publisher_note_pending = true;
    }
    st.publisher_id = h.publisher_id;
  }
  return std::string(parts[2].to_string_view());
}

std::optional<Rates> accept(const std::string& text, State& st) {
  try {
    return parse_rates(text);
  } catch (const RatesError& e) {
    ++st.bad_messages;
    st.last_error = e.what();
    return std::nullopt;
  }
}

std::string one_line(std::string text) {
  // Raw newlines can only be white space between JSON tokens (strings escape them).
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return text;
}

// Each option is declared once here; adding one is one add_option line and one field.
std::optional<int> parse_args(int argc, char** argv, Options& o) {
  cli::App app("petdaq-top",
               "A live count-rate display of petdaqd's `rates` topic. Keys (full screen): q "
               "quits, p pauses and resumes.");
  bool plain = false, json = false;
  cli::add_config(app, o.config, "petdaq configuration: the endpoint from output.zmq.endpoint");
  cli::add_endpoint(app, o.endpoint);
  CLI::Option* plain_option =
      app.add_flag("--plain", plain, "one text line per second instead of the full-screen display");
  app.add_flag("--json", json, "the raw rates documents, one per line")->excludes(plain_option);
  app.add_flag("--crystals", o.crystals,
               "start in the crystals view (per-DU singles, hot and dead crystals, from the "
               "`histograms` topic: output.histograms.enabled); with --plain, one line per "
               "histograms message; key c toggles it");
  if (const auto rc = app.parse_or_exit(argc, argv)) return rc;
  o.mode = plain ? Mode::plain : json ? Mode::json : Mode::screen;
  if (o.endpoint.empty()) {
    try {
      o.endpoint = o.config.empty() ? ZmqSettings{}.endpoint
                                    : load_settings(o.config).output.zmq.endpoint;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "petdaq-top: %s\n", e.what());
      return cli::kExitUsage;
    }
  }
  return std::nullopt;
}

std::string clock_text() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[16];
  std::strftime(buf, sizeof buf, "%H:%M:%S", &tm);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (const auto rc = parse_args(argc, argv, o)) return *rc;
  install_stop_signals();

  zmq::context_t ctx(1);
  zmq::socket_t sub(ctx, zmq::socket_type::sub);
  try {
    sub.set(zmq::sockopt::linger, 0);
    sub.set(zmq::sockopt::subscribe, topic::rates);
    sub.set(zmq::sockopt::subscribe, topic::histograms);
    sub.connect(o.endpoint);
  } catch (const zmq::error_t& e) {
    std::fprintf(stderr, "petdaq-top: cannot subscribe to %s: %s\n", o.endpoint.c_str(), e.what());
    return 1;
  }

  State st;
  std::optional<Screen> screen;
  if (o.mode == Mode::screen) screen.emplace();
  bool paused = false;
  bool crystals = o.crystals;
  const auto started = Clock::now();
  auto next_stale_line = started + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(kStaleAfter_s));
  auto next_draw = started;

  while (!stop_requested()) {
    zmq::pollitem_t item{sub.handle(), 0, ZMQ_POLLIN, 0};
    try {
      zmq::poll(&item, 1, std::chrono::milliseconds(100));
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) throw;
    }
    const auto now = Clock::now();
    bool changed = false;
    if (item.revents & ZMQ_POLLIN) {
      for (;;) {
        bool received = false, histograms = false;
        const auto text = receive(sub, st, received, histograms);
        if (!received) break;
        if (histograms) {
          if (o.mode == Mode::plain && o.crystals) {
            std::printf("%s %s\n", clock_text().c_str(), crystals_line(st).c_str());
            std::fflush(stdout);
          }
          if (o.mode == Mode::plain && st.figures) {
            std::printf("%s %s\n", clock_text().c_str(), figures_line(st).c_str());
            std::fflush(stdout);
          }
          changed = true;
        }
        if (st.publisher_note_pending && o.mode != Mode::screen) {
          std::fprintf(stderr, "petdaq-top: %s\n", st.publisher_note.c_str());
          st.publisher_note_pending = false;
        }
        if (!text) continue;
        if (o.mode == Mode::json) {
          std::printf("%s\n", one_line(*text).c_str());
          std::fflush(stdout);
        }
        if (auto r = accept(*text, st)) {
          st.take(std::move(*r), now);
          if (o.mode == Mode::plain) {
            const Rates& cur = *st.latest;
            const std::string problems = problems_text(st);
            std::printf("%s %s run %llu up %s | %s | singles %s/s | latency p99 %.1f ms | %s%s\n",
                        clock_text().c_str(), cur.backend.c_str(),
                        static_cast<unsigned long long>(cur.run_id),
                        duration_text(cur.uptime_s).c_str(), rates_line(cur).c_str(),
                        si(cur.singles).c_str(), cur.latency_p99_ms.value_or(0),
                        problems.empty() ? "no drops or errors" : ("problems: " + problems).c_str(),
                        cur.alarms.empty() ? "" : (" | " + alarms_text(cur)).c_str());
            std::fflush(stdout);
          }
          changed = true;
        }
      }
    }
    const double age_s = std::chrono::duration<double>(now - st.latest_at.value_or(started)).count();
    if (o.mode != Mode::screen) {
      if (age_s >= kStaleAfter_s && now >= next_stale_line) {
        std::fprintf(o.mode == Mode::json ? stderr : stdout, "%s %s (last update %s)\n",
                     clock_text().c_str(), no_data_text(o).c_str(),
                     st.latest_at ? format("%.0f s ago", age_s).c_str() : "never");
        std::fflush(stdout);
        next_stale_line = now + std::chrono::seconds(1);
      }
      continue;
    }
    const int key = getch();
    if (key == 'q' || key == 'Q') break;
    if (key == 'p' || key == 'P') {
      paused = !paused;
      changed = true;
    }
    if (key == KEY_RESIZE) changed = true;
    if (key == 'c' || key == 'C') {
      crystals = !crystals;
      changed = true;
    }
    // Redraw on news and at least every half second so "updated ... ago" and the stale
    // message move on their own.
    if ((changed || now >= next_draw) && (!paused || key == 'p' || key == 'P' || key == KEY_RESIZE)) {
      screen->draw(o, st, paused, crystals, now);
      next_draw = now + std::chrono::milliseconds(500);
    }
  }
  return 0;
}

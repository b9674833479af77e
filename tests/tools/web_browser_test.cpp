// The page in a real browser: Debian's chromium, headless, loads petdaq-web's page while the
// test publisher sends known rates documents. The test drives chromium over its DevTools
// protocol (a WebSocket), reads the numbers the page shows and the histograms it draws (a
// .pdh file made with the project's writer, published next to each rates document), stops
// the publisher and waits for the "no data" state, starts it again and waits for the page to come back, and saves a
// screenshot (web_page.png in the build folder). Skips when chromium is not installed. The
// Runs section against a run catalogue made with petdaqd's own writer.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>

#include <nlohmann/json.hpp>

#include "tests/tools/tool_harness.h"
#include "tests/tools/test_messages.h"
#include "tests/tools/web_histograms.h"
#include "tests/tools/web_support.h"
#include "core/image.h"
#include "tools/runs/catalogue_reader.h"
#ifdef PETDAQ_HAVE_DAEMON
#include "daemon/catalogue.h"
#endif

namespace {

using namespace petdaq;
using namespace petdaq::test;
using nlohmann::json;
namespace fs = std::filesystem;

std::optional<fs::path> find_chromium() {
  // PETDAQ_CHROMIUM names another browser binary (one that does not exist: skip).
  if (const char* c = std::getenv("PETDAQ_CHROMIUM"))
    return fs::exists(c) ? std::optional<fs::path>(c) : std::nullopt;
  for (const char* name : {"chromium", "chromium-browser"}) {
    for (const char* dir : {"/usr/bin", "/usr/local/bin", "/snap/bin"}) {
      const fs::path p = fs::path(dir) / name;
      if (fs::exists(p)) return p;
    }
  }
  return std::nullopt;
}

std::string base64_decode(const std::string& in) {
  static const std::string alphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  unsigned bits = 0;
  int count = 0;
  for (char c : in) {
    const auto v = alphabet.find(c);
    if (v == std::string::npos) continue;  // '=' padding
    bits = (bits << 6) | static_cast<unsigned>(v);
    count += 6;
    if (count >= 8) {
      count -= 8;
      out.push_back(static_cast<char>((bits >> count) & 0xff));
    }
  }
  return out;
}

// One page of a headless chromium, driven over the DevTools protocol.
class Browser {
 public:
  Browser(const fs::path& chromium, const ScratchDir& dir, const std::string& url) {
    const fs::path profile = dir / "chromium-profile";  // fresh: nothing from an earlier run
    child_.emplace(std::vector<std::string>{chromium.string(), "--headless", "--no-sandbox",
                                            "--disable-gpu", "--disable-quic", "--no-first-run",
                                            "--disable-background-networking",
                                            "--disable-component-update", "--disable-sync",
                                            "--user-data-dir=" + profile.string(),
                                            "--remote-debugging-port=0",
                                            "--window-size=1400,1700", url},
                   dir / "chromium.out", dir / "chromium.err");
    // chromium writes the port it took into the profile.
    const fs::path port_file = profile / "DevToolsActivePort";
    if (!wait_until([&] { return fs::exists(port_file) && !read_text(port_file).empty(); },
                    std::chrono::seconds(20))) {
      throw std::runtime_error("chromium did not start: " + read_text(dir / "chromium.err"));
    }
    const std::uint16_t port = static_cast<std::uint16_t>(std::stoi(read_text(port_file)));
    std::string page_path;
    wait_until([&] {
      for (const json& t : json::parse(http_request(port, "/json/list").body)) {
        if (t["type"] == "page" && t["url"].get<std::string>().rfind(url, 0) == 0) {
          const std::string ws = t["webSocketDebuggerUrl"];
          page_path = ws.substr(ws.find('/', std::string("ws://").size()));
          return true;
        }
      }
      return false;
    });
    if (page_path.empty()) throw std::runtime_error("chromium has no page for " + url);
    devtools_.emplace(port, page_path);
  }

  json call(const std::string& method, json params = json::object()) {
    const int id = ++last_id_;
    devtools_->write(json{{"id", id}, {"method", method}, {"params", std::move(params)}}.dump());
    for (;;) {
      const auto m = devtools_->read(std::chrono::seconds(20));
      if (!m) throw std::runtime_error("no answer from chromium to " + method);
      json j = json::parse(*m);
      if (j.contains("id") && j["id"] == id) {
        if (j.contains("error")) throw std::runtime_error(method + ": " + j["error"].dump());
        return j["result"];
      }
    }
  }
  // The value of a JavaScript expression in the page (JSON-serialisable).
  json eval(const std::string& expression) {
    const json r = call("Runtime.evaluate", {{"expression", expression}, {"returnByValue", true}});
    if (r.contains("exceptionDetails")) throw std::runtime_error(expression + ": " + r.dump());
    return r["result"].contains("value") ? r["result"]["value"] : json(nullptr);
  }
  // Polls `expression` until it is true, at most `limit`; one that throws (the page is still
  // loading) counts as false.
  bool until(const std::string& expression, std::chrono::milliseconds limit) {
    return wait_until(
        [&] {
          const json r = call("Runtime.evaluate", {{"expression", expression}, {"returnByValue", true}});
          return !r.contains("exceptionDetails") && r["result"].value("value", json()) == true;
        },
        limit);
  }

 private:
  std::optional<Child> child_;
  std::optional<WsClient> devtools_;
  int last_id_ = 0;
};

// Every element of the page with an id and a data-value: the numbers as sent.
// Peaks with known widths over the filled bins, for the figures panel: the signed Δt of the
// prompts a Gaussian of kPlantedCtrPs FWHM over a floor of 50 a bin, and every crystal's
// spectrum a photopeak at 511 keV of kPlantedResolution FWHM over a floor of 20 a bin
// (expected counts, rounded: the fits must find the widths to a fraction of a per cent).
constexpr double kPlantedCtrPs = 480;
constexpr double kPlantedResolution = 0.15;
void plant_figures(HistogramSet& set, double tick_ps) {
  const HistogramLayout& l = set.layout();
  const auto gauss_bin = [](double a, double b, double mu, double fwhm) {
    const double s = fwhm / 2.3548200450309493 * std::sqrt(2.0);
    return 0.5 * (std::erf((b - mu) / s) - std::erf((a - mu) / s));
  };
  auto* tof = l.u64(set.bins(), Hist::tof_prompt);
  const double w = l.dt_bin_ticks * tick_ps, lo = (-static_cast<double>(l.tof_half) * l.dt_bin_ticks - 0.5) * tick_ps;
  for (std::uint32_t i = 0; i < l.tof_bins; ++i)
    tof[i] = static_cast<std::uint64_t>(
        std::llround(50 + 200000 * gauss_bin(lo + i * w, lo + (i + 1) * w, 30, kPlantedCtrPs)));
  auto* energy = l.u32(set.bins(), Hist::energy_keV);
  for (std::uint32_t c = 0; c < l.crystal_count; ++c)
    for (std::uint32_t i = 0; i < l.energy_bins; ++i)
      energy[std::size_t{c} * l.energy_bins + i] = static_cast<unsigned int>(std::llround(
          20 + 20000 * gauss_bin(i * l.energy_bin_keV, (i + 1) * l.energy_bin_keV, 511, 511 * kPlantedResolution)));
}

const char* kShownValues =
    "Object.fromEntries([...document.querySelectorAll('[id][data-value]')]"
    ".map(e => [e.id, e.dataset.value]))";

double number(const json& shown, const std::string& id) {
  if (!shown.contains(id)) throw std::runtime_error("the page shows no value for #" + id);
  return std::stod(shown[id].get<std::string>());
}

TEST(WebBrowser, ShowsTheRatesSentThenNoDataThenRecovers) {
  const auto chromium = find_chromium();
  if (!chromium) GTEST_SKIP() << "chromium is not installed (Debian package chromium): skipped";
  ScratchDir dir;
  const std::string ep = dir.ipc("pub");
  WebServer w(dir, ep, {"--stale-after-s", "1.5"});
  ASSERT_NE(w.port(), 0) << w.log();
  auto publish = [&](const char* name, std::vector<std::string> extra) {
    std::vector<std::string> argv = {(bin_dir() / "petdaq-test-publisher").string(), "--endpoint",
                                     ep, "--wait-subscriptions", "2", "--rates",
                                     "--interval-ms", "100", "--duration-s", "60"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return std::make_unique<Child>(argv, dir / (std::string(name) + ".out"),
                                   dir / (std::string(name) + ".err"));
  };
  // Histograms: every bin of a small scanner's file known (tests/tools/web_histograms.h).
  const Settings hist_settings = web_histogram_settings();
  HistogramSet hist_set(make_histogram_layout(hist_settings));
  fill_web_histograms(hist_set);
  plant_figures(hist_set, hist_settings.scanner.tick_ps);
  const fs::path pdh = dir / "known.pdh";
  write_histogram_file(pdh, web_histogram_file(hist_set, hist_settings, 77));
  auto pub = publish("pub1", {"--bad-first", "--opaque-histograms", "2", "--histograms", pdh.string()});

  Browser b(*chromium, dir, w.url());
  ASSERT_TRUE(b.until("document.getElementById('state').dataset.state === 'live' && "
                      "document.getElementById('rate-prompts').dataset.value !== undefined",
                      std::chrono::seconds(15)))
      << b.eval("document.getElementById('state').textContent");
  // The plots have points once a few documents came.
  EXPECT_TRUE(b.until("typeof Chart !== 'undefined' && "
                      "Chart.getChart('chart-coinc').data.datasets[0].data.length >= 3",
                      std::chrono::seconds(10)));

  // What the page shows against the document the publisher sends.
  const json doc = json::parse(test_rates_json(0));
  const json shown = b.eval(kShownValues);
  for (const char* k : {"frames", "singles", "prompts", "delayed", "trues", "multiples",
                        "randoms_fraction", "necr"}) {
    EXPECT_EQ(number(shown, std::string("rate-") + k), doc["rates"][k].get<double>()) << k;
  }
  EXPECT_EQ(shown["run-id"], std::to_string(doc["run_id"].get<std::uint64_t>()));
  EXPECT_EQ(shown["backend"], doc["backend"]);
  EXPECT_EQ(number(shown, "uptime"), doc["uptime_s"].get<double>());
  const json& bdm = doc["bdm"];
  for (std::size_t i = 0; i < bdm["singles_per_s"].size(); ++i) {
    EXPECT_EQ(number(shown, "bdm-" + std::to_string(i)), bdm["singles_per_s"][i].get<double>());
    if (bdm["temperature_degC"][i].is_null())
      EXPECT_FALSE(shown.contains("bdm-temp-" + std::to_string(i)));
    else
      EXPECT_EQ(number(shown, "bdm-temp-" + std::to_string(i)), bdm["temperature_degC"][i].get<double>());
  }
  EXPECT_EQ(number(shown, "latency-p50"), doc["latency_ms"]["p50"].get<double>());
  EXPECT_EQ(number(shown, "latency-p99"), doc["latency_ms"]["p99"].get<double>());
  EXPECT_EQ(number(shown, "latency-max"), doc["latency_ms"]["max"].get<double>());
  EXPECT_EQ(number(shown, "ring-free"), doc["queues"]["ring_free"].get<double>());
  EXPECT_EQ(number(shown, "ring-chunks"), doc["queues"]["ring_chunks"].get<double>());
  EXPECT_EQ(number(shown, "pending-frames"), doc["queues"]["pending_frames"].get<double>());
  // As a person reads them: three significant digits and an SI prefix.
  EXPECT_EQ(b.eval("document.getElementById('rate-prompts').textContent"), "123 k");
  EXPECT_EQ(b.eval("document.getElementById('rate-singles').textContent"), "2.35 M");
  EXPECT_EQ(b.eval("document.getElementById('rate-randoms_fraction').textContent"), "10.0 %");
  // The trues' label names the estimate the daemon used (rates.randoms_method).
  EXPECT_EQ(b.eval("document.getElementById('trues-method').textContent"),
            "prompts − randoms from the singles-prompts window model");
  // The daemon's alarms in the banner.
  EXPECT_EQ(b.eval("[...document.querySelectorAll('#alarms .alarm')].map(e => e.textContent)"),
            json::parse(R"(["ALARM board_temperature (bdm 23): BDM 23 at 41.5 C, outside [-40.0, 40.0] C"])"));
  EXPECT_EQ(b.eval("document.getElementById('alarms').hidden"), false);
  // The non-zero loss counters, named, and nothing else.
  EXPECT_EQ(b.eval("[...document.querySelectorAll('#problems li.problem')]"
                   ".map(e => e.textContent)"),
            json::parse(R"(["rx.kernel_drops 7", "rx.seq_missing 3"])"));
  // The malformed document and the histograms it could not read, counted on the page.
  const std::string web_counter =
      "document.querySelector('#web-counters tr[data-name=\"%\"]').dataset.value";
  auto web_value = [&](const std::string& name) {
    return b.eval(std::regex_replace(web_counter, std::regex("%"), name));
  };
  EXPECT_EQ(web_value("web.rates_malformed"), "1");
  EXPECT_EQ(b.eval("document.getElementById('hist-malformed').dataset.value"), "2");
  EXPECT_GE(std::stoi(b.eval("document.getElementById('hist-received').dataset.value").get<std::string>()), 3);

  // The histograms drawn: the images' shapes and totals and the spectra's bins against the
  // file's bins.
  ASSERT_TRUE(b.until("document.getElementById('hist-run-id').dataset.value === '77'",
                      std::chrono::seconds(10)));
  const HistogramLayout& l = hist_set.layout();
  const Geometry& g = l.geometry;
  const json drawn = b.eval(
      "Object.fromEntries(['img-flood-tiles', 'img-flood-sum', 'img-crystals'].map(id => {"
      "  const c = document.getElementById(id);"
      "  const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;"
      "  let lit = 0; for (let i = 0; i < px.length; i += 4) if (px[i] + px[i + 1] + px[i + 2] > 0) ++lit;"
      "  return [id, {width: +c.dataset.width, height: +c.dataset.height, total: +c.dataset.total,"
      "               lit: lit / (px.length / 4)}]; }))");
  EXPECT_EQ(drawn["img-flood-tiles"]["width"], g.bdm_transaxial * g.du_transaxial * g.position_size);
  EXPECT_EQ(drawn["img-flood-tiles"]["height"], g.bdm_axial * g.du_axial * g.position_size);
  EXPECT_EQ(drawn["img-flood-sum"]["width"], g.position_size);
  EXPECT_EQ(drawn["img-crystals"]["width"], g.crystals_per_ring());
  EXPECT_EQ(drawn["img-crystals"]["height"], g.ring_count());
  EXPECT_EQ(drawn["img-flood-tiles"]["total"], hist_set.sum(Hist::flood));
  EXPECT_EQ(drawn["img-flood-sum"]["total"], hist_set.sum(Hist::flood));
  EXPECT_EQ(drawn["img-crystals"]["total"], hist_set.sum(Hist::crystal_singles));
  // Every bin holds at least 1 count: (nearly) every pixel is drawn in a colour, not black.
  for (const char* id : {"img-flood-tiles", "img-flood-sum", "img-crystals"})
    EXPECT_GT(drawn[id]["lit"].get<double>(), 0.9) << id;
  const json shown_hist = b.eval(kShownValues);
  EXPECT_EQ(number(shown_hist, "flood-total"), static_cast<double>(hist_set.sum(Hist::flood)));
  EXPECT_EQ(number(shown_hist, "crystal-total"), static_cast<double>(hist_set.sum(Hist::crystal_singles)));
  EXPECT_EQ(number(shown_hist, "energy-total"), static_cast<double>(hist_set.sum(Hist::energy_keV)));
  EXPECT_EQ(number(shown_hist, "dt-total"), static_cast<double>(hist_set.sum(Hist::dt_prompt)));
  // The figures panel: the planted widths fitted and shown, the map drawn for every crystal.
  EXPECT_NEAR(number(shown_hist, "ctr-fwhm"), kPlantedCtrPs, 0.005 * kPlantedCtrPs);
  EXPECT_NEAR(number(shown_hist, "ctr-centre"), 30, 2);
  EXPECT_GT(number(shown_hist, "ctr-err"), 0);
  EXPECT_NEAR(number(shown_hist, "eres-global"), 100 * kPlantedResolution, 0.1);
  EXPECT_NEAR(number(shown_hist, "eres-median"), 100 * kPlantedResolution, 0.1);
  EXPECT_NEAR(number(shown_hist, "eres-peak"), 511, 1);
  EXPECT_EQ(number(shown_hist, "eres-fitted"), l.crystal_count);
  EXPECT_EQ(b.eval("document.getElementById('img-eres-map').dataset.total"), std::to_string(l.crystal_count));
  EXPECT_EQ(b.eval("Chart.getChart('chart-tof').data.datasets[0].data.length"), l.tof_bins + 1);
  EXPECT_EQ(b.eval("Chart.getChart('chart-tof').options.scales.y.type"), "logarithmic");
  // The spectra: one step per bin and one closing the last; the prompt Δt bin for bin.
  EXPECT_EQ(b.eval("Chart.getChart('chart-energy').data.datasets[0].data.length"), l.energy_bins + 1);
  const json dt = b.eval("Chart.getChart('chart-dt').data.datasets[0].data.map(p => p.y)");
  ASSERT_EQ(dt.size(), l.dt_bins + 1u);
  for (std::uint32_t i = 0; i < l.dt_bins; ++i)
    EXPECT_EQ(dt[i].get<std::uint64_t>(), hist_set.at(Hist::dt_prompt, i)) << i;
  const json edges = b.eval("Chart.getChart('chart-dt').data.datasets[0].data.slice(0, 2).map(p => p.x)");
  EXPECT_DOUBLE_EQ(edges[1].get<double>() - edges[0].get<double>(), l.dt_bin_ticks * hist_settings.scanner.tick_ps);

  const json shot = b.call("Page.captureScreenshot", {{"format", "png"}, {"captureBeyondViewport", true}});
  const std::string png = base64_decode(shot["data"].get<std::string>());
  ASSERT_GT(png.size(), 8u);
  EXPECT_EQ(png.substr(1, 3), "PNG");
  const char* shot_path = std::getenv("PETDAQ_WEB_SCREENSHOT");
  std::ofstream(shot_path ? fs::path(shot_path) : fs::path(PETDAQ_BINARY_DIR) / "web_page.png",
                std::ios::binary)
      << png;

  // The publisher stops: after --stale-after-s the page says so, keeping the last numbers.
  pub->signal(SIGTERM);
  pub->wait_for(std::chrono::seconds(5));
  EXPECT_TRUE(b.until("document.getElementById('state').dataset.state === 'no-data'",
                      std::chrono::seconds(10)));
  EXPECT_EQ(b.eval("document.getElementById('state').textContent.startsWith('no data from petdaqd')"),
            true);
  EXPECT_EQ(b.eval("document.body.classList.contains('stale')"), true);
  EXPECT_EQ(number(b.eval(kShownValues), "rate-prompts"), doc["rates"]["prompts"].get<double>());

  // It comes back.
  pub = publish("pub2", {});
  EXPECT_TRUE(b.until("document.getElementById('state').dataset.state === 'live'",
                      std::chrono::seconds(10)));
  EXPECT_EQ(b.eval("document.body.classList.contains('stale')"), false);
}

// A known image: a 3-D blob of records around a point, and a trace (core/image.h).
std::vector<std::uint8_t> known_image(Settings& s, ImageSet*& out_set, std::unique_ptr<ImageSet>& keep) {
  s.output.image.enabled = true;
  s.output.image.voxel_mm = 4;
  s.output.image.dim_x = s.output.image.dim_y = 40;
  s.output.image.dim_z = 24;
  s.output.image.trace_bin_ms = 0.01;
  s.output.image.trace_bins = 50;
  keep = std::make_unique<ImageSet>(s);
  out_set = keep.get();
  const Geometry g = Geometry::from(s.scanner);
  const std::uint32_t ring = g.crystals_per_ring();
  const std::uint32_t mid = g.ring_count() / 2 * ring;
  std::vector<CoincRecord> rs;
  for (std::uint32_t i = 0; i < 3000; ++i) {
    CoincRecord r{};
    r.crystal_a = mid + i % 11;
    r.crystal_b = mid + ring / 2 + (i * 7) % 13;
    r.dt = i % 40;
    r.time_a = 1000 + std::uint64_t{i} * 20000;
    rs.push_back(r);
  }
  keep->add_records(rs.data(), rs.size(), false);
  std::vector<std::uint8_t> bytes;
  encode_image_file(*keep, s, 91, nullptr, ImageSpan{1000, 70'000'000, 1000, 70'000'000}, bytes);
  return bytes;
}
#ifdef PETDAQ_HAVE_DAEMON
TEST(WebBrowser, RunsSectionShowsTheCatalogueWithCountersAndQaLinks) {
  const auto chromium = find_chromium();
  if (!chromium) GTEST_SKIP() << "chromium is not installed (Debian package chromium): skipped";
  ScratchDir dir;
  const fs::path db = dir / "runs.sqlite";
  const fs::path qa = dir / "qa8";
  fs::create_directories(qa);
  std::ofstream(qa / "index.html") << "<html><body>QA of run 8</body></html>";
  {
    Counters counters(4);
    daemon::Catalogue c(db, counters, "test");
    daemon::AcquisitionControl acq(c.next_acquisition_id());
    acq.on_change([&](const daemon::Acquisition& a, const char* what) { c.acquisition_changed(a, what); });
    acq.start(json{{"name", "NEMA phantom"}, {"isotope", "F-18"}, {"activity_MBq", 40.0},
                   {"operator", "jd"}}, 1'800'000'000'000'000'000ull);
    c.run_started(8);
    c.rates(R"({"run_id":8,"interval_s":2.0,"deadtime":{"live_fraction_interval":0.75},"counters":{}})");
    daemon::Catalogue::CounterValues end{};
    end[static_cast<std::size_t>(Counter::coinc_prompts)] = 123456;
    end[static_cast<std::size_t>(Counter::coinc_delayed)] = 2345;
    end[static_cast<std::size_t>(Counter::rx_frames)] = 999999;
    end[static_cast<std::size_t>(Counter::rx_ring_full)] = 7;
    c.run_ended(8, "clock reset", end);
    acq.annotate("bed moved", 1'800'000'001'000'000'000ull);
    acq.stop(1'800'000'002'000'000'000ull);
    acq.start(json{{"name", "still open"}}, 1'800'000'003'000'000'000ull);
    c.run_started(9);
    c.flush();
  }
  {
    runs::CatalogueReader writer(db, true);
    ASSERT_TRUE(writer.set_qa(8, qa.string()));
  }
  WebServer w(dir, dir.ipc("pub"), {"--catalogue", db.string()});
  ASSERT_NE(w.port(), 0) << w.log();
  Browser b(*chromium, dir, w.url());
  ASSERT_TRUE(b.until("document.querySelector('#runs-table tr[data-id=\"8\"]') !== null",
                      std::chrono::seconds(15)))
      << b.eval("document.getElementById('runs-none').textContent");
  const std::string run8 = "#runs-table tr[data-id=\"8\"] td[data-key=\"%\"]";
  auto run_value = [&](const std::string& key) {
    return b.eval("document.querySelector('" + std::regex_replace(run8, std::regex("%"), key) +
                  "').dataset.value");
  };
  auto run_text = [&](const std::string& key) {
    return b.eval("document.querySelector('" + std::regex_replace(run8, std::regex("%"), key) +
                  "').textContent");
  };
  EXPECT_EQ(run_value("prompts"), "123456");
  EXPECT_EQ(run_value("delayed"), "2345");
  EXPECT_EQ(run_value("frames"), "999999");
  EXPECT_EQ(run_value("losses"), "7");
  EXPECT_EQ(run_value("live"), "0.75");
  EXPECT_EQ(run_text("prompts"), "123 k");
  EXPECT_EQ(run_text("end_reason"), "clock reset");
  // The open run and acquisition, marked as open.
  EXPECT_EQ(b.eval("document.querySelector('#runs-table tr[data-id=\"9\"]').classList.contains('open')"), true);
  EXPECT_EQ(b.eval("[...document.querySelectorAll('#acquisitions-table tbody tr')].map(r => "
                   "[r.dataset.id, r.querySelector('td[data-key=\"name\"]').textContent, "
                   "r.classList.contains('open')])"),
            json::parse(R"([["2", "still open", true], ["1", "NEMA phantom", false]])"));
  EXPECT_EQ(b.eval("document.querySelector('#acquisitions-table tr[data-id=\"1\"]').textContent.includes('bed moved')"),
            true);
  // The QA link opens the report, served by petdaq-web from the report's folder.
  const json report = b.eval(
      "(() => { const a = document.querySelector('" +
      std::regex_replace(run8, std::regex("%"), "qa") +
      " a'); const x = new XMLHttpRequest(); x.open('GET', a.href, false); x.send();"
      " return [a.getAttribute('href'), x.status, x.responseText]; })()");
  EXPECT_EQ(report[0], "qa/8/");
  EXPECT_EQ(report[1], 200);
  EXPECT_NE(report[2].get<std::string>().find("QA of run 8"), std::string::npos);
  // Nothing outside the report's folder, and no report for a run without one.
  const json refused = b.eval(
      "['qa/8/..%2F..%2Fetc%2Fpasswd', 'qa/8/.hidden', 'qa/9/', 'qa/x/'].map(u => {"
      " const x = new XMLHttpRequest(); x.open('GET', u, false); x.send(); return x.status; })");
  EXPECT_EQ(refused, json::parse("[404, 404, 404, 404]"));

  // Without a catalogue the section says how to name one.
  ScratchDir dir2;  // a profile of its own for the second browser
  WebServer bare(dir2, dir2.ipc("pub"));
  Browser b2(*chromium, dir2, bare.url());
  EXPECT_TRUE(b2.until("document.getElementById('runs-none').textContent.includes('--catalogue')",
                       std::chrono::seconds(15)));
  // ... asked once: the page stops asking (each refusal counts in web.http_refused).
  EXPECT_EQ(b2.eval("document.getElementById('runs').dataset.polling"), "off");
  EXPECT_TRUE(b2.until("document.querySelector('#web-counters tr[data-name=\"web.http_refused\"]')"
                       "?.dataset.value === '1'",
                       std::chrono::seconds(10)));
}
#endif

}  // namespace

TEST(WebBrowser, ShowsTheImageItsTraceAndWhatItIsNot) {
  const auto chromium = find_chromium();
  if (!chromium) GTEST_SKIP() << "chromium is not installed (Debian package chromium): skipped";
  ScratchDir dir;
  const std::string ep = dir.ipc("pub");
  WebServer w(dir, ep, {"--stale-after-s", "5"});
  ASSERT_NE(w.port(), 0) << w.log();
  Settings s;
  ImageSet* set = nullptr;
  std::unique_ptr<ImageSet> keep;
  const std::vector<std::uint8_t> bytes = known_image(s, set, keep);
  const ImageFile f = parse_image_file(bytes.data(), bytes.size());
  ASSERT_GT(f.trace_count, 3u);
  const fs::path pdim = dir / "known.pdim";
  write_image_file(pdim, bytes);
  Child pub({(bin_dir() / "petdaq-test-publisher").string(), "--endpoint", ep, "--wait-subscriptions",
             "1", "--rates", "--interval-ms", "100", "--duration-s", "60", "--image", pdim.string()},
            dir / "pub.out", dir / "pub.err");
  Browser b(*chromium, dir, w.url());
  ASSERT_TRUE(b.until("document.getElementById('image-run-id').dataset.value === '91'",
                      std::chrono::seconds(15)))
      << b.eval("document.getElementById('image-none').hidden");
  // What it is not, in words, where it is shown.
  const std::string note = b.eval("document.getElementById('image-note').textContent");
  EXPECT_NE(note.find("TOF back-projection, not a reconstruction"), std::string::npos) << note;
  EXPECT_NE(note.find("no attenuation, scatter or normalisation"), std::string::npos) << note;
  EXPECT_EQ(b.eval("document.getElementById('image-views').hidden"), false);
  // The six views: shapes, and every projection's total = the window's counts.
  std::int64_t total = 0;
  for (std::uint64_t v = 0; v < f.voxel_count(); ++v) total += f.window_voxel(v);
  ASSERT_GT(total, 1000);
  const json drawn = b.eval(
      "Object.fromEntries([...document.querySelectorAll('#image-views canvas[id^=img-]')].map(c =>"
      "  [c.id, {width: +c.dataset.width, height: +c.dataset.height, total: +c.dataset.total}]))");
  ASSERT_EQ(drawn.size(), 6u) << drawn.dump();
  EXPECT_EQ(drawn["img-slice-xy"]["width"], 40);
  EXPECT_EQ(drawn["img-slice-xy"]["height"], 40);
  EXPECT_EQ(drawn["img-slice-zx"]["width"], 24);
  EXPECT_EQ(drawn["img-slice-zy"]["height"], 40);
  for (const char* id : {"img-proj-xy", "img-proj-zx", "img-proj-zy"})
    EXPECT_EQ(drawn[id]["total"].get<double>(), static_cast<double>(total)) << id;
  for (const char* id : {"img-slice-xy", "img-slice-zx", "img-slice-zy"}) {
    EXPECT_GT(drawn[id]["total"].get<double>(), 0) << id;
    EXPECT_LE(drawn[id]["total"].get<double>(), static_cast<double>(total)) << id;
  }
  // The trace and the axial profile: one point per sample and per slice, values as sent.
  ASSERT_TRUE(b.until("typeof Chart !== 'undefined' && Chart.getChart('chart-trace') !== undefined",
                      std::chrono::seconds(10)));
  const json trace_z = b.eval("Chart.getChart('chart-trace').data.datasets[2].data.map(p => p.y)");
  ASSERT_EQ(trace_z.size(), f.trace_count);
  for (std::uint32_t i = 0; i < f.trace_count; ++i)
    EXPECT_NEAR(trace_z[i].get<double>(), f.sample(i).mean_mm[2], 1e-9) << i;
  const json axial = b.eval("Chart.getChart('chart-axial').data.datasets[0].data.map(p => p.y)");
  ASSERT_EQ(axial.size(), f.dims[2]);
  double axial_sum = 0;
  for (const json& v : axial) axial_sum += v.get<double>();
  EXPECT_EQ(axial_sum, static_cast<double>(total));
  EXPECT_EQ(b.eval("document.getElementById('image-malformed').dataset.value"), "0");
  // A screenshot of the image section (web_image.png in the build folder).
  b.eval("document.getElementById('image').scrollIntoView()");
  const json shot = b.call("Page.captureScreenshot", {{"format", "png"}});
  const std::string png = base64_decode(shot["data"].get<std::string>());
  EXPECT_EQ(png.substr(1, 3), "PNG");
  std::ofstream(fs::path(PETDAQ_BINARY_DIR) / "web_image.png", std::ios::binary) << png;
}

// petdaq-web's page: one WebSocket, four kinds of message (docs/tools.md): "history" when
// connected, "rates" for every rates document, "histograms" for every histograms message
// and "image" for every image message (and the latest ones when connected), "status" once a second and at every change of the
// feed's state. Read-only: the page sends nothing.
"use strict";

const MAX_POINTS = 600;
const RECONNECT_MS = 2000;
const $ = (id) => document.getElementById(id);

let history = [];        // {t, singles, prompts, delayed, trues, necr}
let lastRatesAt = null;  // Date.now() when the last rates message arrived
let charts = null;
let histogramsAt = null;  // Date.now() when the last histograms message arrived

// "12.3 k", "1.50 M", "980": three significant digits and an SI prefix (as petdaq-top).
function si(v) {
  const a = Math.abs(v);
  const [d, p] = a >= 1e9 ? [1e9, " G"] : a >= 1e6 ? [1e6, " M"] : a >= 1e3 ? [1e3, " k"] : [1, ""];
  const x = v / d;
  const ax = Math.abs(x);
  if (p === "") return ax >= 100 || Number.isInteger(x) ? x.toFixed(0) : x.toFixed(1);
  return (ax >= 100 ? x.toFixed(0) : ax >= 10 ? x.toFixed(1) : x.toFixed(2)) + p;
}

// What rates.trues subtracts from the prompts, by rates.randoms_method (docs/randoms.md).
const TRUES_METHODS = {
  delayed: "prompts − delayed",
  singles_rate: "prompts − randoms from the singles rates (2τ·S_i·S_j)",
  singles_prompts: "prompts − randoms from the singles-prompts window model",
};

// Every number shown also sits unformatted in data-value, for scripts and tests.
function show(id, value, text) {
  const el = $(id);
  if (!el) return;
  if (value === null || value === undefined) {
    el.textContent = "–";
    delete el.dataset.value;
    return;
  }
  el.dataset.value = String(value);
  el.textContent = text === undefined ? String(value) : text;
}

function duration(s) {
  const t = Math.max(0, Math.floor(s));
  const d = Math.floor(t / 86400), h = Math.floor(t / 3600) % 24, m = Math.floor(t / 60) % 60;
  const hms = [h, m, t % 60].map((x) => String(x).padStart(2, "0")).join(":");
  return d ? `${d}d ${hms}` : hms;
}

function makeCharts() {
  if (typeof Chart === "undefined") {
    $("no-plots").hidden = false;
    return null;
  }
  const line = (label, colour) => ({ label, data: [], borderColor: colour, backgroundColor: colour,
                                     pointRadius: 0, borderWidth: 1.5 });
  const timeAxis = { type: "linear", title: { display: true, text: "seconds before the latest document" } };
  const opts = (title) => ({
    animation: false, responsive: true, maintainAspectRatio: false, parsing: false,
    plugins: { title: { display: true, text: title } },
    scales: { x: timeAxis, y: { beginAtZero: true, ticks: { callback: (v) => si(v) } } },
  });
  return {
    singles: new Chart($("chart-singles"), { type: "line", options: opts("singles /s"),
      data: { datasets: [line("singles", "#2f6fb3")] } }),
    coinc: new Chart($("chart-coinc"), { type: "line", options: opts("coincidences /s"),
      data: { datasets: [line("prompts", "#1d2330"), line("delayed", "#c0262d"),
                         line("trues (est.)", "#1f8a3b"), line("NECR", "#b07800")] } }),
    bdm: new Chart($("chart-bdm"), { type: "bar",
      options: { animation: false, responsive: true, maintainAspectRatio: false,
                 plugins: { legend: { display: false } },
                 scales: { y: { beginAtZero: true, ticks: { callback: (v) => si(v) } } } },
      data: { labels: [], datasets: [{ label: "singles /s", data: [], backgroundColor: "#2f6fb3" }] } }),
    energy: new Chart($("chart-energy"), { type: "line", options: histogramOptions("energy spectrum", "keV"),
      data: { datasets: [step("singles", "#2f6fb3")] } }),
    dt: new Chart($("chart-dt"), { type: "line", options: histogramOptions("prompt Δt", "ps"),
      data: { datasets: [step("prompts", "#1d2330"), step("delayed", "#c0262d")] } }),
    ...figureCharts(),
  };
}

// A 1-D histogram as steps over its bins' lower edges, the x axis in the bins' unit.
function step(label, colour) {
  return { label, data: [], borderColor: colour, backgroundColor: colour, pointRadius: 0,
           borderWidth: 1.2, stepped: "before" };
}
function histogramOptions(title, unit) {
  return {
    animation: false, responsive: true, maintainAspectRatio: false, parsing: false,
    plugins: { title: { display: true, text: title } },
    scales: { x: { type: "linear", title: { display: true, text: unit } },
              y: { beginAtZero: true, title: { display: true, text: "counts per bin" },
                   ticks: { callback: (v) => si(v) } } },
  };
}

function drawHistory() {
  if (!charts || history.length === 0) return;
  const t0 = history[history.length - 1].t;
  const series = (key) => history.map((p) => ({ x: p.t - t0, y: p[key] }));
  charts.singles.data.datasets[0].data = series("singles");
  ["prompts", "delayed", "trues", "necr"].forEach((k, i) => {
    charts.coinc.data.datasets[i].data = series(k);
  });
  charts.singles.update("none");
  charts.coinc.update("none");
}

function showBdm(bdm) {
  const table = $("bdm-table");
  if (!bdm) {
    table.replaceChildren();
    return;
  }
  const n = bdm.singles_per_s.length;
  // b = b_axial * transaxial + b_trans (docs/daemon.md): rows transaxial, columns axial.
  if (table.dataset.count !== String(n)) {
    table.dataset.count = String(n);
    const head = document.createElement("tr");
    head.innerHTML = "<th>transaxial</th>" +
      Array.from({ length: bdm.axial }, (_, a) => `<th>axial ${a}: singles /s</th><th>°C</th>`).join("");
    const rows = [head];
    for (let t = 0; t < bdm.transaxial; ++t) {
      const tr = document.createElement("tr");
      tr.innerHTML = `<th>${t}</th>` + Array.from({ length: bdm.axial }, (_, a) => {
        const b = a * bdm.transaxial + t;
        return `<td id="bdm-${b}">–</td><td id="bdm-temp-${b}">–</td>`;
      }).join("");
      rows.push(tr);
    }
    table.replaceChildren(...rows);
  }
  bdm.singles_per_s.forEach((v, b) => {
    // A lagging board (DESIGN section 6) does not hold the horizon: its late frames drop. A
    // dropping one's receiving socket lost datagrams since the last document: its data has gaps.
    const lagging = Boolean(bdm.lagging && bdm.lagging[b]);
    const dropping = Boolean(bdm.dropping && bdm.dropping[b]);
    show(`bdm-${b}`, v, si(v) + (lagging ? " LAGGING" : "") + (dropping ? " DROPPING" : ""));
    const cell = $(`bdm-${b}`);
    if (cell) cell.classList.toggle("problem", lagging || dropping);
    const t = bdm.temperature_degC[b];
    show(`bdm-temp-${b}`, t === undefined ? null : t, t === null || t === undefined ? "–" : t.toFixed(1));
  });
  if (charts) {
    charts.bdm.data.labels = bdm.singles_per_s.map((_, b) => `${b % bdm.transaxial}/${Math.floor(b / bdm.transaxial)}`);
    charts.bdm.data.datasets[0].data = bdm.singles_per_s;
    charts.bdm.update("none");
  }
}

function counterRows(table, entries, isProblem) {
  table.replaceChildren(...entries.map(([name, value]) => {
    const tr = document.createElement("tr");
    tr.dataset.name = name;
    tr.dataset.value = String(value);
    if (isProblem(name, value)) tr.className = "problem";
    // Text, not HTML: names come from the publisher.
    for (const text of [name, String(value)]) tr.insertCell().textContent = text;
    return tr;
  }));
}

function onRates(m) {
  lastRatesAt = Date.now();
  show("run-id", m.run_id);
  show("backend", m.backend);
  show("uptime", m.uptime_s, duration(m.uptime_s));
  for (const [k, v] of Object.entries(m.rates)) {
    show(`rate-${k}`, v, k === "randoms_fraction" ? `${(100 * v).toFixed(1)} %` : si(v));
  }
  $("trues-method").textContent = TRUES_METHODS[m.randoms_method] ||
    (m.randoms_method ? `prompts − randoms (${m.randoms_method} estimate)`
                      : "prompts − the daemon's randoms estimate");
  const banner = $("alarms");
  const alarms = m.alarms || [];
  banner.hidden = alarms.length === 0;
  banner.replaceChildren(...alarms.map((a) => {
    const div = document.createElement("div");
    div.className = "alarm";
    div.dataset.name = a.name;
    div.textContent = "ALARM " + a.name + " (" + a.subject + "): " + a.message;
    return div;
  }));
  const list = $("problems");
  if (m.problems.length === 0) {
    list.innerHTML = '<li class="none">none</li>';
  } else {
    list.replaceChildren(...m.problems.map((p) => {
      const li = document.createElement("li");
      li.className = p.increase > 0 ? "problem growing" : "problem";
      li.dataset.name = p.name;
      li.dataset.value = String(p.value);
      li.textContent = `${p.name} ${p.value}` + (p.increase > 0 ? ` (+${p.increase})` : "");
      return li;
    }));
  }
  const problemNames = new Set(m.problems.map((p) => p.name));
  counterRows($("counters"), Object.entries(m.counters), (name) => problemNames.has(name));
  const q = m.queues || {};
  show("ring-free", q.ring_free);
  show("ring-chunks", q.ring_chunks);
  show("pending-frames", q.pending_frames);
  // Dead time of an overload (DESIGN section 6): the live fraction corrects the rates.
  const d = m.deadtime || {};
  show("live-interval", d.live_fraction_interval,
       d.live_fraction_interval === undefined ? undefined
         : d.live_fraction_interval.toFixed(3) + (d.shedding ? " shedding" : ""));
  show("live-run", d.live_fraction_run,
       d.live_fraction_run === undefined ? undefined : d.live_fraction_run.toFixed(3));
  const l = m.latency_ms || {};
  for (const k of ["p50", "p99", "max"]) {
    show(`latency-${k}`, l[k], l[k] === undefined ? undefined : `${l[k].toFixed(1)} ms`);
  }
  showBdm(m.bdm);
  const t = m.time_unix_ns ? m.time_unix_ns / 1e9 : Date.now() / 1000;
  history.push({ t, singles: m.rates.singles, prompts: m.rates.prompts, delayed: m.rates.delayed,
                 trues: m.rates.trues, necr: m.rates.necr });
  if (history.length > MAX_POINTS) history.splice(0, history.length - MAX_POINTS);
  drawHistory();
}

// Colour of a count: square-root scale from 0 (black) to `max` (white) through blue,
// purple and orange.
const STOPS = [[0, 0, 0], [30, 40, 140], [150, 40, 150], [240, 120, 30], [255, 255, 220]];
function colour(v, max) {
  const f = max > 0 ? Math.sqrt(v / max) * (STOPS.length - 1) : 0;
  const i = Math.min(STOPS.length - 2, Math.floor(f));
  const t = f - i;
  return STOPS[i].map((c, k) => Math.round(c + t * (STOPS[i + 1][k] - c)));
}

// An image of the histograms message on a canvas, as large as fits maxWidthPx x maxHeightPx
// on screen; drawn at a whole number of canvas pixels per image pixel (sharp when scaled),
// with lines between tiles of `tile` pixels.
function drawImage(id, img, maxWidthPx, maxHeightPx, tile) {
  const canvas = $(id);
  const fit = Math.min(maxWidthPx / img.width, maxHeightPx / img.height);
  const scale = Math.max(1, Math.ceil(fit));
  canvas.width = img.width * scale;
  canvas.height = img.height * scale;
  canvas.style.width = `${Math.round(img.width * fit)}px`;
  canvas.dataset.width = String(img.width);
  canvas.dataset.height = String(img.height);
  canvas.dataset.total = String(img.total);
  canvas.dataset.max = String(img.max);
  const ctx = canvas.getContext("2d");
  const data = ctx.createImageData(canvas.width, canvas.height);
  for (let y = 0; y < img.height; ++y) {
    for (let x = 0; x < img.width; ++x) {
      const [r, g, b] = colour(img.counts[y * img.width + x], img.max);
      for (let sy = 0; sy < scale; ++sy) {
        let o = ((y * scale + sy) * canvas.width + x * scale) * 4;
        for (let sx = 0; sx < scale; ++sx, o += 4) {
          data.data[o] = r; data.data[o + 1] = g; data.data[o + 2] = b; data.data[o + 3] = 255;
        }
      }
    }
  }
  ctx.putImageData(data, 0, 0);
  if (tile) {
    ctx.strokeStyle = "rgba(255,255,255,0.35)";
    ctx.lineWidth = 1;
    ctx.beginPath();
    for (let x = tile; x < img.width; x += tile) {
      ctx.moveTo(x * scale + 0.5, 0); ctx.lineTo(x * scale + 0.5, canvas.height);
    }
    for (let y = tile; y < img.height; y += tile) {
      ctx.moveTo(0, y * scale + 0.5); ctx.lineTo(canvas.width, y * scale + 0.5);
    }
    ctx.stroke();
  }
}

function steps(h) {
  // The last bin's upper edge closes the last step.
  const points = h.counts.map((c, i) => ({ x: h.lo + i * h.width, y: c }));
  if (h.counts.length) points.push({ x: h.lo + h.counts.length * h.width, y: h.counts[h.counts.length - 1] });
  return points;
}

function binNote(img, what) {
  return img.bin > 1 ? `${img.width} × ${img.height}, ${what} summed in blocks of ${img.bin} × ${img.bin}`
                     : `${img.width} × ${img.height}, full resolution`;
}

function onHistograms(m) {
  $("hist-none").hidden = true;
  $("histogram-views").dataset.run = String(m.run_id);
  histogramsAt = Date.now();
  show("hist-run-id", m.run_id);
  const tiles = m.flood_tiles;
  show("flood-total", tiles.total, si(tiles.total));
  $("flood-tile-note").textContent = `${tiles.columns} × ${tiles.rows} DUs of ${tiles.tile} × ${tiles.tile}` +
    (tiles.bin > 1 ? ` (position_size ${m.scanner.position_size} in blocks of ${tiles.bin})` : "");
  drawImage("img-flood-tiles", tiles, 1300, 420, tiles.tile);
  $("flood-sum-note").textContent = binNote(m.flood_sum, "pixels");
  drawImage("img-flood-sum", m.flood_sum, 256, 256, 0);
  show("crystal-total", m.crystal_singles.total, si(m.crystal_singles.total));
  $("crystal-note").textContent = binNote(m.crystal_singles, "crystals");
  drawImage("img-crystals", m.crystal_singles, 1000, 256, 0);
  show("energy-total", m.energy_keV.total, si(m.energy_keV.total));
  show("dt-total", m.dt_prompt.total, si(m.dt_prompt.total));
  const w = m.energy_window_keV;
  show("energy-window", w ? w.join("–") : null, w ? `${w[0]}–${w[1]} keV` : undefined);
  if (charts) {
    charts.energy.data.datasets[0].data = steps(m.energy_keV);
    charts.energy.options.scales.x.title.text = m.energy_keV.unit;
    charts.energy.update("none");
    charts.dt.data.datasets[0].data = steps(m.dt_prompt);
    charts.dt.data.datasets[1].data = m.dt_delayed ? steps(m.dt_delayed) : [];
    charts.dt.options.scales.x.title.text = m.dt_prompt.unit;
    charts.dt.update("none");
  }
  onFigures(m);
}

// The figures panel: the signed Δt on a log scale with the CTR, the energy resolution's
// distribution over crystals and its map.
function figureCharts() {
  const tofOptions = histogramOptions("signed Δt = t(lower crystal) − t(higher)", "ps");
  tofOptions.scales.y = { type: "logarithmic", min: 0.5, title: { display: true, text: "counts per bin" },
                          ticks: { callback: (v) => si(v) } };
  return {
    tof: new Chart($("chart-tof"), { type: "line", options: tofOptions,
      data: { datasets: [step("prompts", "#1d2330"), step("delayed", "#c0262d")] } }),
    eres: new Chart($("chart-eres"), { type: "line",
      options: histogramOptions("energy resolution over crystals", "FWHM %"),
      data: { datasets: [step("crystals", "#2f6fb3")] } }),
  };
}

// A map of values in [min, max] (0: none) on a canvas, linear colour scale from min to max.
function drawValues(id, img, maxWidthPx, maxHeightPx) {
  const span = Math.max(1, img.max - img.min);
  drawImage(id, { width: img.width, height: img.height, total: img.values.filter((v) => v > 0).length,
                  max: span + 1, counts: img.values.map((v) => (v > 0 ? v - img.min + 1 : 0)) },
            maxWidthPx, maxHeightPx, 0);
}

function onFigures(m) {
  const f = m.figures;
  if (!f) return;
  const c = f.ctr;
  show("ctr-fwhm", c ? c.fwhm_ps : null, c ? `${c.fwhm_ps.toFixed(1)} ps` : undefined);
  show("ctr-err", c ? c.fwhm_err_ps : null, c && c.fwhm_err_ps !== null ? `${c.fwhm_err_ps.toFixed(1)} ps` : undefined);
  show("ctr-centre", c ? c.centre_ps : null, c ? `${c.centre_ps.toFixed(1)} ps` : undefined);
  const e = f.energy_resolution, g = e.global;
  show("eres-global", g ? g.percent : null, g ? `${g.percent.toFixed(2)} %` : undefined);
  show("eres-err", g ? g.err_percent : null, g && g.err_percent !== null ? `${g.err_percent.toFixed(2)} %` : undefined);
  show("eres-peak", g ? g.position_keV : null, g ? `${g.position_keV.toFixed(1)} keV` : undefined);
  show("eres-fitted", e.crystals_fitted, `${e.crystals_fitted} / ${e.crystals}`);
  show("eres-median", e.median_percent, e.median_percent !== null ? `${e.median_percent.toFixed(2)} %` : undefined);
  $("ctr-note").dataset.signed = String(f.signed_tof);
  if (!f.signed_tof) $("ctr-note").textContent = "No signed Δt in these histograms (petdaqd older than histogram file version 3): no CTR.";
  if (e.map) {
    drawValues("img-eres-map", e.map, 1000, 256);
    $("eres-map-range").textContent = e.map.max > 0
      ? `${(e.map.min / 100).toFixed(2)} % (dark) to ${(e.map.max / 100).toFixed(2)} % (bright)` : "none fitted";
  }
  if (charts) {
    // Empty bins at 0.5 on the log scale.
    const logSteps = (h) => (h ? steps(h).map((p) => ({ x: p.x, y: Math.max(p.y, 0.5) })) : []);
    charts.tof.data.datasets[0].data = logSteps(m.tof_prompt);
    charts.tof.data.datasets[1].data = logSteps(m.tof_delayed);
    charts.tof.update("none");
    charts.eres.data.datasets[0].data = steps(e.distribution);
    charts.eres.update("none");
  }
}

// The `image` topic's views (docs/tools.md): slices and projections on canvases, the trace
// and the axial profile with Chart.js (created at the first image).
let imageCharts = null;
let imageAt = null;  // Date.now() when the last image message arrived
function onImage(m) {
  $("image-none").hidden = true;
  $("image-views").hidden = false;
  $("image-note").textContent = m.note;
  $("image-views").dataset.run = String(m.run_id);
  imageAt = Date.now();
  show("image-run-id", m.run_id);
  show("image-window", m.window_s, `${Number(m.window_s.toPrecision(3))} s`);
  show("image-max", m.max_voxel_mm.join(","), m.max_voxel_mm.map((v) => v.toFixed(1)).join(", "));
  show("image-counts", m.window_counts, si(m.window_counts));
  $("image-randoms").textContent = m.randoms_subtracted ? "delayed-window randoms subtracted"
                                                         : "randoms not subtracted";
  show("image-voxel", m.voxel_mm);
  for (const v of ["xy", "zx", "zy"]) {
    drawImage(`img-slice-${v}`, m.slices[v], 300, 300, 0);
    drawImage(`img-proj-${v}`, m.projections[v], 300, 300, 0);
  }
  const tr = m.trace;
  show("trace-bin", tr.bin_ms, String(Number(tr.bin_ms.toPrecision(4))));
  show("trace-samples", tr.t_s.length);
  const last = tr.t_s.length - 1;
  $("trace-error").textContent = last < 0 ? "–" :
    [tr.x_err_mm[last], tr.y_err_mm[last], tr.z_err_mm[last]].map((v) => v.toFixed(2)).join(", ");
  if (typeof Chart === "undefined") return;
  if (!imageCharts) {
    const line = (label, colour) => ({ label, data: [], borderColor: colour, backgroundColor: colour,
                                       pointRadius: 0, borderWidth: 1.2 });
    const opts = (title, x, y) => ({
      animation: false, responsive: true, maintainAspectRatio: false, parsing: false,
      plugins: { title: { display: true, text: title } },
      scales: { x: { type: "linear", title: { display: true, text: x } },
                y: { title: { display: true, text: y } } },
    });
    imageCharts = {
      trace: new Chart($("chart-trace"), { type: "line",
        options: opts("centroid trace", "s of acquisition time", "mm"),
        data: { datasets: [line("x", "#2f6fb3"), line("y", "#1f8a3b"), line("z", "#c0262d")] } }),
      axial: new Chart($("chart-axial"), { type: "line",
        options: opts("axial profile (window)", "z (mm)", "counts"),
        data: { datasets: [step("counts", "#1d2330")] } }),
    };
  }
  ["x_mm", "y_mm", "z_mm"].forEach((k, i) => {
    imageCharts.trace.data.datasets[i].data = tr.t_s.map((t, j) => ({ x: t, y: tr[k][j] }));
  });
  imageCharts.trace.update("none");
  imageCharts.axial.data.datasets[0].data = m.axial.z_mm.map((z, j) => ({ x: z, y: m.axial.counts[j] }));
  imageCharts.axial.update("none");
}

function setState(state, text) {
  const el = $("state");
  el.dataset.state = state;
  el.textContent = text;
  document.body.classList.toggle("stale", state !== "live");
}

function onStatus(m) {
  show("endpoint", m.endpoint);
  show("clients", m.clients);
  show("hist-received", m.counters["web.histograms_received"]);
  show("hist-malformed", m.counters["web.histograms_malformed"]);
  show("image-received", m.counters["web.image_received"]);
  show("image-malformed", m.counters["web.image_malformed"]);
  // Counters that mean something was refused or dropped are highlighted when non-zero.
  const informational = new Set(["web.rates_received", "web.histograms_received", "web.image_received",
                                 "web.clients_accepted", "web.http_requests"]);
  counterRows($("web-counters"), Object.entries(m.counters),
              (name, value) => value > 0 && !informational.has(name));
  if (m.state === "live") {
    setState("live", "live");
  } else if (m.state === "waiting") {
    setState("waiting", `waiting for petdaqd at ${m.endpoint}`);
  } else {
    setState("no-data", `no data from petdaqd for ${Math.round(m.age_s)} s (${m.endpoint})`);
  }
}

function connect() {
  const ws = new WebSocket(`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/ws`);
  ws.onmessage = (ev) => {
    const m = JSON.parse(ev.data);
    if (m.type === "rates") onRates(m);
    else if (m.type === "status") onStatus(m);
    else if (m.type === "histograms") onHistograms(m);
    else if (m.type === "image") onImage(m);
    else if (m.type === "history") {
      history = m.points.slice(-MAX_POINTS);
      drawHistory();
    }
  };
  ws.onclose = () => {
    setState("disconnected", "petdaq-web is not reachable; retrying");
    setTimeout(connect, RECONNECT_MS);
  };
}

setInterval(() => {
  if (histogramsAt !== null) show("hist-age", (Date.now() - histogramsAt) / 1000,
                                  `${((Date.now() - histogramsAt) / 1000).toFixed(0)} s ago`);
  if (imageAt !== null) show("image-age", (Date.now() - imageAt) / 1000,
                             `${((Date.now() - imageAt) / 1000).toFixed(0)} s ago`);
  if (lastRatesAt !== null) show("age", (Date.now() - lastRatesAt) / 1000,
                                 `${((Date.now() - lastRatesAt) / 1000).toFixed(0)} s ago`);
}, 500);

// ---- the Runs section: the run catalogue, read over HTTP every few seconds ----

const RUNS_EVERY_MS = 5000;
// Counters of a run whose growth is data lost (petdaqd's data_loss and file_loss alarms).
const LOSS_COUNTERS = ["rx.kernel_drops", "rx.ring_full", "rx.seq_missing", "stream.pending_full",
                       "stream.late", "stream.carry_overflow", "coinc.records_overflow",
                       "out.file_dropped_bytes", "out.raw_lost_frames"];
let runsAt = null;

function cell(tr, text, opts = {}) {
  const td = document.createElement("td");
  td.textContent = text === null || text === undefined || text === "" ? "–" : String(text);
  if (opts.value !== undefined && opts.value !== null) td.dataset.value = String(opts.value);
  if (opts.cls) td.className = opts.cls;
  if (opts.key) td.dataset.key = opts.key;
  tr.appendChild(td);
  return td;
}

const when = (iso) => (iso ? iso.replace("T", " ").replace("Z", "") : null);

function counterCell(tr, run, name, key) {
  const v = run.counters ? run.counters[name] : undefined;
  cell(tr, v === undefined ? null : si(v), { value: v, cls: "num", key });
}

function renderRuns(doc) {
  $("runs-none").hidden = true;
  $("runs-views").hidden = false;
  show("runs-catalogue", doc.catalogue);
  const acq = $("acquisitions-table").tBodies[0];
  acq.replaceChildren();
  for (const a of doc.acquisitions) {
    const tr = document.createElement("tr");
    tr.dataset.id = String(a.id);
    if (a.ended_unix_ns === null) tr.classList.add("open");
    if (a.end_reason === "daemon died") tr.classList.add("died");
    cell(tr, a.id);
    cell(tr, a.name, { key: "name" });
    cell(tr, a.subject);
    cell(tr, a.isotope);
    cell(tr, a.activity_MBq, { value: a.activity_MBq, cls: "num" });
    cell(tr, a.operator);
    cell(tr, when(a.started));
    cell(tr, a.ended_unix_ns === null ? "(open)" : when(a.ended));
    cell(tr, a.end_reason, { cls: "end", key: "end_reason" });
    cell(tr, a.runs.join(" "));
    cell(tr, a.file_count, { value: a.file_count, cls: "num", key: "files" });
    cell(tr, (a.annotations || []).map((n) => n.text).join("; "));
    acq.appendChild(tr);
  }
  const runs = $("runs-table").tBodies[0];
  runs.replaceChildren();
  for (const r of doc.runs) {
    const tr = document.createElement("tr");
    tr.dataset.id = String(r.run_id);
    if (r.ended_unix_ns === null) tr.classList.add("open");
    if (r.end_reason === "daemon died") tr.classList.add("died");
    cell(tr, r.run_id);
    cell(tr, when(r.started));
    cell(tr, r.ended_unix_ns === null ? "(open)" : when(r.ended));
    cell(tr, r.end_reason, { cls: "end", key: "end_reason" });
    counterCell(tr, r, "rx.frames", "frames");
    counterCell(tr, r, "single.accepted", "singles");
    counterCell(tr, r, "coinc.prompts", "prompts");
    counterCell(tr, r, "coinc.delayed", "delayed");
    const losses = LOSS_COUNTERS.reduce((sum, n) => sum + ((r.counters || {})[n] || 0), 0);
    cell(tr, si(losses), { value: losses, cls: losses > 0 ? "num end" : "num", key: "losses" });
    cell(tr, r.live_fraction === null ? null : `${(100 * r.live_fraction).toFixed(2)} %`,
         { value: r.live_fraction, cls: "num", key: "live" });
    cell(tr, r.file_count, { value: r.file_count, cls: "num", key: "files" });
    cell(tr, r.acquisitions.join(" "));
    const qa = cell(tr, r.qa_report ? "" : null, { key: "qa" });
    if (r.qa_report) {
      const a = document.createElement("a");
      a.href = `qa/${r.run_id}/`;
      a.textContent = "report";
      a.title = r.qa_report;
      qa.appendChild(a);
    }
    runs.appendChild(tr);
  }
}

async function loadRuns() {
  try {
    const res = await fetch("runs.json", { cache: "no-store" });
    if (res.ok) {
      renderRuns(await res.json());
      runsAt = Date.now();
    } else {
      const body = await res.text();
      let why = body;
      try { why = JSON.parse(body).error || body; } catch (e) { /* plain text */ }
      $("runs-none").hidden = false;
      $("runs-none").textContent = why.trim();
      // No catalogue configured: that stays so until petdaq-web restarts; ask no more.
      if (res.status === 404) {
        $("runs-views").hidden = true;
        $("runs").dataset.polling = "off";
        return;
      }
    }
  } catch (e) {
    // petdaq-web unreachable: the WebSocket's state says so.
  }
  setTimeout(loadRuns, RUNS_EVERY_MS);
}

setInterval(() => {
  if (runsAt !== null) show("runs-age", (Date.now() - runsAt) / 1000,
                            `${((Date.now() - runsAt) / 1000).toFixed(0)} s ago`);
}, 1000);

charts = makeCharts();
connect();
loadRuns();

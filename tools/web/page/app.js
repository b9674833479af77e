// petdaq-web's page: one WebSocket, three kinds of message (docs/tools.md): "history" when
// connected, "rates" for every rates document, "status" once a second and at every change of
// the feed's state. Read-only: the page sends nothing.
"use strict";

const MAX_POINTS = 600;
const RECONNECT_MS = 2000;
const $ = (id) => document.getElementById(id);

let history = [];        // {t, singles, prompts, delayed, trues, necr}
let lastRatesAt = null;  // Date.now() when the last rates message arrived
let charts = null;

// "12.3 k", "1.50 M", "980": three significant digits and an SI prefix (as petdaq-top).
function si(v) {
  const a = Math.abs(v);
  const [d, p] = a >= 1e9 ? [1e9, " G"] : a >= 1e6 ? [1e6, " M"] : a >= 1e3 ? [1e3, " k"] : [1, ""];
  const x = v / d;
  const ax = Math.abs(x);
  if (p === "") return ax >= 100 || Number.isInteger(x) ? x.toFixed(0) : x.toFixed(1);
  return (ax >= 100 ? x.toFixed(0) : ax >= 10 ? x.toFixed(1) : x.toFixed(2)) + p;
}

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
    show(`bdm-${b}`, v, si(v));
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
  show("hist-unparsed", m.counters["web.histograms_unparsed"]);
  // Counters that mean something was refused or dropped are highlighted when non-zero.
  const informational = new Set(["web.rates_received", "web.histograms_received",
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
  if (lastRatesAt !== null) show("age", (Date.now() - lastRatesAt) / 1000,
                                 `${((Date.now() - lastRatesAt) / 1000).toFixed(0)} s ago`);
}, 500);

charts = makeCharts();
connect();

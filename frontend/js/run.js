// The run page (/runs/{id}): loss curve, metric panels, timeline, data mix, config; live.
//
// View state lives in the URL query so a view can be shared as a link:
//   keys=train/loss,val/loss  metrics on the loss chart      x=step|tokens|time  x axis
//   smooth=0.6                EMA strength (0 = off)         log=1               log y axis
//   start=..&end=..           visible x range (x-axis units)  panels=lr,grad_norm only these panels
/* global Plotly */
import { ApiError, decode, getEvents, getJSON, getRun, runUrl } from "./api.js";
import { DEFAULT_SMOOTHING, MetricChart, XMap, markerStyle, rangesEqual } from "./chart.js";
import { LiveStream } from "./live.js";
import {
  color, debounce, el, escapeHtml, formatAge, formatBytes, formatTime, formatValue, lastLossKey, safeHttpUrl, theme,
} from "./util.js";

const PANEL_ORDER = [/^(lr|learning_rate)$/i, /grad_?norm/i, /(tokens?_per_s|throughput|tok\/s)/i, /loss_scale/i];
const PANEL_TITLES = [
  [/^(lr|learning_rate)$/i, "learning rate"],
  [/grad_?norm/i, "gradient norm"],
  [/(tokens?_per_s|throughput)/i, "throughput (tokens/s)"],
  [/loss_scale/i, "loss scale"],
];
const TOKEN_KEY = /^(tokens_seen|tokens|train\/tokens|tokens\/seen|num_tokens|consumed_tokens)$/i;
const TIME_KEY = /^(wall_?time|time|timestamp|elapsed(_s)?|time\/elapsed|_runtime)$/i;
const isLossKey = (k) => /(^|[/_.])loss$/i.test(k) && !/scale/i.test(k);

const runId = decodeURIComponent(location.pathname.replace(/^\/runs\//, "").replace(/\/$/, ""));
const $ = (id) => document.getElementById(id);

const state = readUrl();
let detail = null;
let events = [];
let mainChart = null;
let panelCharts = [];
let stream = null;
let heartbeatAt = null;
let loaded = false;
let eventsSentAt = Infinity;
let firstFetchAt = Infinity;
let staleEvents = false;
let staleCharts = false;
let alerts = new Map(); // alert id -> alert (GET /alerts)
let checkpoints = null; // GET /checkpoints, null until read
const xmaps = new Map(); // mode -> XMap
const charts = () => (mainChart ? [mainChart, ...panelCharts] : panelCharts);

const view = {
  smoothing: state.smooth,
  log: state.log,
  range: state.range,
  colorBy: "segment",
  xmapFor: () => xmaps.get(state.x) || xmaps.get("step"),
  segmentsOf: () => (detail ? detail.segments : []),
  onRange(range) {
    if (rangesEqual(view.range, range)) {
      for (const c of charts()) c.applyRange(range);
      return;
    }
    view.range = range;
    state.range = range;
    writeUrl();
    for (const c of charts()) c.applyRange(range);
    syncMixRange();
  },
};
xmaps.set("step", new XMap("step"));

function readUrl() {
  const q = new URLSearchParams(location.search);
  const list = (name) => (q.get(name) ? q.get(name).split(",").filter(Boolean) : null);
  const num = (name) => (q.get(name) !== null && q.get(name) !== "" && Number.isFinite(Number(q.get(name))) ? Number(q.get(name)) : null);
  const smooth = num("smooth");
  const start = num("start");
  const end = num("end");
  return {
    keys: list("keys"),
    panels: list("panels"),
    x: q.get("x") || "step",
    smooth: smooth === null ? DEFAULT_SMOOTHING : Math.min(0.99, Math.max(0, smooth)),
    log: q.get("log") === "1",
    range: start !== null && end !== null && end > start ? [start, end] : null,
  };
}

function writeUrl() {
  const q = new URLSearchParams();
  if (state.keys) q.set("keys", state.keys.join(","));
  if (state.panels) q.set("panels", state.panels.join(","));
  if (state.x !== "step") q.set("x", state.x);
  if (state.smooth !== DEFAULT_SMOOTHING) q.set("smooth", String(state.smooth));
  if (state.log) q.set("log", "1");
  if (state.range) {
    const digits = state.x === "step" ? 0 : 6;
    q.set("start", state.range[0].toFixed(digits));
    q.set("end", state.range[1].toFixed(digits));
  }
  const search = q.toString().replace(/%2F/g, "/").replace(/%2C/g, ",");
  history.replaceState(null, "", location.pathname + (search ? "?" + search : ""));
}

// --- loading -------------------------------------------------------------------------------------

async function fromPrefetch(name, fallback) {
  const pre = window.__runcastPrefetch;
  if (pre && pre[name] && decodeURIComponent(pre.path) === runId) {
    const promise = pre[name];
    pre[name] = null; // a response body is read once
    try {
      const { ok, status, body } = await promise;
      if (!ok) throw new ApiError(status, (body && body.error && body.error.message) || "request failed");
      return body;
    } catch (err) {
      if (err instanceof ApiError) throw err;
    }
  }
  return fallback();
}

async function loadEvents() {
  const first = await fromPrefetch("events", () => {
    eventsSentAt = performance.now();
    return getJSON(runUrl(runId) + "/events?limit=1000");
  });
  const pre = window.__runcastPrefetch;
  if (pre && pre.eventsSentAt !== undefined && eventsSentAt === Infinity) eventsSentAt = pre.eventsSentAt;
  if (!first.next_cursor || first.events.length < 1000) return first.events;
  const rest = await getEvents(runId); // long timelines: read every page
  return rest;
}

async function catchUp() {
  if (staleCharts) {
    staleCharts = false;
    refetchCharts();
  }
  if (staleEvents) {
    staleEvents = false;
    try {
      events = await getEvents(runId);
      renderEvents();
    } catch {
      /* the live stream still brings new events */
    }
  }
}

async function start() {
  stream = new LiveStream(runId, {
    onBatch,
    onReset: () => reloadAll(),
    onState: showLiveState,
    onSubscribed: (arrivedAt) => {
      // Re-read only what was read before the subscription's first message arrived.
      const pre = window.__runcastPrefetch;
      const sent = Math.min(eventsSentAt, (pre && pre.eventsSentAt) ?? Infinity);
      if (sent < arrivedAt) staleEvents = true;
      if (firstFetchAt < arrivedAt) staleCharts = true;
      if (loaded) catchUp();
    },
  });
  stream.start();
  let eventsPromise;
  try {
    eventsPromise = loadEvents().catch(() => []);
    detail = await fromPrefetch("detail", () => getRun(runId));
  } catch (err) {
    stream.close();
    $("loading").hidden = true;
    if (err instanceof ApiError && err.status === 404) return showNotFound();
    return showFailed(err);
  }
  $("loading").hidden = true;
  $("run").hidden = false;
  renderHeader();
  renderConfig();
  setupControls();
  await setupXmaps();
  buildMainChart();
  firstFetchAt = performance.now();
  // The loss curve first; the timeline, data mix and panels once it is drawn.
  if (mainChart) await mainChart.fetch();
  events = await eventsPromise;
  renderEvents();
  buildPanels();
  loadArtifacts();
  loaded = true;
  stream.release();
  catchUp();
  setInterval(pollDetail, 30000);
  setInterval(tickHeartbeat, 1000);
}

function showNotFound() {
  document.title = "Run not found · Runcast";
  $("missing-id").textContent = runId;
  $("not-found").hidden = false;
}

function showFailed(err) {
  document.title = "Run unavailable · Runcast";
  $("failed-message").textContent = err.message;
  $("failed").hidden = false;
  $("retry").onclick = () => location.reload();
}

// --- header, config ------------------------------------------------------------------------------

function renderHeader() {
  document.title = detail.name + " · " + detail.project + " · Runcast";
  $("run-project").textContent = detail.project;
  $("run-name").textContent = detail.name;
  const badge = $("run-status");
  badge.textContent = detail.status;
  badge.className = "badge badge-" + detail.status;
  $("fact-step").textContent = detail.last_step === null ? "–" : detail.last_step.toLocaleString();
  const lossKey = lastLossKey(detail.last_values);
  $("fact-loss-key").textContent = lossKey || "Loss";
  $("fact-loss").textContent = lossKey ? formatValue(decode(detail.last_values[lossKey].value)) : "–";
  heartbeatAt = detail.heartbeat_at;
  tickHeartbeat();
  $("fact-started").textContent = formatTime(detail.started_at ?? detail.created_at);
  const resumed = detail.segments.filter((s) => s.resumed).length;
  $("fact-segments").textContent = detail.segments.length + (resumed ? ` (${resumed} resumed)` : "");
  const mainKey = (state.keys && state.keys[0]) || detail.keys.find(isLossKey) || detail.keys[0] || "";
  $("compare-link").href = "/compare?" + new URLSearchParams({ runs: runId, key: mainKey });
}

function tickHeartbeat() {
  $("fact-heartbeat").textContent = heartbeatAt ? formatAge(Date.now() / 1000 - heartbeatAt) : "–";
}

function showLiveState(s) {
  const label = { live: "● live stream", reconnecting: "reconnecting…", offline: "stream offline", unsupported: "" }[s] ?? "";
  const node = $("live-state");
  node.textContent = label;
  node.dataset.state = s;
}

function table(rows) {
  const t = el("table", { className: "kv" });
  const body = el("tbody");
  for (const [k, v] of rows) body.append(el("tr", {}, el("th", { scope: "row", text: k }), el("td", { text: v })));
  t.append(body);
  return t;
}

function flatten(obj, prefix = "", out = []) {
  for (const [k, v] of Object.entries(obj || {})) {
    const name = prefix ? prefix + "." + k : k;
    if (v && typeof v === "object" && !Array.isArray(v) && Object.keys(v).length && out.length < 500) flatten(v, name, out);
    else out.push([name, typeof v === "string" ? v : JSON.stringify(v)]);
  }
  return out;
}

function renderConfig() {
  const box = $("config");
  box.replaceChildren();
  const env = detail.env || {};
  const code = detail.code || {};
  const runRows = [
    ["run id", detail.id],
    ["seed", detail.seed === null ? "–" : String(detail.seed)],
    ["world size", env.world_size !== undefined && env.world_size !== null ? String(env.world_size) : "–"],
    ["code revision", code.sha ? String(code.sha).slice(0, 12) + (code.dirty ? " (dirty)" : "") : "–"],
    ["branch", code.branch ? String(code.branch) : "–"],
    ["visibility", detail.visibility],
  ];
  box.append(el("h3", { text: "Run" }), table(runRows));
  setupEstimate();
  const config = flatten(detail.config);
  box.append(el("h3", { text: "Hyperparameters" }), config.length ? table(config) : el("p", { text: "No config logged." }));
  const envRows = flatten(env);
  box.append(el("h3", { text: "Environment" }), envRows.length ? table(envRows) : el("p", { text: "No environment logged." }));
  const codeRows = flatten(Object.fromEntries(Object.entries(code).filter(([k]) => k !== "diff")));
  if (codeRows.length) box.append(el("h3", { text: "Code" }), table(codeRows));
  if (code.diff) {
    box.append(el("details", {}, el("summary", { text: "Uncommitted diff" }), el("pre", { text: String(code.diff).slice(0, 200000) })));
  }
}

// --- charts --------------------------------------------------------------------------------------

async function setupXmaps() {
  const select = $("xmode");
  const tokens = detail.keys.find((k) => TOKEN_KEY.test(k));
  const time = detail.keys.find((k) => TIME_KEY.test(k));
  select.replaceChildren(el("option", { value: "step", text: "step" }));
  if (tokens) select.append(el("option", { value: "tokens", text: "tokens seen (" + tokens + ")" }));
  if (time) select.append(el("option", { value: "time", text: "wall time (" + time + ")" }));
  for (const [mode, key] of [["tokens", tokens], ["time", time]]) {
    if (key && !xmaps.has(mode)) xmaps.set(mode, new XMap(mode, key));
  }
  if (!xmaps.has(state.x)) state.x = "step";
  select.value = state.x;
  if (state.x !== "step") await xmaps.get(state.x).load(runId);
}

function mainKeys() {
  const wanted = state.keys ? state.keys.filter((k) => detail.keys.includes(k)) : [];
  if (wanted.length) return wanted;
  const losses = detail.keys.filter(isLossKey);
  const ordered = losses.sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
  return ordered.length ? ordered.slice(0, 6) : detail.keys.slice(0, 1);
}

function rank(key) {
  if (/^(train[/_])?loss$/i.test(key)) return 0;
  if (/^train/i.test(key)) return 1;
  if (/^(val|valid|eval)/i.test(key)) return 2;
  return 3;
}

function onFirstDraw() {
  if (window.__runcastDrawn === undefined) {
    performance.mark("runcast-drawn");
    window.__runcastDrawn = performance.now();
  }
}

function buildMainChart() {
  const keys = mainKeys();
  renderKeyPicker(keys);
  if (!keys.length) {
    $("chart-main-note").textContent = "No metrics logged yet.";
    return;
  }
  if (mainChart) Plotly.purge(mainChart.div);
  mainChart = new MetricChart($("chart-main"), {
    title: keys.join(", "),
    sources: keys.map((key) => ({ run: runId, key, label: key })),
    view,
    noteEl: $("chart-main-note"),
    onDrawn: onFirstDraw,
    prefetched: takePrefetchedMetrics(),
  });
  mainChart.setMarkers(markers());
}

/** The head script's reads of the default view, once: (key, maxPoints) -> Promise<body|null>. */
function takePrefetchedMetrics() {
  const pre = window.__runcastPrefetch;
  if (!pre || !pre.metrics || decodeURIComponent(pre.path) !== runId) return null;
  const promise = pre.metrics;
  pre.metrics = null;
  return async (key, maxPoints) => {
    const reads = await promise.catch(() => null);
    const read = reads && reads[key];
    if (!read || maxPoints > 2 * pre.maxPoints || maxPoints < pre.maxPoints / 2) return null;
    const answer = await read.catch(() => null);
    return answer && answer.ok ? answer.body : null;
  };
}

function renderKeyPicker(selected) {
  const box = $("key-picker");
  box.querySelectorAll("label").forEach((n) => n.remove());
  for (const key of detail.keys) {
    const input = el("input", { type: "checkbox", value: key });
    input.checked = selected.includes(key);
    input.addEventListener("change", () => {
      const keys = [...box.querySelectorAll("input:checked")].map((i) => i.value);
      state.keys = keys.length ? keys : null;
      writeUrl();
      buildMainChart();
      if (mainChart) mainChart.fetch();
      buildPanels();
    });
    box.append(el("label", { className: "check" }, input, " " + key));
  }
}

function panelKeys() {
  const main = new Set(mainChart ? mainChart.sources.map((s) => s.key) : []);
  let keys = detail.keys.filter((k) => !main.has(k));
  if (state.panels) keys = keys.filter((k) => state.panels.includes(k));
  const order = (k) => {
    const i = PANEL_ORDER.findIndex((re) => re.test(k));
    return i < 0 ? PANEL_ORDER.length : i;
  };
  return keys.sort((a, b) => order(a) - order(b) || a.localeCompare(b));
}

let observer = null;

function buildPanels() {
  for (const c of panelCharts) Plotly.purge(c.div);
  panelCharts = [];
  if (observer) observer.disconnect();
  const box = $("panels");
  box.replaceChildren();
  // Panels draw when they scroll into view: a run with fifty keys costs one chart at first load.
  observer = new IntersectionObserver((entries) => {
    for (const entry of entries) {
      if (!entry.isIntersecting) continue;
      observer.unobserve(entry.target);
      const chart = panelCharts.find((c) => c.div === entry.target);
      if (chart) chart.fetch();
    }
  }, { rootMargin: "300px" });
  for (const key of panelKeys()) {
    const hint = PANEL_TITLES.find(([re]) => re.test(key));
    const plot = el("div", { className: "plot plot-panel" });
    const note = el("p", { className: "note" });
    box.append(el("section", { className: "card panel", "aria-label": key }, plot, note));
    const chart = new MetricChart(plot, {
      title: hint ? `${key} — ${hint[1]}` : key,
      sources: [{ run: runId, key, label: key }],
      view,
      noteEl: note,
    });
    chart.setMarkers(markers());
    panelCharts.push(chart);
    observer.observe(plot);
  }
}

function refetchCharts() {
  for (const c of charts()) if (c.drawn) c.fetch();
}

function rerender() {
  for (const c of charts()) if (c.drawn) c.render();
}

// --- events: markers, timeline, data mix ---------------------------------------------------------

function describe(e) {
  const p = e.payload || {};
  switch (e.type) {
    case "run_started": {
      const bits = [];
      if (p.resume_step !== null && p.resume_step !== undefined) bits.push(`resumed at step ${p.resume_step} (segment ${e.segment})`);
      else bits.push("run started");
      if (p.code && p.code.sha) bits.push("code " + String(p.code.sha).slice(0, 12) + (p.code.dirty ? " (dirty)" : ""));
      return bits.join("; ");
    }
    case "checkpoint": {
      const metrics = Object.entries(p.metrics || {}).map(([k, v]) => `${k} ${formatValue(decode(v))}`);
      return [
        `checkpoint ${p.status || ""}`.trim(), p.size !== undefined ? formatBytes(p.size) : null,
        p.sha256 ? "sha256 " + String(p.sha256).slice(0, 12) : null, p.filename ? String(p.filename) : null, ...metrics,
      ].filter(Boolean).join(" · ");
    }
    case "data_mix":
      return "data mix: " + Object.entries(p.weights || {}).map(([k, v]) => `${k} ${formatValue(decode(v))}`).join(", ");
    case "manifest":
      return "dataset manifest " + (p.version ?? "");
    case "note":
      return String(p.text ?? "");
    case "finished":
      return "run " + (p.status || "finished");
    case "anomaly": {
      const where = p.key ? ` on ${p.key}` : "";
      const span = p.end_step !== null && p.end_step !== undefined ? ` until step ${p.end_step}` : "";
      return `anomaly: ${p.kind || "alert"}${where} (${p.state || "open"}${span})`;
    }
    default:
      return e.type;
  }
}

function markerType(e) {
  if (e.type === "run_started") return e.payload && e.payload.resume_step !== null && e.payload.resume_step !== undefined ? "restart" : "code";
  if (e.type === "anomaly") return "alert";
  return e.type;
}

function eventStep(e) {
  if (e.step !== null && e.step !== undefined) return e.step;
  if (e.type === "run_started") {
    const seg = detail.segments.find((s) => s.index === e.segment);
    return seg ? seg.start_step : 0;
  }
  return null;
}

function timelineItems() {
  // One item per anomaly: the timeline event (kept current by the stream) carries it, the
  // alert from /alerts adds its title and the checkpoints around it. An alert that has no
  // event (none was written) is listed on its own, so nothing is drawn twice.
  const matched = new Set();
  const items = events.map((e) => {
    const item = { type: markerType(e), step: eventStep(e), label: describe(e), ts: e.ts, event: e };
    if (e.type === "anomaly") {
      const alert = alertOf(e);
      if (alert) matched.add(alert.id);
      item.alert = alertState(alert, e);
      item.label = describeAlert(item.alert);
    }
    return item;
  });
  for (const alert of alerts.values()) {
    if (matched.has(alert.id)) continue;
    const a = alertState(alert, null);
    items.push({ type: "alert", step: a.step, label: describeAlert(a), ts: alert.opened_at, alert: a });
  }
  return items;
}

function markers() {
  return timelineItems().filter((m) => m.step !== null && m.type !== "finished").map((m) => ({
    step: m.step, type: m.type, label: m.label.length > 300 ? m.label.slice(0, 300) + "…" : m.label,
  }));
}

function renderEvents() {
  const list = $("timeline");
  list.replaceChildren();
  const items = timelineItems();
  for (const item of items.slice(-500).reverse()) {
    const style = markerStyle(item.type);
    const li = el("li", { className: "tl-" + item.type });
    li.append(el("span", { className: "tl-dot", style: "--c:" + style.color, "aria-hidden": "true" }));
    const body = el("div", { className: "tl-body" });
    const head = el("div", { className: "tl-head" }, el("strong", { text: style.name }));
    if (item.step !== null) {
      head.append(" ", el("button", {
        type: "button", className: "link", text: "step " + item.step.toLocaleString(),
        "aria-label": `Zoom to step ${item.step} (${style.name})`, onclick: () => zoomTo(item.step),
      }));
    }
    if (item.alert) {
      head.append(" ", el("span", { className: "badge alert-state alert-" + item.alert.state, text: item.alert.state }));
      if (item.alert.id !== null) li.id = "alert-" + item.alert.id;
      const hover = evidenceText(item.alert.evidence);
      if (hover) body.title = hover;
    }
    if (item.ts) head.append(el("time", { className: "tl-time", text: formatTime(item.ts) }));
    body.append(head, el("p", { className: "tl-text", text: item.label }));
    if (item.alert && item.alert.checkpoints) {
      const around = ["before", "after"].map((side) => {
        const c = item.alert.checkpoints[side];
        return c && Number.isFinite(c.step) ? `${side} step ${c.step.toLocaleString()}` : null;
      }).filter(Boolean);
      if (around.length) body.append(el("p", { className: "tl-note", text: "nearest checkpoints: " + around.join(", ") }));
    }
    if (item.event && item.event.type === "manifest" && item.event.payload && item.event.payload.manifest) {
      body.append(el("details", {}, el("summary", { text: "Manifest" }),
        el("pre", { text: JSON.stringify(item.event.payload.manifest, null, 2).slice(0, 200000) })));
    }
    li.append(body);
    list.append(li);
  }
  if (!items.length) list.append(el("li", { className: "empty", text: "Nothing on the timeline yet." }));
  const m = markers();
  for (const c of charts()) c.setMarkers(m);
  renderMix();
}

function zoomTo(step) {
  const last = detail.last_step || step;
  const half = Math.max(10, Math.round(last * 0.03));
  const xmap = view.xmapFor();
  const lo = xmap.toX(Math.max(0, step - half));
  const hi = xmap.toX(step + half);
  view.onRange([lo, hi]);
}

let mixDrawn = false;

function renderMix() {
  // Weights from data_mix events; a later segment's events replace an abandoned branch's.
  const segs = detail.segments;
  const cutOf = (segment) => {
    const later = segs.filter((s) => s.index > segment).map((s) => s.start_step);
    return later.length ? Math.min(...later) : Infinity;
  };
  const mixes = events
    .filter((e) => e.type === "data_mix" && e.step !== null && e.step < cutOf(e.segment))
    .sort((a, b) => a.step - b.step || a.segment - b.segment);
  const card = $("mix-card");
  if (!mixes.length) {
    card.hidden = true;
    return;
  }
  card.hidden = false;
  const sources = [...new Set(mixes.flatMap((e) => Object.keys(e.payload.weights || {})))];
  const xmap = view.xmapFor();
  const end = Math.max(detail.last_step || 0, mixes[mixes.length - 1].step);
  const steps = [...mixes.map((e) => e.step), end];
  const x = steps.map((s) => xmap.toPlot(xmap.toX(s)));
  const t = theme();
  const traces = sources.map((source, i) => {
    const y = mixes.map((e) => decode((e.payload.weights || {})[source] ?? 0));
    y.push(y[y.length - 1]);
    return {
      type: "scatter", mode: "lines", stackgroup: "mix", groupnorm: i === 0 ? "fraction" : undefined,
      line: { shape: "hv", width: 0.5, color: color(i) }, fillcolor: color(i), x, y,
      name: escapeHtml(source), hovertemplate: "%{y:.1%}<extra>" + escapeHtml(source) + "</extra>",
    };
  });
  const range = view.range;
  const layout = {
    margin: { l: 60, r: 16, t: 8, b: 40 }, height: 200,
    paper_bgcolor: t.bg, plot_bgcolor: t.bg, font: { color: t.fg }, hovermode: "x unified",
    xaxis: { title: { text: escapeHtml(xmap.axisTitle) }, gridcolor: t.grid, type: xmap.epoch ? "date" : "linear",
      ...(range ? { range: [xmap.toPlot(range[0]), xmap.toPlot(range[1])], autorange: false } : { autorange: true }) },
    yaxis: { tickformat: ".0%", range: [0, 1], gridcolor: t.grid, fixedrange: true },
    legend: { orientation: "h", y: -0.35 },
  };
  Plotly.react($("chart-mix"), traces, layout, { responsive: true, displaylogo: false });
  if (!mixDrawn) {
    mixDrawn = true;
    $("chart-mix").on("plotly_relayout", (ev) => {
      if (ev["xaxis.autorange"]) view.onRange(null);
      else if ("xaxis.range[0]" in ev) view.onRange([xmap.fromPlot(ev["xaxis.range[0]"]), xmap.fromPlot(ev["xaxis.range[1]"])]);
    });
  }
}

function syncMixRange() {
  if (!mixDrawn) return;
  const xmap = view.xmapFor();
  const r = view.range;
  const gd = $("chart-mix");
  const ax = gd.layout.xaxis || {};
  const current = ax.autorange === true || !ax.range ? null : [xmap.fromPlot(ax.range[0]), xmap.fromPlot(ax.range[1])];
  if (rangesEqual(current, r)) return;
  Plotly.relayout(gd, r ? { "xaxis.range": [xmap.toPlot(r[0]), xmap.toPlot(r[1])] } : { "xaxis.autorange": true });
}

// --- alerts, checkpoints, code revisions, memory estimate -----------------------------------------

let hashShown = false;

function loadArtifacts() {
  loadAlerts().then((changed) => {
    if (changed) renderEvents();
    // A notification's link (/runs/{id}#alert-<id>): the entry exists only now.
    const target = !hashShown && /^#alert-\d+$/.test(location.hash) ? document.getElementById(location.hash.slice(1)) : null;
    if (target) {
      hashShown = true;
      target.scrollIntoView({ block: "nearest" });
      target.classList.add("target");
    }
  });
  loadCheckpoints();
  loadRevisions();
}

/** Every alert of the run (pages of 1000); true when the list was read. */
async function loadAlerts() {
  const fresh = new Map();
  let after = null;
  try {
    for (let page = 0; page < 20; page++) {
      const params = new URLSearchParams({ limit: "1000" });
      if (after) params.set("after", after);
      const body = await getJSON(runUrl(runId) + "/alerts?" + params);
      for (const a of body.alerts || []) fresh.set(a.id, a);
      if (!body.next_cursor || !(body.alerts || []).length) break;
      after = body.next_cursor;
    }
  } catch {
    return false; // the timeline still shows the anomaly events
  }
  alerts = fresh;
  return true;
}

const reloadAlertsSoon = debounce(() => loadAlerts().then((changed) => changed && renderEvents()), 500);

function alertOf(e) {
  const p = e.payload || {};
  const id = Number.isSafeInteger(p.alert) ? p.alert : e.seq < 0 ? -e.seq : null;
  if (id !== null && alerts.has(id)) return alerts.get(id);
  for (const a of alerts.values()) if (a.event === e.id) return a;
  return null;
}

/** The alert as the timeline shows it: the event's payload is live, so it wins, except that
 * an alert never reopens (whichever source saw it close first says closed). */
function alertState(alert, e) {
  const p = (e && e.payload) || {};
  const a = alert || {};
  const closed = p.state === "closed" || a.state === "closed";
  const endStep = p.end_step ?? a.end_step ?? null;
  const step = (e ? eventStep(e) : null) ?? a.step ?? null;
  return {
    id: Number.isSafeInteger(a.id) ? a.id : Number.isSafeInteger(p.alert) ? p.alert : null,
    kind: p.kind || a.kind || "alert",
    title: a.title || null,
    key: p.key || a.key || null,
    state: closed ? "closed" : "open",
    step: Number.isFinite(step) ? step : null,
    endStep: Number.isFinite(endStep) ? endStep : null,
    evidence: (closed && a.evidence && a.evidence.close ? a.evidence : p.evidence) || a.evidence || {},
    checkpoints: a.checkpoints || null,
  };
}

function describeAlert(a) {
  const what = a.title ? `${a.title} (${a.kind})` : a.kind;
  const where = a.key ? ` on ${a.key}` : "";
  const span = a.state === "closed" && a.endStep !== null ? ` until step ${a.endStep}` : "";
  return `anomaly: ${what}${where} (${a.state}${span})`;
}

/** Evidence as plain lines for a hover title: "open: value 9.1, baseline 2.3, …". */
function evidenceText(evidence) {
  const lines = [];
  for (const [phase, facts] of Object.entries(evidence || {}).slice(0, 4)) {
    if (!facts || typeof facts !== "object") {
      lines.push(`${phase}: ${formatEvidence(facts)}`);
      continue;
    }
    const parts = Object.entries(facts).slice(0, 16).map(([k, v]) => `${k} ${formatEvidence(v)}`);
    lines.push(`${phase}: ${parts.join(", ")}`);
  }
  return lines.join("\n").slice(0, 2000);
}

function formatEvidence(v) {
  if (typeof v === "number") return formatValue(v);
  if (typeof v === "string") return v in { NaN: 1, Infinity: 1, "-Infinity": 1 } ? v : v.slice(0, 200);
  if (v === null || v === undefined) return "–";
  return JSON.stringify(v).slice(0, 200);
}

async function loadCheckpoints() {
  try {
    const body = await getJSON(runUrl(runId) + "/checkpoints");
    checkpoints = body.checkpoints || [];
  } catch (err) {
    if (checkpoints === null) {
      $("checkpoints").replaceChildren(el("li", { className: "empty", text: "Checkpoints could not be read: " + err.message }));
    }
    return;
  }
  renderCheckpoints();
}

const reloadCheckpointsSoon = debounce(loadCheckpoints, 500);
const CHECKPOINT_STATUS = ["available", "pruned", "private", "missing"];

function renderCheckpoints() {
  const list = $("checkpoints");
  list.replaceChildren();
  if (!checkpoints.length) {
    list.append(el("li", { className: "empty", text: "No checkpoints recorded." }));
    return;
  }
  const ordered = [...checkpoints].sort((a, b) => (b.step ?? 0) - (a.step ?? 0) || (b.segment ?? 0) - (a.segment ?? 0));
  for (const c of ordered.slice(0, 500)) list.append(checkpointItem(c));
}

function checkpointItem(c) {
  const status = CHECKPOINT_STATUS.includes(c.status) ? c.status : "missing";
  const li = el("li", { className: "ck ck-" + status });
  const head = el("div", { className: "ck-head" });
  if (Number.isFinite(c.step)) {
    head.append(el("button", {
      type: "button", className: "link ck-step", text: "step " + c.step.toLocaleString(),
      "aria-label": `Zoom to step ${c.step} (checkpoint)`, onclick: () => zoomTo(c.step),
    }));
  }
  head.append(" ", el("span", { className: "badge ck-status ck-status-" + status, text: status }));
  if (typeof c.size === "number") head.append(" ", el("span", { className: "ck-size", text: formatBytes(c.size) }));
  if (Number.isFinite(c.segment) && detail && detail.segments.length > 1) head.append(" ", el("span", { className: "ck-seg", text: "segment " + c.segment }));
  li.append(head);
  if (c.filename) li.append(el("p", { className: "ck-file", text: String(c.filename) + (c.kind === "directory" ? "/" : "") }));
  if (c.sha256) {
    const sha = String(c.sha256);
    li.append(el("p", { className: "ck-sha" }, "sha256 ", el("code", { title: sha, text: sha.slice(0, 12) }), " ", copyButton(sha, "sha256")));
  }
  const metrics = Object.entries(c.metrics || {}).slice(0, 12).map(([k, v]) => `${k} ${formatValue(decode(v))}`);
  if (metrics.length) li.append(el("p", { className: "ck-metrics", text: metrics.join(" · ") }));
  if (status === "missing" && c.reason) li.append(el("p", { className: "ck-reason", text: String(c.reason) }));
  if (Number.isSafeInteger(c.id)) {
    const base = runUrl(runId) + "/checkpoints/" + c.id;
    const links = el("p", { className: "ck-links" });
    if (status === "available" && c.kind !== "directory") {
      links.append(el("a", { className: "ck-download", href: base + "/download", download: "", text: "Download" }), " ");
    }
    links.append(el("a", {
      className: "ck-card", href: base + "/card?download=true", text: "card",
      title: "Reproducibility card (JSON): code, config, packages, data position, parent checkpoint",
    }));
    li.append(links);
  }
  return li;
}

function copyButton(value, what) {
  const button = el("button", { type: "button", className: "copy", text: "copy", "aria-label": "Copy the " + what });
  button.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(value);
      button.textContent = "copied";
    } catch {
      button.textContent = "copy failed";
    }
    setTimeout(() => (button.textContent = "copy"), 1500);
  });
  return button;
}

async function loadRevisions() {
  let body;
  try {
    body = await getJSON(runUrl(runId) + "/revisions");
  } catch {
    return;
  }
  renderRevisions(body.revisions || []);
}

const reloadRevisionsSoon = debounce(loadRevisions, 500);

function renderRevisions(revisions) {
  const box = $("revisions");
  box.replaceChildren();
  if (!revisions.length) return;
  box.append(el("h3", { text: revisions.length > 1 ? "Code revisions" : "Code revision" }));
  const list = el("ul", { className: "revisions" });
  for (const r of revisions.slice(0, 200)) {
    const li = el("li", { className: "revision" });
    const sha = r.sha ? String(r.sha) : null;
    const head = el("div", { className: "rev-head" });
    head.append(sha ? el("code", { className: "rev-sha", title: sha, text: sha.slice(0, 12) }) : el("span", { text: "no sha" }));
    if (sha) head.append(" ", copyButton(sha, "commit sha"));
    if (r.dirty) head.append(" ", el("span", { className: "badge rev-dirty", text: "dirty" }));
    li.append(head);
    const rows = [];
    if (r.branch) rows.push(["branch", String(r.branch)]);
    if (r.remote) rows.push(["remote", String(r.remote)]);
    if (Array.isArray(r.segments) && r.segments.length) rows.push(["segments", r.segments.join(", ")]);
    if (Array.isArray(r.start_steps) && r.start_steps.length) rows.push(["from steps", r.start_steps.map((s) => Number(s).toLocaleString()).join(", ")]);
    rows.push(["dirty", r.dirty ? "yes" + (r.diff_truncated ? " (diff truncated)" : "") : "no"]);
    li.append(table(rows));
    const links = el("p", { className: "rev-links" });
    const href = safeHttpUrl(r.link);
    if (href) {
      const a = el("a", { className: "rev-link", text: "on the code host", rel: "noopener noreferrer nofollow" });
      a.href = href;
      links.append(a);
    }
    if (r.diff_url && Number.isSafeInteger(r.id)) {
      if (links.childNodes.length) links.append(" · ");
      links.append(el("a", {
        className: "rev-diff", href: runUrl(runId) + "/revisions/" + r.id + "/diff",
        text: "diff" + (typeof r.diff_bytes === "number" ? ` (${formatBytes(r.diff_bytes)})` : ""),
      }));
    }
    if (links.childNodes.length) li.append(links);
    list.append(li);
  }
  box.append(list);
}

// Memory estimate: the ZeRO accounting of `runcast estimate`, for the run's config.
const PARAM_KEY = /^(n_params|num_params|params|num_parameters|n_parameters|parameters|param_count|n_param)$/i;
const SHAPE_KEYS = {
  layers: /^(n_layers?|num_layers|num_hidden_layers|layers)$/i,
  hidden: /^(n_embd|n_embed|hidden_size|d_model|hidden)$/i,
  heads: /^(n_heads?|num_heads|num_attention_heads|heads)$/i,
  seq_len: /^(block_size|seq_len|seq_length|max_seq_len|context_length|sequence_length)$/i,
  micro_batch: /^(train_micro_batch_size_per_gpu|micro_batch_size|micro_batch|per_device_train_batch_size|batch_size)$/i,
};

/** A positive number under a key matching `re`: top level first, then one level of nesting. */
function configNumber(config, re) {
  const asNumber = (v) => {
    const n = typeof v === "number" ? v : typeof v === "string" && v.trim() !== "" ? Number(v) : NaN;
    return Number.isFinite(n) && n > 0 ? n : null;
  };
  const top = Object.entries(config || {});
  for (const [k, v] of top) if (re.test(k) && asNumber(v) !== null) return { key: k, value: asNumber(v) };
  for (const [k, v] of top) {
    if (!v || typeof v !== "object" || Array.isArray(v)) continue;
    for (const [k2, v2] of Object.entries(v)) if (re.test(k2) && asNumber(v2) !== null) return { key: k + "." + k2, value: asNumber(v2) };
  }
  return null;
}

/** ZeRO stage and optimizer offload from a DeepSpeed config inside the run's config. */
function zeroFromConfig(config) {
  const c = config || {};
  const candidates = [["deepspeed", c.deepspeed], ["ds_config", c.ds_config], ["deepspeed_config", c.deepspeed_config], ["", c]];
  for (const [name, ds] of candidates) {
    const zo = ds && typeof ds === "object" ? ds.zero_optimization : null;
    if (!zo || typeof zo !== "object") continue;
    const stage = Number(zo.stage);
    if (![0, 1, 2, 3].includes(stage)) continue;
    const device = zo.offload_optimizer && typeof zo.offload_optimizer === "object" ? zo.offload_optimizer.device : null;
    const offload = stage > 0 && (device === "cpu" || device === "nvme" || zo.cpu_offload === true);
    return { stage, offload, source: (name ? name + "." : "") + "zero_optimization.stage" };
  }
  const stage = Number(c.zero_stage);
  if ([0, 1, 2, 3].includes(stage)) return { stage, offload: false, source: "zero_stage" };
  return { stage: 0, offload: false, source: null };
}

let estimateSetUp = false;

function setupEstimate() {
  const card = $("estimate-card");
  const params = configNumber(detail.config, PARAM_KEY);
  if (!params) {
    card.hidden = true;
    return;
  }
  card.hidden = false;
  if (estimateSetUp) return; // the user's inputs stay as they are
  estimateSetUp = true;
  const env = detail.env || {};
  const gpus = Number.isSafeInteger(env.world_size) && env.world_size > 0 ? env.world_size : 1;
  const zero = zeroFromConfig(detail.config);
  $("est-params").value = String(params.value);
  $("est-gpus").value = String(gpus);
  $("est-zero").value = String(zero.stage);
  $("est-offload").checked = zero.offload;
  const shape = {};
  for (const [name, re] of Object.entries(SHAPE_KEYS)) {
    const found = configNumber(detail.config, re);
    if (found && Number.isSafeInteger(found.value)) shape[name] = found.value;
  }
  if (!(shape.layers && shape.hidden)) delete shape.heads; // the server assumes the whole shape from Ψ then
  const form = $("estimate-form");
  form.dataset.sources = [
    `parameters from config ${params.key}`,
    `GPUs from ${Number.isSafeInteger(env.world_size) ? "env.world_size" : "a default of 1"}`,
    `ZeRO stage from ${zero.source ? "config " + zero.source : "a default of 0"}`,
  ].join("; ");
  const refresh = debounce(() => fetchEstimate(shape), 250);
  form.addEventListener("input", refresh);
  form.addEventListener("change", refresh);
  form.addEventListener("submit", (ev) => { ev.preventDefault(); refresh(); });
  fetchEstimate(shape);
}

let estimateSeq = 0;

async function fetchEstimate(shape) {
  const q = new URLSearchParams({
    params: $("est-params").value.trim(),
    gpus: $("est-gpus").value.trim(),
    zero: $("est-zero").value,
    offload_optimizer: $("est-offload").checked ? "true" : "false",
  });
  for (const [k, v] of Object.entries(shape)) q.set(k, String(v));
  const seq = ++estimateSeq;
  const box = $("estimate");
  let result;
  try {
    result = await getJSON("/api/v1/estimate?" + q);
  } catch (err) {
    if (seq === estimateSeq) box.replaceChildren(el("p", { className: "error", role: "alert", text: "Cannot estimate: " + err.message }));
    return;
  }
  if (seq !== estimateSeq) return; // a newer request is on its way
  const b = result.bytes;
  const s = result.shape;
  const rows = [
    ["weights (fp16)", formatGB(b.weights)],
    ["gradients (fp16)", formatGB(b.gradients)],
    ["optimizer states (Adam, 12 bytes/param)", formatGB(b.optimizer)],
    ["model states per GPU", formatGB(b.total)],
  ];
  if (result.offload_optimizer) rows.push(["CPU memory per GPU (offloaded optimizer)", formatGB(b.cpu_optimizer)]);
  rows.push(
    [`activations (${s.activation_checkpointing ? "checkpointed" : "L·s·b·h·(34 + 5·a·s/h)"})`, formatGB(b.activations)],
    ["total per GPU", formatGB(b.gpu_total)],
  );
  const tbl = table(rows);
  tbl.id = "estimate-table";
  const shapeNote = `Activations for L=${s.layers}, h=${s.hidden}, a=${s.heads}, s=${s.seq_len}, b=${s.micro_batch}`
    + (s.assumed ? " (shape assumed from the parameter count)" : " (from the config)")
    + ". ZeRO paper accounting, mixed-precision Adam; no buffers, fragmentation or CUDA context. GB = 10⁹ bytes.";
  box.replaceChildren(tbl, el("p", { className: "note", text: shapeNote }),
    el("p", { className: "note", text: $("estimate-form").dataset.sources || "" }));
}

function formatGB(bytes) {
  if (typeof bytes !== "number" || !Number.isFinite(bytes)) return "–";
  if (bytes === 0 || bytes >= 0.05e9) return (bytes / 1e9).toLocaleString(undefined, { maximumFractionDigits: 1, minimumFractionDigits: 1 }) + " GB";
  if (bytes >= 0.05e6) return (bytes / 1e6).toLocaleString(undefined, { maximumFractionDigits: 1, minimumFractionDigits: 1 }) + " MB";
  return (bytes / 1e3).toLocaleString(undefined, { maximumFractionDigits: 1, minimumFractionDigits: 1 }) + " kB";
}

// --- controls ------------------------------------------------------------------------------------

function setupControls() {
  const slider = $("smoothing");
  const out = $("smoothing-value");
  slider.value = String(state.smooth);
  out.textContent = state.smooth.toFixed(2);
  const apply = debounce(() => {
    view.smoothing = state.smooth;
    rerender();
    writeUrl();
  }, 30);
  slider.addEventListener("input", () => {
    state.smooth = Number(slider.value);
    out.textContent = state.smooth.toFixed(2);
    apply();
  });
  const log = $("logscale");
  log.checked = state.log;
  log.addEventListener("change", () => {
    state.log = view.log = log.checked;
    for (const c of charts()) c.yRange = null;
    rerender();
    writeUrl();
  });
  $("xmode").addEventListener("change", async (ev) => {
    state.x = ev.target.value;
    state.range = view.range = null;
    const xmap = xmaps.get(state.x);
    if (xmap && !xmap.identity && !xmap.steps.length) await xmap.load(runId);
    writeUrl();
    for (const c of charts()) if (c.drawn) c.fetch();
    renderMix();
  });
  $("reset-zoom").addEventListener("click", () => {
    for (const c of charts()) c.yRange = null;
    view.onRange(null);
  });
  $("copy-link").addEventListener("click", async () => {
    const button = $("copy-link");
    try {
      await navigator.clipboard.writeText(location.href);
      button.textContent = "Link copied";
    } catch {
      button.textContent = "Copy the address bar";
    }
    setTimeout(() => (button.textContent = "Copy link"), 2000);
  });
  document.addEventListener("keydown", (ev) => {
    if (ev.key === "Escape" && view.range) view.onRange(null);
  });
}

// --- live ----------------------------------------------------------------------------------------

const reloadDetail = debounce(async () => {
  let fresh;
  try {
    fresh = await getRun(runId);
  } catch {
    return;
  }
  const keysChanged = fresh.keys.join("\u0000") !== detail.keys.join("\u0000");
  const segsChanged = fresh.segments.length !== detail.segments.length;
  detail = fresh;
  renderHeader();
  if (keysChanged) {
    await setupXmaps();
    const before = mainChart ? mainChart.sources.map((s) => s.key).join() : "";
    if (mainKeys().join() !== before) {
      buildMainChart();
      if (mainChart) mainChart.fetch();
    } else renderKeyPicker(mainKeys());
    buildPanels();
  } else if (segsChanged) refetchCharts();
  renderEvents();
}, 300);

function onBatch(message) {
  if (message.status) {
    detail.status = message.status;
    const badge = $("run-status");
    badge.textContent = message.status;
    badge.className = "badge badge-" + message.status;
  }
  if (message.last_step !== undefined && message.last_step !== null) {
    if (message.last_step > (detail.last_step ?? -1)) renderMixSoon(); // the last share reaches the new step
    detail.last_step = message.last_step;
    $("fact-step").textContent = message.last_step.toLocaleString();
  }
  heartbeatAt = Date.now() / 1000;
  tickHeartbeat();
  const points = message.points || [];
  const segIndices = new Set(detail.segments.map((s) => s.index));
  let unknown = false;
  for (const p of points) {
    if (!detail.keys.includes(p.key) || !segIndices.has(p.segment)) unknown = true;
    for (const xmap of xmaps.values()) if (xmap.key === p.key) xmap.extend(p.step, p.value);
    const lossKey = $("fact-loss-key").textContent;
    if (p.key === lossKey && p.value.length) $("fact-loss").textContent = formatValue(decode(p.value[p.value.length - 1]));
  }
  for (const c of charts()) c.append(runId, points);
  if (message.events && message.events.length) {
    const byId = new Map(events.map((e, i) => [e.id, i]));
    for (const e of message.events) {
      if (byId.has(e.id)) events[byId.get(e.id)] = e; // an anomaly closing updates its event
      else events.push(e);
    }
    if (message.events.some((e) => e.type === "run_started" || e.type === "finished")) unknown = true;
    if (message.events.some((e) => e.type === "anomaly")) reloadAlertsSoon();
    if (message.events.some((e) => e.type === "checkpoint")) reloadCheckpointsSoon();
    if (message.events.some((e) => e.type === "run_started")) reloadRevisionsSoon();
    renderEventsSoon();
  }
  if (unknown) reloadDetail();
}

const renderEventsSoon = debounce(renderEvents, 200);
let mixTimer = null;
function renderMixSoon() {
  // At most once a second while points stream in.
  if (mixTimer === null) mixTimer = setTimeout(() => { mixTimer = null; renderMix(); }, 1000);
}

async function reloadAll() {
  try {
    events = await getEvents(runId);
  } catch {
    /* keep what we have */
  }
  reloadDetail();
  refetchCharts();
  loadArtifacts();
}

async function pollDetail() {
  // Status and heartbeat for runs that went quiet; a fallback when the stream is down.
  let fresh;
  try {
    fresh = await getRun(runId);
  } catch {
    return;
  }
  const moved = fresh.last_step !== detail.last_step;
  const keysChanged = fresh.keys.join() !== detail.keys.join() || fresh.segments.length !== detail.segments.length;
  if (keysChanged) return reloadDetail();
  detail = { ...fresh };
  renderHeader();
  if (moved && !(stream && stream.open)) {
    refetchCharts();
    try {
      events = await getEvents(runId);
      renderEvents();
    } catch {
      /* next poll */
    }
    loadArtifacts();
  }
}

// Tests and the first-load benchmark read these.
window.__runcast = {
  charts,
  get view() {
    return view;
  },
  get stream() {
    return stream;
  },
  pointCount: () => (mainChart ? mainChart.pointCount() : 0),
};

start();

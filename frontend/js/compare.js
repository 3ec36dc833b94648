// The compare page (/compare?runs=a,b&key=train/loss): runs overlaid on one metric,
// aligned by step or by tokens seen (each run's own tokens_seen key). URL state:
// runs, key, x=step|tokens, smooth, log=1, start/end (x-axis units).
/* global Plotly */
import { ApiError, getRun } from "./api.js";
import { DEFAULT_SMOOTHING, MetricChart, XMap, rangesEqual } from "./chart.js";
import { LiveStream } from "./live.js";
import { color, el, lastLossKey } from "./util.js";

const TOKEN_KEY = /^(tokens_seen|tokens|train\/tokens|tokens\/seen|num_tokens|consumed_tokens)$/i;
const $ = (id) => document.getElementById(id);
const q = new URLSearchParams(location.search);
const num = (name) => (q.get(name) !== null && q.get(name) !== "" && Number.isFinite(Number(q.get(name))) ? Number(q.get(name)) : null);
const state = {
  runs: (q.get("runs") || "").split(",").map((s) => s.trim()).filter(Boolean),
  key: q.get("key") || "",
  x: q.get("x") === "tokens" ? "tokens" : "step",
  smooth: num("smooth") ?? DEFAULT_SMOOTHING,
  log: q.get("log") === "1",
  range: num("start") !== null && num("end") !== null && num("end") > num("start") ? [num("start"), num("end")] : null,
};
const details = new Map();
const xmaps = new Map();
const streams = [];
let chart = null;

const view = {
  smoothing: state.smooth,
  log: state.log,
  range: state.range,
  colorBy: "source",
  xmapFor: (run) => (state.x === "tokens" && xmaps.get(run)) || IDENTITY,
  segmentsOf: (run) => (details.get(run) ? details.get(run).segments : []),
  onRange(range) {
    if (!rangesEqual(view.range, range)) {
      view.range = state.range = range;
      writeUrl();
    }
    if (chart) chart.applyRange(range);
  },
};
const IDENTITY = new XMap("step");

function writeUrl() {
  const p = new URLSearchParams();
  if (state.runs.length) p.set("runs", state.runs.join(","));
  if (state.key) p.set("key", state.key);
  if (state.x !== "step") p.set("x", state.x);
  if (state.smooth !== DEFAULT_SMOOTHING) p.set("smooth", String(state.smooth));
  if (state.log) p.set("log", "1");
  if (state.range) {
    p.set("start", String(Math.round(state.range[0])));
    p.set("end", String(Math.round(state.range[1])));
  }
  history.replaceState(null, "", "/compare?" + p.toString().replace(/%2C/g, ",").replace(/%2F/g, "/"));
}

async function load() {
  const status = $("status");
  $("runs-input").value = state.runs.join(", ");
  if (state.runs.length === 0) {
    status.textContent = "Pick two or more runs on the runs page, or type their ids above.";
    return;
  }
  status.textContent = "Loading…";
  const missing = [];
  await Promise.all(state.runs.map(async (id) => {
    try {
      details.set(id, await getRun(id));
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) missing.push(id);
      else throw err;
    }
  }));
  const found = state.runs.filter((id) => details.has(id));
  const keys = [...new Set(found.flatMap((id) => details.get(id).keys))].sort();
  if (!state.key || !keys.includes(state.key)) {
    const first = details.get(found[0]);
    state.key = (first && lastLossKey(first.last_values)) || keys[0] || "";
  }
  const select = $("key");
  select.replaceChildren(...keys.map((k) => el("option", { value: k, text: k })));
  select.value = state.key;
  status.textContent = missing.length ? "Run not found: " + missing.join(", ") : "";
  if (!found.length || !state.key) return;
  for (const id of found) {
    const tokens = details.get(id).keys.find((k) => TOKEN_KEY.test(k));
    if (tokens) xmaps.set(id, new XMap("tokens", tokens));
  }
  if (state.x === "tokens") await Promise.all([...xmaps.entries()].map(([id, m]) => m.load(id)));
  const sources = found.filter((id) => details.get(id).keys.includes(state.key)).map((id) => {
    const d = details.get(id);
    return { run: id, key: state.key, label: `${d.name} (${d.project})` };
  });
  chart = new MetricChart($("chart"), { title: state.key, sources, view, noteEl: $("chart-note") });
  $("legend").replaceChildren(...sources.map((s, i) => el("li", {},
    el("span", { className: "swatch", style: "background:" + color(i), "aria-hidden": "true" }),
    el("a", { href: "/runs/" + encodeURIComponent(s.run), text: s.label }))));
  await chart.fetch();
  writeUrl();
  for (const s of sources) {
    const stream = new LiveStream(s.run, {
      onBatch: (m) => {
        for (const p of m.points || []) {
          const xm = xmaps.get(s.run);
          if (xm && xm.key === p.key) xm.extend(p.step, p.value);
        }
        chart.append(s.run, m.points || []);
      },
      onReset: () => chart.fetch(),
    });
    stream.start();
    stream.release();
    streams.push(stream);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("xmode").value = state.x;
  $("smoothing").value = String(state.smooth);
  $("smoothing-value").textContent = state.smooth.toFixed(2);
  $("logscale").checked = state.log;
  $("compare-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const runs = $("runs-input").value.split(/[\s,]+/).filter(Boolean);
    const p = new URLSearchParams({ runs: runs.join(","), key: $("key").value || state.key });
    if ($("xmode").value !== "step") p.set("x", $("xmode").value);
    location.href = "/compare?" + p.toString().replace(/%2C/g, ",").replace(/%2F/g, "/");
  });
  $("key").addEventListener("change", () => $("compare-form").requestSubmit());
  $("xmode").addEventListener("change", () => $("compare-form").requestSubmit());
  $("smoothing").addEventListener("input", (e) => {
    state.smooth = view.smoothing = Number(e.target.value);
    $("smoothing-value").textContent = state.smooth.toFixed(2);
    if (chart && chart.drawn) chart.render();
    writeUrl();
  });
  $("logscale").addEventListener("change", (e) => {
    state.log = view.log = e.target.checked;
    if (chart) {
      chart.yRange = null;
      if (chart.drawn) chart.render();
    }
    writeUrl();
  });
  $("reset-zoom").addEventListener("click", () => {
    if (chart) chart.yRange = null;
    view.onRange(null);
  });
  load().catch((err) => ($("status").textContent = "Could not load: " + err.message));
});

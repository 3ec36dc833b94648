// The compare page (/compare?runs=a,b&key=train/loss): runs overlaid on one metric,
// aligned by step or by tokens seen (each run's own tokens_seen key). URL state:
// runs, key, x=step|tokens, smooth, log=1, start/end (x-axis units).
//
// Like the run page, one store holds what the chart draws: each run's /metrics answer plus
// its live stream's messages after the answer's version. The page's state is made once.
import { ApiError, getMetrics, getRun } from "./api.js";
import { DEFAULT_SMOOTHING, MetricChart } from "./chart.js";
import { LiveStream } from "./live.js";
import { MetricStore } from "./store.js";
import { XMap, rangesEqual } from "./xmap.js";
import { color, el, lastLossKey } from "./util.js";

const TOKEN_KEY = /^(tokens_seen|tokens|train\/tokens|tokens\/seen|num_tokens|consumed_tokens)$/i;
const IDENTITY = new XMap("step");
const $ = (id) => document.getElementById(id);

function createPage() {
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
  const page = {
    state,
    details: new Map(),
    xmaps: new Map(),
    streams: [],
    chart: null,
    store: new MetricStore((run, key, query, signal) => getMetrics(run, key, { ...query, signal })),
  };
  page.view = {
    smoothing: state.smooth,
    log: state.log,
    range: state.range,
    colorBy: "source",
    xmapFor: (run) => (state.x === "tokens" && page.xmaps.get(run)) || IDENTITY,
    segmentsOf: (run) => (page.details.get(run) ? page.details.get(run).segments : []),
    onRange(range) {
      if (!rangesEqual(page.view.range, range)) {
        page.view.range = state.range = range;
        writeUrl(state);
      }
      if (page.chart) page.chart.applyRange(range);
    },
  };
  return page;
}

function writeUrl(state) {
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

async function load(page) {
  const { state, details, xmaps } = page;
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
  // Subscribe first, read second: each answer applies the messages after its version.
  for (const s of sources) {
    const stream = new LiveStream(s.run, {
      onBatch: (m) => {
        for (const p of m.points || []) {
          const xm = xmaps.get(s.run);
          if (xm && xm.key === p.key) xm.extend(p.step, p.value);
        }
        page.store.onBatch(s.run, m);
      },
      onReset: (version) => page.store.onReset(s.run, version),
    });
    page.streams.push(stream.start());
  }
  $("chart-title").textContent = state.key;
  page.chart = new MetricChart($("chart"), { sources, view: page.view, store: page.store, noteEl: $("chart-note"), filename: "compare-" + state.key });
  $("legend").replaceChildren(...sources.map((s, i) => el("li", {},
    el("span", { className: "swatch", style: "background:" + color(i), "aria-hidden": "true" }),
    el("a", { href: "/runs/" + encodeURIComponent(s.run), text: s.label }))));
  await page.chart.load();
  writeUrl(state);
}

document.addEventListener("DOMContentLoaded", () => {
  const page = createPage();
  const { state, view } = page;
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
    if (page.chart) page.chart.invalidate();
    writeUrl(state);
  });
  $("logscale").addEventListener("change", (e) => {
    state.log = view.log = e.target.checked;
    if (page.chart) {
      page.chart.yRange = null;
      page.chart.invalidate();
    }
    writeUrl(state);
  });
  $("reset-zoom").addEventListener("click", () => {
    if (page.chart) page.chart.yRange = null;
    view.onRange(null);
  });
  load(page).catch((err) => ($("status").textContent = "Could not load: " + err.message));
});

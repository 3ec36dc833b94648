// The embed page (/embed/runs/{id}?key=...): one metric's live chart for an iframe, with the
// run's name and a link to its full page. It is the run page's chart on the run page's truth:
// one store (store.js) fed by /metrics answers and the live stream (live.js) exactly as the
// run page feeds it, drawn by the same MetricChart (chart.js). Optional: &log=1, &smooth=0..0.99.

import { ApiError, getMetrics, getRun } from "./api.js";
import { MetricChart } from "./chart.js";
import { DEFAULT_SMOOTHING } from "./chart/smoothing.js";
import { XMap } from "./xmap.js";
import { LiveStream } from "./live.js";
import { MetricStore } from "./store.js";
import { debounce, LIVE_MAX_WAIT_MS } from "./util.js";
import { loadLanguage, t } from "./i18n.js";

const $ = (id) => document.getElementById(id);
const LIVE_LABELS = { live: "stream.live", reconnecting: "stream.reconnecting", offline: "stream.offline" };

function readOptions() {
  const runId = decodeURIComponent(location.pathname.replace(/^\/embed\/runs\//, "").replace(/\/$/, ""));
  const q = new URLSearchParams(location.search);
  const smooth = Number(q.get("smooth"));
  return {
    runId,
    key: q.get("key") || "",
    log: q.get("log") === "1",
    smoothing: q.has("smooth") && smooth >= 0 && smooth < 1 ? smooth : DEFAULT_SMOOTHING,
  };
}

function createEmbed() {
  const options = readOptions();
  const embed = {
    ...options,
    detail: null,
    streamState: "offline",
    store: new MetricStore((run, key, query, signal) => getMetrics(run, key, { ...query, signal })),
    stream: null,
    chart: null,
    xmap: new XMap("step"),
  };
  embed.view = {
    smoothing: options.smoothing,
    log: options.log,
    range: null,
    colorBy: "segment",
    xmapFor: () => embed.xmap,
    segmentsOf: () => (embed.detail ? embed.detail.segments : []),
    onRange(range) {
      embed.view.range = range;
      if (embed.chart) embed.chart.applyRange(range);
    },
  };
  return embed;
}

function renderHead(embed) {
  const d = embed.detail;
  const page = new URL("/runs/" + encodeURIComponent(embed.runId), location.origin);
  page.searchParams.set("keys", embed.key);
  for (const a of [$("embed-title"), $("embed-open")]) a.href = page.href;
  $("embed-title").textContent = d.name + " · " + embed.key;
  $("embed-title").dataset.user = "";
  $("embed-title").title = d.project + " / " + d.name;
  document.title = t("embed.title", { name: d.name, key: embed.key });
  const status = $("embed-status");
  status.textContent = t("status." + d.status);
  status.className = "badge badge-" + d.status;
  const running = d.status === "running" || d.status === "stalled";
  $("live-state").textContent = running && LIVE_LABELS[embed.streamState] ? t(LIVE_LABELS[embed.streamState]) : "";
  $("live-state").dataset.state = running ? embed.streamState : "ended";
}

async function reloadDetail(embed) {
  try {
    const fresh = await getRun(embed.runId);
    const segsChanged = fresh.segments.length !== embed.detail.segments.length;
    const keyAppeared = !embed.detail.keys.includes(embed.key) && fresh.keys.includes(embed.key);
    embed.detail = fresh;
    renderHead(embed);
    if (keyAppeared) buildChart(embed);
    else if (segsChanged && embed.chart) embed.chart.invalidate();
  } catch {
    /* the stream goes on; the next message tries again */
  }
}

function buildChart(embed) {
  if (embed.chart) return;
  if (!embed.detail.keys.includes(embed.key)) {
    $("embed-chart").replaceChildren(Object.assign(document.createElement("p"), {
      className: "placeholder", textContent: t("embed.notYet", { key: embed.key }),
    }));
    return;
  }
  const div = $("embed-chart");
  div.replaceChildren();
  embed.chart = new MetricChart(div, {
    sources: [{ run: embed.runId, key: embed.key, label: embed.key }],
    view: embed.view,
    store: embed.store,
    noteEl: $("embed-note"),
    filename: embed.detail.name + "-" + embed.key,
  });
  embed.chart.load();
}

function onBatch(embed, message) {
  embed.store.onBatch(embed.runId, message);
  if (!embed.detail) return;
  if (message.status) embed.detail.status = message.status;
  if (message.last_step !== undefined && message.last_step !== null) embed.detail.last_step = message.last_step;
  renderHead(embed);
  const known = new Set(embed.detail.segments.map((s) => s.index));
  const news = (message.points || []).some((p) => p.key === embed.key && !known.has(p.segment))
    || (message.events || []).some((e) => e.type === "run_started" || e.type === "finished")
    || (!embed.chart && (message.points || []).some((p) => p.key === embed.key));
  if (news) embed.soonDetail();
}

async function start(embed) {
  embed.soonDetail = debounce(() => reloadDetail(embed), 300, LIVE_MAX_WAIT_MS);
  if (!embed.key) return showProblem(t("embed.noKey"));
  embed.stream = new LiveStream(embed.runId, {
    onBatch: (m) => onBatch(embed, m),
    onReset: (version, { initial }) => {
      embed.store.onReset(embed.runId, version);
      if (!initial && embed.detail) embed.soonDetail();
    },
    onState: (s) => {
      embed.streamState = s;
      if (embed.detail) renderHead(embed);
    },
  });
  embed.stream.start(); // before the reads: the store applies what comes after each answer
  try {
    embed.detail = await getRun(embed.runId);
  } catch (err) {
    embed.stream.close();
    return showProblem(err instanceof ApiError && err.status === 404 ? t("embed.notFound") : t("embed.failed", { error: err.message }));
  }
  renderHead(embed);
  buildChart(embed);
  setInterval(() => embed.soonDetail(), 30000); // status of a run gone quiet
}

function showProblem(text) {
  $("embed-title").textContent = text;
  delete $("embed-title").dataset.user;
  $("embed-title").removeAttribute("href");
  $("embed-open").hidden = true;
  $("embed-chart").replaceChildren();
}

const embed = createEmbed();

// Read-only hooks for tests, as on the run page.
window.__runcast = Object.freeze({
  store: Object.freeze({ snapshot: () => embed.store.snapshot() }),
  get stream() {
    return embed.stream ? { open: embed.stream.open, version: embed.stream.version } : null;
  },
  pointCount: () => (embed.chart ? embed.chart.pointCount() : 0),
});

loadLanguage().then(() => start(embed));

// The run page (/runs/{id}): loss curve, metric panels, timeline, data mix, checkpoints,
// evaluations, samples, media, config; live. This is the page's entry: it makes the page's state once (the store, the
// stream, the view) and passes it to the panels (./run/*.js); nothing is shared through
// module globals.
//
// The order that makes the page exact (docs/live.md, "The page's store"): the stream is
// subscribed first (by the inline head script, or here), the reads come second, and every
// /metrics answer applies the stream's messages after the run version it names.

import { ApiError, getEvents, getJSON, getRun, runUrl } from "./api.js";
import { RunReads } from "./batch.js";
import { MetricStore } from "./store.js";
import { XMap, rangesEqual } from "./xmap.js";
import { mountSignIn } from "./signin.js";
import { loadLanguage, t } from "./i18n.js";
import { debounce, LIVE_MAX_WAIT_MS } from "./util.js";
import { loadAlerts } from "./run/alerts.js";
import { allCharts, buildMainChart, buildPanels, redraw, setMarkers, setupXmaps } from "./run/charts.js";
import { exposeHooks } from "./run/hooks.js";
import { loadCheckpoints } from "./run/checkpoints.js";
import { CommentsPanel } from "./run/comments.js";
import { mountControl } from "./run/commands.js";
import { loadReports } from "./run/reports.js";
import { renderConfig } from "./run/config.js";
import { EstimatePanel } from "./run/estimate.js";
import { EvalsPanel } from "./run/evals.js";
import { applyLive, renderHeader, renderTitle, tickHeartbeat } from "./run/header.js";
import { MixChart } from "./run/mix.js";
import { openLive } from "./run/live_source.js";
import { fromPrefetch, prefetchedMetrics, takePrefetch } from "./run/prefetch.js";
import { MediaPanel } from "./run/media.js";
import { loadRevisions } from "./run/revisions.js";
import { SamplesPanel } from "./run/samples.js";
import { markers, mergeEvents, renderTimeline } from "./run/timeline.js";
import { readUrl, writeUrl } from "./run/url.js";
import { setupControls } from "./run/controls.js";
import { buildSystem } from "./run/system.js";

const $ = (id) => document.getElementById(id);

function createPage() {
  const runId = decodeURIComponent(location.pathname.replace(/^\/runs\//, "").replace(/\/$/, ""));
  const state = readUrl(location.search);
  const reads = new RunReads(); // the panels' and charts' reads made together go as one request
  const page = {
    runId,
    state,
    prefetch: takePrefetch(runId),
    read: (path) => reads.get(runId, path), // GET /runs/{id}/{path}, batched
    store: new MetricStore((run, key, query) => reads.metrics(run, key, query)),
    stream: null, // a LiveStream, or a BroadcastFollower (liveMode "cache")
    liveMode: null,
    streamState: "offline",
    detail: null,
    events: [],
    // When the reads of the run and of its events were sent, and when the stream's first
    // message arrived (performance.now clock): a read sent before it is read again.
    detailReadAt: -Infinity,
    eventsReadAt: -Infinity,
    eventsVersion: null, // the run version the first events read reflects (null: not named)
    subscribedAt: null,
    liveFrom: null, // the version the live source's first reset started after
    alerts: new Map(),
    checkpoints: null,
    xmaps: new Map([["step", new XMap("step")]]),
    mainChart: null,
    panelCharts: [],
    systemCharts: [], // the System panel (run/system.js)
    systemSignature: null,
    panelObserver: null,
    heartbeatAt: null,
    loaded: false,
    estimate: new EstimatePanel(),
    mix: null,
    hashShown: false,
  };
  page.view = {
    smoothing: state.smooth,
    log: state.log,
    range: state.range,
    colorBy: "segment",
    xmapFor: () => page.xmaps.get(state.x) || page.xmaps.get("step"),
    segmentsOf: () => (page.detail ? page.detail.segments : []),
    onRange(range) {
      if (!rangesEqual(page.view.range, range)) {
        page.view.range = range;
        state.range = range;
        writeUrl(state);
      }
      for (const c of allCharts(page)) c.applyRange(range);
      page.mix.syncRange();
    },
  };
  page.mix = new MixChart(page);
  page.evals = new EvalsPanel(page);
  page.samples = new SamplesPanel(page);
  page.media = new MediaPanel(page);
  page.comments = new CommentsPanel(page, () => setMarkers(page, markers(page)));
  page.zoomTo = (step) => {
    const last = page.detail.last_step || step;
    const half = Math.max(10, Math.round(last * 0.03));
    const xmap = page.view.xmapFor();
    page.view.onRange([xmap.toX(Math.max(0, step - half)), xmap.toX(step + half)]);
  };
  return page;
}

function renderEvents(page) {
  renderTimeline(page, page.zoomTo);
  setMarkers(page, markers(page));
  page.mix.render();
}

async function rereadEvents(page) {
  try {
    page.eventsReadAt = performance.now();
    mergeEvents(page, await getEvents(page.runId));
    renderEvents(page);
  } catch {
    /* the stream still brings new events */
  }
}

async function refreshAlerts(page) {
  const fresh = await loadAlerts(page);
  if (fresh === null) return;
  page.alerts = fresh;
  renderEvents(page);
  // A notification's link (/runs/{id}#alert-<id>): the entry exists only now.
  const target = !page.hashShown && /^#alert-\d+$/.test(location.hash) ? document.getElementById(location.hash.slice(1)) : null;
  if (target) {
    page.hashShown = true;
    target.scrollIntoView({ block: "nearest" });
    target.classList.add("target");
  }
}

function loadArtifacts(page) {
  refreshAlerts(page);
  loadCheckpoints(page, page.zoomTo);
  loadRevisions(page);
  page.evals.load();
  page.samples.reload();
  page.media.reload();
  page.comments.load();
  loadReports(page);
}

// --- the run's detail: keys, segments, status ------------------------------------------------

/** Read the run again: new keys get charts, new segments redraw (their colours and forks). */
async function reloadDetail(page) {
  let fresh;
  try {
    page.detailReadAt = performance.now();
    fresh = await getRun(page.runId);
  } catch {
    return;
  }
  const keysChanged = fresh.keys.join("\u0000") !== page.detail.keys.join("\u0000");
  const segsChanged = fresh.segments.length !== page.detail.segments.length;
  page.detail = fresh;
  renderHeader(page);
  renderConfig(fresh); // a rename, new tags, group or notes (an SDK update) come this way
  if (page.control) page.control.render(); // a tunable declared since
  if (keysChanged) {
    await setupXmaps(page);
    if (buildMainChart(page, { onDrawn: onFirstDraw, onPainted: onFirstPaint, markers: markers(page) }) && page.mainChart) page.mainChart.load();
    buildPanels(page, markers(page));
    buildSystem(page);
  } else if (segsChanged) redraw(page);
  renderEvents(page);
}

async function pollDetail(page) {
  // Status and heartbeat for runs that went quiet; a fallback when the stream is down.
  let fresh;
  try {
    fresh = await getRun(page.runId);
  } catch {
    return;
  }
  const moved = fresh.last_step !== page.detail.last_step;
  if (fresh.keys.join() !== page.detail.keys.join() || fresh.segments.length !== page.detail.segments.length) {
    return page.soon.detail();
  }
  page.detail = fresh;
  renderHeader(page);
  if (moved && !(page.stream && page.stream.open)) {
    page.store.refetchAll();
    rereadEvents(page);
    loadArtifacts(page);
  }
}

// --- the live stream -------------------------------------------------------------------------

function onBatch(page, message) {
  if (!page.detail) {
    // Before the run's read is in (run.js runs while Plotly.js downloads, often before it):
    // the store still logs the message, for the /metrics answers in flight; the run and its
    // events are read again by start() when they were sent before the stream began.
    page.store.onBatch(page.runId, message);
    return;
  }
  const before = page.detail.last_step ?? -1;
  const status = page.detail.status;
  applyLive(page, message);
  if (page.control && page.detail.status !== status) page.control.render(); // finished: the buttons close
  if ((message.last_step ?? -1) > before) page.mix.soon(); // the last share reaches the new step
  // A message the run's read already reflects (it names its version) does not call for another read.
  const reflected = typeof page.detail.version === "number" && message.version <= page.detail.version;
  const unknown = !reflected && outdatesDetail(page, message);
  for (const p of message.points || []) {
    for (const xmap of page.xmaps.values()) if (xmap.key === p.key) xmap.extend(p.step, p.value);
  }
  page.store.onBatch(page.runId, message);
  const events = message.events || [];
  if (events.length) {
    mergeEvents(page, events);
    if (events.some((e) => e.type === "anomaly")) page.soon.alerts();
    if (events.some((e) => e.type === "checkpoint")) page.soon.checkpoints();
    if (events.some((e) => e.type === "run_started")) page.soon.revisions();
    if (page.control && events.some((e) => e.type === "command")) page.control.load(); // sent, resolved, expired
    page.soon.events();
  }
  // Samples, evaluations and media: the rows the batch stored, which the panels read.
  if (message.samples && message.samples.length) page.samples.onLive(message.samples);
  if (message.evals && message.evals.length) {
    page.soon.evals();
    page.soon.checkpoints(); // a checkpoint's scores
  }
  if (message.media && message.media.length) page.media.onLive(message.media);
  if (unknown || (message.described && !reflected)) page.soon.detail();
}

/** Whether a message names a segment or key the run's read lacks, or starts or ends a segment. */
function outdatesDetail(page, message) {
  const segments = new Set(page.detail.segments.map((s) => s.index));
  if ((message.points || []).some((p) => !page.detail.keys.includes(p.key) || !segments.has(p.segment))) return true;
  return (message.events || []).some((e) => e.type === "run_started" || e.type === "finished");
}

function onReset(page, version, { initial, at }) {
  page.store.onReset(page.runId, version); // metrics: each entry checks its own version
  if (initial) {
    page.subscribedAt = at;
    page.liveFrom = version;
  }
  if (!page.loaded) return; // start() catches up once its first reads are in
  if (initial) return catchUp(page);
  // A later reset: messages were lost; read the run, its events and artifacts again.
  page.soon.detail();
  rereadEvents(page);
  loadArtifacts(page);
}

/**
 * The run and its events read again if the live source starts after the version their answer
 * reflects (messages in between would be missing); from a server that does not name the version,
 * if they were sent before the live source's first message.
 */
function catchUp(page) {
  if (page.subscribedAt === null) return;
  const behind = (version, sentAt) => (typeof version === "number" ? version < page.liveFrom : sentAt < page.subscribedAt);
  if (behind(page.detail.version, page.detailReadAt)) page.soon.detail();
  if (behind(page.eventsVersion, page.eventsReadAt)) rereadEvents(page);
}

/**
 * The chart's first draw; at once when it has nothing to draw (every read failed), and after
 * a second at most (a hidden tab draws no frames; a chart rebuilt meanwhile never draws).
 */
function firstPaintOrFailure(chart) {
  if (!chart.sources.some((s) => s.entry.ready)) return Promise.resolve();
  return Promise.race([chart.firstPaint, new Promise((resolve) => setTimeout(resolve, 1000))]);
}

/** The first Plotly draw (hover and zoom work from here on). */
function onFirstDraw() {
  if (window.__runcastDrawn === undefined) {
    performance.mark("runcast-drawn");
    window.__runcastDrawn = performance.now();
  }
}

/** The first curve on screen: the light drawing (chart/sketch.js) or, without one, Plotly's. */
function onFirstPaint() {
  if (window.__runcastPainted === undefined) {
    performance.mark("runcast-painted");
    window.__runcastPainted = performance.now();
  }
}

async function start(page) {
  page.soon = {
    // Live messages keep calling these: each runs at most LIVE_MAX_WAIT_MS after the first call.
    events: debounce(() => renderEvents(page), 200, LIVE_MAX_WAIT_MS),
    alerts: debounce(() => refreshAlerts(page), 500, LIVE_MAX_WAIT_MS),
    checkpoints: debounce(() => loadCheckpoints(page, page.zoomTo), 500, LIVE_MAX_WAIT_MS),
    revisions: debounce(() => loadRevisions(page), 500, LIVE_MAX_WAIT_MS),
    evals: debounce(() => page.evals.load(), 500, LIVE_MAX_WAIT_MS),
    detail: debounce(() => reloadDetail(page), 300, LIVE_MAX_WAIT_MS),
    commands: debounce(() => {
      rereadEvents(page); // every reader: the timeline's `command` events (under the run's policy)
      if (page.control) page.control.load();
    }, 200, LIVE_MAX_WAIT_MS),
  };
  openLive(page, { onBatch, onReset }); // before any read: the store applies what comes after each answer
  const pre = page.prefetch;
  let eventsPromise;
  try {
    page.eventsReadAt = (pre && pre.eventsSentAt) ?? performance.now();
    eventsPromise = fromPrefetch(pre, "events", () => {
      page.eventsReadAt = performance.now();
      return getJSON(runUrl(page.runId) + "/events?limit=1000");
    }).then(async (first) => {
      page.eventsVersion = typeof first.version === "number" ? first.version : null;
      if (!first.next_cursor || first.events.length < 1000) return first.events;
      return getEvents(page.runId); // long timelines: every page
    }).catch(() => []);
    page.detailReadAt = (pre && pre.detailSentAt) ?? performance.now();
    page.detail = await fromPrefetch(pre, "detail", () => {
      page.detailReadAt = performance.now();
      return getRun(page.runId);
    });
  } catch (err) {
    page.stream.close();
    $("loading").hidden = true;
    if (err instanceof ApiError && err.status === 404) return showNotFound(page);
    return showFailed(err);
  }
  $("loading").hidden = true;
  $("run").hidden = false;
  renderTitle(page);
  await setupXmaps(page);
  // The events before the loss curve's first paint: their markers widen its x range (Plotly pads
  // for them), so drawn later they would move the curve.
  mergeEvents(page, await eventsPromise);
  buildMainChart(page, { onDrawn: onFirstDraw, onPainted: onFirstPaint, prefetched: prefetchedMetrics(pre), markers: markers(page) });
  // The loss curve first (its light drawing, or Plotly's draw when Plotly.js is there): the rest
  // of the page is set up once it is on screen.
  if (page.mainChart) {
    await page.mainChart.load();
    await firstPaintOrFailure(page.mainChart);
  }
  renderHeader(page);
  renderConfig(page.detail);
  page.estimate.update(page.detail);
  setupControls(page);
  buildPanels(page, markers(page));
  buildSystem(page);
  renderEvents(page);
  loadArtifacts(page);
  mountControl(page);
  page.loaded = true;
  catchUp(page);
  setInterval(() => pollDetail(page), 30000);
  setInterval(() => tickHeartbeat(page), 1000);
}

async function showNotFound(page) {
  const session = await page.session;
  document.title = t(session ? "run.notFound.pageTitle" : "run.notFound.privatePageTitle");
  $("missing-id").textContent = page.runId;
  if (session) {
    const hint = $("signed-in-hint");
    hint.textContent = t("run.notFound.signedInHint", { project: session.project });
    hint.hidden = false;
  } else {
    $("not-found-title").textContent = t("run.notFound.private");
    $("private-hint").hidden = false;
    $("not-found-signin").onclick = () => {
      const box = document.querySelector("#signin details");
      if (box) box.open = true;
    };
  }
  $("not-found").hidden = false;
}

function showFailed(err) {
  document.title = t("run.failed.pageTitle");
  $("failed-message").textContent = err.message;
  $("failed").hidden = false;
  $("retry").onclick = () => location.reload();
}

const page = createPage();

exposeHooks(page);

// The language first: every panel's text comes from its catalog (the run's reads are already out).
loadLanguage().then(() => {
  page.session = mountSignIn($("signin"));
  return start(page);
});

// One Plotly chart of one or more metric sources (a source = one key of one run), drawn from
// the page's store (store.js) and nothing else: the chart asks the store to answer its query
// (the visible range and its pixel budget) and redraws whenever an entry changes.
//
// Each segment of a run is drawn in its own colour; the points of a segment that a later
// segment replaced (branch.js: steps after its start_step) are the abandoned branch, drawn grey.
// Per part: a min–max band (when bucketed, so a one-step spike shows at any zoom), the raw
// values (or bucket means) faint and a smoothed line (debiased EMA, as TensorBoard draws it).
//
// Drawing happens at most once per animation frame. When the store only appended points at
// the end of its series since the last draw, the new points go in with one
// Plotly.extendTraces; anything else (a bucket that changed, a refetched view, markers,
// smoothing) redraws with Plotly.react.

/* global Plotly */
import { GREY, alpha, color, debounce, escapeHtml, theme } from "./util.js";
import { abandonedFrom } from "./branch.js";

export { XMap, rangesEqual } from "./xmap.js";
import { rangesEqual } from "./xmap.js";

export const DEFAULT_SMOOTHING = 0.6;
/** Points (or buckets) per CSS pixel of plot width that a chart asks for. */
export const POINTS_PER_PIXEL = 2;
export const MAX_POINTS = 20000;
/** Exported images: publication size. */
export const EXPORT_SIZE = { width: 1600, height: 900 };
const FETCH_DEBOUNCE_MS = 150;
const PAD = 0.1; // fetch this share of the visible width beyond each edge, for panning
const GROUP_PX = 14; // anomaly markers closer than this are one marker
const GROUP_LIST = 12; // anomalies named in a group's hover text
const DASHES = ["solid", "dash", "dot", "dashdot", "longdash"];
const LANE = { events: 0.96, anomalies: 0.86 };
const MARKER_STYLE = {
  restart: { symbol: "triangle-down", color: "#D55E00", name: "restart" },
  checkpoint: { symbol: "diamond", color: "#009E73", name: "checkpoint" },
  note: { symbol: "circle", color: "#CC79A7", name: "note" },
  data_mix: { symbol: "square", color: "#E69F00", name: "data mix" },
  manifest: { symbol: "star", color: "#56B4E9", name: "manifest" },
  code: { symbol: "hexagon", color: "#0072B2", name: "code revision" },
  alert: { symbol: "x", color: "#D55E00", name: "anomaly" },
  finished: { symbol: "square-open", color: GREY, name: "finished" },
};
export function markerStyle(type) {
  return MARKER_STYLE[type] || { symbol: "circle-open", color: GREY, name: type };
}

// A chart's first draw sets its bottom margin itself (the x axis's tick labels and title, and
// the legend's rows, measured at Plotly's default fonts) instead of leaving it to Plotly's
// automargin, which draws the whole chart a second time to grow the margin: about half of
// a first draw's time (docs/performance.md). The y axis keeps automargin (its labels fit the
// 56 px left margin; wider ones grow it without a second draw of the common case). Every
// later draw has automargin on again, and one follows the first at once, so a margin
// measured wrong (another font) lasts one frame, never longer.
const X_AXIS_BOTTOM = 50; // tick labels, title and the gaps around them under the plot, px
const LEGEND_ROW = 19; // one row of the horizontal legend at 11 px
const LEGEND_ITEM = 45; // each item's line sample and gaps, besides its text
const LEGEND_FONT = '11px "Open Sans", verdana, arial, sans-serif';
let measureCanvas = null;

/**
 * The bottom margin automargin would give: the x axis's labels and title, then the legend's
 * rows. Plotly lays a horizontal legend out in one row when every item fits the plot's width,
 * else in columns as wide as its widest item.
 */
export function firstBottomMargin(names, plotWidth) {
  if (!names.length) return X_AXIS_BOTTOM;
  if (!measureCanvas) measureCanvas = document.createElement("canvas").getContext("2d");
  measureCanvas.font = LEGEND_FONT;
  const widths = names.map((name) => LEGEND_ITEM + measureCanvas.measureText(name).width);
  const total = widths.reduce((a, b) => a + b, 0);
  const columns = total <= plotWidth ? names.length : Math.max(1, Math.floor(plotWidth / Math.max(...widths)));
  return X_AXIS_BOTTOM + LEGEND_ROW * Math.ceil(names.length / columns);
}

const SVG_ICON = { width: 1000, height: 1000, path: "M450 100h100v420l130-130 70 70-250 250-250-250 70-70 130 130z M150 800h700v100h-700z" };

/**
 * Plotly's options for every chart: no logo, no cloud ("Share chart" / Chart Studio), and
 * image export at publication size, PNG (Plotly's camera button) and SVG.
 */
export function plotConfig(filename) {
  const name = String(filename || "runcast").replace(/[^\w.-]+/g, "_").slice(0, 120);
  return {
    responsive: true,
    displaylogo: false,
    showSendToCloud: false,
    showEditInChartStudio: false,
    modeBarButtonsToRemove: ["select2d", "lasso2d", "sendDataToCloud", "sendChartToCloud", "editInChartStudio"],
    toImageButtonOptions: { format: "png", filename: name, scale: 1, ...EXPORT_SIZE },
    modeBarButtonsToAdd: [{
      name: "downloadSvg",
      title: `Download plot as SVG (${EXPORT_SIZE.width}×${EXPORT_SIZE.height})`,
      icon: SVG_ICON,
      click: (gd) => Plotly.downloadImage(gd, { format: "svg", filename: name, ...EXPORT_SIZE }),
    }],
  };
}

let plotlyReady = null;

/**
 * Resolves once Plotly.js has run. A page may load it `async` (run.html: its modules set the
 * page up while Plotly.js downloads); a chart's draw waits for it. Rejects when the script fails.
 */
export function whenPlotly() {
  if (typeof Plotly !== "undefined") return Promise.resolve();
  if (!plotlyReady) {
    plotlyReady = new Promise((resolve, reject) => {
      const script = document.querySelector('script[src*="/plotly.min.js"]');
      if (!script) return reject(new Error("Plotly.js is not on this page"));
      // A script's load event follows its run in the same task: not run yet, so not fired yet.
      script.addEventListener("load", () => resolve(), { once: true });
      script.addEventListener("error", () => reject(new Error("Plotly.js could not be loaded")), { once: true });
    });
  }
  return plotlyReady;
}

/** One step of TensorBoard's debiased exponential moving average; NaN/±Inf leave a gap. */
export function emaStep(state, y, weight) {
  if (y === null || !Number.isFinite(y)) return null;
  state.last = state.last * weight + (1 - weight) * y;
  state.n += 1;
  const debias = 1 - Math.pow(weight, state.n);
  return debias > 0 ? state.last / debias : y;
}

export function ema(values, weight) {
  const state = { last: 0, n: 0 };
  return { y: values.map((v) => emaStep(state, v, weight)), state };
}

const finite = (v) => (v === null || v === undefined || !Number.isFinite(v) ? null : v);
const clamp = (v, lo, hi) => Math.max(lo, Math.min(hi, v));

/**
 * view: the page's shared view {smoothing, log, range, xmapFor(run), onRange(range), segmentsOf(run),
 *       colorBy: "segment" | "source"}
 * sources: [{run, key, label}]; store: the page's MetricStore.
 */
export class MetricChart {
  constructor(plotDiv, { sources, view, store, noteEl = null, onDrawn = null, prefetched = null, filename = "runcast" }) {
    this.div = plotDiv;
    this.view = view;
    this.store = store;
    this.sources = sources.map((s, i) => ({ ...s, index: i, entry: store.acquire(s.run, s.key) }));
    this.noteEl = noteEl;
    this.onDrawn = onDrawn;
    this.prefetched = prefetched; // (key, maxPoints) -> {maxPoints, body: Promise} read before this chart existed
    this.config = plotConfig(filename);
    this.markers = [];
    this.yRange = null;
    this.active = false; // load() was called: the chart follows its entries
    this.drawn = false;
    this.dirty = true; // the next draw is a full Plotly.react
    this.frame = 0;
    this.seen = new Map(); // entry -> {mutations, size} at the last draw
    this.shape = []; // per drawn trace: {sig, length}
    this.level = 0;
    this.bucketWidth = 1;
    this.unsubscribe = this.sources.map((s) => store.subscribe(s.entry, () => this.schedule()));
    this.scheduleLoad = debounce(() => this.load(), FETCH_DEBOUNCE_MS);
    /** Resolves after the chart's first Plotly draw. */
    this.firstDraw = new Promise((resolve) => { this.resolveFirstDraw = resolve; });
  }

  /** Plot area width in CSS pixels. */
  pixelWidth() {
    const size = this.div._fullLayout && this.div._fullLayout._size;
    const w = size ? size.w : this.div.clientWidth - 80;
    return Math.max(50, Math.min(10000, Math.round(w || 800)));
  }

  /** Points the chart asks for across its width. */
  budget() {
    return clamp(Math.round(POINTS_PER_PIXEL * this.pixelWidth()), 100, MAX_POINTS);
  }

  /** The /metrics query for a source: the visible range plus PAD each side, in steps. */
  query(src) {
    const range = this.view.range ?? null;
    const width = this.budget();
    if (!range) return { start: null, end: null, maxPoints: width };
    const xmap = this.view.xmapFor(src.run);
    const pad = (range[1] - range[0]) * PAD;
    let start = xmap.toStep(range[0] - pad);
    let end = xmap.toStep(range[1] + pad);
    if (start === null || end === null) return { start: null, end: null, maxPoints: width };
    if (end < start) [start, end] = [end, start];
    return {
      start: Math.max(0, Math.floor(start)),
      end: Math.max(0, Math.ceil(end)),
      maxPoints: clamp(Math.round(width * (1 + 2 * PAD)), 1, MAX_POINTS),
    };
  }

  /** Make the store answer this chart's query for every source; the chart draws as answers land. */
  async load() {
    this.active = true;
    const prefetched = this.prefetched;
    this.prefetched = null; // used once
    const range = this.view.range ?? null;
    this.loadedRange = range;
    await Promise.all(this.sources.map((src) => {
      let query = this.query(src);
      let body = null;
      const early = !range && prefetched ? prefetched(src.key, query.maxPoints) : null;
      if (early) {
        query = { start: null, end: null, maxPoints: early.maxPoints };
        body = early.body;
      }
      return this.store.request(src.entry, query, body);
    }));
    this.dirty = true;
    this.schedule();
  }

  setMarkers(markers) {
    this.markers = markers;
    this.invalidate();
  }

  /** Redraw everything on the next frame (smoothing, log scale, segments, markers). */
  invalidate() {
    this.dirty = true;
    this.schedule();
  }

  schedule() {
    if (!this.active || this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.draw();
    });
  }

  destroy() {
    if (this.frame) cancelAnimationFrame(this.frame);
    this.frame = 0;
    this.active = false;
    this.scheduleLoad.cancel();
    for (const off of this.unsubscribe) off();
    for (const s of this.sources) this.store.release(s.entry);
    if (this.drawn) Plotly.purge(this.div);
  }

  draw() {
    if (typeof Plotly === "undefined") {
      whenPlotly().then(() => this.schedule(), (err) => {
        if (this.noteEl) this.noteEl.textContent = "Could not draw: " + err.message;
      });
      return;
    }
    const entries = this.sources.map((s) => s.entry);
    if (!entries.some((e) => e.ready)) {
      const failed = entries.find((e) => e.error);
      if (failed && this.noteEl) this.noteEl.textContent = "Could not load: " + failed.error.message;
      return;
    }
    const changed = this.dirty || entries.some((e) => {
      const s = this.seen.get(e);
      return !s || s.mutations !== e.mutations || s.size !== e.size;
    });
    if (!changed) return;
    const traces = this.buildTraces();
    traces.push(...this.markerTraces(traces));
    const appendOnly = !this.dirty && this.drawn && entries.every((e) => this.seen.has(e) && this.seen.get(e).mutations === e.mutations);
    if (appendOnly && this.extend(traces)) {
      this.remember(entries, traces);
    } else {
      this.react(traces);
      this.remember(entries, traces);
    }
    this.dirty = false;
    this.writeNote();
  }

  remember(entries, traces) {
    for (const e of entries) this.seen.set(e, { mutations: e.mutations, size: e.size });
    this.shape = traces.map((t) => ({ sig: signature(t), length: t.x.length, fixed: fixedPart(t) }));
  }

  /** Append the new tails of every trace with one extendTraces; false when the traces changed shape. */
  extend(traces) {
    if (traces.length !== this.shape.length) return false;
    const indices = [];
    const xs = [];
    const ys = [];
    for (let i = 0; i < traces.length; i++) {
      const old = this.shape[i];
      const t = traces[i];
      if (old.sig !== signature(t) || t.x.length < old.length || old.fixed !== fixedPart(t)) return false;
      if (t.x.length === old.length) continue;
      indices.push(i);
      xs.push(t.x.slice(old.length));
      ys.push(t.y.slice(old.length));
    }
    if (indices.length) Plotly.extendTraces(this.div, { x: xs, y: ys }, indices);
    return true;
  }

  react(traces) {
    const previous = new Map((this.div.data || []).map((tr) => [tr.name, tr.visible]));
    for (const tr of traces) {
      const visible = previous.get(tr.name);
      if (visible !== undefined && visible !== true) tr.visible = visible;
    }
    const first = !this.drawn;
    if (first) this.div.replaceChildren(); // the placeholder
    const layout = this.layout();
    // The first draw's margin set here, not by automargin (see firstBottomMargin); date axes
    // (two-line tick labels) keep automargin.
    const quick = first && layout.xaxis.type === "linear";
    if (quick) {
      const names = traces.filter((t) => t.showlegend).map((t) => t.name);
      const width = this.div.clientWidth - layout.margin.l - layout.margin.r;
      layout.xaxis.automargin = false;
      layout.margin = { ...layout.margin, b: firstBottomMargin(names, width) };
    }
    const drawn = Plotly.react(this.div, traces, layout, this.config);
    if (first) {
      this.drawn = true;
      this.div.on("plotly_relayout", (ev) => this.onRelayout(ev));
      Promise.resolve(drawn).then(() => {
        if (this.onDrawn) this.onDrawn(this);
        this.resolveFirstDraw();
        if (quick) this.invalidate(); // the next frame's draw has automargin back
      });
    }
  }

  /** The note under the chart: what the store holds for the view. */
  writeNote() {
    if (!this.noteEl) return;
    const entries = this.sources.map((s) => s.entry).filter((e) => e.ready);
    const total = entries.reduce((n, e) => n + e.size, 0);
    const bucketed = entries.filter((e) => e.bucketed);
    const width = Math.max(1, ...bucketed.map((e) => e.bucketWidth));
    this.noteEl.textContent = total === 0
      ? "No points in this range yet."
      : bucketed.length
        ? `${total.toLocaleString()} buckets of ${width.toLocaleString()} steps: line = mean, band = min–max.`
        : `${total.toLocaleString()} points (every logged step).`;
  }

  /** Every trace from the store's entries. */
  buildTraces() {
    const traces = [];
    const weight = this.view.smoothing;
    let level = 0;
    let bucketWidth = 1;
    for (const src of this.sources) {
      const entry = src.entry;
      if (!entry.ready) continue;
      level = Math.max(level, entry.level);
      bucketWidth = Math.max(bucketWidth, entry.bucketWidth);
      const xmap = this.view.xmapFor(src.run);
      const segments = this.view.segmentsOf(src.run) || [];
      const multiSeg = segments.length > 1 || entry.series.length > 1;
      const bucketed = entry.bucketed;
      const holds = (index, step) => entry.series.some((t) => t.segment === index && t.step.includes(step));
      for (const series of entry.series) {
        const split = abandonedFrom(segments, series.segment, series.step, holds);
        const parts = [
          { abandoned: false, from: 0, to: split },
          { abandoned: true, from: Math.max(0, split - 1), to: series.step.length },
        ];
        for (const part of parts) {
          if (part.abandoned && split >= series.step.length) continue;
          if (part.to - part.from <= (part.abandoned && split > 0 ? 1 : 0)) continue;
          const colourIndex = this.view.colorBy === "segment" && multiSeg ? series.segment : src.index;
          const c = part.abandoned ? GREY : color(colourIndex);
          const dash = this.view.colorBy === "segment" ? DASHES[src.index % DASHES.length] : "solid";
          let name = src.label;
          if (multiSeg) name += " · segment " + series.segment;
          if (part.abandoned) name += " (abandoned)";
          const safe = escapeHtml(name);
          const group = src.run + "|" + src.key + "|" + series.segment + "|" + part.abandoned;
          const meta = (role) => ({ role, run: src.run, key: src.key, source: src.index, segment: series.segment, abandoned: part.abandoned, epoch: xmap.epoch });
          const steps = series.step.slice(part.from, part.to);
          const x = steps.map((s) => xmap.toPlot(xmap.toX(s)));
          const raw = (bucketed ? series.mean : series.last).slice(part.from, part.to).map(finite);
          if (bucketed) {
            traces.push({
              type: "scatter", mode: "lines", x, y: series.max.slice(part.from, part.to).map(finite),
              line: { width: 0, color: c }, name: safe + " max", legendgroup: group, showlegend: false,
              hovertemplate: "max %{y:.6g}<extra>" + safe + "</extra>", meta: meta("max"),
            });
            traces.push({
              type: "scatter", mode: "lines", x, y: series.min.slice(part.from, part.to).map(finite),
              fill: "tonexty", fillcolor: alpha(c, part.abandoned ? 0.12 : 0.18),
              line: { width: 0, color: c }, name: safe + " min", legendgroup: group, showlegend: false,
              hovertemplate: "min %{y:.6g}<extra>" + safe + "</extra>", meta: meta("min"),
            });
          }
          traces.push({
            type: "scatter", mode: steps.length <= 80 ? "lines+markers" : "lines", x, y: raw,
            line: { width: 1, color: alpha(c, part.abandoned ? 0.5 : 0.35) },
            marker: { size: 4, color: alpha(c, 0.6) },
            name: safe + (bucketed ? " mean" : ""), legendgroup: group, showlegend: false,
            hovertemplate: (bucketed ? "mean " : "") + "%{y:.6g}<extra>" + safe + "</extra>",
            meta: meta("raw"),
          });
          traces.push({
            type: "scatter", mode: "lines", x, y: ema(raw, weight).y,
            line: { width: part.abandoned ? 1.5 : 2, color: c, dash: part.abandoned ? "dot" : dash },
            name: safe, legendgroup: group, showlegend: true,
            hovertemplate: "smoothed %{y:.6g}<extra>" + safe + "</extra>",
            meta: meta("smooth"),
          });
        }
      }
    }
    this.level = level;
    this.bucketWidth = bucketWidth;
    if (this.view.band) traces.unshift(...this.bandTraces());
    return traces;
  }

  /**
   * With view.band (the System panel): the min–max across the sources, behind their lines. At
   * each step any source has, each source counts with its value at or before that step.
   */
  bandTraces() {
    const ready = this.sources.filter((s) => s.entry.ready);
    if (ready.length < 2) return [];
    const cols = ready.map((src) => {
      const pts = [];
      for (const series of src.entry.series) {
        const ys = src.entry.bucketed ? series.mean : series.last;
        for (let i = 0; i < series.step.length; i++) pts.push([series.step[i], finite(ys[i])]);
      }
      pts.sort((a, b) => a[0] - b[0]);
      return { pts, at: 0 };
    });
    const steps = [...new Set(cols.flatMap((c) => c.pts.map((p) => p[0])))].sort((a, b) => a - b);
    const xmap = this.view.xmapFor(ready[0].run);
    const x = [], lo = [], hi = [];
    for (const step of steps) {
      let min = Infinity, max = -Infinity;
      for (const c of cols) {
        while (c.at < c.pts.length && c.pts[c.at][0] <= step) c.at++;
        const v = c.at > 0 ? c.pts[c.at - 1][1] : null;
        if (v !== null) {
          min = Math.min(min, v);
          max = Math.max(max, v);
        }
      }
      if (min > max) continue;
      x.push(xmap.toPlot(xmap.toX(step)));
      lo.push(min);
      hi.push(max);
    }
    const meta = (key) => ({ role: "band", run: ready[0].run, key });
    return [
      { type: "scatter", mode: "lines", x, y: hi, line: { width: 0, color: GREY }, name: "max across ranks",
        showlegend: false, hovertemplate: "max %{y:.6g}<extra>all ranks</extra>", meta: meta("max") },
      { type: "scatter", mode: "lines", x, y: lo, line: { width: 0, color: GREY }, name: "min across ranks",
        fill: "tonexty", fillcolor: alpha(GREY, 0.25), showlegend: false,
        hovertemplate: "min %{y:.6g}<extra>all ranks</extra>", meta: meta("min") },
    ];
  }

  /** The timeline's markers in two lanes at the top: events, and anomalies grouped when dense. */
  markerTraces(dataTraces) {
    if (!this.markers.length) return [];
    const xmap = this.view.xmapFor(this.sources[0].run);
    const placed = [];
    for (const m of this.markers) {
      const x = xmap.toPlot(xmap.toX(m.step));
      if (x === null || x === undefined || !Number.isFinite(Number(x))) continue;
      const style = markerStyle(m.type);
      const text = wrap(style.name + " @ step " + m.step + (m.label ? ": " + m.label : "")).map(escapeHtml).join("<br>");
      placed.push({ x, text, style, anomaly: m.type === "alert" });
    }
    const out = [];
    const events = placed.filter((p) => !p.anomaly);
    if (events.length) {
      out.push({
        type: "scatter", mode: "markers", x: events.map((p) => p.x), y: events.map(() => LANE.events), yaxis: "y2",
        text: events.map((p) => p.text), hovertemplate: "%{text}<extra></extra>", showlegend: false, name: "timeline",
        marker: { size: 10, symbol: events.map((p) => p.style.symbol), color: events.map((p) => p.style.color),
          line: { width: 1, color: events.map((p) => p.style.color) } },
        meta: { role: "markers" },
      });
    }
    const anomalies = placed.filter((p) => p.anomaly).sort((a, b) => a.x - b.x);
    if (anomalies.length) {
      const groups = this.groupAnomalies(anomalies, dataTraces, placed);
      const style = markerStyle("alert");
      out.push({
        type: "scatter", mode: "markers+text", x: groups.map((g) => g.x), y: groups.map(() => LANE.anomalies), yaxis: "y2",
        text: groups.map((g) => (g.items.length > 1 ? String(g.items.length) : "")),
        hovertext: groups.map((g) => g.text),
        textposition: "middle right", textfont: { size: 10, color: style.color },
        hovertemplate: "%{hovertext}<extra></extra>", showlegend: false, name: "anomalies",
        marker: { size: groups.map((g) => (g.items.length > 1 ? 13 : 9)), symbol: style.symbol, color: style.color,
          line: { width: 1, color: style.color } },
        meta: { role: "anomalies", counts: groups.map((g) => g.items.length) },
      });
    }
    return out;
  }

  /** Anomalies closer than GROUP_PX on screen become one marker whose hover lists them. */
  groupAnomalies(anomalies, dataTraces, placed) {
    const xmap = this.view.xmapFor(this.sources[0].run);
    let lo;
    let hi;
    if (this.view.range) {
      lo = xmap.toPlot(this.view.range[0]);
      hi = xmap.toPlot(this.view.range[1]);
    } else {
      const xs = [...placed.map((p) => p.x)];
      for (const t of dataTraces) if (t.x.length) xs.push(t.x[0], t.x[t.x.length - 1]);
      lo = Math.min(...xs);
      hi = Math.max(...xs);
    }
    const perPixel = hi > lo ? (hi - lo) / this.pixelWidth() : 1;
    const groups = [];
    for (const a of anomalies) {
      const g = groups[groups.length - 1];
      if (g && (a.x - g.items[0].x) / perPixel < GROUP_PX) g.items.push(a);
      else groups.push({ items: [a] });
    }
    for (const g of groups) {
      g.x = g.items[0].x;
      const shown = g.items.slice(0, GROUP_LIST).map((a) => a.text);
      if (g.items.length > GROUP_LIST) shown.push(`… and ${g.items.length - GROUP_LIST} more`);
      g.text = (g.items.length > 1 ? `${g.items.length} anomalies<br>` : "") + shown.join("<br>");
    }
    return groups;
  }

  layout() {
    const t = theme();
    const xmap = this.view.xmapFor(this.sources[0].run);
    const range = this.view.range;
    const xaxis = {
      title: { text: escapeHtml(xmap.axisTitle), standoff: 6 }, gridcolor: t.grid, zeroline: false, automargin: true,
      type: xmap.epoch ? "date" : "linear",
    };
    if (range) {
      xaxis.range = [xmap.toPlot(range[0]), xmap.toPlot(range[1])];
      xaxis.autorange = false;
    } else xaxis.autorange = true;
    const yaxis = { type: this.view.log ? "log" : "linear", gridcolor: t.grid, zeroline: false, exponentformat: "power", automargin: true };
    if (this.yRange) {
      yaxis.range = this.yRange;
      yaxis.autorange = false;
    } else yaxis.autorange = true;
    const shapes = [];
    const lines = this.markers.filter((m) => m.type !== "alert");
    if (lines.length <= 300) {
      for (const m of lines) {
        const xv = xmap.toPlot(xmap.toX(m.step));
        if (xv === null) continue;
        shapes.push({
          type: "line", xref: "x", yref: "paper", x0: xv, x1: xv, y0: 0, y1: 1, layer: "below",
          line: { width: 1, dash: "dot", color: alpha(markerStyle(m.type).color, 0.7) },
        });
      }
    }
    return {
      // The title is the card's heading (HTML): the toolbar sits in the top margin alone.
      margin: { l: 56, r: 12, t: 30, b: 8 },
      paper_bgcolor: t.bg, plot_bgcolor: t.bg, font: { color: t.fg },
      hovermode: "x unified", hoverlabel: { bgcolor: t.hoverbg, font: { color: t.fg } },
      xaxis, yaxis,
      yaxis2: { overlaying: "y", range: [0, 1], visible: false, fixedrange: true },
      shapes,
      showlegend: true,
      // Below the axis title, in the bottom margin that Plotly grows to hold it.
      legend: { orientation: "h", x: 0, xanchor: "left", y: 0, yref: "container", yanchor: "bottom", bgcolor: "rgba(0,0,0,0)", font: { size: 11 } },
    };
  }

  onRelayout(ev) {
    let xr;
    if (ev["xaxis.autorange"]) xr = null;
    else if ("xaxis.range[0]" in ev) xr = [ev["xaxis.range[0]"], ev["xaxis.range[1]"]];
    else if (Array.isArray(ev["xaxis.range"])) xr = ev["xaxis.range"];
    if (ev["yaxis.autorange"]) this.yRange = null;
    else if ("yaxis.range[0]" in ev) this.yRange = [ev["yaxis.range[0]"], ev["yaxis.range[1]"]];
    else if (Array.isArray(ev["yaxis.range"])) this.yRange = ev["yaxis.range"].slice();
    if (xr === undefined) return;
    const xmap = this.view.xmapFor(this.sources[0].run);
    const range = xr === null ? null : [xmap.fromPlot(xr[0]), xmap.fromPlot(xr[1])];
    this.view.onRange(range, this);
  }

  /** The shared range changed (here or on another chart): follow it and load its points. */
  applyRange(range) {
    if (!this.active) return;
    if (this.drawn) {
      const current = this.currentPlotRange();
      if (!rangesEqual(current, range)) {
        const xmap = this.view.xmapFor(this.sources[0].run);
        if (range === null) Plotly.relayout(this.div, { "xaxis.autorange": true });
        else Plotly.relayout(this.div, { "xaxis.range": [xmap.toPlot(range[0]), xmap.toPlot(range[1])] });
      }
    }
    if (!rangesEqual(this.loadedRange ?? null, range)) this.scheduleLoad();
    else this.invalidate(); // anomaly groups follow the zoom
  }

  currentPlotRange() {
    const ax = this.div.layout && this.div.layout.xaxis;
    if (!ax || ax.autorange === true || !ax.range) return null;
    const xmap = this.view.xmapFor(this.sources[0].run);
    return [xmap.fromPlot(ax.range[0]), xmap.fromPlot(ax.range[1])];
  }

  /** Points (or buckets) drawn in raw traces, the abandoned fork counted once per part. */
  pointCount() {
    return (this.div.data || []).filter((t) => t.meta && t.meta.role === "raw").reduce((n, t) => n + t.x.length, 0);
  }
}

/** Hover text in lines of at most `width` characters (a phone's hover box stays on screen). */
function wrap(text, width = 56) {
  const lines = [];
  for (const para of String(text).split("\n")) {
    let line = "";
    for (const word of para.split(" ")) {
      if (line && line.length + 1 + word.length > width) {
        lines.push(line);
        line = word;
      } else line = line ? line + " " + word : word;
    }
    lines.push(line);
  }
  return lines;
}

/** Marker lanes are redrawn, never extended: any change in them (a regrouping) needs a react. */
function fixedPart(t) {
  const role = t.meta && t.meta.role;
  if (role === "band") return JSON.stringify([t.x, t.y]); // a late point of one source can change it anywhere
  return role === "markers" || role === "anomalies" ? JSON.stringify([t.x, t.text, t.hovertext]) : null;
}

function signature(t) {
  const m = t.meta || {};
  return [m.role, m.run, m.key, m.segment, m.abandoned, t.mode, t.name].join("|");
}

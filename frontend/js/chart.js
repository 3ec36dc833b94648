// One Plotly chart of one or more metric sources (a source = one key of one run), drawn from
// the page's store (store.js) and nothing else: the chart asks the store to answer its query
// (the visible range and its pixel budget) and redraws whenever an entry changes. Its parts:
// chart/traces.js (the sources' traces), chart/markers.js (the timeline's markers),
// chart/layout.js (axes, legend, margins), chart/plotly.js (options, loading),
// chart/smoothing.js (the EMA).
//
// Drawing happens at most once per animation frame. When the store only appended points at
// the end of its series since the last draw, the new points go in with one
// Plotly.extendTraces; anything else (a bucket that changed, a refetched view, markers,
// smoothing) redraws with Plotly.react.

/* global Plotly */
import { debounce } from "./util.js";
import { t } from "./i18n.js";
import { rangesEqual } from "./xmap.js";
import { chartLayout, firstBottomMargin } from "./chart/layout.js";
import { markerTraces } from "./chart/markers.js";
import { plotConfig, whenPlotly } from "./chart/plotly.js";
import { canSketch, flatLevel, leftMargin, sketchChart } from "./chart/sketch.js";
import { fixedPart, sourceTraces, traceSignature } from "./chart/traces.js";

/** Points (or buckets) per CSS pixel of plot width that a chart asks for. */
export const POINTS_PER_PIXEL = 2;
export const MAX_POINTS = 20000;
const FETCH_DEBOUNCE_MS = 150;
const PAD = 0.1; // fetch this share of the visible width beyond each edge, for panning

const clamp = (v, lo, hi) => Math.max(lo, Math.min(hi, v));

/**
 * view: the page's shared view {smoothing, log, range, xmapFor(run), onRange(range), segmentsOf(run),
 *       colorBy: "segment" | "source"}
 * sources: [{run, key, label}]; store: the page's MetricStore.
 */
export class MetricChart {
  constructor(plotDiv, { sources, view, store, noteEl = null, onDrawn = null, onPainted = null, onClick = null, prefetched = null, filename = "runcast" }) {
    this.div = plotDiv;
    this.view = view;
    this.store = store;
    this.sources = sources.map((s, i) => ({ ...s, index: i, entry: store.acquire(s.run, s.key) }));
    this.noteEl = noteEl;
    this.onDrawn = onDrawn;
    this.onPainted = onPainted; // the first curve on screen: the light drawing, or Plotly's first draw
    this.sketch = null; // what the light drawing showed (chart/sketch.js), until Plotly replaced it
    this.isPainted = false;
    this.marginLeft = null; // the y labels' room set by the first layout (firstLayout)
    this.waiting = false; // for Plotly.js
    this.onClick = onClick; // a plotly_click event
    this.prefetched = prefetched; // (key, maxPoints) -> {maxPoints, body: Promise} read before this chart existed
    this.config = plotConfig(filename);
    this.markers = [];
    this.yRange = null;
    this.flat = null; // the value of a series flat on a linear axis (layout)
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
    /** Resolves once a curve is on screen: the light drawing or the first Plotly draw. */
    this.firstPaint = new Promise((resolve) => { this.resolveFirstPaint = resolve; });
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
    const entries = this.sources.map((s) => s.entry);
    if (!entries.some((e) => e.ready)) {
      const failed = entries.find((e) => e.error);
      if (failed && this.noteEl) this.noteEl.textContent = t("chart.loadFailed", { error: failed.error.message });
      return;
    }
    if (typeof Plotly === "undefined") return this.drawLight();
    const changed = this.dirty || entries.some((e) => {
      const s = this.seen.get(e);
      return !s || s.mutations !== e.mutations || s.size !== e.size;
    });
    if (!changed) return;
    const traces = this.buildTraces();
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

  /**
   * Before Plotly.js: the light drawing of what the store holds (chart/sketch.js; painted again
   * as answers land), then Plotly.js asked for once that frame is on screen (run.html only
   * preloads it, so it runs then).
   */
  drawLight() {
    const traces = this.buildTraces();
    const layout = this.firstLayout(traces);
    // Painted again as answers land, until Plotly draws (sources answer one by one).
    const sketch = !this.drawn && canSketch(layout, traces) ? sketchChart(this.div, traces, layout) : null;
    const light = sketch !== null; // null: a range only Plotly draws (chart/sketch.js)
    if (light) {
      this.sketch = sketch;
      this.writeNote();
      this.painted();
    }
    if (this.waiting) return;
    this.waiting = true;
    const plotly = () => whenPlotly().then(() => {
      this.waiting = false;
      this.schedule();
    }, (err) => {
      if (this.noteEl) this.noteEl.textContent = t("chart.drawFailed", { error: err.message });
    });
    if (light) requestAnimationFrame(() => setTimeout(plotly, 0));
    else plotly();
  }

  painted() {
    if (this.isPainted) return;
    this.isPainted = true;
    if (this.onPainted) this.onPainted(this);
    this.resolveFirstPaint();
  }

  /**
   * The layout of the first draw: its bottom margin set here, not by automargin (see
   * firstBottomMargin); date axes (two-line tick labels) keep automargin.
   */
  firstLayout(traces) {
    const layout = this.layout(traces);
    if (layout.xaxis.type === "linear") {
      const names = traces.filter((t) => t.showlegend).map((t) => t.name);
      const b = firstBottomMargin(names, this.div.clientWidth - layout.margin.l - layout.margin.r);
      // The y labels' room too, kept for the chart's later draws (automargin only grows it).
      const height = this.div.clientHeight - layout.margin.t - b;
      if (!this.drawn) this.marginLeft = leftMargin(traces, height, layout.yaxis.type === "log", layout.margin.l);
      layout.xaxis.automargin = false;
      layout.margin = { ...layout.margin, l: this.marginLeft, b };
    }
    return layout;
  }

  remember(entries, traces) {
    for (const e of entries) this.seen.set(e, { mutations: e.mutations, size: e.size });
    this.shape = traces.map((t) => ({ sig: traceSignature(t), length: t.x.length, fixed: fixedPart(t) }));
  }

  /** Append the new tails of every trace with one extendTraces; false when the traces changed shape. */
  extend(traces) {
    if (traces.length !== this.shape.length || flatLevel(traces, this.view.log) !== this.flat) return false;
    const indices = [];
    const xs = [];
    const ys = [];
    for (let i = 0; i < traces.length; i++) {
      const old = this.shape[i];
      const t = traces[i];
      if (old.sig !== traceSignature(t) || t.x.length < old.length || old.fixed !== fixedPart(t)) return false;
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
    if (first) this.div.replaceChildren(); // the placeholder, or the light drawing
    const layout = first ? this.firstLayout(traces) : this.layout(traces);
    const quick = first && layout.xaxis.automargin === false;
    const drawn = Plotly.react(this.div, traces, layout, this.config);
    if (first) {
      this.drawn = true;
      this.div.on("plotly_relayout", (ev) => this.onRelayout(ev));
      if (this.onClick) this.div.on("plotly_click", (ev) => this.onClick(ev));
      Promise.resolve(drawn).then(() => {
        if (this.onDrawn) this.onDrawn(this);
        this.painted();
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
      ? t("chart.noPoints")
      : bucketed.length
        ? t("chart.buckets", { count: total, width })
        : t("chart.points", { count: total });
  }

  /** Every trace from the store's entries, then the timeline's markers. */
  buildTraces() {
    const { traces, level, bucketWidth } = sourceTraces(this.sources, this.view);
    this.level = level;
    this.bucketWidth = bucketWidth;
    const xmap = this.view.xmapFor(this.sources[0].run);
    traces.push(...markerTraces(this.markers, xmap, {
      range: this.view.range, pixelWidth: () => this.pixelWidth(), dataTraces: traces,
    }));
    return traces;
  }

  /** The layout for `traces` (a series flat on a linear axis gets its range: sketch.js, flatLevel). */
  layout(traces) {
    this.flat = flatLevel(traces, this.view.log);
    const layout = chartLayout({
      xmap: this.view.xmapFor(this.sources[0].run), range: this.view.range, log: this.view.log,
      yRange: this.yRange, markers: this.markers, flat: this.flat,
    });
    if (this.marginLeft) layout.margin.l = this.marginLeft;
    return layout;
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

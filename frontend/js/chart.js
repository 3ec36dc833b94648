// One Plotly chart of one or more metric sources (a source = one key of one run).
//
// Data comes from /metrics as aligned buckets (docs/api.md): the server picks the bucket
// width, and bucket edges never move, so a refetch redraws the same curve. Each segment
// of a run is drawn in its own colour; the points of a segment that a later segment
// replaced (steps >= that segment's start_step) are the abandoned branch, drawn grey.
// Per part: a min–max band (when bucketed, so a one-step spike shows at any zoom), the
// raw values faint and a smoothed line (debiased EMA, as TensorBoard draws it).
//
// Live points arrive through append(); they are coalesced and drawn with one
// Plotly.extendTraces per animation frame. Past a bound the chart refetches the rolled-up
// view instead of growing, so a page left open for a week stays the same size.

/* global Plotly */
import { decode, decodeMetrics, getMetrics } from "./api.js";
import { GREY, alpha, color, debounce, escapeHtml, theme } from "./util.js";

export const DEFAULT_SMOOTHING = 0.6;
/** Raw points a trace may hold before the chart swaps them for the rolled-up view. */
export const MAX_TRACE_POINTS = 20000;
const FETCH_DEBOUNCE_MS = 150;
const PAD = 0.1; // fetch this share of the visible width beyond each edge, for panning
const DASHES = ["solid", "dash", "dot", "dashdot", "longdash"];
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

function bisect(arr, x) {
  let lo = 0;
  let hi = arr.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (arr[mid] < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function interp(xs, ys, x) {
  const n = xs.length;
  if (n === 0) return null;
  const i = bisect(xs, x);
  if (i === 0) return ys[0];
  if (i >= n) return ys[n - 1];
  const x0 = xs[i - 1];
  const x1 = xs[i];
  return x1 === x0 ? ys[i] : ys[i - 1] + ((ys[i] - ys[i - 1]) * (x - x0)) / (x1 - x0);
}

/**
 * The x axis: steps, or a logged monotonic key (tokens seen, wall time) mapped from steps
 * by interpolating between its logged points. Ranges are kept in x units; toStep turns
 * them back into steps for /metrics.
 */
export class XMap {
  constructor(mode = "step", key = null) {
    this.mode = mode;
    this.key = key;
    this.steps = [];
    this.values = [];
    this.epoch = false;
  }

  get identity() {
    return this.mode === "step" || !this.key;
  }

  async load(runId) {
    if (this.identity) return this;
    const body = await getMetrics(runId, this.key, { maxPoints: 5000 });
    const byStep = new Map();
    for (const s of body.series) {
      for (let i = 0; i < s.step.length; i++) {
        const v = s.last[i];
        if (Number.isFinite(v)) byStep.set(s.last_step[i], v);
      }
    }
    this.steps = [...byStep.keys()].sort((a, b) => a - b);
    this.values = this.steps.map((s) => byStep.get(s));
    this.epoch = this.mode === "time" && this.values.length > 0 && this.values[0] > 1e9;
    return this;
  }

  /** Extend with live points of the mapping key. */
  extend(steps, values) {
    for (let i = 0; i < steps.length; i++) {
      const v = decode(values[i]);
      if (!Number.isFinite(v)) continue;
      if (this.steps.length && steps[i] <= this.steps[this.steps.length - 1]) continue;
      this.steps.push(steps[i]);
      this.values.push(v);
    }
  }

  toX(step) {
    if (this.identity) return step;
    return interp(this.steps, this.values, step);
  }

  toStep(x) {
    if (this.identity) return x;
    return interp(this.values, this.steps, x);
  }

  /** x units -> what Plotly plots (date axes take epoch milliseconds). */
  toPlot(x) {
    return this.epoch && x !== null ? x * 1000 : x;
  }

  fromPlot(p) {
    if (this.epoch) {
      const ms = typeof p === "number" ? p : Date.parse(String(p).replace(" ", "T") + (/[zZ]|[+-]\d\d:?\d\d$/.test(p) ? "" : "Z"));
      return ms / 1000;
    }
    return typeof p === "number" ? p : Number(p);
  }

  get axisTitle() {
    if (this.identity) return "step";
    return this.key;
  }
}

export function rangesEqual(a, b) {
  if (a === null || b === null || a === undefined || b === undefined) return (a ?? null) === (b ?? null);
  const tol = Math.max(1e-9, Math.abs(a[1] - a[0]) * 1e-6);
  return Math.abs(a[0] - b[0]) <= tol && Math.abs(a[1] - b[1]) <= tol;
}

/**
 * view: shared page state {smoothing, log, range, xmapFor(run), onRange(range), segmentsOf(run),
 *       colorBy: "segment" | "source"}
 * sources: [{run, key, label}]
 */
export class MetricChart {
  constructor(plotDiv, { title, sources, view, noteEl = null, onDrawn = null, prefetched = null }) {
    this.div = plotDiv;
    this.title = title;
    this.sources = sources.map((s, i) => ({ ...s, index: i, id: s.run + "\u0000" + s.key }));
    this.view = view;
    this.noteEl = noteEl;
    this.onDrawn = onDrawn;
    this.prefetched = prefetched; // (key, maxPoints) -> a read started before this chart existed
    this.data = new Map(); // source id -> /metrics response
    this.markers = [];
    this.appliedRange = view.range ?? null;
    this.fetchedRange = undefined;
    this.yRange = null;
    this.live = new Map(); // "sourceId|segment" -> {traces, lastStep, ema}
    this.pending = [];
    this.frame = 0;
    this.appended = 0;
    this.drawn = false;
    this.seq = 0;
    this.abort = null;
    this.replay = null;
    this.scheduleFetch = debounce(() => this.fetch(), FETCH_DEBOUNCE_MS);
  }

  /** Plot area width in CSS pixels: one bucket per pixel. */
  pixelWidth() {
    const size = this.div._fullLayout && this.div._fullLayout._size;
    const w = size ? size.w : this.div.clientWidth - 80;
    return Math.max(100, Math.min(4000, Math.round(w || 800)));
  }

  /** Fetch every source for the current range and redraw (the view is replaced, not merged). */
  async fetch() {
    const range = this.view.range ?? null;
    const seq = ++this.seq;
    if (this.abort) this.abort.abort();
    const abort = new AbortController();
    this.abort = abort;
    const width = this.pixelWidth();
    this.replay = []; // live points that arrive while this fetch is in flight
    const task = (async () => {
      const results = await Promise.all(
        this.sources.map(async (src) => {
          let start = null;
          let end = null;
          let maxPoints = width;
          if (range) {
            const xmap = this.view.xmapFor(src.run);
            const pad = (range[1] - range[0]) * PAD;
            start = xmap.toStep(range[0] - pad);
            end = xmap.toStep(range[1] + pad);
            if (start !== null && end !== null && end < start) [start, end] = [end, start];
            maxPoints = width * (1 + 2 * PAD);
          }
          if (!range && this.prefetched) {
            const body = await this.prefetched(src.key, maxPoints);
            if (body) return decodeMetrics(body);
          }
          try {
            return await getMetrics(src.run, src.key, { start, end, maxPoints, signal: abort.signal });
          } catch (err) {
            if (err.name === "AbortError") throw err;
            if (err.status === 404 || err.status === 422) return null; // no points (yet) in range
            throw err;
          }
        }),
      );
      this.prefetched = null; // used once
      if (seq !== this.seq) return;
      this.data.clear();
      results.forEach((body, i) => body && this.data.set(this.sources[i].id, body));
      this.fetchedRange = range;
      this.appended = 0;
      this.render();
      // Points that arrived during the fetch may be missing from its answer: queue them again
      // (append skips any the answer already holds).
      const again = this.replay;
      this.replay = null;
      if (again && again.length) this.pending.push(...again);
      if (this.pending.length && !this.frame) this.frame = requestAnimationFrame(() => this.flush());
    })();
    return task.catch((err) => {
      if (err.name !== "AbortError") this.showError(err);
    });
  }

  showError(err) {
    if (this.noteEl) this.noteEl.textContent = "Could not load: " + err.message;
  }

  setMarkers(markers) {
    this.markers = markers;
    if (this.drawn) this.render();
  }

  /** Build every trace from the fetched buckets; registers the live targets. */
  buildTraces() {
    const traces = [];
    this.live.clear();
    const weight = this.view.smoothing;
    const multiSource = this.sources.length > 1;
    let level = 0;
    let bucketWidth = 1;
    for (const src of this.sources) {
      const body = this.data.get(src.id);
      if (!body) continue;
      level = Math.max(level, body.level);
      bucketWidth = Math.max(bucketWidth, body.bucket_width);
      const xmap = this.view.xmapFor(src.run);
      const segments = this.view.segmentsOf(src.run) || [];
      const multiSeg = segments.length > 1;
      const bucketed = body.level > 0;
      for (const series of body.series) {
        const later = segments.filter((s) => s.index > series.segment).map((s) => s.start_step);
        const cut = later.length ? Math.min(...later) : Infinity;
        let split = series.step.findIndex((s) => s >= cut);
        if (split < 0) split = series.step.length;
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
          const group = src.id + "|" + series.segment + "|" + part.abandoned;
          const steps = series.step.slice(part.from, part.to);
          const x = steps.map((s) => xmap.toPlot(xmap.toX(s)));
          const raw = (bucketed ? series.mean : series.last).slice(part.from, part.to).map(finite);
          const indices = {};
          if (bucketed) {
            indices.hi = traces.length;
            traces.push({
              type: "scatter", mode: "lines", x, y: series.max.slice(part.from, part.to).map(finite),
              line: { width: 0, color: c }, name: safe + " max", legendgroup: group, showlegend: false,
              hovertemplate: "max %{y:.6g}<extra>" + safe + "</extra>",
            });
            indices.lo = traces.length;
            traces.push({
              type: "scatter", mode: "lines", x, y: series.min.slice(part.from, part.to).map(finite),
              fill: "tonexty", fillcolor: alpha(c, part.abandoned ? 0.12 : 0.18),
              line: { width: 0, color: c }, name: safe + " min", legendgroup: group, showlegend: false,
              hovertemplate: "min %{y:.6g}<extra>" + safe + "</extra>",
            });
          }
          indices.raw = traces.length;
          traces.push({
            type: "scatter", mode: steps.length <= 80 ? "lines+markers" : "lines", x, y: raw,
            line: { width: 1, color: alpha(c, part.abandoned ? 0.5 : 0.35) },
            marker: { size: 4, color: alpha(c, 0.6) },
            name: safe + (bucketed ? " mean" : ""), legendgroup: group, showlegend: false,
            hovertemplate: (bucketed ? "mean " : "") + "%{y:.6g}<extra>" + safe + "</extra>",
            meta: { role: "raw", source: src.index, segment: series.segment, abandoned: part.abandoned },
          });
          const smooth = ema(raw, weight);
          indices.smooth = traces.length;
          traces.push({
            type: "scatter", mode: "lines", x, y: smooth.y,
            line: { width: part.abandoned ? 1.5 : 2, color: c, dash: part.abandoned ? "dot" : dash },
            name: safe, legendgroup: group, showlegend: true,
            hovertemplate: "smoothed %{y:.6g}<extra>" + safe + "</extra>",
            meta: { role: "smooth", source: src.index, segment: series.segment, abandoned: part.abandoned },
          });
          if (!part.abandoned) {
            this.live.set(src.id + "|" + series.segment, {
              indices, bucketed, ema: smooth.state, lastStep: steps.length ? steps[steps.length - 1] : -1,
              lastBucketEnd: bucketed ? series.last_step[part.to - 1] : -1,
            });
          }
        }
      }
    }
    this.level = level;
    this.bucketWidth = bucketWidth;
    return traces;
  }

  markerTrace() {
    if (!this.markers.length) return null;
    const xmap = this.view.xmapFor(this.sources[0].run);
    const x = [];
    const text = [];
    const symbols = [];
    const colors = [];
    for (const m of this.markers) {
      const xv = xmap.toPlot(xmap.toX(m.step));
      if (xv === null) continue;
      const style = markerStyle(m.type);
      x.push(xv);
      text.push(escapeHtml(style.name + " @ step " + m.step + (m.label ? ": " + m.label : "")).replace(/\n/g, "<br>"));
      symbols.push(style.symbol);
      colors.push(style.color);
    }
    return {
      type: "scatter", mode: "markers", x, y: x.map(() => 0.97), yaxis: "y2", text,
      hovertemplate: "%{text}<extra></extra>", showlegend: false, name: "timeline",
      marker: { size: 10, symbol: symbols, color: colors, line: { width: 1, color: colors } },
      meta: { role: "markers" },
    };
  }

  layout() {
    const t = theme();
    const xmap = this.view.xmapFor(this.sources[0].run);
    const range = this.view.range;
    const xaxis = {
      title: { text: escapeHtml(xmap.axisTitle) }, gridcolor: t.grid, zeroline: false,
      type: xmap.epoch ? "date" : "linear",
    };
    if (range) {
      xaxis.range = [xmap.toPlot(range[0]), xmap.toPlot(range[1])];
      xaxis.autorange = false;
    } else xaxis.autorange = true;
    const yaxis = { type: this.view.log ? "log" : "linear", gridcolor: t.grid, zeroline: false, exponentformat: "power" };
    if (this.yRange) {
      yaxis.range = this.yRange;
      yaxis.autorange = false;
    } else yaxis.autorange = true;
    const shapes = [];
    if (this.markers.length <= 300) {
      for (const m of this.markers) {
        const xv = xmap.toPlot(xmap.toX(m.step));
        if (xv === null) continue;
        shapes.push({
          type: "line", xref: "x", yref: "paper", x0: xv, x1: xv, y0: 0, y1: 1, layer: "below",
          line: { width: 1, dash: "dot", color: alpha(markerStyle(m.type).color, 0.7) },
        });
      }
    }
    return {
      title: { text: escapeHtml(this.title), x: 0, xanchor: "left", font: { size: 14 } },
      margin: { l: 60, r: 16, t: 36, b: 44 },
      paper_bgcolor: t.bg, plot_bgcolor: t.bg, font: { color: t.fg },
      hovermode: "x unified", hoverlabel: { bgcolor: t.hoverbg, font: { color: t.fg } },
      xaxis, yaxis,
      yaxis2: { overlaying: "y", range: [0, 1], visible: false, fixedrange: true },
      shapes,
      showlegend: true,
      legend: { orientation: "h", x: 0, y: -0.16, yanchor: "top", xanchor: "left", bgcolor: "rgba(0,0,0,0)", font: { size: 11 } },
    };
  }

  render() {
    const previous = new Map((this.div.data || []).map((tr) => [tr.name, tr.visible]));
    const traces = this.buildTraces();
    const markers = this.markerTrace();
    if (markers) traces.push(markers);
    for (const tr of traces) {
      const visible = previous.get(tr.name);
      if (visible !== undefined && visible !== true) tr.visible = visible;
    }
    const layout = this.layout();
    const first = !this.drawn;
    const drawn = Plotly.react(this.div, traces, layout, {
      responsive: true, displaylogo: false, modeBarButtonsToRemove: ["select2d", "lasso2d"],
    });
    if (first) {
      this.drawn = true;
      this.div.on("plotly_relayout", (ev) => this.onRelayout(ev));
      if (this.onDrawn) Promise.resolve(drawn).then(() => this.onDrawn(this));
    }
    if (this.noteEl) {
      const total = traces.filter((t) => t.meta && t.meta.role === "raw").reduce((n, t) => n + t.x.length, 0);
      this.noteEl.textContent = total === 0
        ? "No points in this range yet."
        : this.level > 0
          ? `${total.toLocaleString()} buckets of ${this.bucketWidth.toLocaleString()} steps: line = mean, band = min–max.`
          : `${total.toLocaleString()} points (every logged step).`;
    }
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

  /** The shared range changed (here or on another chart): follow it and fetch its points. */
  applyRange(range) {
    if (!this.drawn) return;
    const current = this.currentPlotRange();
    if (!rangesEqual(current, range)) {
      const xmap = this.view.xmapFor(this.sources[0].run);
      if (range === null) Plotly.relayout(this.div, { "xaxis.autorange": true });
      else Plotly.relayout(this.div, { "xaxis.range": [xmap.toPlot(range[0]), xmap.toPlot(range[1])] });
    }
    if (!rangesEqual(this.fetchedRange ?? null, range)) this.scheduleFetch();
  }

  currentPlotRange() {
    const ax = this.div.layout && this.div.layout.xaxis;
    if (!ax || ax.autorange === true || !ax.range) return null;
    const xmap = this.view.xmapFor(this.sources[0].run);
    return [xmap.fromPlot(ax.range[0]), xmap.fromPlot(ax.range[1])];
  }

  /** Live points of one run: [{key, segment, step: [], value: []}] (values wire-encoded). */
  append(run, points) {
    let any = false;
    for (const p of points) {
      const src = this.sources.find((s) => s.run === run && s.key === p.key);
      if (!src) continue;
      this.pending.push({ src, p });
      if (this.replay) this.replay.push({ src, p });
      any = true;
    }
    if (any && !this.frame) this.frame = requestAnimationFrame(() => this.flush());
  }

  /** Draw every point queued since the last frame with one extendTraces. */
  flush() {
    this.frame = 0;
    if (!this.drawn) return; // kept in pending: the first fetch queues them again
    const batch = this.pending;
    this.pending = [];
    const weight = this.view.smoothing;
    const updates = new Map(); // trace index -> {x: [], y: []}
    const add = (index, x, y) => {
      let u = updates.get(index);
      if (!u) updates.set(index, (u = { x: [], y: [] }));
      u.x.push(x);
      u.y.push(y);
    };
    let missing = false;
    for (const { src, p } of batch) {
      const target = this.live.get(src.id + "|" + p.segment);
      if (!target) {
        missing = true;
        continue;
      }
      const xmap = this.view.xmapFor(src.run);
      const range = this.view.range;
      for (let i = 0; i < p.step.length; i++) {
        const step = p.step[i];
        if (step <= target.lastStep || step <= target.lastBucketEnd) continue; // already drawn
        const xv = xmap.toX(step);
        if (range && xv > range[1] + (range[1] - range[0]) * PAD) continue; // right of a zoomed view
        target.lastStep = step;
        const y = finite(decode(p.value[i]));
        const x = xmap.toPlot(xv);
        add(target.indices.raw, x, y);
        add(target.indices.smooth, x, emaStep(target.ema, y, weight));
        if (target.bucketed) {
          add(target.indices.hi, x, y);
          add(target.indices.lo, x, y);
        }
        this.appended += 1;
      }
    }
    if (updates.size) {
      const indices = [...updates.keys()];
      Plotly.extendTraces(this.div, { x: indices.map((i) => updates.get(i).x), y: indices.map((i) => updates.get(i).y) }, indices);
    }
    const longest = Math.max(0, ...(this.div.data || []).map((t) => (t.x ? t.x.length : 0)));
    // Following a bucketed view, or past the bound: swap the raw tail for the rolled-up view.
    const bound = this.level > 0 ? Math.max(200, this.pixelWidth() / 2) : MAX_TRACE_POINTS;
    const cap = Math.min(MAX_TRACE_POINTS, 4 * this.pixelWidth());
    if (missing || longest > cap || this.appended > bound) this.scheduleFetch();
  }

  /** Points drawn in raw traces (tests read this). */
  pointCount() {
    return (this.div.data || []).filter((t) => t.meta && t.meta.role === "raw").reduce((n, t) => n + t.x.length, 0);
  }
}

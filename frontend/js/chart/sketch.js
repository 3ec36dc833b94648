// A light drawing of a metric chart on a canvas, painted before Plotly.js has loaded: the very
// traces Plotly will get (chart/traces.js), on the axes ranges Plotly's autorange and auto ticks
// give them (plots/cartesian/autorange.js, axes.js of Plotly.js 2-4), in the same plot box,
// colours and size, so that the curve shows at once and nothing moves when Plotly's chart
// replaces it (chart.js). Hover, zoom and the toolbar come with Plotly. Linear x axes only: a
// date axis (wall time) waits for Plotly.

import { theme } from "../util.js";

const FAMILY = '"Open Sans", verdana, arial, sans-serif';
const DRAWN = new Set(["max", "min", "raw", "smooth", "band"]);
const MARKERS = new Set(["markers", "anomalies"]); // the timeline's lanes, on the y2 axis (0-1)
const MINUS = "\u2212";
// Room beside the widest y tick label: Plotly's automargin gave 66 px for labels 56.8 px wide.
const LABEL_ROOM = 10;
// Plotly draws 5 to 10 ticks an axis; more than this means a range the sketch cannot tick.
const MAX_TICKS = 50;

/** Whether a chart of this layout and these traces can be sketched (a linear x axis, data traces). */
export function canSketch(layout, traces) {
  return layout.xaxis.type === "linear" && traces.some((t) => DRAWN.has(t.meta && t.meta.role));
}

const num = (v) => (typeof v === "number" && Number.isFinite(v) ? v : null);

/** A trace's values on one axis as the axis reads them (log10 on a log axis; null where none). */
function axisValues(values, log) {
  return values.map((v) => {
    const n = num(v);
    if (n === null) return null;
    if (!log) return n;
    return n > 0 ? Math.log10(n) : null;
  });
}

/**
 * Plotly's autorange of one axis over these traces: each trace's min and max with its padding
 * (5 % of the axis length unless Plotly leaves it unpadded: x of a line without markers or of a
 * `tonexty` fill; 3 px more for markers), then the pair of extremes that needs the most room.
 */
export function autorange(traces, axis, length, log = false) {
  const mins = [];
  const maxs = [];
  for (const tr of traces) {
    if (axis === "y" && tr.yaxis === "y2") continue; // the markers' lanes
    if (!axisValues(axis === "x" ? tr.x : tr.y, log).some((v) => v !== null)) continue;
    const markers = /markers/.test(tr.mode || "");
    const unpaddedX = axis === "x" && (tr.fill === "tonexty" || !markers);
    // Plotly's marker padding: size / 1.6 px, at least 3 (scatter/calc.js, calcMarkerSize).
    const size = markers && tr.marker ? tr.marker.size : 0;
    const padAt = (i) => (markers && !unpaddedX ? Math.max((Array.isArray(size) ? size[i] : size) / 1.6 || 0, 3) : 0);
    const all = axisValues(axis === "x" ? tr.x : tr.y, log);
    let lo = Infinity;
    let hi = -Infinity;
    let at = [0, 0];
    all.forEach((v, i) => {
      if (v === null) return;
      if (v < lo) [lo, at[0]] = [v, i];
      if (v > hi) [hi, at[1]] = [v, i];
    });
    mins.push({ val: lo, pad: padAt(at[0]), extrapad: !unpaddedX });
    maxs.push({ val: hi, pad: padAt(at[1]), extrapad: !unpaddedX });
  }
  if (!mins.length) return null;
  const extra = 0.05 * length;
  const padOf = (pt) => (pt.nopad ? 0 : pt.pad + (pt.extrapad ? extra : 0));
  const minmin = Math.min(...mins.map((p) => p.val));
  const maxmax = Math.max(...maxs.map((p) => p.val));
  if (minmin === maxmax) return axis === "y" && !log && minmin !== 0 ? flatRange(minmin) : [minmin - 1, minmin + 1];
  let best = 0;
  let lo = null;
  let hi = null;
  for (const a of mins) {
    for (const b of maxs) {
      const dv = b.val - a.val;
      if (dv <= 0) continue;
      const dp = length - padOf(a) - padOf(b);
      if (dp > length / 10) {
        if (dv / dp > best) [lo, hi, best] = [a, b, dv / dp];
      } else if (dv / length > best) [lo, hi, best] = [{ val: a.val, nopad: 1 }, { val: b.val, nopad: 1 }, dv / length];
    }
  }
  best = (hi.val - lo.val) / (length - padOf(lo) - padOf(hi));
  return [lo.val - best * padOf(lo), hi.val + best * padOf(hi)];
}

/**
 * The one value every drawn point of `traces` has on a linear y axis, else null (0 too: Plotly's
 * [-1, 1] suits it). Plotly would centre such a series on an axis from v - 1 to v + 1, where a flat
 * learning rate of 3e-4 reads as zero; the chart gives it `flatRange(v)` instead (layout.js).
 */
export function flatLevel(traces, log) {
  if (log) return null;
  let level = null;
  for (const tr of traces) {
    if (!DRAWN.has(tr.meta && tr.meta.role) || tr.yaxis === "y2") continue;
    for (const v of tr.y) {
      if (typeof v !== "number" || !Number.isFinite(v)) continue;
      if (level === null) level = v;
      else if (v !== level) return null;
    }
  }
  return level === 0 ? null : level;
}

/** The y range of a series flat at `v` (not 0): a tenth of |v| either side. */
export function flatRange(v) {
  const pad = 0.1 * Math.abs(v);
  return [v - pad, v + pad];
}

/** Plotly's auto ticks of a linear axis: a step of 1, 2 or 5 times a power of ten, from 0. */
export function autoTicks(range, length, axis) {
  const count = Math.max(4, Math.min(9, length / (axis === "y" ? 40 : 80))) + 1;
  const rough = Math.abs(range[1] - range[0]) / count;
  const base = Math.pow(10, Math.floor(Math.log10(rough)));
  const ratio = rough / base;
  const dtick = base * (ratio <= 2 ? 2 : ratio <= 5 ? 5 : 10);
  const lo = Math.min(range[0], range[1]);
  const hi = Math.max(range[0], range[1]);
  const values = [];
  const first = Math.ceil(lo / dtick - 1e-9);
  const last = Math.floor(hi / dtick + 1e-9);
  // A range this arithmetic cannot tick (zero wide, or too narrow for its magnitude: the step
  // vanishes beside the values) gets none, and the chart waits for Plotly (sketchChart).
  if (!Number.isSafeInteger(first) || !Number.isSafeInteger(last) || last - first > MAX_TICKS) return { values, dtick };
  for (let i = first; i <= last; i++) values.push(i * dtick);
  return { values, dtick };
}

/**
 * A tick's label as Plotly writes it: digits as the step needs them (no trailing zeros), a
 * U+2212 minus, and beyond 10^±3 an exponent: SI suffixes on x (exponentformat "B"), powers
 * of ten on y ("power").
 */
export function tickLabel(v, dtick, range, axis) {
  const top = Math.max(Math.abs(range[0]), Math.abs(range[1]));
  const rangeExp = Math.floor(Math.log10(top) + 0.01);
  let exp = 0;
  if (Math.abs(rangeExp) > 3) exp = axis === "x" && rangeExp > 0 && rangeExp < 15 ? 3 * Math.round((rangeExp - 1) / 3) : rangeExp;
  if (Math.abs(v) < dtick * 1e-6) return "0";
  const scaled = v / Math.pow(10, exp);
  const digits = Math.max(0, -Math.floor(Math.log10(dtick / Math.pow(10, exp)) + 1e-9));
  let text = String(Number(scaled.toFixed(Math.min(15, digits))));
  text = text.replace("-", MINUS);
  if (!exp) return text;
  if (axis === "x") return text + ({ 3: "k", 6: "M", 9: "G", 12: "T" }[exp] || "");
  const power = "10^" + String(exp).replace("-", MINUS); // "^": the rest is a superscript (drawLabel)
  return text === "1" ? power : text + "\u00d7" + power;
}

/** A label's width at `size` px, its superscript (after "^") at 70 % as Plotly sets it. */
function labelWidth(ctx, text, size) {
  const [base, sup] = text.split("^");
  ctx.font = `${size}px ${FAMILY}`;
  let w = ctx.measureText(base).width;
  if (sup) {
    ctx.font = `${size * 0.7}px ${FAMILY}`;
    w += ctx.measureText(sup).width;
    ctx.font = `${size}px ${FAMILY}`;
  }
  return w;
}

/** A label right-aligned at x, centred on y. */
function drawLabel(ctx, text, x, y, size) {
  const [base, sup] = text.split("^");
  const w = labelWidth(ctx, text, size);
  ctx.textAlign = "left";
  ctx.fillText(base, x - w, y);
  if (sup) {
    const bw = ctx.measureText(base).width;
    ctx.font = `${size * 0.7}px ${FAMILY}`;
    ctx.fillText(sup, x - w + bw, y - size * 0.35);
    ctx.font = `${size}px ${FAMILY}`;
  }
}

let measure = null;

/**
 * The left margin the y axis's tick labels need (the widest label and Plotly's gap around it),
 * at least `base`: the chart sets it itself (layout.js) so that Plotly's automargin has nothing
 * to grow and the light drawing's box is Plotly's.
 */
export function leftMargin(traces, plotHeight, log, base) {
  const data = traces.filter((t) => DRAWN.has(t.meta && t.meta.role));
  const yrange = autorange(data, "y", plotHeight, log); // a flat series' flatRange too, as the layout has it
  if (!yrange) return base;
  if (!measure) measure = document.createElement("canvas").getContext("2d");
  const labels = yLabels(yrange, plotHeight, log);
  const widest = Math.max(0, ...labels.map((l) => labelWidth(measure, l.text, 12)));
  return Math.max(base, Math.ceil(widest + LABEL_ROOM));
}

function yLabels(yrange, length, log) {
  if (log) return logTicks(yrange).values.map((v) => ({ v, text: tickLabel(Math.pow(10, v), Math.pow(10, v), [Math.pow(10, v), Math.pow(10, v)], "y") }));
  const { values, dtick } = autoTicks(yrange, length, "y");
  return values.map((v) => ({ v, text: tickLabel(v, dtick, yrange, "y") }));
}

// Plotly's dash patterns (components/drawing: dashStyle), scaled by the line's width.
function dashPattern(dash, width) {
  const w = Math.max(width, 3);
  return { dot: [w, w], dash: [3 * w, 3 * w], longdash: [5 * w, 5 * w], dashdot: [3 * w, w, w, w], longdashdot: [5 * w, 2 * w, w, 2 * w] }[dash] || [];
}

const unescape = (s) => String(s).replace(/&#(\d+);/g, (_, n) => String.fromCharCode(Number(n)))
  .replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&");

/**
 * Paint the chart into `div` (its children replaced by one canvas): the data traces of
 * `traces` with `layout`'s margins and axis types. Returns what was drawn: the plot box (CSS
 * px from the div's top left), both axes' ranges (log10 units on a log y axis, as Plotly's
 * `_fullLayout.yaxis.range`), and each drawn trace's points; null, painting nothing, for a range it cannot tick.
 */
export function sketchChart(div, traces, layout) {
  const width = div.clientWidth;
  const height = div.clientHeight;
  const m = layout.margin;
  const box = { l: m.l, t: m.t, w: Math.max(1, width - m.l - m.r), h: Math.max(1, height - m.t - m.b) };
  const log = layout.yaxis.type === "log";
  const data = traces.filter((t) => DRAWN.has(t.meta && t.meta.role));
  const lanes = traces.filter((t) => MARKERS.has(t.meta && t.meta.role));
  const xrange = layout.xaxis.autorange === false && layout.xaxis.range ? layout.xaxis.range.slice() : autorange([...data, ...lanes], "x", box.w);
  const yrange = layout.yaxis.autorange === false && layout.yaxis.range ? layout.yaxis.range.slice() : autorange(data, "y", box.h, log);
  const increasing = (r) => Array.isArray(r) && Number.isFinite(r[0]) && Number.isFinite(r[1]) && r[1] > r[0];
  if (!increasing(xrange) || !increasing(yrange) || !autoTicks(xrange, box.w, "x").values.length) return null;
  const canvas = document.createElement("canvas");
  canvas.className = "sketch";
  const dpr = window.devicePixelRatio || 1;
  canvas.width = Math.round(width * dpr);
  canvas.height = Math.round(height * dpr);
  canvas.style.cssText = `display:block;width:${width}px;height:${height}px`;
  const ctx = canvas.getContext("2d");
  ctx.scale(dpr, dpr);
  const colours = theme();
  const px = (x) => box.l + ((x - xrange[0]) / (xrange[1] - xrange[0])) * box.w;
  const py = (y) => box.t + box.h - ((y - yrange[0]) / (yrange[1] - yrange[0])) * box.h;

  // Grid and tick labels (no tick marks, no zero line: the chart's layout).
  ctx.font = `12px ${FAMILY}`;
  ctx.fillStyle = colours.fg;
  ctx.strokeStyle = colours.grid;
  ctx.lineWidth = 1;
  const xt = autoTicks(xrange, box.w, "x");
  ctx.textAlign = "center";
  ctx.textBaseline = "top";
  for (const v of xt.values) {
    const x = Math.round(px(v)) + 0.5;
    ctx.beginPath();
    ctx.moveTo(x, box.t);
    ctx.lineTo(x, box.t + box.h);
    ctx.stroke();
    ctx.fillText(tickLabel(v, xt.dtick, xrange, "x"), px(v), box.t + box.h + 4);
  }
  ctx.textBaseline = "middle";
  for (const { v, text } of yLabels(yrange, box.h, log)) {
    const y = Math.round(py(v)) + 0.5;
    ctx.beginPath();
    ctx.moveTo(box.l, y);
    ctx.lineTo(box.l + box.w, y);
    ctx.stroke();
    drawLabel(ctx, text, box.l - 1, py(v), 12);
  }
  const title = unescape((layout.xaxis.title && layout.xaxis.title.text) || "");
  if (title) {
    ctx.font = `14px ${FAMILY}`;
    ctx.textAlign = "center";
    ctx.textBaseline = "top";
    ctx.fillText(title, box.l + box.w / 2, box.t + box.h + 13 + (layout.xaxis.title.standoff || 0));
  }

  // The traces, clipped to the plot box as Plotly clips them; the events' dotted lines below.
  ctx.save();
  ctx.beginPath();
  ctx.rect(box.l, box.t, box.w, box.h);
  ctx.clip();
  for (const shape of layout.shapes || []) {
    if (shape.type !== "line" || shape.xref !== "x") continue;
    const x = px(shape.x0);
    strokeLine(ctx, [[x, box.t], [x, box.t + box.h]], shape.line);
  }
  const drawn = [];
  let previous = null;
  for (const tr of data) {
    const ys = axisValues(tr.y, log);
    const pts = [];
    for (let i = 0; i < tr.x.length; i++) pts.push(num(tr.x[i]) === null || ys[i] === null ? null : [px(tr.x[i]), py(ys[i])]);
    if (tr.fill === "tonexty" && previous) fillBetween(ctx, previous, pts, tr.fillcolor);
    const line = tr.line || {};
    if ((line.width ?? 2) > 0) strokeLine(ctx, pts, line);
    if (/markers/.test(tr.mode || "")) {
      ctx.fillStyle = (tr.marker && tr.marker.color) || line.color;
      const r = ((tr.marker && tr.marker.size) || 6) / 2;
      for (const p of pts) {
        if (!p) continue;
        ctx.beginPath();
        ctx.arc(p[0], p[1], r, 0, 2 * Math.PI);
        ctx.fill();
      }
    }
    previous = pts;
    drawn.push({ role: tr.meta.role, key: tr.meta.key, segment: tr.meta.segment, x: tr.x.slice(), y: tr.y.slice() });
  }
  for (const tr of lanes) {
    const at = (v, i) => (Array.isArray(v) ? v[i] : v);
    tr.x.forEach((x, i) => {
      ctx.fillStyle = at(tr.marker.color, i);
      ctx.beginPath();
      ctx.arc(px(x), box.t + box.h * (1 - tr.y[i]), at(tr.marker.size, i) / 2, 0, 2 * Math.PI);
      ctx.fill();
    });
  }
  ctx.restore();
  legend(ctx, traces.filter((t) => t.showlegend), box, height);
  div.replaceChildren(canvas);
  return { box, xrange, yrange, traces: drawn };
}

function logTicks(range) {
  const values = [];
  const first = Math.ceil(range[0]);
  if (!Number.isSafeInteger(first) || !Number.isFinite(range[1]) || range[1] - first > MAX_TICKS) return { values, dtick: 1 };
  for (let e = first; e <= range[1]; e++) values.push(e);
  return { values, dtick: 1 };
}

function strokeLine(ctx, pts, line) {
  ctx.strokeStyle = line.color;
  ctx.lineWidth = line.width ?? 2;
  ctx.lineJoin = "round";
  ctx.setLineDash(dashPattern(line.dash, ctx.lineWidth));
  ctx.beginPath();
  let pen = false;
  for (const p of pts) {
    if (!p) {
      pen = false;
      continue;
    }
    if (pen) ctx.lineTo(p[0], p[1]);
    else ctx.moveTo(p[0], p[1]);
    pen = true;
  }
  ctx.stroke();
  ctx.setLineDash([]);
}

/** A `tonexty` fill: the area between this trace and the one before it. */
function fillBetween(ctx, upper, lower, colour) {
  const top = upper.filter(Boolean);
  const bottom = lower.filter(Boolean);
  if (!top.length || !bottom.length) return;
  ctx.fillStyle = colour;
  ctx.beginPath();
  ctx.moveTo(top[0][0], top[0][1]);
  for (const p of top) ctx.lineTo(p[0], p[1]);
  for (let i = bottom.length - 1; i >= 0; i--) ctx.lineTo(bottom[i][0], bottom[i][1]);
  ctx.closePath();
  ctx.fill();
}

/** The horizontal legend under the axis title, one row as Plotly lays it out when it fits. */
function legend(ctx, items, box, height) {
  ctx.font = `11px ${FAMILY}`;
  ctx.textAlign = "left";
  ctx.textBaseline = "middle";
  let x = box.l;
  const y = height - 13.5;
  for (const tr of items) {
    const name = unescape(tr.name);
    strokeLine(ctx, [[x + 5, y], [x + 35, y]], { ...tr.line, width: Math.min(tr.line.width ?? 2, 5) });
    ctx.fillStyle = theme().fg;
    ctx.fillText(name, x + 40, y);
    x += 45 + ctx.measureText(name).width;
  }
}

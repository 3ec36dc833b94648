// A histogram key over steps as a heat map on a canvas, as TensorBoard users read it: the step
// across, the value up, each step's bins drawn at their own edges (the SDK bins each step
// between its own min and max: nothing is re-binned), coloured by density (count per unit
// of value) against the step's densest bin. Drawn here rather than by Plotly.js: the partial
// bundle the pages load has no heatmap trace.

import { formatValue } from "../util.js";
import { formatNumber } from "../i18n.js";

const MARGIN = { left: 58, right: 12, top: 8, bottom: 30 };
// Viridis: readable in light and dark, and in grey.
const STOPS = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];

function colour(t) {
  const x = Math.max(0, Math.min(1, t)) * (STOPS.length - 1);
  const i = Math.min(STOPS.length - 2, Math.floor(x));
  const f = x - i;
  const c = STOPS[i].map((v, k) => Math.round(v + (STOPS[i + 1][k] - v) * f));
  return `rgb(${c[0]},${c[1]},${c[2]})`;
}

/** About `n` round numbers between `lo` and `hi` (whole numbers only, with `whole`). */
export function ticks(lo, hi, n, whole = false) {
  const span = hi - lo;
  if (!(span > 0)) return [lo];
  const raw = whole ? Math.max(1, span / n) : span / n;
  const unit = 10 ** Math.floor(Math.log10(raw));
  const step = unit * ([1, 2, 5, 10].find((m) => m * unit >= raw) || 10);
  // Counted in whole steps: a step too small beside the values (a narrow range far from 0) would
  // never advance `v += step`.
  const first = Math.ceil(lo / step);
  const last = Math.floor(hi / step + 1e-9);
  if (!Number.isSafeInteger(first) || !Number.isSafeInteger(last) || last - first > 4 * n + 10) return [lo];
  const out = [];
  for (let i = first; i <= last; i++) out.push(Number((i * step).toPrecision(12)));
  return out;
}

/** Each row's span of steps, centred on its step: from halfway to the step before to halfway to
 * the next (an end row mirrors its neighbour's gap; a lone row: its step ± 0.5). */
export function spans(rows) {
  const gap = (i) => (rows.length < 2 ? 1 : i + 1 < rows.length ? rows[i + 1].step - rows[i].step : rows[i].step - rows[i - 1].step);
  return rows.map((r, i) => [
    i > 0 ? (rows[i - 1].step + r.step) / 2 : r.step - gap(0) / 2,
    i + 1 < rows.length ? (r.step + rows[i + 1].step) / 2 : r.step + gap(i) / 2,
  ]);
}

/** Where rows go on a canvas of `width` × `height` CSS pixels (`left`: room for the value labels): the axes' ranges and scales. */
export function layout(rows, width, height, left = MARGIN.left) {
  const lo = Math.min(...rows.map((r) => r.edges[0]));
  const hi = Math.max(...rows.map((r) => r.edges[r.edges.length - 1]));
  const columns = spans(rows);
  const x0 = columns[0][0];
  const x1 = columns[columns.length - 1][1];
  const plot = { left, top: MARGIN.top, width: width - left - MARGIN.right, height: height - MARGIN.top - MARGIN.bottom };
  return {
    lo, hi, x0, x1, plot, columns,
    x: (step) => plot.left + ((step - x0) / (x1 - x0)) * plot.width,
    y: (v) => plot.top + plot.height - ((v - lo) / (hi - lo || 1)) * plot.height,
  };
}

/** Draw `rows` (histogram media rows, oldest first) on `canvas` with the x axis titled `xTitle`; returns the layout. */
export function drawHeatmap(canvas, rows, theme, xTitle) {
  const dpr = window.devicePixelRatio || 1;
  const width = canvas.clientWidth;
  const height = canvas.clientHeight;
  canvas.width = Math.round(width * dpr);
  canvas.height = Math.round(height * dpr);
  const ctx = canvas.getContext("2d");
  ctx.scale(dpr, dpr);
  ctx.font = "11px system-ui, sans-serif";
  let at = layout(rows, width, height);
  // The value labels' room: a small gradient's "-2.000e-4" is wider than the default margin.
  const labels = ticks(at.lo, at.hi, 5).map((v) => [v, formatValue(v)]);
  const room = Math.ceil(Math.max(0, ...labels.map(([, text]) => ctx.measureText(text).width))) + 8;
  if (room > at.plot.left) at = layout(rows, width, height, room);
  rows.forEach((row, i) => {
    const xa = at.x(at.columns[i][0]);
    const xb = at.x(at.columns[i][1]);
    const density = row.counts.map((c, j) => c / (row.edges[j + 1] - row.edges[j]));
    const top = Math.max(...density);
    density.forEach((d, j) => {
      if (!(d > 0)) return;
      ctx.fillStyle = colour(d / top);
      const ya = at.y(row.edges[j + 1]);
      ctx.fillRect(xa, ya, Math.max(1, xb - xa), Math.max(1, at.y(row.edges[j]) - ya));
    });
  });
  ctx.strokeStyle = theme.grid;
  ctx.fillStyle = theme.fg;
  ctx.strokeRect(at.plot.left, at.plot.top, at.plot.width, at.plot.height);
  ctx.textAlign = "right";
  ctx.textBaseline = "middle";
  for (const [v, text] of labels) ctx.fillText(text, at.plot.left - 4, at.y(v));
  ctx.textAlign = "center";
  ctx.textBaseline = "top";
  for (const s of ticks(at.x0, at.x1, 6, true)) ctx.fillText(formatNumber(s), at.x(s), at.plot.top + at.plot.height + 4);
  ctx.fillText(xTitle, at.plot.left + at.plot.width / 2, at.plot.top + at.plot.height + 17);
  return at;
}

/** The row and bin under (px, py) of a drawn layout, or null. */
export function cellAt(rows, at, px, py) {
  if (px < at.plot.left || px > at.plot.left + at.plot.width) return null;
  let i = 0;
  while (i + 1 < rows.length && at.x(at.columns[i][1]) <= px) i++;
  const row = rows[i];
  const v = at.lo + ((at.plot.top + at.plot.height - py) / at.plot.height) * (at.hi - at.lo);
  const bin = row.edges.findIndex((e, j) => j + 1 < row.edges.length && v >= e && v < row.edges[j + 1]);
  return { row, bin };
}

// The Plotly traces of a metric chart's sources, built from the store's entries.
//
// Each segment of a run is drawn in its own colour; the points of a segment that a later
// segment replaced (branch.js: steps after its start_step) are the abandoned branch, drawn grey.
// Per part: a min–max band (when bucketed, so a one-step spike shows at any zoom), the raw
// values (or bucket means) faint and a smoothed line (debiased EMA, as TensorBoard draws it).
// Each trace's `meta` says what it is (role: max, min, raw, smooth, band; its run and key).

import { GREY, alpha, color, escapeHtml } from "../util.js";
import { abandonedFrom } from "../branch.js";
import { ema } from "./smoothing.js";
import { t } from "../i18n.js";

// A hover line: the value in the catalog's words ("max %{y:.6g}"), the series' name in the box's corner.
const hover = (key, safeName) => t(key, { y: "%{y:.6g}" }) + "<extra>" + safeName + "</extra>";

const DASHES = ["solid", "dash", "dot", "dashdot", "longdash"];

const finite = (v) => (v === null || v === undefined || !Number.isFinite(v) ? null : v);

/**
 * Every trace of the sources whose entries are ready, with the coarsest bucket level and width
 * among them. view: {smoothing, xmapFor(run), segmentsOf(run), colorBy, band}.
 */
export function sourceTraces(sources, view) {
  const traces = [];
  const weight = view.smoothing;
  let level = 0;
  let bucketWidth = 1;
  for (const src of sources) {
    const entry = src.entry;
    if (!entry.ready) continue;
    level = Math.max(level, entry.level);
    bucketWidth = Math.max(bucketWidth, entry.bucketWidth);
    const xmap = view.xmapFor(src.run);
    const segments = view.segmentsOf(src.run) || [];
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
        const colourIndex = view.colorBy === "segment" && multiSeg ? series.segment : src.index;
        const c = part.abandoned ? GREY : color(colourIndex);
        const dash = view.colorBy === "segment" ? DASHES[src.index % DASHES.length] : "solid";
        let name = src.label;
        if (multiSeg) name = t("trace.segment", { name, segment: String(series.segment) });
        if (part.abandoned) name = t("trace.abandoned", { name });
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
            hovertemplate: hover("trace.max", safe), meta: meta("max"),
          });
          traces.push({
            type: "scatter", mode: "lines", x, y: series.min.slice(part.from, part.to).map(finite),
            fill: "tonexty", fillcolor: alpha(c, part.abandoned ? 0.12 : 0.18),
            line: { width: 0, color: c }, name: safe + " min", legendgroup: group, showlegend: false,
            hovertemplate: hover("trace.min", safe), meta: meta("min"),
          });
        }
        traces.push({
          type: "scatter", mode: steps.length <= 80 ? "lines+markers" : "lines", x, y: raw,
          line: { width: 1, color: alpha(c, part.abandoned ? 0.5 : 0.35) },
          marker: { size: 4, color: alpha(c, 0.6) },
          name: safe + (bucketed ? " mean" : ""), legendgroup: group, showlegend: false,
          hovertemplate: bucketed ? hover("trace.mean", safe) : "%{y:.6g}<extra>" + safe + "</extra>",
          meta: meta("raw"),
        });
        traces.push({
          type: "scatter", mode: "lines", x, y: ema(raw, weight).y,
          line: { width: part.abandoned ? 1.5 : 2, color: c, dash: part.abandoned ? "dot" : dash },
          name: safe, legendgroup: group, showlegend: true,
          hovertemplate: hover("trace.smoothed", safe),
          meta: meta("smooth"),
        });
      }
    }
  }
  if (view.band) traces.unshift(...bandTraces(sources, view));
  return { traces, level, bucketWidth };
}

/**
 * With view.band (the System panel): the min–max across the sources, behind their lines. At
 * each step any source has, each source counts with its value at or before that step.
 */
function bandTraces(sources, view) {
  const ready = sources.filter((s) => s.entry.ready);
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
  const xmap = view.xmapFor(ready[0].run);
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
      showlegend: false, hovertemplate: hover("trace.max", escapeHtml(t("trace.allRanks"))), meta: meta("max") },
    { type: "scatter", mode: "lines", x, y: lo, line: { width: 0, color: GREY }, name: "min across ranks",
      fill: "tonexty", fillcolor: alpha(GREY, 0.25), showlegend: false,
      hovertemplate: hover("trace.min", escapeHtml(t("trace.allRanks"))), meta: meta("min") },
  ];
}

/** What makes a trace the same trace from one draw to the next (extendTraces needs the same). */
export function traceSignature(t) {
  const m = t.meta || {};
  return [m.role, m.run, m.key, m.segment, m.abandoned, t.mode, t.name].join("|");
}

/**
 * The part of a trace that must not change for an append-only draw. Marker lanes are redrawn,
 * never extended: any change in them (a regrouping) needs a react.
 */
export function fixedPart(t) {
  const role = t.meta && t.meta.role;
  if (role === "band") return JSON.stringify([t.x, t.y]); // a late point of one source can change it anywhere
  return role === "markers" || role === "anomalies" ? JSON.stringify([t.x, t.text, t.hovertext]) : null;
}

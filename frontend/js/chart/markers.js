// The timeline's markers on a metric chart: each event type's symbol and colour, the two lanes
// of markers at the top of the plot (events; anomalies, grouped when dense) and the dotted
// vertical line of each event.

import { GREY, alpha, escapeHtml } from "../util.js";
import { t } from "../i18n.js";

const GROUP_PX = 14; // anomaly markers closer than this are one marker
const GROUP_LIST = 12; // anomalies named in a group's hover text
const MAX_LINES = 300; // more events than this: no vertical lines (the lane's markers remain)
const LANE = { events: 0.96, anomalies: 0.86 };
const MARKER_STYLE = {
  restart: { symbol: "triangle-down", color: "#D55E00", name: "marker.restart" },
  checkpoint: { symbol: "diamond", color: "#009E73", name: "marker.checkpoint" },
  note: { symbol: "circle", color: "#CC79A7", name: "marker.note" },
  data_mix: { symbol: "square", color: "#E69F00", name: "marker.dataMix" },
  manifest: { symbol: "star", color: "#56B4E9", name: "marker.manifest" },
  code: { symbol: "hexagon", color: "#0072B2", name: "marker.code" },
  alert: { symbol: "x", color: "#D55E00", name: "marker.alert" },
  comment: { symbol: "triangle-up", color: "#6A3D9A", name: "marker.comment" },
  command: { symbol: "bowtie", color: "#000000", name: "marker.command" },
  finished: { symbol: "square-open", color: GREY, name: "marker.finished" },
};

/** The symbol, colour and name of an event type (an unknown type: an open grey circle). */
export function markerStyle(type) {
  const style = MARKER_STYLE[type];
  return style ? { ...style, name: t(style.name) } : { symbol: "circle-open", color: GREY, name: type };
}

/**
 * The markers' traces, in two lanes of the overlaid y2 axis: events, and anomalies grouped
 * when dense. xmap places a step on the plot; range (the view's, or null) and pixelWidth
 * measure "dense"; without a range the data traces' extent does.
 */
export function markerTraces(markers, xmap, { range, pixelWidth, dataTraces }) {
  if (!markers.length) return [];
  const placed = [];
  for (const m of markers) {
    const x = xmap.toPlot(xmap.toX(m.step));
    if (x === null || x === undefined || !Number.isFinite(Number(x))) continue;
    const style = markerStyle(m.type);
    const text = wrap(t(m.label ? "marker.hoverLabel" : "marker.hover", { name: style.name, step: String(m.step), label: m.label }))
      .map(escapeHtml).join("<br>");
    placed.push({ x, text, style, anomaly: m.type === "alert", id: m.id ?? null });
  }
  const out = [];
  const events = placed.filter((p) => !p.anomaly);
  if (events.length) {
    out.push({
      type: "scatter", mode: "markers", x: events.map((p) => p.x), y: events.map(() => LANE.events), yaxis: "y2",
      text: events.map((p) => p.text), hovertemplate: "%{text}<extra></extra>", showlegend: false, name: "timeline",
      customdata: events.map((p) => p.id), // a comment's id: a click opens its thread
      marker: { size: 10, symbol: events.map((p) => p.style.symbol), color: events.map((p) => p.style.color),
        line: { width: 1, color: events.map((p) => p.style.color) } },
      meta: { role: "markers" },
    });
  }
  const anomalies = placed.filter((p) => p.anomaly).sort((a, b) => a.x - b.x);
  if (anomalies.length) {
    const [lo, hi] = range ? [xmap.toPlot(range[0]), xmap.toPlot(range[1])] : extent(placed, dataTraces);
    const groups = groupAnomalies(anomalies, hi > lo ? (hi - lo) / pixelWidth() : 1);
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

/** The layout's shapes: a dotted vertical line at each event (anomalies have none). */
export function markerLines(markers, xmap) {
  const shapes = [];
  const lines = markers.filter((m) => m.type !== "alert");
  if (lines.length > MAX_LINES) return shapes;
  for (const m of lines) {
    const xv = xmap.toPlot(xmap.toX(m.step));
    if (xv === null) continue;
    shapes.push({
      type: "line", xref: "x", yref: "paper", x0: xv, x1: xv, y0: 0, y1: 1, layer: "below",
      line: { width: 1, dash: "dot", color: alpha(markerStyle(m.type).color, 0.7) },
    });
  }
  return shapes;
}

/** The plot x extent of the placed markers and the data traces' ends. */
function extent(placed, dataTraces) {
  const xs = [...placed.map((p) => p.x)];
  for (const t of dataTraces) if (t.x.length) xs.push(t.x[0], t.x[t.x.length - 1]);
  return [Math.min(...xs), Math.max(...xs)];
}

/** Anomalies (sorted by x) closer than GROUP_PX on screen become one marker whose hover lists them. */
function groupAnomalies(anomalies, perPixel) {
  const groups = [];
  for (const a of anomalies) {
    const g = groups[groups.length - 1];
    if (g && (a.x - g.items[0].x) / perPixel < GROUP_PX) g.items.push(a);
    else groups.push({ items: [a] });
  }
  for (const g of groups) {
    g.x = g.items[0].x;
    const shown = g.items.slice(0, GROUP_LIST).map((a) => a.text);
    if (g.items.length > GROUP_LIST) shown.push(escapeHtml(t("marker.more", { count: g.items.length - GROUP_LIST })));
    g.text = (g.items.length > 1 ? escapeHtml(t("marker.anomalies", { count: g.items.length })) + "<br>" : "") + shown.join("<br>");
  }
  return groups;
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

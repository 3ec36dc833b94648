// The data mix over steps: a stacked area of each source's share, from data_mix events (an
// abandoned branch's changes are left out). It follows the page's x range.

/* global Plotly */
import { decode } from "../api.js";
import { plotConfig, whenPlotly } from "../chart/plotly.js";
import { rangesEqual } from "../xmap.js";
import { isAbandoned } from "../branch.js";
import { color, escapeHtml, theme } from "../util.js";

export class MixChart {
  constructor(page) {
    this.page = page;
    this.drawn = false;
    this.timer = null;
    this.div = document.getElementById("chart-mix");
    this.card = document.getElementById("mix-card");
  }

  /** At most once a second while points stream in (the last share reaches the newest step). */
  soon() {
    if (this.timer === null) this.timer = setTimeout(() => { this.timer = null; this.render(); }, 1000);
  }

  render() {
    const { detail, events, view } = this.page;
    const segs = detail.segments;
    const logged = events.filter((e) => e.type === "data_mix" && e.step !== null);
    const holds = (index, step) => logged.some((e) => e.segment === index && e.step === step);
    const mixes = logged
      .filter((e) => !isAbandoned(segs, e.segment, e.step, holds))
      .sort((a, b) => a.step - b.step || a.segment - b.segment);
    if (!mixes.length) {
      this.card.hidden = true;
      return;
    }
    this.card.hidden = false;
    const sources = [...new Set(mixes.flatMap((e) => Object.keys(e.payload.weights || {})))];
    const xmap = view.xmapFor();
    const end = Math.max(detail.last_step || 0, mixes[mixes.length - 1].step);
    const steps = [...mixes.map((e) => e.step), end];
    const x = steps.map((s) => xmap.toPlot(xmap.toX(s)));
    const t = theme();
    const traces = sources.map((source, i) => {
      const y = mixes.map((e) => decode((e.payload.weights || {})[source] ?? 0));
      y.push(y[y.length - 1]);
      return {
        type: "scatter", mode: "lines", stackgroup: "mix", groupnorm: i === 0 ? "fraction" : undefined,
        line: { shape: "hv", width: 0.5, color: color(i) }, fillcolor: color(i), x, y,
        name: escapeHtml(source), hovertemplate: "%{y:.1%}<extra>" + escapeHtml(source) + "</extra>",
      };
    });
    const range = view.range;
    const layout = {
      margin: { l: 56, r: 12, t: 30, b: 8 }, height: 230,
      paper_bgcolor: t.bg, plot_bgcolor: t.bg, font: { color: t.fg }, hovermode: "x unified",
      xaxis: { title: { text: escapeHtml(xmap.axisTitle), standoff: 6 }, automargin: true, gridcolor: t.grid, type: xmap.epoch ? "date" : "linear",
        ...(range ? { range: [xmap.toPlot(range[0]), xmap.toPlot(range[1])], autorange: false } : { autorange: true }) },
      yaxis: { tickformat: ".0%", range: [0, 1], gridcolor: t.grid, fixedrange: true, automargin: true },
      legend: { orientation: "h", x: 0, y: 0, yref: "container", yanchor: "bottom" },
    };
    if (typeof Plotly === "undefined") {
      // Plotly.js is still on its way (run.html loads it async): draw once it has run.
      if (!this.waiting) {
        this.waiting = true;
        whenPlotly().then(() => { this.waiting = false; this.render(); }, () => {});
      }
      return;
    }
    Plotly.react(this.div, traces, layout, plotConfig(detail.name + "-data-mix"));
    if (!this.drawn) {
      this.drawn = true;
      this.div.on("plotly_relayout", (ev) => {
        const xm = view.xmapFor();
        if (ev["xaxis.autorange"]) view.onRange(null);
        else if ("xaxis.range[0]" in ev) view.onRange([xm.fromPlot(ev["xaxis.range[0]"]), xm.fromPlot(ev["xaxis.range[1]"])]);
      });
    }
  }

  syncRange() {
    if (!this.drawn) return;
    const xmap = this.page.view.xmapFor();
    const r = this.page.view.range;
    const ax = this.div.layout.xaxis || {};
    const current = ax.autorange === true || !ax.range ? null : [xmap.fromPlot(ax.range[0]), xmap.fromPlot(ax.range[1])];
    if (rangesEqual(current, r)) return;
    Plotly.relayout(this.div, r ? { "xaxis.range": [xmap.toPlot(r[0]), xmap.toPlot(r[1])] } : { "xaxis.autorange": true });
  }
}

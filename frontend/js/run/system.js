// The System panel: what every rank's sampler sends (system/<node>/rank<r>/<figure>, the step a
// wall-clock second, runcast.system). One chart per figure (CPU, memory, each GPU's utilisation,
// ...), a line per node and rank, drawn from the page's store like every chart; with more than
// one rank, a shaded min/max band across the ranks at each second behind the lines. Its x axis
// is the time of day, its zoom its own (the training charts' x is the step).

import { MetricChart } from "../chart.js";
import { XMap } from "../xmap.js";
import { el } from "../util.js";
import { t } from "../i18n.js";

const $ = (id) => document.getElementById(id);
const SYSTEM_KEY = /^system\/([^/]+)\/(rank\d+)\/(.+)$/;
const ORDER = [/^cpu\//, /^memory\//, /^gpu\d+\/util/, /^gpu\d+\/memory/, /^gpu/, /^disk\//, /^net\//];
const UNITS = [[/_percent$/, "%"], [/_mb_s$/, "MiB/s"], [/_mb$/, "MiB"], [/_w$/, "W"], [/_c$/, "°C"]];

export const isSystemKey = (key) => key.startsWith("system/");

/** Wall-clock seconds as the x axis (a date axis). */
class Clock extends XMap {
  constructor() {
    super("step");
    this.epoch = true;
  }

  get axisTitle() {
    return t("system.time");
  }
}

/** figure -> [{key, label: "node/rank"}], sorted: a chart's lines in node and rank order. */
export function systemFigures(keys) {
  const figures = new Map();
  for (const key of keys) {
    const m = SYSTEM_KEY.exec(key);
    if (!m) continue;
    if (!figures.has(m[3])) figures.set(m[3], []);
    figures.get(m[3]).push({ key, label: m[1] + "/" + m[2] });
  }
  const rankOf = (label) => Number(label.split("/rank")[1]);
  for (const lines of figures.values()) lines.sort((a, b) => a.label.split("/")[0].localeCompare(b.label.split("/")[0]) || rankOf(a.label) - rankOf(b.label));
  const order = (f) => {
    const i = ORDER.findIndex((re) => re.test(f));
    return i < 0 ? ORDER.length : i;
  };
  return new Map([...figures].sort(([a], [b]) => order(a) - order(b) || a.localeCompare(b)));
}

function title(figure) {
  const unit = UNITS.find(([re]) => re.test(figure));
  return unit ? `${figure} (${unit[1]})` : figure;
}

/** Rebuild the panel when the run's system keys changed. */
export function buildSystem(page) {
  const keys = page.detail.keys.filter(isSystemKey);
  const signature = keys.join("\u0000");
  if (page.systemSignature === signature) return;
  page.systemSignature = signature;
  const old = page.systemCharts;
  page.systemCharts = [];
  const figures = systemFigures(keys);
  $("system-card").hidden = figures.size === 0;
  const ranks = new Set(keys.map((k) => (SYSTEM_KEY.exec(k) || [])[1] + "/" + (SYSTEM_KEY.exec(k) || [])[2]));
  // The ranks' names are the trainer's: data, beside the counted words.
  $("system-note").replaceChildren(...(figures.size
    ? [t("system.ranks", { count: ranks.size }), " ", el("span", { "data-user": true, text: [...ranks].sort().join(", ") })]
    : []));
  const clock = new Clock();
  const view = {
    smoothing: 0,
    log: false,
    range: null,
    colorBy: "source",
    band: true, // the min/max across the sources behind them (chart/traces.js)
    xmapFor: () => clock,
    segmentsOf: () => (page.detail ? page.detail.segments : []),
    onRange(range) {
      view.range = range;
      for (const c of page.systemCharts) c.applyRange(range);
    },
  };
  const cards = [];
  for (const [figure, lines] of figures) {
    const plot = el("div", { className: "plot plot-panel" });
    const note = el("p", { className: "note" });
    cards.push(el("section", { className: "card panel", "aria-label": t("system.figure", { figure }) },
      el("h3", { className: "chart-title", text: title(figure), "data-user": true }), plot, note));
    const chart = new MetricChart(plot, {
      sources: lines.map((l) => ({ run: page.runId, key: l.key, label: l.label })),
      view,
      store: page.store,
      noteEl: note,
      filename: page.detail.name + "-system-" + figure.replaceAll("/", "-"),
    });
    page.systemCharts.push(chart);
  }
  for (const c of old) c.destroy();
  $("system-panels").replaceChildren(...cards);
  for (const c of page.systemCharts) c.load();
}

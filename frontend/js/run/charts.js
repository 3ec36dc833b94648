// The run page's charts: the loss chart (every loss-like key, or the keys picked) and one
// panel per other key. Each card has its title and a placeholder before its chart loads; a
// panel loads when it scrolls into view. Charts draw from the page's store; rebuilding a
// chart keeps the store's entries (and their live points) of the keys it still shows.

import { MetricChart } from "../chart.js";
import { TIMESTAMP_KEY, XMap } from "../xmap.js";
import { el } from "../util.js";
import { t } from "../i18n.js";
import { isSystemKey } from "./system.js";
import { writeUrl } from "./url.js";

const $ = (id) => document.getElementById(id);
const PANEL_ORDER = [/^(lr|learning_rate)$/i, /grad_?norm/i, /(tokens?_per_s|throughput|tok\/s)/i, /loss_scale/i];
const PANEL_TITLES = [
  [/^(lr|learning_rate)$/i, "panel.lr"],
  [/grad_?norm/i, "panel.gradNorm"],
  [/(tokens?_per_s|throughput)/i, "panel.throughput"],
  [/loss_scale/i, "panel.lossScale"],
];
/** Keys that can stand for the x axis: tokens seen, and wall time. */
export const TOKEN_KEY = /^(tokens_seen|tokens|train\/tokens|tokens\/seen|num_tokens|consumed_tokens)$/i;
export const TIME_KEY = /^(wall_?time|time|timestamp|elapsed(_s)?|time\/elapsed(_s)?|_runtime)$/i;
export const isLossKey = (k) => /(^|[/_.])loss$/i.test(k) && !/scale/i.test(k);

/** The run's keys but the system metrics (they have their own panel, run/system.js). */
const trainingKeys = (detail) => detail.keys.filter((k) => !isSystemKey(k));

/** Every chart of the page, the loss chart first. */
export function allCharts(page) {
  return page.mainChart ? [page.mainChart, ...page.panelCharts] : page.panelCharts;
}

/** The x-axis choices the run's keys allow; loads the mapping of the one in use. */
export async function setupXmaps(page) {
  const { detail, xmaps, state } = page;
  const select = $("xmode");
  const tokens = trainingKeys(detail).find((k) => TOKEN_KEY.test(k));
  const time = trainingKeys(detail).find((k) => TIME_KEY.test(k));
  select.replaceChildren(el("option", { value: "step", text: t("x.step") }));
  if (tokens) select.append(el("option", { value: "tokens", text: t("x.tokensKey", { key: tokens }) }));
  // Every run: the server's step times (a logged time key stands in for a run stored without them).
  select.append(el("option", { value: "time", text: t("x.time") }), el("option", { value: "relative", text: t("x.relative") }));
  if (tokens && !xmaps.has("tokens")) xmaps.set("tokens", new XMap("tokens", tokens));
  if (!xmaps.has("time")) xmaps.set("time", new XMap("time", TIMESTAMP_KEY, { fallback: time }));
  if (!xmaps.has("relative")) xmaps.set("relative", new XMap("time", TIMESTAMP_KEY, { sinceStart: true, fallback: time }));
  if (!state.xChosen) {
    // The x axis the trainer declared for a loss metric (run.define_metric(key, x="tokens")).
    const declared = Object.entries(detail.metrics || {}).find(([k, d]) => isLossKey(k) && d.x !== "step");
    if (declared && xmaps.has(declared[1].x)) state.x = declared[1].x;
  }
  if (!xmaps.has(state.x)) state.x = "step";
  select.value = state.x;
  if (state.x !== "step") await xmaps.get(state.x).load(page.runId);
}

function mainKeys(page) {
  const { detail, state } = page;
  const keys = trainingKeys(detail);
  const wanted = state.keys ? state.keys.filter((k) => keys.includes(k)) : [];
  if (wanted.length) return wanted;
  const losses = keys.filter(isLossKey);
  const ordered = losses.sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
  return ordered.length ? ordered.slice(0, 6) : keys.slice(0, 1);
}

function rank(key) {
  if (/^(train[/_])?loss$/i.test(key)) return 0;
  if (/^train/i.test(key)) return 1;
  if (/^(val|valid|eval)/i.test(key)) return 2;
  return 3;
}

function panelKeys(page) {
  const main = new Set(page.mainChart ? page.mainChart.sources.map((s) => s.key) : []);
  let keys = trainingKeys(page.detail).filter((k) => !main.has(k));
  if (page.state.panels) keys = keys.filter((k) => page.state.panels.includes(k));
  const order = (k) => {
    const i = PANEL_ORDER.findIndex((re) => re.test(k));
    return i < 0 ? PANEL_ORDER.length : i;
  };
  return keys.sort((a, b) => order(a) - order(b) || a.localeCompare(b));
}

function placeholder(text) {
  return el("p", { className: "placeholder", text });
}

/**
 * (Re)build the loss chart for the keys it should show; true when its keys changed (the caller
 * loads it). `options`: {onDrawn, onPainted, prefetched, markers}.
 */
export function buildMainChart(page, options = {}) {
  const keys = mainKeys(page);
  renderKeyPicker(page, keys, options);
  const before = page.mainChart ? page.mainChart.sources.map((s) => s.key).join("\u0000") : null;
  if (before === keys.join("\u0000") && page.mainChart) return false;
  const title = $("chart-main-title");
  title.textContent = keys.length ? keys.join(", ") : t("run.lossChart");
  title.toggleAttribute("data-user", keys.length > 0);
  title.removeAttribute("data-i18n");
  const old = page.mainChart;
  page.mainChart = null;
  if (!keys.length) {
    if (old) old.destroy();
    $("chart-main").replaceChildren(placeholder(t("run.noMetrics")));
    $("chart-main-note").textContent = t("run.noMetrics");
    return false;
  }
  const div = $("chart-main");
  const fresh = el("div", { id: "chart-main", className: div.className });
  fresh.append(placeholder(t("chart.loadingKeys", { keys: keys.join(", ") })));
  const chart = new MetricChart(fresh, {
    sources: keys.map((key) => ({ run: page.runId, key, label: key })),
    view: page.view,
    store: page.store,
    noteEl: $("chart-main-note"),
    onDrawn: options.onDrawn,
    onPainted: options.onPainted,
    onClick: (ev) => page.comments.onChartClick(ev),
    prefetched: options.prefetched || null,
    filename: page.detail.name + "-" + keys[0],
  });
  if (old) old.destroy(); // after the new chart holds the store's entries it shares
  div.replaceWith(fresh);
  chart.setMarkers(options.markers || []);
  page.mainChart = chart;
  return true;
}

function renderKeyPicker(page, selected, options) {
  const box = $("key-picker");
  box.querySelectorAll("label").forEach((n) => n.remove());
  for (const key of trainingKeys(page.detail)) {
    const input = el("input", { type: "checkbox", value: key });
    input.checked = selected.includes(key);
    input.addEventListener("change", () => {
      const keys = [...box.querySelectorAll("input:checked")].map((i) => i.value);
      page.state.keys = keys.length ? keys : null;
      writeUrl(page.state);
      if (buildMainChart(page, { ...options, prefetched: null }) && page.mainChart) page.mainChart.load();
      buildPanels(page, options.markers || []);
    });
    box.append(el("label", { className: "check" }, input, " ", el("span", { "data-user": true, text: key })));
  }
}

/** (Re)build the panels: a titled card each, charted once it scrolls into view. */
export function buildPanels(page, markers) {
  const old = page.panelCharts;
  page.panelCharts = [];
  if (page.panelObserver) page.panelObserver.disconnect();
  const box = $("panels");
  const observer = new IntersectionObserver((entries) => {
    for (const entry of entries) {
      if (!entry.isIntersecting) continue;
      observer.unobserve(entry.target);
      const chart = page.panelCharts.find((c) => c.div === entry.target);
      if (chart) chart.load();
    }
  }, { rootMargin: "300px" });
  page.panelObserver = observer;
  const cards = [];
  for (const key of panelKeys(page)) {
    const hint = PANEL_TITLES.find(([re]) => re.test(key));
    const title = hint ? t("panel.titled", { key, hint: t(hint[1]) }) : key;
    const plot = el("div", { className: "plot plot-panel" }, placeholder(t("chart.loadsOnScroll")));
    const note = el("p", { className: "note" });
    const heading = el("h2", { className: "chart-title", text: title, "data-user": !hint });
    cards.push(el("section", { className: "card panel", "aria-label": title }, heading, plot, note));
    const chart = new MetricChart(plot, {
      sources: [{ run: page.runId, key, label: key }],
      view: page.view,
      store: page.store,
      noteEl: note,
      filename: page.detail.name + "-" + key,
    });
    chart.setMarkers(markers);
    page.panelCharts.push(chart);
  }
  for (const c of old) c.destroy();
  box.replaceChildren(...cards);
  for (const c of page.panelCharts) observer.observe(c.div);
}

/** Every chart drawn so far reads its entries again (a view change, or the stream is down). */
export function reloadCharts(page) {
  for (const c of allCharts(page)) if (c.active) c.load();
}

export function setMarkers(page, markers) {
  for (const c of allCharts(page)) c.setMarkers(markers);
}

export function redraw(page) {
  for (const c of allCharts(page)) c.invalidate();
}

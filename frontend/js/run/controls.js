// The view controls: smoothing, x axis, log scale, reset zoom (and Escape), copy link.

import { debounce } from "../util.js";
import { t } from "../i18n.js";
import { allCharts, redraw, reloadCharts } from "./charts.js";
import { writeUrl } from "./url.js";

const $ = (id) => document.getElementById(id);

export function setupControls(page) {
  const { state, view } = page;
  const slider = $("smoothing");
  const out = $("smoothing-value");
  slider.value = String(state.smooth);
  out.textContent = state.smooth.toFixed(2);
  const apply = debounce(() => {
    view.smoothing = state.smooth;
    redraw(page);
    writeUrl(state);
  }, 30);
  slider.addEventListener("input", () => {
    state.smooth = Number(slider.value);
    out.textContent = state.smooth.toFixed(2);
    apply();
  });
  const log = $("logscale");
  log.checked = state.log;
  log.addEventListener("change", () => {
    state.log = view.log = log.checked;
    for (const c of allCharts(page)) c.yRange = null;
    redraw(page);
    writeUrl(state);
  });
  $("xmode").addEventListener("change", async (ev) => {
    state.x = ev.target.value;
    state.xChosen = true;
    state.range = view.range = null;
    const xmap = page.xmaps.get(state.x);
    if (xmap && !xmap.identity && !xmap.steps.length) await xmap.load(page.runId);
    writeUrl(state);
    reloadCharts(page);
    redraw(page);
    page.mix.render();
  });
  $("reset-zoom").addEventListener("click", () => {
    for (const c of allCharts(page)) c.yRange = null;
    view.onRange(null);
  });
  $("copy-link").addEventListener("click", async () => {
    const button = $("copy-link");
    try {
      await navigator.clipboard.writeText(location.href);
      button.textContent = t("controls.copied");
    } catch {
      button.textContent = t("controls.copyAddressBar");
    }
    setTimeout(() => (button.textContent = t("controls.copyLink")), 2000);
  });
  document.addEventListener("keydown", (ev) => {
    if (ev.key === "Escape" && view.range) view.onRange(null);
  });
}

// The compare page (/compare?runs=a,b&keys=train/loss,lr&x=step|tokens|time|relative): runs picked
// from a searchable list (name, project, tag, id), one chart per metric with every picked run
// on it, aligned by step, tokens seen or wall time (each run's own key for them), and the
// runs' configs side by side (only the keys that differ, or all). The view lives in the URL
// (run/url.js, shared with the run page), so a comparison is a link.
//
// Like the run page, one store holds what the charts draw: each run's /metrics answer plus its
// live stream's messages after the answer's version. The page's state is made once.
import { ApiError, getJSON, getMetrics, getRun } from "./api.js";
import { MetricChart } from "./chart.js";
import { DEFAULT_SMOOTHING } from "./chart/smoothing.js";
import { TIMESTAMP_KEY, XMap, rangesEqual, shareUnit } from "./xmap.js";
import { LiveStream } from "./live.js";
import { MetricStore } from "./store.js";
import { color, debounce, el, lastLossKey, statusBadge } from "./util.js";
import { TIME_KEY, TOKEN_KEY, isLossKey } from "./run/charts.js";
import { flatten } from "./run/config.js";
import { readUrl, writeUrl } from "./run/url.js";
import { mountSignIn } from "./signin.js";
import { loadLanguage, t } from "./i18n.js";

const $ = (id) => document.getElementById(id);
const STEP = new XMap("step");
const ALIGN = {
  tokens: { re: TOKEN_KEY, what: "x.tokens" },
  time: { re: TIME_KEY, what: "x.time", clock: true },
  relative: { re: TIME_KEY, what: "x.relative", clock: true, sinceStart: true },
};
const LIST_PAGES = 10; // runs offered in the picker: up to 10 pages of 200, newest first
const SHOWN = 30; // matches listed at once

function createPage() {
  const url = readUrl(location.search);
  const q = new URLSearchParams(location.search);
  const state = {
    ...url,
    runs: url.runs || [],
    keys: url.keys || (q.get("key") ? [q.get("key")] : null), // key=: links made before keys=
    x: ALIGN[url.x] ? url.x : "step",
  };
  const page = {
    state,
    details: new Map(), // run id -> GET /runs/{id}
    missing: new Set(),
    xmaps: new Map(), // run id -> XMap of the current alignment (absent: the run lacks its key)
    streams: new Map(), // run id -> LiveStream
    charts: [],
    catalog: null, // the runs offered in the picker
    generation: 0, // refresh() calls: only the latest one builds the charts
    store: new MetricStore((run, key, query, signal) => getMetrics(run, key, { ...query, signal })),
  };
  page.view = {
    smoothing: state.smooth,
    log: state.log,
    range: state.range,
    colorBy: "source",
    xmapFor: (run) => page.xmaps.get(run) || STEP,
    segmentsOf: (run) => (page.details.get(run) ? page.details.get(run).segments : []),
    onRange(range) {
      if (!rangesEqual(page.view.range, range)) {
        page.view.range = state.range = range;
        writeUrl(state);
      }
      for (const c of page.charts) c.applyRange(range);
    },
  };
  return page;
}

const label = (d) => `${d.name} (${d.project})`;

// --- the run picker ---------------------------------------------------------------------------

async function loadCatalog() {
  const runs = [];
  let cursor = null;
  for (let i = 0; i < LIST_PAGES; i++) {
    const q = new URLSearchParams({ limit: "200" });
    if (cursor) q.set("cursor", cursor);
    const body = await getJSON("/api/v1/runs?" + q);
    runs.push(...body.runs);
    cursor = body.next_cursor;
    if (!cursor) break;
  }
  return runs;
}

/** Runs whose name, project, tags or id hold every word of the search. */
export function matching(runs, text) {
  const words = text.toLowerCase().split(/\s+/).filter(Boolean);
  return runs.filter((r) => {
    const hay = [r.name, r.project, r.id, ...(Array.isArray(r.tags) ? r.tags : [])].join("\u0000").toLowerCase();
    return words.every((w) => hay.includes(w));
  });
}

function renderResults(page) {
  const box = $("run-results");
  if (!page.catalog) {
    box.replaceChildren(el("li", { className: "empty", text: t("runs.loading") }));
    return;
  }
  const found = matching(page.catalog, $("run-search").value);
  const items = found.slice(0, SHOWN).map((r) => {
    const picked = page.state.runs.includes(r.id);
    const add = el("button", {
      type: "button", text: t(picked ? "compare.added" : "compare.add"), disabled: picked,
      "aria-label": t(picked ? "compare.addedLabel" : "compare.addLabel", { run: label(r) }),
      onclick: () => pick(page, r.id),
    });
    const tags = Array.isArray(r.tags) && r.tags.length ? el("span", { className: "tags", text: r.tags.join(", "), "data-user": true }) : null;
    return el("li", { "data-run": r.id }, add, " ", el("span", { className: "name", text: r.name, "data-user": true }), " ",
      el("span", { className: "project", text: r.project, "data-user": true }), " ", statusBadge(r.status), tags);
  });
  if (!found.length) items.push(el("li", { className: "empty", text: t("compare.noMatch") }));
  else if (found.length > SHOWN) items.push(el("li", { className: "empty", text: t("compare.more", { count: found.length - SHOWN }) }));
  box.replaceChildren(...items);
}

function renderPicked(page) {
  const { state, details } = page;
  $("picked").replaceChildren(...state.runs.map((id, i) => {
    const d = details.get(id);
    const name = d ? label(d) : page.missing.has(id) ? t("compare.notFound", { id }) : id;
    return el("li", {},
      el("span", { className: "swatch", style: "background:" + color(i), "aria-hidden": "true" }),
      d ? el("a", { href: "/runs/" + encodeURIComponent(id), text: name, "data-user": true }) : el("span", { text: name, "data-user": !page.missing.has(id) }), " ",
      el("button", { type: "button", className: "remove", text: "×", "aria-label": t("compare.remove", { run: name }), onclick: () => unpick(page, id) }));
  }));
  if (!state.runs.length) $("picked").append(el("li", { className: "empty", text: t("compare.noRuns") }));
}

function pick(page, id) {
  if (page.state.runs.includes(id)) return;
  page.state.runs = [...page.state.runs, id];
  refresh(page);
}

function unpick(page, id) {
  page.state.runs = page.state.runs.filter((r) => r !== id);
  const stream = page.streams.get(id);
  if (stream) stream.close();
  page.streams.delete(id);
  page.details.delete(id);
  refresh(page);
}

// --- runs, metrics, alignment -----------------------------------------------------------------

async function readDetails(page) {
  await Promise.all(page.state.runs.filter((id) => !page.details.has(id) && !page.missing.has(id)).map(async (id) => {
    try {
      page.details.set(id, await getRun(id));
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) page.missing.add(id);
      else throw err;
    }
  }));
}

function found(page) {
  return page.state.runs.filter((id) => page.details.has(id));
}

function allKeys(page) {
  return [...new Set(found(page).flatMap((id) => page.details.get(id).keys))].sort();
}

function renderMetricPicker(page) {
  const keys = allKeys(page);
  const { state } = page;
  if (!state.keys || !state.keys.some((k) => keys.includes(k))) {
    const first = page.details.get(found(page)[0]);
    const loss = (first && lastLossKey(first.last_values)) || keys.find(isLossKey) || keys[0];
    state.keys = loss ? [loss] : null;
  }
  const box = $("metric-picker");
  box.querySelectorAll("label").forEach((n) => n.remove());
  for (const key of keys) {
    const input = el("input", { type: "checkbox", value: key });
    input.checked = state.keys.includes(key);
    input.addEventListener("change", () => {
      const picked = [...box.querySelectorAll("input:checked")].map((i) => i.value);
      state.keys = picked.length ? picked : null;
      refresh(page);
    });
    box.append(el("label", { className: "check" }, input, " ", el("span", { text: key, "data-user": true })));
  }
}

/** {xmaps, lacking}: each run's x mapping for the alignment, and the runs without its key. */
async function alignRuns(page) {
  const xmaps = new Map();
  const lacking = [];
  const { x } = page.state;
  if (x === "step") return { xmaps, lacking };
  await Promise.all(found(page).map(async (id) => {
    const logged = page.details.get(id).keys.find((k) => ALIGN[x].re.test(k));
    if (ALIGN[x].clock) {  // the server's step times, every run's (a logged time key for a run stored without them)
      const map = new XMap("time", TIMESTAMP_KEY, { sinceStart: !!ALIGN[x].sinceStart, fallback: logged || null });
      try {
        xmaps.set(id, await map.load(id));
      } catch {
        lacking.push(id);
      }
      return;
    }
    if (!logged) return lacking.push(id);
    xmaps.set(id, await new XMap(x, logged, { sinceStart: true }).load(id));
  }));
  shareUnit([...xmaps.values()]);  // one axis: every run's time since its start in one unit
  return { xmaps, lacking };
}

function follow(page, id) {
  if (page.streams.has(id)) return;
  const stream = new LiveStream(id, {
    onBatch: (m) => {
      const xm = page.xmaps.get(id);
      for (const p of m.points || []) if (xm && xm.key === p.key) xm.extend(p.step, p.value);
      page.store.onBatch(id, m);
    },
    onReset: (version) => page.store.onReset(id, version),
  });
  page.streams.set(id, stream.start()); // subscribe first: each answer applies what follows it
}

function buildCharts(page, runs) {
  for (const c of page.charts) c.destroy();
  page.charts = [];
  const cards = [];
  for (const key of page.state.keys || []) {
    const sources = runs.filter((id) => page.details.get(id).keys.includes(key))
      .map((id) => ({ run: id, key, label: label(page.details.get(id)) }));
    const plot = el("div", { className: "plot plot-main" });
    const note = el("p", { className: "note" });
    const without = runs.length - sources.length;
    cards.push(el("section", { className: "card", "aria-label": key },
      el("h2", { className: "chart-title", text: without ? t("compare.notLoggedBy", { key, count: without }) : key, "data-user": !without }), plot, note));
    if (!sources.length) {
      plot.append(el("p", { className: "placeholder", text: t("compare.noneLogged", { key }) }));
      continue;
    }
    const chart = new MetricChart(plot, { sources, view: page.view, store: page.store, noteEl: note, filename: "compare-" + key });
    // One colour per run across every chart: the source's index is its place among the picked runs.
    chart.sources.forEach((s) => (s.index = page.state.runs.indexOf(s.run)));
    page.charts.push(chart);
  }
  $("charts").replaceChildren(...cards);
  $("legend").replaceChildren(...runs.map((id) => el("li", {},
    el("span", { className: "swatch", style: "background:" + color(page.state.runs.indexOf(id)), "aria-hidden": "true" }),
    el("a", { href: "/runs/" + encodeURIComponent(id), text: label(page.details.get(id)), "data-user": true }))));
  return Promise.all(page.charts.map((c) => c.load()));
}

// --- the config diff --------------------------------------------------------------------------

/** Rows [key, values per run] of the runs' flattened configs; `all` = false: only differing keys. */
export function configRows(configs, all) {
  const flat = configs.map((c) => new Map(flatten(c)));
  const keys = [...new Set(flat.flatMap((m) => [...m.keys()]))].sort();
  const rows = keys.map((k) => [k, flat.map((m) => (m.has(k) ? m.get(k) : null))]);
  const differs = ([, values]) => new Set(values.map((v) => (v === null ? "\u0000missing" : v))).size > 1;
  return { rows: all ? rows : rows.filter(differs), total: rows.length, differing: rows.filter(differs).length };
}

function renderDiff(page) {
  const runs = found(page);
  const box = $("config-diff");
  if (runs.length < 2) {
    box.replaceChildren(el("p", { className: "note", text: t("compare.pickTwo") }));
    $("diff-note").textContent = "";
    return;
  }
  const { rows, total, differing } = configRows(runs.map((id) => page.details.get(id).config || {}), page.state.all);
  $("diff-note").textContent = t("compare.differ", { differing, total });
  const head = el("tr", {}, el("th", { scope: "col", text: t("compare.key") }),
    ...runs.map((id) => el("th", { scope: "col", text: label(page.details.get(id)), "data-user": true })));
  const body = rows.map(([k, values]) => {
    const same = new Set(values).size === 1;
    return el("tr", { className: same ? "same" : "differs", "data-key": k }, el("th", { scope: "row", text: k, "data-user": true }),
      ...values.map((v) => el("td", { className: v === null ? "missing" : "", text: v === null ? "—" : v, "data-user": true })));
  });
  box.replaceChildren(el("table", { className: "diff" }, el("thead", {}, head), el("tbody", {}, ...body)));
}

// --- the page ---------------------------------------------------------------------------------

async function refresh(page) {
  const { state } = page;
  const generation = ++page.generation;
  const status = $("status");
  status.textContent = state.runs.length ? t("common.loading") : "";
  writeUrl(state);
  await readDetails(page);
  if (generation !== page.generation) return; // a later pick, removal or choice took over
  renderPicked(page);
  renderResults(page);
  renderMetricPicker(page);
  writeUrl(state);
  renderDiff(page);
  const runs = found(page);
  const { xmaps, lacking } = await alignRuns(page);
  if (generation !== page.generation) return;
  page.xmaps = xmaps;
  const shown = runs.filter((id) => !lacking.includes(id));
  for (const id of runs) follow(page, id);
  const notes = [];
  if (page.missing.size) notes.push(t("compare.missing", { runs: [...page.missing].join(", ") }));
  if (lacking.length) {
    notes.push(t("compare.lacking", { what: t(ALIGN[state.x].what), runs: lacking.map((id) => label(page.details.get(id))).join(", ") }));
  }
  if (!runs.length) notes.push(t("compare.findBelow"));
  // One element per sentence: each is one message of the catalog.
  status.replaceChildren(...notes.flatMap((n, i) => (i ? [" ", el("span", { text: n })] : [el("span", { text: n })])));
  await buildCharts(page, shown);
}

function setup(page) {
  const { state, view } = page;
  $("xmode").value = state.x;
  $("smoothing").value = String(state.smooth);
  $("smoothing-value").textContent = state.smooth.toFixed(2);
  $("logscale").checked = state.log;
  $("diff-all").checked = state.all;
  $("run-search").addEventListener("input", debounce(() => renderResults(page), 120));
  $("view").addEventListener("submit", (e) => e.preventDefault());
  $("xmode").addEventListener("change", (e) => {
    state.x = e.target.value;
    view.range = state.range = null; // ranges are in x units
    refresh(page);
  });
  $("smoothing").addEventListener("input", (e) => {
    state.smooth = view.smoothing = Number(e.target.value);
    $("smoothing-value").textContent = state.smooth.toFixed(2);
    for (const c of page.charts) c.invalidate();
    writeUrl(state);
  });
  $("logscale").addEventListener("change", (e) => {
    state.log = view.log = e.target.checked;
    for (const c of page.charts) {
      c.yRange = null;
      c.invalidate();
    }
    writeUrl(state);
  });
  $("reset-zoom").addEventListener("click", () => {
    for (const c of page.charts) c.yRange = null;
    view.onRange(null);
  });
  $("diff-all").addEventListener("change", (e) => {
    state.all = e.target.checked;
    writeUrl(state);
    renderDiff(page);
  });
}

const page = createPage();
const runList = loadCatalog(); // the run list's read does not wait for the language
loadLanguage().then(() => {
  mountSignIn($("signin"));
  setup(page);
  renderResults(page);
  refresh(page).catch((err) => ($("status").textContent = t("chart.loadFailed", { error: err.message })));
  runList.then((runs) => {
    page.catalog = runs;
    renderResults(page);
  }, (err) => $("run-results").replaceChildren(el("li", { className: "empty", text: t("compare.listFailed", { error: err.message }) })));
});

// Read-only hooks for tests: what the store holds, and each chart's sources.
window.__runcast = Object.freeze({
  store: Object.freeze({ snapshot: () => page.store.snapshot() }),
  charts: () => page.charts.map((c) => ({ keys: c.sources.map((s) => s.key), runs: c.sources.map((s) => s.run) })),
});

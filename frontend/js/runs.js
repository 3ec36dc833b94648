// The runs page: a table of runs with columns chosen from config, summary and metric keys,
// sorted, filtered and grouped by the server (GET /api/v1/runs); badges stay live by
// re-reading the list every few seconds. Run data is set with textContent only. The page's
// state lives in its URL (runs/query.js) and is passed to the functions that use it.
import { decode, getJSON } from "./api.js";
import { mountSignIn } from "./signin.js";
import { loadLanguage, t } from "./i18n.js";
import { OPS, apiParams, firstDir, parseValue, readState, writeState } from "./runs/query.js";
import { columnOptions, groupRow, renderChooser, renderHeader, valueCells } from "./runs/table.js";
import { el, formatAge, formatTime, formatValue, lastLossKey } from "./util.js";

const API = "/api/v1/runs";
const PAGE = 50;
const POLL_MS = 5000;
const $ = (id) => document.getElementById(id);

function createPage() {
  return {
    rows: [], // run summaries in the server's order (+ fetchedAt)
    groups: null, // with grouping: the server's groups and their aggregates
    keys: { config: new Set(), summary: new Set(), metric: new Set() },
    keysShown: "", // the keys and columns the chooser shows
    selected: new Set(),
    next: null, // {cursor} or {offset, asOf} of the next page; null on the last
    lossKey: "train/loss",
    generation: 0, // bumped when the query changes: answers to older requests are dropped
    state: readState(location.search),
  };
}

function lossOf(run) {
  const key = lastLossKey(run.last_values);
  return key ? decode(run.last_values[key].value) : null;
}

function heartbeatAge(run) {
  if (run.heartbeat_age_s === null || run.heartbeat_age_s === undefined) return null;
  return run.heartbeat_age_s + (Date.now() - run.fetchedAt) / 1000;
}

/** A cell: its label (shown on phones, where the table is a card) and its value. */
function cell(row, label, text, className) {
  const value = el("span", { className: "cell-value" });
  if (text !== undefined) value.textContent = text;
  row.append(el("td", { className }, el("span", { className: "cell-label", "aria-hidden": "true", text: label }), value));
  if (className === undefined || className === "name") value.dataset.user = ""; // the run's project and name
  if (className === "age" || className === "time") value.dataset.intl = ""; // words of Intl, not of the catalog
  return value;
}

function renderRun(page, run) {
  const { selected } = page;
  const row = el("tr", { "data-id": run.id });
  cell(row, t("runs.col.project"), run.project);
  const name = cell(row, t("runs.col.name"), undefined, "name");
  const box = el("input", { type: "checkbox", "aria-label": t("runs.select", { name: run.name }) });
  box.checked = selected.has(run.id);
  box.addEventListener("change", () => {
    if (box.checked) selected.add(run.id);
    else selected.delete(run.id);
    $("compare").disabled = selected.size < 2;
    $("compare").textContent = selected.size ? t("runs.compareSelectedN", { count: selected.size }) : t("runs.compareSelected");
  });
  name.append(box, el("a", { href: "/runs/" + encodeURIComponent(run.id), text: run.name }));
  // Shown only to the signed-in team (public runs alone are listed to anyone else).
  if (run.visibility !== "public") name.append(el("span", { className: "visibility", text: run.visibility }));
  if (run.group) name.append(chip(page, "group", run.group, "chip chip-group"));
  for (const tag of run.tags || []) name.append(chip(page, "tag", tag, "chip"));
  const status = cell(row, t("runs.col.status"), undefined, "status");
  status.append(el("span", { className: "badge badge-" + run.status, text: t("status." + run.status) }));
  cell(row, t("runs.col.step"), run.last_step === null ? "" : String(run.last_step), "num");
  const loss = lossOf(run);
  cell(row, t("runs.col.loss"), loss === null ? "" : typeof loss === "number" && Number.isFinite(loss) ? loss.toPrecision(5) : formatValue(loss), "num");
  cell(row, t("runs.col.heartbeat"), formatAge(heartbeatAge(run)), "age");
  cell(row, t("runs.col.started"), formatTime(run.started_at ?? run.created_at), "time");
  valueCells(row, run, page.state.cols);
  return row;
}

/** A tag or group shown by a run's name; clicking it filters the list by it. */
function chip(page, field, value, className) {
  const button = el("button", { type: "button", className, title: t("runs.only." + field, { value }) }, el("span", { text: value, "data-user": true }));
  button.dataset[field] = value;
  button.addEventListener("click", () => {
    page.state[field] = value;
    $(field + "-filter").value = value;
    restart(page);
  });
  return button;
}

function visible({ rows, state }) {
  const q = state.q.trim().toLowerCase();
  return q ? rows.filter((r) => r.project.toLowerCase().includes(q) || r.name.toLowerCase().includes(q)) : rows;
}

function render(page) {
  const { rows, state, groups } = page;
  const table = $("runs");
  const list = visible(page);
  renderHeader(table, state, (name) => sortBy(page, name));
  const body = [];
  const byName = new Map((groups || []).map((g) => [g.group ?? "", g]));
  let current;
  for (const run of list) {
    if (groups && (run.group ?? "") !== current) {
      current = run.group ?? "";
      if (byName.has(current)) body.push(groupRow(byName.get(current), state.cols));
    }
    body.push(renderRun(page, run));
  }
  table.tBodies[0].replaceChildren(...body);
  table.hidden = list.length === 0;
  const n = list.length;
  const filtered = state.status || state.tag || state.group || state.where.length || state.since;
  $("status").textContent = rows.length === 0 && !filtered ? t("runs.none") : n === 0 ? t("runs.noMatch")
    : groups ? t("runs.countGroups", { count: n, groups: groups.length }) : t("runs.count", { count: n });
  renderConditions(page);
}

function keysOf(page) {
  const { keys } = page;
  return { config: [...keys.config], summary: [...keys.summary], metric: [...keys.metric] };
}

function renderConditions(page) {
  const { state } = page;
  $("conditions").replaceChildren(...state.where.map((w, i) => el("button", {
    type: "button", className: "chip condition", title: t("runs.removeCondition"),
    onclick: () => {
      state.where = state.where.filter((_, j) => j !== i);
      restart(page);
    },
  }, el("span", { "data-user": true, text: `${w[0]} ${OPS[w[1]]} ${typeof w[2] === "string" ? JSON.stringify(w[2]) : w[2]} ✕` }))));
}

function learn(page, body) {
  for (const kind of ["config", "summary", "metric"]) for (const k of body.keys?.[kind] || []) page.keys[kind].add(k);
  // Rebuilt only when the keys or the chosen columns change: not under the pointer at every poll.
  const signature = JSON.stringify([keysOf(page), page.state.cols]);
  if (signature === page.keysShown) return;
  page.keysShown = signature;
  renderChooser($("column-list"), keysOf(page), page.state, (c, on) => {
    page.state.cols = on ? [...page.state.cols, c] : page.state.cols.filter((x) => x !== c);
    restart(page);
  });
  columnOptions($("where-column"), keysOf(page), page.state);
}

function keep(rows) {
  const now = Date.now();
  return rows.map((run) => ({ ...run, fetchedAt: now }));
}

function nextPage(body) {
  if (body.next_cursor) return { cursor: body.next_cursor };
  return body.next_offset ? { offset: body.next_offset, asOf: body.as_of } : null;
}

async function loadPage(page) {
  const more = $("more");
  const params = apiParams(page.state, page.lossKey);
  params.set("limit", String(PAGE));
  if (page.next?.cursor) params.set("cursor", page.next.cursor);
  if (page.next?.offset) params.set("offset", String(page.next.offset));
  if (page.next?.asOf) params.set("as_of", String(page.next.asOf)); // runs created since never shift a page
  more.disabled = true;
  const generation = page.generation;
  try {
    const body = await getJSON(API + "?" + params);
    if (generation !== page.generation) return;
    page.rows = [...page.rows, ...keep(body.runs)];
    page.groups = body.groups;
    page.next = nextPage(body);
    more.hidden = !page.next;
    if (page.state.sort !== "loss") page.lossKey = lastLossKey(page.rows[0]?.last_values || {}) || page.lossKey;
    learn(page, body);
    render(page);
  } catch (err) {
    $("status").textContent = t("runs.failed", { error: err.message });
  } finally {
    more.disabled = false;
  }
}

async function refresh(page) {
  // The rows shown again (up to 200): new runs, status, steps, heartbeats, groups.
  if (document.hidden) return;
  const params = apiParams(page.state, page.lossKey);
  params.set("limit", String(Math.min(200, Math.max(PAGE, page.rows.length))));
  const generation = page.generation;
  try {
    const body = await getJSON(API + "?" + params);
    if (generation !== page.generation) return;
    const fresh = keep(body.runs);
    page.rows = page.rows.length > 200 ? [...fresh, ...page.rows.slice(200).filter((r) => !fresh.some((f) => f.id === r.id))] : fresh;
    page.groups = body.groups;
    if (page.rows.length <= 200) {
      page.next = nextPage(body);
      $("more").hidden = !page.next;
    }
    learn(page, body);
    render(page);
  } catch {
    /* try again next time */
  }
}

function restart(page) {
  page.generation += 1;
  page.rows = [];
  page.groups = null;
  page.next = null;
  history.replaceState(null, "", location.pathname + (writeState(page.state).toString() ? "?" + writeState(page.state) : ""));
  loadPage(page);
}

function sortBy(page, name) {
  const { state } = page;
  if (state.sort === name) state.dir = -state.dir;
  else {
    state.sort = name;
    state.dir = firstDir(name);
  }
  restart(page);
}

function addCondition(page) {
  const column = $("where-column").value;
  const op = $("where-op").value;
  const text = $("where-value").value;
  if (!column || text.trim() === "") return;
  page.state.where = [...page.state.where, [column, op, parseValue(text)]];
  $("where-value").value = "";
  restart(page);
}

document.addEventListener("DOMContentLoaded", async () => {
  await loadLanguage();
  mountSignIn($("signin"));
  const page = createPage();
  const { selected, state } = page;
  $("filter").value = state.q;
  $("status-filter").value = state.status;
  $("grouped").checked = state.grouped;
  $("since").value = state.since;
  for (const field of ["tag", "group"]) {
    const input = $(field + "-filter");
    input.value = state[field];
    input.addEventListener("change", () => {
      state[field] = input.value.trim();
      restart(page);
    });
  }
  $("filter").addEventListener("input", (e) => {
    state.q = e.target.value;
    history.replaceState(null, "", location.pathname + "?" + writeState(state));
    render(page);
  });
  $("filters").addEventListener("submit", (e) => e.preventDefault());
  $("where").addEventListener("submit", (e) => {
    e.preventDefault();
    addCondition(page);
  });
  $("status-filter").addEventListener("change", (e) => {
    state.status = e.target.value;
    restart(page);
  });
  $("since").addEventListener("change", (e) => {
    state.since = e.target.value;
    restart(page);
  });
  $("grouped").addEventListener("change", (e) => {
    state.grouped = e.target.checked;
    restart(page);
  });
  $("more").addEventListener("click", () => loadPage(page));
  $("compare").addEventListener("click", () => {
    const ids = [...selected];
    const first = page.rows.find((r) => r.id === ids[0]);
    const metric = state.cols.find((c) => c.startsWith("metric."));
    const key = (state.sort.startsWith("metric.") && state.sort.slice(7)) || (metric && metric.slice(7)) ||
      (first && lastLossKey(first.last_values)) || "train/loss";
    location.href = "/compare?" + new URLSearchParams({ runs: ids.join(","), key }).toString().replace(/%2C/g, ",").replace(/%2F/g, "/");
  });
  loadPage(page);
  setInterval(() => refresh(page), POLL_MS);
  setInterval(() => {
    for (const row of $("runs").tBodies[0].rows) {
      const run = page.rows.find((r) => r.id === row.dataset.id);
      const age = row.querySelector("td.age .cell-value");
      if (run && age) age.textContent = formatAge(heartbeatAge(run));
    }
  }, 1000);
});

// The runs page: every public run, newest first; filter, sort, compare; badges stay live
// by re-reading the list every few seconds. Run data is set with textContent only. The
// page's state is made once on load and passed to the functions that use it.
import { decode, getJSON } from "./api.js";
import { mountSignIn } from "./signin.js";
import { el, formatAge, formatTime, formatValue, lastLossKey } from "./util.js";

const API = "/api/v1/runs";
const PAGE = 50;
const POLL_MS = 5000;
const $ = (id) => document.getElementById(id);

function createPage() {
  const query = new URLSearchParams(location.search);
  return {
    runs: new Map(), // id -> summary (+ fetchedAt)
    selected: new Set(),
    cursor: null,
    loadedPages: 0,
    generation: 0, // bumped when the filters change: answers to older requests are dropped
    state: {
      q: query.get("q") || "",
      status: query.get("status") || "",
      tag: query.get("tag") || "", // tag and group filter on the server (GET /runs?tag=&group=)
      group: query.get("group") || "",
      sort: query.get("sort") || "started",
      dir: query.get("dir") === "asc" ? 1 : -1,
    },
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

const SORTS = {
  project: (r) => r.project.toLowerCase(),
  name: (r) => r.name.toLowerCase(),
  status: (r) => r.status,
  last_step: (r) => r.last_step ?? -1,
  loss: (r) => lossOf(r) ?? Infinity,
  heartbeat: (r) => heartbeatAge(r) ?? Infinity,
  started: (r) => r.started_at ?? r.created_at,
};

/** A cell: its label (shown on phones, where the table is a card) and its value. */
function cell(row, label, text, className) {
  const value = el("span", { className: "cell-value" });
  if (text !== undefined) value.textContent = text;
  row.append(el("td", { className }, el("span", { className: "cell-label", "aria-hidden": "true", text: label }), value));
  return value;
}

function renderRun(page, run) {
  const { selected } = page;
  const row = el("tr", { "data-id": run.id });
  cell(row, "Project", run.project);
  const name = cell(row, "Name", undefined, "name");
  const box = el("input", { type: "checkbox", "aria-label": "Select for comparison: " + run.name });
  box.checked = selected.has(run.id);
  box.addEventListener("change", () => {
    if (box.checked) selected.add(run.id);
    else selected.delete(run.id);
    $("compare").disabled = selected.size < 2;
  });
  name.append(box, el("a", { href: "/runs/" + encodeURIComponent(run.id), text: run.name }));
  // Shown only to the signed-in team (public runs alone are listed to anyone else).
  if (run.visibility !== "public") name.append(el("span", { className: "visibility", text: run.visibility }));
  if (run.group) name.append(chip(page, "group", run.group, "chip chip-group"));
  for (const tag of run.tags || []) name.append(chip(page, "tag", tag, "chip"));
  const status = cell(row, "Status", undefined);
  status.append(el("span", { className: "badge badge-" + run.status, text: run.status }));
  cell(row, "Step", run.last_step === null ? "" : String(run.last_step), "num");
  const loss = lossOf(run);
  cell(row, "Last loss", loss === null ? "" : typeof loss === "number" && Number.isFinite(loss) ? loss.toPrecision(5) : formatValue(loss), "num");
  cell(row, "Heartbeat", formatAge(heartbeatAge(run)), "age");
  cell(row, "Started", formatTime(run.started_at ?? run.created_at));
  return row;
}

/** A tag or group shown by a run's name; clicking it filters the list by it. */
function chip(page, field, value, className) {
  const button = el("button", { type: "button", className, text: value, title: `Only runs with ${field} ${value}` });
  button.dataset[field] = value;
  button.addEventListener("click", () => {
    page.state[field] = value;
    $(field + "-filter").value = value;
    restart(page);
  });
  return button;
}

function serverFilters(state, params) {
  if (state.status) params.set("status", state.status);
  if (state.tag) params.set("tag", state.tag);
  if (state.group) params.set("group", state.group);
  return params;
}

function visible({ runs, state }) {
  const q = state.q.trim().toLowerCase();
  const list = [...runs.values()].filter((r) =>
    (!q || r.project.toLowerCase().includes(q) || r.name.toLowerCase().includes(q)) && (!state.status || r.status === state.status));
  const key = SORTS[state.sort] || SORTS.started;
  return list.sort((a, b) => {
    const ka = key(a);
    const kb = key(b);
    return (ka < kb ? -1 : ka > kb ? 1 : 0) * state.dir;
  });
}

function render(page) {
  const { runs, state } = page;
  const table = $("runs");
  const tbody = table.tBodies[0];
  const list = visible(page);
  tbody.replaceChildren(...list.map((run) => renderRun(page, run)));
  for (const th of table.tHead.rows[0].cells) {
    if (th.dataset.sort === state.sort) th.setAttribute("aria-sort", state.dir > 0 ? "ascending" : "descending");
    else th.removeAttribute("aria-sort");
  }
  table.hidden = list.length === 0;
  const n = list.length;
  const filtered = state.status || state.tag || state.group;
  $("status").textContent = runs.size === 0 && !filtered ? "No public runs yet." : n === 0 ? "No runs match." : n + (n === 1 ? " run" : " runs");
}

function writeUrl(state) {
  const q = new URLSearchParams();
  if (state.q) q.set("q", state.q);
  if (state.status) q.set("status", state.status);
  if (state.tag) q.set("tag", state.tag);
  if (state.group) q.set("group", state.group);
  if (state.sort !== "started") q.set("sort", state.sort);
  if (state.dir > 0) q.set("dir", "asc");
  history.replaceState(null, "", location.pathname + (q.toString() ? "?" + q : ""));
}

function keep(page, list) {
  const now = Date.now();
  for (const run of list) page.runs.set(run.id, { ...run, fetchedAt: now });
}

async function loadPage(page) {
  const more = $("more");
  const params = new URLSearchParams({ limit: String(PAGE) });
  if (page.cursor) params.set("cursor", page.cursor);
  serverFilters(page.state, params);
  more.disabled = true;
  const generation = page.generation;
  try {
    const body = await getJSON(API + "?" + params);
    if (generation !== page.generation) return;
    keep(page, body.runs);
    page.loadedPages += 1;
    page.cursor = body.next_cursor;
    more.hidden = !page.cursor;
    render(page);
  } catch (err) {
    $("status").textContent = "Could not load runs: " + err.message;
  } finally {
    more.disabled = false;
  }
}

async function refresh(page) {
  // The newest runs again (as many as are shown, up to 200): new runs, status, steps, heartbeats.
  if (document.hidden) return;
  const { runs, state } = page;
  const params = serverFilters(state, new URLSearchParams({ limit: String(Math.min(200, Math.max(PAGE, page.loadedPages * PAGE))) }));
  const generation = page.generation;
  try {
    const body = await getJSON(API + "?" + params);
    if (generation !== page.generation) return;
    keep(page, body.runs);
    if (state.status) for (const [id, r] of runs) if (r.status !== state.status && !body.runs.some((b) => b.id === id)) runs.delete(id);
    render(page);
  } catch {
    /* try again next time */
  }
}

function restart(page) {
  page.generation += 1;
  page.runs.clear();
  page.cursor = null;
  page.loadedPages = 0;
  writeUrl(page.state);
  loadPage(page);
}

document.addEventListener("DOMContentLoaded", () => {
  mountSignIn($("signin"));
  const page = createPage();
  const { runs, selected, state } = page;
  $("filter").value = state.q;
  $("status-filter").value = state.status;
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
    writeUrl(state);
    render(page);
  });
  $("filters").addEventListener("submit", (e) => e.preventDefault());
  $("status-filter").addEventListener("change", (e) => {
    state.status = e.target.value;
    restart(page);
  });
  for (const th of $("runs").tHead.rows[0].cells) {
    th.querySelector("button").addEventListener("click", () => {
      if (state.sort === th.dataset.sort) state.dir = -state.dir;
      else {
        state.sort = th.dataset.sort;
        state.dir = ["project", "name", "status"].includes(state.sort) ? 1 : -1;
      }
      writeUrl(state);
      render(page);
    });
  }
  $("more").addEventListener("click", () => loadPage(page));
  $("compare").addEventListener("click", () => {
    const ids = [...selected];
    const first = runs.get(ids[0]);
    const key = (first && lastLossKey(first.last_values)) || "train/loss";
    location.href = "/compare?" + new URLSearchParams({ runs: ids.join(","), key }).toString().replace(/%2C/g, ",").replace(/%2F/g, "/");
  });
  loadPage(page);
  setInterval(() => refresh(page), POLL_MS);
  setInterval(() => {
    for (const row of $("runs").tBodies[0].rows) {
      const run = runs.get(row.dataset.id);
      const age = row.querySelector("td.age .cell-value");
      if (run && age) age.textContent = formatAge(heartbeatAge(run));
    }
  }, 1000);
});

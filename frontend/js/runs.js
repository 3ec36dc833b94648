// The runs page: every public run, newest first; filter, sort, compare; badges stay live
// by re-reading the list every few seconds. Run data is set with textContent only.
import { decode, getJSON } from "./api.js";
import { el, formatAge, formatTime, formatValue, lastLossKey } from "./util.js";

const API = "/api/v1/runs";
const PAGE = 50;
const POLL_MS = 5000;
const $ = (id) => document.getElementById(id);

const runs = new Map(); // id -> summary (+ fetchedAt)
const selected = new Set();
let cursor = null;
let loadedPages = 0;
const query = new URLSearchParams(location.search);
const state = {
  q: query.get("q") || "",
  status: query.get("status") || "",
  sort: query.get("sort") || "started",
  dir: query.get("dir") === "asc" ? 1 : query.get("dir") === "desc" ? -1 : -1,
};

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

function cell(row, label, text, className) {
  const td = el("td", { className, "data-label": label });
  if (text !== undefined) td.textContent = text;
  row.append(td);
  return td;
}

function renderRun(run) {
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
  const status = cell(row, "Status", undefined);
  status.append(el("span", { className: "badge badge-" + run.status, text: run.status }));
  cell(row, "Step", run.last_step === null ? "" : String(run.last_step), "num");
  const loss = lossOf(run);
  cell(row, "Last loss", loss === null ? "" : typeof loss === "number" && Number.isFinite(loss) ? loss.toPrecision(5) : formatValue(loss), "num");
  cell(row, "Heartbeat", formatAge(heartbeatAge(run)), "age");
  cell(row, "Started", formatTime(run.started_at ?? run.created_at));
  return row;
}

function visible() {
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

function render() {
  const table = $("runs");
  const tbody = table.tBodies[0];
  const list = visible();
  tbody.replaceChildren(...list.map(renderRun));
  for (const th of table.tHead.rows[0].cells) {
    if (th.dataset.sort === state.sort) th.setAttribute("aria-sort", state.dir > 0 ? "ascending" : "descending");
    else th.removeAttribute("aria-sort");
  }
  table.hidden = list.length === 0;
  const n = list.length;
  $("status").textContent = runs.size === 0 ? "No public runs yet." : n === 0 ? "No runs match." : n + (n === 1 ? " run" : " runs");
}

function writeUrl() {
  const q = new URLSearchParams();
  if (state.q) q.set("q", state.q);
  if (state.status) q.set("status", state.status);
  if (state.sort !== "started") q.set("sort", state.sort);
  if (state.dir > 0) q.set("dir", "asc");
  history.replaceState(null, "", location.pathname + (q.toString() ? "?" + q : ""));
}

function store(list) {
  const now = Date.now();
  for (const run of list) runs.set(run.id, { ...run, fetchedAt: now });
}

async function loadPage() {
  const more = $("more");
  const params = new URLSearchParams({ limit: String(PAGE) });
  if (cursor) params.set("cursor", cursor);
  if (state.status) params.set("status", state.status);
  more.disabled = true;
  try {
    const body = await getJSON(API + "?" + params);
    store(body.runs);
    loadedPages += 1;
    cursor = body.next_cursor;
    more.hidden = !cursor;
    render();
  } catch (err) {
    $("status").textContent = "Could not load runs: " + err.message;
  } finally {
    more.disabled = false;
  }
}

async function refresh() {
  // The newest runs again (as many as are shown, up to 200): new runs, status, steps, heartbeats.
  if (document.hidden) return;
  const params = new URLSearchParams({ limit: String(Math.min(200, Math.max(PAGE, loadedPages * PAGE))) });
  if (state.status) params.set("status", state.status);
  try {
    const body = await getJSON(API + "?" + params);
    store(body.runs);
    if (state.status) for (const [id, r] of runs) if (r.status !== state.status && !body.runs.some((b) => b.id === id)) runs.delete(id);
    render();
  } catch {
    /* try again next time */
  }
}

function restart() {
  runs.clear();
  cursor = null;
  loadedPages = 0;
  writeUrl();
  loadPage();
}

document.addEventListener("DOMContentLoaded", () => {
  $("filter").value = state.q;
  $("status-filter").value = state.status;
  $("filter").addEventListener("input", (e) => {
    state.q = e.target.value;
    writeUrl();
    render();
  });
  $("filters").addEventListener("submit", (e) => e.preventDefault());
  $("status-filter").addEventListener("change", (e) => {
    state.status = e.target.value;
    restart();
  });
  for (const th of $("runs").tHead.rows[0].cells) {
    th.querySelector("button").addEventListener("click", () => {
      if (state.sort === th.dataset.sort) state.dir = -state.dir;
      else {
        state.sort = th.dataset.sort;
        state.dir = ["project", "name", "status"].includes(state.sort) ? 1 : -1;
      }
      writeUrl();
      render();
    });
  }
  $("more").addEventListener("click", () => loadPage());
  $("compare").addEventListener("click", () => {
    const ids = [...selected];
    const first = runs.get(ids[0]);
    const key = (first && lastLossKey(first.last_values)) || "train/loss";
    location.href = "/compare?" + new URLSearchParams({ runs: ids.join(","), key }).toString().replace(/%2C/g, ",").replace(/%2F/g, "/");
  });
  loadPage();
  setInterval(refresh, POLL_MS);
  setInterval(() => {
    for (const row of $("runs").tBodies[0].rows) {
      const run = runs.get(row.dataset.id);
      const age = row.querySelector("td.age");
      if (run && age) age.textContent = formatAge(heartbeatAge(run));
    }
  }, 1000);
});

// The runs page's state in its URL (?q=&status=&tag=&group=&sort=&dir=&col=&where=&since=&grouped=)
// and the GET /api/v1/runs parameters it asks for: filters, sort and grouping are the server's.

export const OPS = { eq: "=", ne: "≠", lt: "<", le: "≤", gt: ">", ge: "≥" };
// Header sorts of the fixed columns -> the server's column (started: newest first, the default).
const FIELD_SORTS = { project: "project", name: "name", status: "status", last_step: "last_step", heartbeat: "heartbeat_at" };
const ASCENDING_FIRST = new Set(["project", "name", "status"]);

function readWhere(text) {
  try {
    const w = JSON.parse(text);
    return Array.isArray(w) && w.length === 3 && typeof w[0] === "string" && w[1] in OPS ? w : null;
  } catch {
    return null;
  }
}

/** The page's state from its query string. */
export function readState(search) {
  const q = new URLSearchParams(search);
  return {
    q: q.get("q") || "",
    status: q.get("status") || "",
    tag: q.get("tag") || "",
    group: q.get("group") || "",
    sort: q.get("sort") || "started",
    dir: q.get("dir") === "asc" ? 1 : -1,
    cols: q.getAll("col").filter((c) => /^(config|summary|metric)\../.test(c)),
    where: q.getAll("where").map(readWhere).filter(Boolean),
    since: q.get("since") || "",
    grouped: q.get("grouped") === "1",
  };
}

/** The query string that reproduces ``state``. */
export function writeState(state) {
  const q = new URLSearchParams();
  if (state.q) q.set("q", state.q);
  for (const name of ["status", "tag", "group", "since"]) if (state[name]) q.set(name, state[name]);
  if (state.sort !== "started") q.set("sort", state.sort);
  if (state.dir > 0) q.set("dir", "asc");
  for (const c of state.cols) q.append("col", c);
  for (const w of state.where) q.append("where", JSON.stringify(w));
  if (state.grouped) q.set("grouped", "1");
  return q;
}

/** The first direction of a newly clicked header: names A to Z, numbers largest first. */
export function firstDir(sort) {
  return ASCENDING_FIRST.has(sort) ? 1 : -1;
}

/** GET /runs parameters for ``state`` (``lossKey``: the metric the Last loss column shows). */
export function apiParams(state, lossKey) {
  const p = new URLSearchParams();
  for (const name of ["status", "tag", "group"]) if (state[name]) p.set(name, state[name]);
  for (const c of state.cols) p.append("column", c);
  for (const w of state.where) p.append("filter", JSON.stringify(w));
  if (state.since) {
    const t = Date.parse(state.since + "T00:00:00Z") / 1000;
    if (Number.isFinite(t)) p.append("filter", JSON.stringify(["created_at", "ge", t]));
  }
  let descending = state.dir < 0;
  let sort = state.sort === "loss" ? "metric." + lossKey : FIELD_SORTS[state.sort] || state.sort;
  if (state.sort === "started") sort = descending ? null : "created_at"; // newest first: the server's default
  if (state.sort === "heartbeat") descending = !descending; // the largest age is the oldest heartbeat
  if (sort) {
    p.set("sort", sort);
    p.set("order", descending ? "desc" : "asc");
  }
  if (state.grouped) p.set("group_by", "group");
  p.set("keys", "true");
  return p;
}

/** What a condition's value box holds as JSON: a number, true/false, or text. */
export function parseValue(text) {
  const t = text.trim();
  if (t === "true" || t === "false") return t === "true";
  if (t !== "" && Number.isFinite(Number(t))) return Number(t);
  return text;
}

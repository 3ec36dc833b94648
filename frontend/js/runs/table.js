// The runs table's header, chosen columns, group rows and column chooser. Every key, value and
// name a run sent is set as text (textContent), never as HTML.
import { el } from "../util.js";
import { t } from "../i18n.js";

export const FIXED = [
  ["project", "runs.col.project"], ["name", "runs.col.name"], ["status", "runs.col.status"], ["last_step", "runs.col.step", "num"],
  ["loss", "runs.col.loss", "num"], ["heartbeat", "runs.col.heartbeat"], ["started", "runs.col.started"],
];

/** A cell's text: numbers to 5 significant digits (no trailing zeros), text as is, anything else as JSON. */
export function formatCell(value) {
  if (value === undefined || value === null) return "";
  if (typeof value === "number") return Number.isInteger(value) ? String(value) : String(Number(value.toPrecision(5)));
  if (typeof value === "string") return value;
  return JSON.stringify(value);
}

/** The header row: the fixed columns, then the chosen ones; each header sorts (``onSort(name)``). */
export function renderHeader(table, state, onSort) {
  const cells = [...FIXED.map(([name, label, cls]) => [name, t(label), cls, false]), ...state.cols.map((c) => [c, c, "num col", true])];
  const row = el("tr");
  for (const [name, label, cls, user] of cells) {
    const th = el("th", { scope: "col", className: cls }, el("button", { type: "button", className: "sort", text: label, "data-user": user }));
    th.dataset.sort = name;
    if (state.sort === name) th.setAttribute("aria-sort", state.dir > 0 ? "ascending" : "descending");
    th.querySelector("button").addEventListener("click", () => onSort(name));
    row.append(th);
  }
  table.tHead.replaceChildren(row);
}

/** The chosen columns' cells of one run (``values`` as the server published them). */
export function valueCells(row, run, cols) {
  for (const c of cols) {
    const value = (run.values || {})[c];
    row.append(el("td", { className: typeof value === "number" ? "num col" : "col" }, el("span", { className: "cell-label", "aria-hidden": "true", text: c, "data-user": true }),
      el("span", { className: "cell-value", text: formatCell(value), "data-user": true })));
  }
}

/** A group's header row: its name and count, then min / mean / max under each numeric column. */
export function groupRow(group, cols) {
  const name = group.group === null ? t("runs.noGroup") : group.group;
  const row = el("tr", { className: "group-row" });
  row.dataset.group = group.group ?? "";
  row.append(el("th", { scope: "rowgroup", colspan: String(FIXED.length), className: "group-name" },
    el("span", { text: name, "data-user": group.group !== null }), " ", el("span", { className: "group-count", text: t("runs.count", { count: group.count }) })));
  for (const c of cols) {
    const a = group.aggregates[c];
    const td = el("td", { className: "num col aggregate" });
    if (a) {
      td.textContent = t("runs.mean", { value: formatCell(a.mean) });
      td.append(el("span", { className: "range", text: `${formatCell(a.min)} – ${formatCell(a.max)}` }));
      td.title = t("runs.aggregateTitle", { column: c, min: String(a.min), mean: String(a.mean), max: String(a.max) });
    }
    row.append(td);
  }
  return row;
}

/** The column chooser: a checkbox per known config, summary and metric key. */
export function renderChooser(box, keys, state, onChange) {
  const known = new Set(state.cols);
  for (const kind of ["config", "summary", "metric"]) for (const k of keys[kind]) known.add(kind + "." + k);
  const sorted = [...known].sort();
  if (!sorted.length) {
    box.replaceChildren(el("p", { className: "empty", text: t("runs.noKeys") }));
    return;
  }
  box.replaceChildren(...sorted.map((c) => {
    const input = el("input", { type: "checkbox", value: c });
    input.checked = state.cols.includes(c);
    input.addEventListener("change", () => onChange(c, input.checked));
    return el("label", { className: "column-choice" }, input, el("span", { text: c, "data-user": true }));
  }));
}

/** The options of the condition builder's column list: run fields, then the known keys. */
export function columnOptions(select, keys, state) {
  const fields = ["created_at", "started_at", "finished_at", "last_step", "name", "job_type"];
  const cols = new Set(state.cols);
  for (const kind of ["config", "summary", "metric"]) for (const k of keys[kind]) cols.add(kind + "." + k);
  const current = select.value;
  select.replaceChildren(...[...[...cols].sort(), ...fields].map((c) => el("option", { value: c, text: c, "data-user": true })));
  if (current) select.value = current;
}

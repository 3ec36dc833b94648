// The runs table's header, chosen columns, group rows and column chooser. Every key, value and
// name a run sent is set as text (textContent), never as HTML.
import { el } from "../util.js";

export const FIXED = [
  ["project", "Project"], ["name", "Name"], ["status", "Status"], ["last_step", "Step", "num"],
  ["loss", "Last loss", "num"], ["heartbeat", "Heartbeat"], ["started", "Started"],
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
  const cells = [...FIXED.map(([name, label, cls]) => [name, label, cls]), ...state.cols.map((c) => [c, c, "num col"])];
  const row = el("tr");
  for (const [name, label, cls] of cells) {
    const th = el("th", { scope: "col", className: cls }, el("button", { type: "button", className: "sort", text: label }));
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
    row.append(el("td", { className: typeof value === "number" ? "num col" : "col" }, el("span", { className: "cell-label", "aria-hidden": "true", text: c }),
      el("span", { className: "cell-value", text: formatCell(value) })));
  }
}

/** A group's header row: its name and count, then min / mean / max under each numeric column. */
export function groupRow(group, cols) {
  const name = group.group === null ? "(no group)" : group.group;
  const row = el("tr", { className: "group-row" });
  row.dataset.group = group.group ?? "";
  row.append(el("th", { scope: "rowgroup", colspan: String(FIXED.length), className: "group-name" },
    el("span", { text: name }), el("span", { className: "group-count", text: ` ${group.count} ${group.count === 1 ? "run" : "runs"}` })));
  for (const c of cols) {
    const a = group.aggregates[c];
    const td = el("td", { className: "num col aggregate" });
    if (a) {
      td.textContent = "mean " + formatCell(a.mean);
      td.append(el("span", { className: "range", text: `${formatCell(a.min)} – ${formatCell(a.max)}` }));
      td.title = `${c}: min ${a.min}, mean ${a.mean}, max ${a.max}`;
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
    box.replaceChildren(el("p", { className: "empty", text: "No config, summary or metric keys yet." }));
    return;
  }
  box.replaceChildren(...sorted.map((c) => {
    const input = el("input", { type: "checkbox", value: c });
    input.checked = state.cols.includes(c);
    input.addEventListener("change", () => onChange(c, input.checked));
    return el("label", { className: "column-choice" }, input, el("span", { text: c }));
  }));
}

/** The options of the condition builder's column list: run fields, then the known keys. */
export function columnOptions(select, keys, state) {
  const fields = ["created_at", "started_at", "finished_at", "last_step", "name", "job_type"];
  const cols = new Set(state.cols);
  for (const kind of ["config", "summary", "metric"]) for (const k of keys[kind]) cols.add(kind + "." + k);
  const current = select.value;
  select.replaceChildren(...[...[...cols].sort(), ...fields].map((c) => el("option", { value: c, text: c })));
  if (current) select.value = current;
}

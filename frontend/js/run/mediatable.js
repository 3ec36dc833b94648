// A table key across steps: the newest tables of the key read, a step slider over them, the
// chosen one drawn as an HTML table (every cell as text).

import { el, formatValue } from "../util.js";
import { readAfter, readNewest } from "./mediaread.js";
import { t } from "../i18n.js";

const NEWEST = 100; // tables read (each up to 256 KiB)

function cellText(cell) {
  if (cell === null || cell === undefined) return "";
  if (typeof cell === "number") return Number.isInteger(cell) ? String(cell) : formatValue(cell);
  return String(cell);
}

export class TableBlock {
  constructor(runId, info, box) {
    this.runId = runId;
    this.info = info;
    this.rows = [];
    this.at = -1;
    this.slider = el("input", { type: "range", min: "0", "aria-label": t("media.stepAria", { key: info.key }), oninput: () => this.show(Number(this.slider.value)) });
    this.label = el("output", { className: "note" });
    this.table = el("div", { className: "table-wrap media-table", "data-user": true }); // the trainer's cells
    box.append(el("div", { className: "strip-nav" }, this.slider, this.label), this.table);
  }

  async open() {
    this.rows = await readNewest(this.runId, this.info, NEWEST);
    this.show(this.rows.length - 1);
  }

  show(i) {
    if (!this.rows.length) return;
    this.at = Math.max(0, Math.min(this.rows.length - 1, i));
    const row = this.rows[this.at];
    this.slider.max = String(this.rows.length - 1);
    this.slider.value = String(this.at);
    this.slider.disabled = this.rows.length < 2;
    const position = { step: row.step, at: this.at + 1, total: this.rows.length, count: this.info.count };
    this.label.textContent = t(this.info.count > this.rows.length ? "media.positionNewest" : "media.position", position);
    const table = el("table", { className: "data" },
      row.caption ? el("caption", { text: String(row.caption) }) : null,
      el("thead", {}, el("tr", {}, ...row.columns.map((c) => el("th", { scope: "col", text: String(c) })))),
      el("tbody", {}, ...row.rows.map((cells) => el("tr", {}, ...cells.map((c) => el("td", {
        className: typeof c === "number" ? "num" : null, text: cellText(c),
      }))))));
    this.table.replaceChildren(table);
  }

  async onLive(info) {
    this.info = info;
    if (!this.rows.length) return this.open();
    const following = this.at === this.rows.length - 1;
    const read = await readAfter(this.runId, info.key, this.rows[this.rows.length - 1], NEWEST);
    const ids = new Set(this.rows.map((r) => r.id));
    this.rows.push(...read.filter((r) => !ids.has(r.id)));
    this.show(following ? this.rows.length - 1 : this.at);
  }
}

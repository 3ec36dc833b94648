// A histogram key across steps: its newest rows read and drawn as a heat map (heatmap.js),
// the step, bin and count under the pointer said in words below it.

import { el, formatValue, theme } from "../util.js";
import { cellAt, drawHeatmap } from "./heatmap.js";
import { readAfter, readNewest } from "./mediaread.js";
import { t } from "../i18n.js";

const NEWEST = 1000; // rows drawn

export class HistogramBlock {
  constructor(runId, info, box) {
    this.runId = runId;
    this.info = info;
    this.rows = [];
    this.at = null; // the drawn layout
    this.canvas = el("canvas", { className: "heatmap", role: "img", "aria-label": t("histogram.aria", { key: info.key }) });
    this.readout = el("p", { className: "note heatmap-readout", text: t("histogram.hint") });
    this.canvas.addEventListener("mousemove", (e) => this.point(e));
    box.append(this.canvas, this.readout);
    new ResizeObserver(() => this.draw()).observe(this.canvas);
  }

  async open() {
    this.rows = await readNewest(this.runId, this.info, NEWEST);
    this.draw();
  }

  draw() {
    if (!this.rows.length || !this.canvas.clientWidth) return;
    this.at = drawHeatmap(this.canvas, this.rows, theme(), t("x.step"));
    const older = this.info.count > this.rows.length;
    this.canvas.setAttribute("aria-label", t(older ? "histogram.drawnNewest" : "histogram.drawn", {
      key: this.info.key, count: this.rows.length, total: this.info.count, first: this.rows[0].step,
      last: this.rows[this.rows.length - 1].step, lo: formatValue(this.at.lo), hi: formatValue(this.at.hi),
    }));
  }

  point(event) {
    if (!this.at) return;
    const box = this.canvas.getBoundingClientRect();
    const hit = cellAt(this.rows, this.at, event.clientX - box.left, event.clientY - box.top);
    if (!hit) return;
    const { row, bin } = hit;
    const extra = ["nan", "inf", "neg_inf"].filter((k) => row[k]).map((k) => `${k} ${row[k]}`);
    const where = bin < 0 ? t("histogram.outside") :
      `[${formatValue(row.edges[bin])}, ${formatValue(row.edges[bin + 1])}): ${formatValue(row.counts[bin])}`;
    this.readout.textContent = extra.length ? t("histogram.readoutExtra", { step: row.step, where, extra: extra.join(", ") })
      : t("histogram.readout", { step: row.step, where });
  }

  async onLive(info) {
    this.info = info;
    if (!this.rows.length) return this.open();
    const read = await readAfter(this.runId, info.key, this.rows[this.rows.length - 1], NEWEST);
    const ids = new Set(this.rows.map((r) => r.id));
    this.rows = [...this.rows, ...read.filter((r) => !ids.has(r.id))].slice(-NEWEST);
    this.draw();
  }
}

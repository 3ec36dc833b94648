// The evaluations panel (GET /runs/{id}/evals): for one suite (a selector when there are
// several), a table of its tasks and metrics × the steps they were scored at (a checkpoint's
// step when the scores are tied to one), the newest columns shown and a sparkline per row over
// all of them; and the scores line of a checkpoint in the checkpoints panel (checkpoints.js).

import { decode } from "../api.js";
import { el, formatValue } from "../util.js";
import { sparkline } from "./sparkline.js";
import { formatNumber, t } from "../i18n.js";

const $ = (id) => document.getElementById(id);
const COLUMNS = 8; // the newest steps shown as columns; the sparklines have them all

/** The metric a task is shown by: the first the trainer logged that is not a standard error. */
export function primaryMetric(metrics) {
  const names = Object.keys(metrics || {});
  return names.find((n) => !/stderr/i.test(n)) ?? names[0] ?? null;
}

/** Every metric of an evaluation in words: "acc 0.31 · acc_norm 0.35 · n 1000". */
export function metricsText(e) {
  const parts = Object.entries(e.metrics || {}).map(([k, v]) => `${k} ${formatValue(decode(v))}`);
  if (Number.isFinite(e.n)) parts.push(`n ${e.n}`);
  return parts.join(" · ");
}

/** A checkpoint's scores in a line: each task's main metric (the suite too when there are several). */
export function scoresLine(evals) {
  const suites = new Set(evals.map((e) => e.suite));
  return evals.map((e) => {
    const metric = primaryMetric(e.metrics);
    const name = (suites.size > 1 ? e.suite + " / " : "") + e.task;
    return metric === null ? name : `${name} ${metric} ${formatValue(decode(e.metrics[metric]))}`;
  }).join(" · ");
}

const column = (e) => e.checkpoint ?? e.step;

/** A task's rows: every metric it was scored by but standard errors (in the cells' titles), in the
 * order the newest evaluation lists them, then any only older ones had. */
function shownMetrics(byStep) {
  const names = new Set();
  for (const s of [...byStep.keys()].sort((a, b) => b - a)) {
    for (const name of Object.keys(byStep.get(s).metrics || {})) if (!/stderr/i.test(name)) names.add(name);
  }
  return names.size ? [...names] : [primaryMetric(byStep.get(Math.max(...byStep.keys())).metrics) ?? ""];
}

export class EvalsPanel {
  constructor(page) {
    this.page = page;
    this.evals = [];
    this.suite = null;
  }

  async load() {
    let body;
    try {
      body = await this.page.read("evals");
    } catch {
      return;
    }
    const card = $("evals-card");
    if (body.withheld) {
      card.hidden = false;
      $("evals").replaceChildren(el("p", { className: "empty", text: t("evals.withheld") }));
      return;
    }
    this.evals = body.evals;
    card.hidden = this.evals.length === 0;
    if (this.evals.length) this.render();
  }

  render() {
    const counts = new Map();
    for (const e of this.evals) counts.set(e.suite, (counts.get(e.suite) || 0) + 1);
    const suites = [...counts.keys()].sort();
    // First shown: the suite with the most scores.
    if (!suites.includes(this.suite)) this.suite = suites.reduce((a, b) => (counts.get(b) > counts.get(a) ? b : a));
    const parts = [];
    if (suites.length > 1) {
      const select = el("select", { id: "evals-suite", onchange: () => { this.suite = select.value; this.render(); } },
        ...suites.map((s) => el("option", { value: s, text: s, "data-user": true })));
      select.value = this.suite;
      parts.push(el("label", { className: "evals-suite" }, t("evals.suite"), " ", select));
    } else parts.push(el("p", { className: "evals-suite" }, t("evals.suite"), " ", el("strong", { text: this.suite, "data-user": true })));
    parts.push(...this.table(this.evals.filter((e) => e.suite === this.suite)));
    $("evals").replaceChildren(...parts);
  }

  /** The suite's table (and a note when it leaves older steps out). */
  table(evals) {
    const steps = [...new Set(evals.map(column))].sort((a, b) => a - b);
    const shown = steps.slice(-COLUMNS);
    const tied = new Set(evals.filter((e) => e.checkpoint !== null).map(column));
    const cells = new Map(); // task -> column -> evaluation (the last stored)
    for (const e of evals) {
      if (!cells.has(e.task)) cells.set(e.task, new Map());
      cells.get(e.task).set(column(e), e);
    }
    const head = el("tr", {}, el("th", { scope: "col", text: t("evals.task") }), el("th", { scope: "col", text: t("evals.metric") }),
      el("th", { scope: "col", text: t("evals.trend") }),
      ...shown.map((s) => el("th", { scope: "col", className: "num" },
        el("span", { className: "evals-at", text: t(tied.has(s) ? "evals.atCheckpoint" : "evals.atStep") }), el("br"), formatNumber(s))));
    const body = el("tbody");
    for (const task of [...cells.keys()].sort()) {
      const byStep = cells.get(task);
      shownMetrics(byStep).forEach((metric, i) => {
        const value = (e) => (e && metric in e.metrics ? decode(e.metrics[metric]) : null);
        const series = steps.map((s) => value(byStep.get(s)));
        const known = series.filter((v) => v !== null);
        const trend = `${task} ${metric}: ${known.map(formatValue).join(", ")}`;
        body.append(el("tr", { "data-task": task, "data-metric": metric, className: i ? "evals-more" : "" },
          el("th", { scope: "row", text: task, "data-user": true }),
          el("td", { className: "evals-metric", text: metric, "data-user": true }),
          el("td", { "data-user": true }, sparkline(series.map((v) => v ?? NaN), trend)),
          ...shown.map((s) => {
            const e = byStep.get(s);
            const td = el("td", { className: "num", title: e ? metricsText(e) : null, "data-user": true }, e ? formatValue(value(e)) : "");
            // Each evaluation's "Discuss" (run/comments.js): an icon and its count, the table stays narrow.
            if (e && i === 0 && Number.isSafeInteger(e.id) && this.page.comments) td.append(this.page.comments.discussButton("eval", e.id, e.step, true));
            return td;
          })));
      });
    }
    const out = [el("div", { className: "table-wrap evals-wrap" }, el("table", { className: "evals" }, el("thead", {}, head), body))];
    if (steps.length > shown.length) {
      out.push(el("p", { className: "note", text: t("evals.newest", { shown: shown.length, count: steps.length }) }));
    }
    return out;
  }
}

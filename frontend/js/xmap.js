// The x axis of a chart: steps, or a monotonic series (tokens seen; wall time: the server's
// `_timestamp`, each step's time) mapped from steps by interpolating between its points. Ranges
// are kept in x units; toStep turns them back into steps for /metrics.

import { decode, getMetrics } from "./api.js";
import { bisect } from "./util.js";
import { t } from "./i18n.js";

function interp(xs, ys, x) {
  const n = xs.length;
  if (n === 0) return null;
  const i = bisect(xs, x);
  if (i === 0) return ys[0];
  if (i >= n) return ys[n - 1];
  const x0 = xs[i - 1];
  const x1 = xs[i];
  return x1 === x0 ? ys[i] : ys[i - 1] + ((ys[i] - ys[i - 1]) * (x - x0)) / (x1 - x0);
}

/** The series the server records each step's wall time in (epoch seconds). */
export const TIMESTAMP_KEY = "_timestamp";

// Time since the start is plotted in the unit that suits its span: a short run reads in seconds,
// a long one in hours. [name, seconds, the longest span shown in it].
const UNITS = [["s", 1, 120], ["min", 60, 7200], ["h", 3600, Infinity]];

function unitFor(span) {
  return UNITS.find(([, , most]) => span < most);
}

export class XMap {
  /** `sinceStart`: a wall-clock key (epoch seconds) is shown as time since its first value, in
   * seconds, minutes or hours by the span loaded (`shareUnit` gives several maps one); `fallback`: the key to read instead when `key` has no points (a run stored before
   * the server kept step times, with a logged time key). */
  constructor(mode = "step", key = null, { sinceStart = false, fallback = null } = {}) {
    this.mode = mode;
    this.key = key;
    this.fallback = fallback;
    this.sinceStart = sinceStart;
    this.origin = 0;
    this.steps = [];
    this.values = [];
    this.epoch = false;
    this.unit = UNITS[0];
  }

  get identity() {
    return this.mode === "step" || !this.key;
  }

  async load(runId) {
    if (this.identity) return this;
    let body;
    try {
      body = await getMetrics(runId, this.key, { maxPoints: 5000 });
    } catch (err) {
      if (!this.fallback) throw err;
      this.key = this.fallback;
      this.fallback = null;
      return this.load(runId);
    }
    const byStep = new Map();
    for (const s of body.series) {
      for (let i = 0; i < s.step.length; i++) {
        const v = s.last[i];
        if (Number.isFinite(v)) byStep.set(s.last_step[i], v);
      }
    }
    this.steps = [...byStep.keys()].sort((a, b) => a - b);
    const clock = this.mode === "time" && this.steps.length > 0 && byStep.get(this.steps[0]) > 1e9;
    this.origin = clock && this.sinceStart ? byStep.get(this.steps[0]) : 0;
    this.values = this.steps.map((s) => byStep.get(s) - this.origin);
    this.epoch = clock && !this.sinceStart;
    this.unit = unitFor(this.span);
    return this;
  }

  /** Extend with live points of the mapping key. */
  extend(steps, values) {
    for (let i = 0; i < steps.length; i++) {
      const v = decode(values[i]);
      if (!Number.isFinite(v)) continue;
      if (this.steps.length && steps[i] <= this.steps[this.steps.length - 1]) continue;
      this.steps.push(steps[i]);
      this.values.push(v - this.origin);
    }
  }

  toX(step) {
    if (this.identity) return step;
    return interp(this.steps, this.values, step);
  }

  toStep(x) {
    if (this.identity) return x;
    return interp(this.values, this.steps, x);
  }

  /** Whether x is time since the start (plotted in `unit`). */
  get relative() {
    return this.mode === "time" && this.sinceStart && this.origin !== 0;
  }

  /** The seconds the loaded points span. */
  get span() {
    return this.values.length ? this.values[this.values.length - 1] - this.values[0] : 0;
  }

  /** x units -> what Plotly plots (date axes take epoch milliseconds). */
  toPlot(x) {
    if (x === null) return x;
    if (this.relative) return x / this.unit[1];
    return this.epoch ? x * 1000 : x;
  }

  fromPlot(p) {
    if (this.relative) return (typeof p === "number" ? p : Number(p)) * this.unit[1];
    if (this.epoch) {
      const ms = typeof p === "number" ? p : Date.parse(String(p).replace(" ", "T") + (/[zZ]|[+-]\d\d:?\d\d$/.test(p) ? "" : "Z"));
      return ms / 1000;
    }
    return typeof p === "number" ? p : Number(p);
  }

  get axisTitle() {
    if (this.identity) return t("x.step");
    if (this.key === TIMESTAMP_KEY) return this.relative ? t("x.relativeUnit", { unit: t("unit." + this.unit[0]) }) : t("x.time");
    return this.relative ? t("x.sinceStart", { key: this.key, unit: t("unit." + this.unit[0]) }) : this.key;
  }
}

/** One unit of time since the start for maps drawn on one axis: the one the longest span needs. */
export function shareUnit(maps) {
  const unit = unitFor(Math.max(0, ...maps.map((m) => m.span)));
  for (const m of maps) m.unit = unit;
}

export function rangesEqual(a, b) {
  if (a === null || b === null || a === undefined || b === undefined) return (a ?? null) === (b ?? null);
  const tol = Math.max(1e-9, Math.abs(a[1] - a[0]) * 1e-6);
  return Math.abs(a[0] - b[0]) <= tol && Math.abs(a[1] - b[1]) <= tol;
}

// The x axis of a chart: steps, or a monotonic series (tokens seen; wall time: the server's
// `_timestamp`, each step's time) mapped from steps by interpolating between its points. Ranges
// are kept in x units; toStep turns them back into steps for /metrics.

import { decode, getMetrics } from "./api.js";
import { bisect } from "./util.js";

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

export class XMap {
  /** `sinceStart`: a wall-clock key (epoch seconds) is shown as time since its first value, in
   * hours; `fallback`: the key to read instead when `key` has no points (a run stored before
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

  /** Time since the start is plotted in hours. */
  get hours() {
    return this.mode === "time" && this.sinceStart && this.origin !== 0;
  }

  /** x units -> what Plotly plots (date axes take epoch milliseconds). */
  toPlot(x) {
    if (x === null) return x;
    if (this.hours) return x / 3600;
    return this.epoch ? x * 1000 : x;
  }

  fromPlot(p) {
    if (this.hours) return (typeof p === "number" ? p : Number(p)) * 3600;
    if (this.epoch) {
      const ms = typeof p === "number" ? p : Date.parse(String(p).replace(" ", "T") + (/[zZ]|[+-]\d\d:?\d\d$/.test(p) ? "" : "Z"));
      return ms / 1000;
    }
    return typeof p === "number" ? p : Number(p);
  }

  get axisTitle() {
    if (this.identity) return "step";
    if (this.key === TIMESTAMP_KEY) return this.hours ? "relative time (hours)" : "wall time";
    return this.hours ? this.key + " (hours since start)" : this.key;
  }
}

export function rangesEqual(a, b) {
  if (a === null || b === null || a === undefined || b === undefined) return (a ?? null) === (b ?? null);
  const tol = Math.max(1e-9, Math.abs(a[1] - a[0]) * 1e-6);
  return Math.abs(a[0] - b[0]) <= tol && Math.abs(a[1] - b[1]) <= tol;
}

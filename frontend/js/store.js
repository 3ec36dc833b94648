// One store per page: for each (run, metric) a page shows, the series that /metrics answers
// for the chart's query, kept equal to what /metrics would answer now as the live stream
// brings new points. Every chart draws from it and nothing else.
//
// The seam between REST and the stream is the run `version`. A /metrics answer names the
// version it reflects (read in one snapshot with its data): it holds every batch up to that
// version and none after. The stream's messages carry their version too, so an entry applies
// exactly the messages after its answer's version: the ones already received (the store keeps
// a short log of them per run) and every later one. A message at or below an entry's version
// is skipped, so nothing is counted twice, and nothing is missed as long as the log reaches
// back to the answer's version; when it does not (the stream reset past it, or the answer is
// older than what the log covers) the entry fetches again.
//
// Merging follows the server's rules exactly (backend/runcast_server/metrics/queries.py):
// raw points are keyed by step, written once; in a bucketed view a point joins the aligned
// bucket [b·2^level, (b+1)·2^level) as min/max (NaN ignored, ±Infinity kept), sum/count
// (finite values), last/last_step (the highest step). After each change the entry checks
// whether the server would now answer its query at another level (raw points past
// max_points, a wider view needing wider buckets) or with another segment, and fetches
// again if so: the store stays equal to the API, and as small as one answer.

import { decode } from "./api.js";
import { bisect } from "./util.js";

// Stream messages kept per run for answers still in flight (an answer names a version at
// least as new as the stream's when it was asked for, so only the last moments are needed).
const LOG_MESSAGES = 1000;
const LOG_POINTS = 100000;
const GAP_RETRIES = 3;

/** The server's bucket exponent for a view (reads/metrics.py plan_level). */
export function planLevel(lo, hi, maxPoints) {
  let e = 0;
  while (Math.floor(hi / 2 ** e) - Math.floor(lo / 2 ** e) + 1 > maxPoints) e += 1;
  return e;
}

export function sameQuery(a, b) {
  return !!a && !!b && a.start === b.start && a.end === b.end && a.maxPoints === b.maxPoints;
}

const WIRE = (v) => (v === null || v === undefined ? null : Number.isNaN(v) ? "NaN" : v === Infinity ? "Infinity" : v === -Infinity ? "-Infinity" : v);

/** A /metrics series (decoded) as the store holds it: the API's columns, plus sum when bucketed. */
function fromAnswer(s, bucketed) {
  const out = {
    segment: s.segment, start_step: s.start_step, step: s.step.slice(), last_step: s.last_step.slice(),
    min: s.min.slice(), max: s.max.slice(), mean: s.mean.slice(), last: s.last.slice(), count: s.count.slice(),
  };
  if (bucketed) out.sum = s.mean.map((m, i) => (m === null ? 0 : m * s.count[i]));
  return out;
}

const pointsIn = (m) => m.points.reduce((n, p) => n + p.step.length, 0);

const COLUMNS = ["step", "last_step", "min", "max", "mean", "last", "count"];

class Entry {
  constructor(run, key) {
    this.run = run;
    this.key = key;
    this.query = null; // the query the data answers: {start, end, maxPoints} (steps; null = the whole run)
    this.version = -1; // the run version the data reflects
    this.level = 0;
    this.bucketWidth = 1;
    this.series = []; // by segment index
    this.ready = false; // holds an answer
    this.loading = false; // a fetch is in flight
    this.wanted = null; // the query in flight
    this.error = null;
    this.mutations = 0; // changes other than points appended at the end of a series
    this.revision = 0; // every change
    this.users = 0;
    this.seq = 0;
    this.abort = null;
    this.promise = null;
    this.gapRetries = 0;
    this.listeners = new Set();
  }

  get bucketed() {
    return this.level > 0;
  }

  /** Points (raw) or buckets held, over every segment. */
  get size() {
    return this.series.reduce((n, s) => n + s.step.length, 0);
  }
}

export class MetricStore {
  /** load(run, key, query, signal) -> a decoded /metrics answer (api.getMetrics). */
  constructor(load) {
    this.load = load;
    this.entries = new Map(); // run \0 key -> Entry
    this.runs = new Map(); // run -> {subscribed, logFrom, log: [messages], logPoints}
  }

  runState(run) {
    let r = this.runs.get(run);
    if (!r) this.runs.set(run, (r = { subscribed: false, logFrom: null, log: [], logPoints: 0 }));
    return r;
  }

  /** The entry of (run, key), made on first use; acquire/release count its charts. */
  acquire(run, key) {
    const id = run + "\u0000" + key;
    let e = this.entries.get(id);
    if (!e) this.entries.set(id, (e = new Entry(run, key)));
    e.users += 1;
    return e;
  }

  release(entry) {
    entry.users -= 1;
    if (entry.users > 0) return;
    if (entry.abort) entry.abort.abort();
    entry.seq += 1;
    this.entries.delete(entry.run + "\u0000" + entry.key);
  }

  subscribe(entry, listener) {
    entry.listeners.add(listener);
    return () => entry.listeners.delete(listener);
  }

  notify(entry) {
    entry.revision += 1;
    for (const fn of entry.listeners) fn(entry);
  }

  /**
   * Make `entry` answer `query`. Resolves once it does (at once when it already does).
   * `prefetched`: an answer to this query read earlier (the page's head script), or null.
   */
  request(entry, query, prefetched = null) {
    if (entry.ready && sameQuery(entry.query, query) && !entry.loading) return Promise.resolve(entry);
    if (entry.loading && sameQuery(entry.wanted, query)) return entry.promise;
    return this.fetch(entry, query, prefetched);
  }

  /** Read the entry's query again (its data stays drawn until the answer lands). */
  refetch(entry) {
    const query = entry.wanted || entry.query;
    if (!query || (entry.loading && sameQuery(entry.wanted, query))) return entry.promise || Promise.resolve(entry);
    return this.fetch(entry, query, null);
  }

  refetchAll() {
    for (const entry of this.entries.values()) if (entry.query) this.refetch(entry);
  }

  fetch(entry, query, prefetched) {
    if (entry.abort) entry.abort.abort();
    const abort = new AbortController();
    const seq = ++entry.seq;
    entry.abort = abort;
    entry.loading = true;
    entry.wanted = query;
    entry.promise = (async () => {
      let body = null;
      try {
        body = (prefetched && (await prefetched)) || (await this.load(entry.run, entry.key, query, abort.signal));
      } catch (err) {
        if (err.name === "AbortError" || seq !== entry.seq) return entry;
        entry.loading = false;
        entry.wanted = null;
        entry.error = err;
        this.notify(entry);
        return entry;
      }
      if (seq !== entry.seq) return entry; // superseded by a newer request
      entry.abort = null;
      this.install(entry, query, body);
      return entry;
    })();
    this.notify(entry); // loading
    return entry.promise;
  }

  /** Replace the entry's data with an answer, then apply the stream's messages after it. */
  install(entry, query, body) {
    const r = this.runState(entry.run);
    if (r.subscribed && body.version < r.logFrom && entry.gapRetries < GAP_RETRIES) {
      // Older than what the log reaches back to: messages in between are lost to us.
      entry.gapRetries += 1;
      this.fetch(entry, query, null);
      return;
    }
    entry.gapRetries = 0;
    entry.query = query;
    entry.wanted = null;
    entry.loading = false;
    entry.error = null;
    entry.ready = true;
    entry.version = body.version;
    entry.level = body.level;
    entry.bucketWidth = body.bucket_width;
    entry.series = body.series.map((s) => fromAnswer(s, body.level > 0)).sort((a, b) => a.segment - b.segment);
    entry.mutations += 1;
    let stale = false;
    let applied = false;
    for (const m of r.log) {
      if (m.version <= entry.version) continue;
      stale = this.applyTo(entry, m) || stale;
      applied = true;
    }
    this.notify(entry);
    // The answer alone is what the server picked: read again only for what came after it.
    if (stale || (applied && this.wouldChange(entry))) this.fetch(entry, query, null);
  }

  /** The stream (re)started at `version`: it brings every message after it, nothing before. */
  onReset(run, version) {
    const r = this.runState(run);
    r.subscribed = true;
    r.logFrom = version;
    r.log = [];
    r.logPoints = 0;
    for (const entry of this.entries.values()) {
      if (entry.run === run && entry.ready && entry.version < version) this.refetch(entry);
    }
  }

  /** One stream message: {version, points: [{key, segment, step: [], value: []}]}. */
  onBatch(run, message) {
    const version = Number(message.version);
    if (!Number.isFinite(version)) return;
    const r = this.runState(run);
    const m = { version, points: message.points || [] };
    r.log.push(m);
    r.logPoints += pointsIn(m);
    while (r.log.length > 1 && (r.log.length > LOG_MESSAGES || r.logPoints > LOG_POINTS)) {
      const old = r.log.shift();
      r.logPoints -= pointsIn(old);
      r.logFrom = old.version;
    }
    for (const entry of this.entries.values()) {
      if (entry.run !== run || !entry.ready || version <= entry.version) continue;
      const stale = this.applyTo(entry, m);
      this.notify(entry);
      if (stale || this.wouldChange(entry)) this.refetch(entry);
    }
  }

  /** Apply one message to an entry; true when the entry must be read again (a segment it lacks). */
  applyTo(entry, m) {
    entry.version = m.version;
    let stale = false;
    let appendOnly = true;
    let changed = false;
    for (const p of m.points) {
      if (p.key !== entry.key) continue;
      const series = entry.series.find((s) => s.segment === p.segment);
      if (!series) {
        stale = true; // a new segment: its start_step comes with the answer
        continue;
      }
      for (let i = 0; i < p.step.length; i++) {
        const step = p.step[i];
        if (!this.inView(entry, step)) continue;
        const placed = entry.bucketed ? this.addToBucket(entry, series, step, decode(p.value[i])) : this.addRaw(series, step, decode(p.value[i]));
        if (placed === null) continue;
        changed = true;
        if (!placed) appendOnly = false;
      }
    }
    if (changed && (!appendOnly || entry.bucketed)) entry.mutations += 1;
    return stale;
  }

  inView(entry, step) {
    const q = entry.query;
    if (q.start === null && q.end === null) return true;
    if (!entry.bucketed) return (q.start === null || step >= q.start) && (q.end === null || step <= q.end);
    const w = entry.bucketWidth;
    const b = Math.floor(step / w);
    return (q.start === null || b >= Math.floor(q.start / w)) && (q.end === null || b <= Math.floor(q.end / w));
  }

  /** A raw point; true when appended at the end, false when inserted, null when already held. */
  addRaw(series, step, value) {
    const n = series.step.length;
    const at = n && step > series.step[n - 1] ? n : bisect(series.step, step);
    if (at < n && series.step[at] === step) return null; // written once
    const row = { step, last_step: step, min: value, max: value, mean: value, last: value, count: 1 };
    for (const c of COLUMNS) series[c].splice(at, 0, row[c]);
    return at === n;
  }

  addToBucket(entry, series, step, value) {
    const w = entry.bucketWidth;
    const start = Math.floor(step / w) * w;
    const finite = Number.isFinite(value);
    const ordered = !Number.isNaN(value);
    const n = series.step.length;
    const at = n && start > series.step[n - 1] ? n : bisect(series.step, start);
    if (at === n || series.step[at] !== start) {
      const row = {
        step: start, last_step: step, min: ordered ? value : null, max: ordered ? value : null,
        mean: finite ? value : null, last: value, count: finite ? 1 : 0, sum: finite ? value : 0,
      };
      for (const c of [...COLUMNS, "sum"]) series[c].splice(at, 0, row[c]);
      return at === n;
    }
    if (ordered) {
      series.min[at] = series.min[at] === null ? value : Math.min(series.min[at], value);
      series.max[at] = series.max[at] === null ? value : Math.max(series.max[at], value);
    }
    if (finite) {
      series.sum[at] += value;
      series.count[at] += 1;
      // Within [min, max], as the server keeps it (metrics.queries.bucket_mean): a constant's sum over
      // its count rounds past it.
      series.mean[at] = Math.min(Math.max(series.sum[at] / series.count[at], series.min[at]), series.max[at]);
    }
    if (step > series.last_step[at]) {
      series.last_step[at] = step;
      series.last[at] = value;
    }
    return false;
  }

  /** Whether /metrics would now answer the entry's query at another level. */
  wouldChange(entry) {
    const q = entry.query;
    const held = entry.series.filter((s) => s.step.length);
    if (!held.length) return false;
    if (!entry.bucketed) return held.some((s) => s.step.length > q.maxPoints);
    const lo = q.start ?? Math.min(...held.map((s) => s.step[0]));
    const hi = q.end ?? Math.max(...held.map((s) => s.last_step[s.last_step.length - 1]));
    return planLevel(lo, hi, q.maxPoints) !== entry.level;
  }

  /** Every entry in the API's shape (values wire-encoded): what tests compare with /metrics. */
  snapshot() {
    return [...this.entries.values()].filter((e) => e.query).map((e) => ({
      run: e.run,
      key: e.key,
      query: { start: e.query.start, end: e.query.end, max_points: e.query.maxPoints },
      version: e.version,
      level: e.level,
      bucket_width: e.bucketWidth,
      loading: e.loading,
      series: e.series.map((s) => ({
        segment: s.segment, start_step: s.start_step, step: s.step.slice(), last_step: s.last_step.slice(),
        min: s.min.map(WIRE), max: s.max.map(WIRE), mean: s.mean.map(WIRE), last: s.last.map(WIRE), count: s.count.slice(),
      })),
    }));
  }
}

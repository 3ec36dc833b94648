// A page's reads of a run, asked in the same moment, sent as one request: GET /runs/{id}/batch
// (docs/api.md, "Several reads in one request"). The run page's panels and charts each ask for
// their own read; a first load that made a dozen small requests makes one or two, which a shared
// cache answers as one object. Each answer (body, status, error) is the single read's. Reads of
// different kinds (a panel's list, a chart's window) go in batches of their own, so that a batch's
// URL, which a shared cache keys on, does not depend on which kinds happened to be asked together.

import { ApiError, decodeMetrics, getJSON, metricsPath, runUrl } from "./api.js";

// The route's limits: a longer read, or a lone one, goes as its own GET.
const MAX_READS = 24;
const MAX_READ_CHARS = 200;

export class RunReads {
  constructor() {
    this.queued = new Map(); // "kind run id" -> {run, asked: Map(path -> [{resolve, reject}])}
    this.timer = null;
  }

  /** The body of GET /runs/{run}/{path} (`path`: "checkpoints", "alerts?limit=1000"); errors as ApiError. */
  get(run, path, kind = "list") {
    return new Promise((resolve, reject) => {
      const group = kind + " " + run;
      if (!this.queued.has(group)) this.queued.set(group, { run, asked: new Map() });
      const { asked } = this.queued.get(group);
      if (!asked.has(path)) asked.set(path, []);
      asked.get(path).push({ resolve, reject });
      if (this.timer === null) this.timer = setTimeout(() => this.send(), 0);
    });
  }

  /** A decoded /metrics answer (the page's store's loader: api.getMetrics's, batched). */
  async metrics(run, key, query) {
    return decodeMetrics(await this.get(run, metricsPath(key, query), "metrics"));
  }

  send() {
    this.timer = null;
    const queued = this.queued;
    this.queued = new Map();
    for (const { run, asked } of queued.values()) {
      const paths = [...asked.keys()].filter((p) => p.length <= MAX_READ_CHARS);
      for (const path of asked.keys()) if (path.length > MAX_READ_CHARS) this.sendOne(run, [path], asked);
      for (let i = 0; i < paths.length; i += MAX_READS) this.sendOne(run, paths.slice(i, i + MAX_READS), asked);
    }
  }

  async sendOne(run, paths, asked) {
    const settle = (path, fn) => {
      for (const waiter of asked.get(path)) fn(waiter);
    };
    if (paths.length === 1) {
      // A lone read goes as itself: the same URL as every other page's, for a shared cache.
      const path = paths[0];
      getJSON(runUrl(run) + "/" + path).then(
        (body) => settle(path, (w) => w.resolve(body)),
        (err) => settle(path, (w) => w.reject(err)),
      );
      return;
    }
    const params = new URLSearchParams();
    for (const path of paths) params.append("read", path);
    let answers;
    try {
      answers = (await getJSON(runUrl(run) + "/batch?" + params)).reads;
    } catch (err) {
      for (const path of paths) settle(path, (w) => w.reject(err));
      return;
    }
    paths.forEach((path, i) => {
      const { status, body } = answers[i];
      if (status >= 200 && status < 300) settle(path, (w) => w.resolve(body));
      else {
        const error = (body && body.error) || {};
        settle(path, (w) => w.reject(new ApiError(status, error.message || "request failed", error.field || null)));
      }
    });
  }
}

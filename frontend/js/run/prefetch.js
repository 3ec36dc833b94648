// The reads that run.html's inline head script started while Plotly downloaded: the run, its
// events, the live stream and the default view's loss curves. Each is taken once.

import { ApiError, decodeMetrics } from "../api.js";

/** The head script's handoff for this run, or null (another page, an old browser). */
export function takePrefetch(runId) {
  const pre = window.__runcastPrefetch;
  delete window.__runcastPrefetch;
  return pre && decodeURIComponent(pre.path) === runId ? pre : null;
}

/** The prefetched read `name` ("detail", "events") if there is one, else fallback(). */
export async function fromPrefetch(pre, name, fallback) {
  if (pre && pre[name]) {
    const promise = pre[name];
    pre[name] = null; // a response body is read once
    try {
      const { ok, status, body } = await promise;
      if (!ok) throw new ApiError(status, (body && body.error && body.error.message) || "request failed");
      return body;
    } catch (err) {
      if (err instanceof ApiError) throw err;
    }
  }
  return fallback();
}

/**
 * The default view's loss curves, once: (key, maxPoints) -> {maxPoints, body: Promise<decoded|null>}
 * when the head script read `key` at a budget close enough to the chart's (within 2x), else null.
 */
export function prefetchedMetrics(pre) {
  if (!pre || !pre.metrics) return null;
  const promise = pre.metrics;
  pre.metrics = null;
  return (key, maxPoints) => {
    if (!pre.maxPoints || maxPoints > 2 * pre.maxPoints || maxPoints < pre.maxPoints / 2) return null;
    const body = promise.then(async (reads) => {
      const read = reads && reads[key];
      const answer = read ? await read.catch(() => null) : null;
      return answer && answer.ok && answer.body ? decodeMetrics(answer.body) : null;
    }, () => null);
    return { maxPoints: pre.maxPoints, body };
  };
}

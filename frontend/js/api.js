// The read API (docs/api.md): JSON with NaN/±Inf as strings, errors as {"error": {"message"}}.

import { lang } from "./i18n.js";

export class ApiError extends Error {
  /** `field`: what the error body names (`{"error": {"field"}}`), or null. */
  constructor(status, message, field = null) {
    super(message);
    this.status = status;
    this.field = field;
  }
}

const NONFINITE = { NaN: NaN, Infinity: Infinity, "-Infinity": -Infinity };

/** A wire value as a number (null stays null: an empty aggregate). */
export function decode(value) {
  if (typeof value === "string") return value in NONFINITE ? NONFINITE[value] : Number(value);
  return value;
}

export function decodeAll(values) {
  const out = new Array(values.length);
  for (let i = 0; i < values.length; i++) out[i] = decode(values[i]);
  return out;
}

export async function getJSON(url, options = {}) {
  // Revalidated every time: a run's reads may be cached for a second (shared caches serve the
  // crowd), but the page's store reads again because it needs what is newer.
  // The page's language (the viewer's choice, not only the browser's) for the errors a person reads.
  const headers = { Accept: "application/json", "Accept-Language": lang(), ...(options.headers || {}) };
  const response = await fetch(url, { cache: "no-cache", ...options, headers });
  let body = null;
  try {
    body = await response.json();
  } catch {
    body = null;
  }
  if (!response.ok) {
    const message = (body && body.error && body.error.message) || response.statusText || "request failed";
    throw new ApiError(response.status, message, (body && body.error && body.error.field) || null);
  }
  return body;
}

export const runUrl = (id) => "/api/v1/runs/" + encodeURIComponent(id);

export function getRun(id) {
  return getJSON(runUrl(id));
}

/** Every timeline event of a run (pages of 1000). */
export async function getEvents(id) {
  const events = [];
  let after = null;
  for (let page = 0; page < 50; page++) {
    const params = new URLSearchParams({ limit: "1000" });
    if (after) params.set("after", after);
    const body = await getJSON(runUrl(id) + "/events?" + params);
    events.push(...body.events);
    if (!body.next_cursor || body.events.length === 0) break;
    after = body.next_cursor;
  }
  return events;
}

/** The read of one metric's buckets for [start, end] (steps, inclusive; null = the whole run), under the run's URL. */
export function metricsPath(key, { start = null, end = null, maxPoints = 2000 } = {}) {
  const params = new URLSearchParams({ key, max_points: String(Math.max(1, Math.min(20000, Math.round(maxPoints)))) });
  if (start !== null) params.set("start", String(Math.max(0, Math.floor(start))));
  if (end !== null) params.set("end", String(Math.max(0, Math.ceil(end))));
  return "metrics?" + params;
}

/** One metric's buckets for [start, end] (steps, inclusive; null = the whole run). */
export async function getMetrics(id, key, { signal, ...query } = {}) {
  return decodeMetrics(await getJSON(runUrl(id) + "/" + metricsPath(key, query), { signal }));
}

/** A /metrics answer with its values as numbers (in place). */
export function decodeMetrics(body) {
  for (const s of body.series) {
    s.min = decodeAll(s.min);
    s.max = decodeAll(s.max);
    s.mean = decodeAll(s.mean);
    s.last = decodeAll(s.last);
  }
  return body;
}

// Reading one media key's rows (GET /runs/{id}/media?key=&after=&limit=), which come oldest step
// first, by windows: from a step (the cursor `<step - 1>_<largest id>` starts at that step), on
// after a row, or the newest rows of the key (its first row estimated from the key's count and
// steps, `GET /media/keys`, then read on to its end).

import { getJSON, runUrl } from "../api.js";

const LAST_ID = Number.MAX_SAFE_INTEGER; // ids are below 2^53

async function page(runId, key, after, limit) {
  const params = new URLSearchParams({ key, limit: String(limit) });
  if (after) params.set("after", after);
  const body = await getJSON(runUrl(runId) + "/media?" + params);
  return { rows: body.media, next: body.next_cursor };
}

/** Up to `limit` rows from `step` on; `next`: the cursor after them, null at the key's end. */
export function readFrom(runId, key, step, limit) {
  return page(runId, key, step > 0 ? `${step - 1}_${LAST_ID}` : null, limit);
}

/** Every row after `row` (pages of `limit`). */
export async function readAfter(runId, key, row, limit) {
  const rows = [];
  let after = `${row.step}_${row.id}`;
  for (let pages = 0; after && pages < 100; pages++) {
    const got = await page(runId, key, after, limit);
    rows.push(...got.rows);
    after = got.rows.length ? got.next : null;
  }
  return rows;
}

/** About the newest `n` rows of a key (`info` as /media/keys lists it), oldest first. */
export async function readNewest(runId, info, n) {
  const spacing = info.count > 1 ? (info.last_step - info.first_step) / (info.count - 1) : 1;
  const start = info.count <= n ? info.first_step : Math.max(info.first_step, Math.floor(info.last_step - spacing * (n - 1)));
  const first = await readFrom(runId, info.key, start, n);
  if (!first.next || !first.rows.length) return first.rows;
  // The steps are not evenly spaced: read on to the end, keeping the newest.
  return [...first.rows, ...(await readAfter(runId, info.key, first.rows[first.rows.length - 1], n))].slice(-n);
}

// Alerts (GET /runs/{id}/alerts, docs/alerts.md) as the timeline shows them: the anomaly
// timeline event is the entry (kept current by the stream); the alert adds its title, state,
// the checkpoints around it and its evidence, and a "Discuss" control (run/comments.js).

import { formatValue } from "../util.js";
import { hasMessage, t } from "../i18n.js";

/** Every alert of the run (pages of 1000) as a Map id -> alert; null when it could not be read. */
export async function loadAlerts(page) {
  const fresh = new Map();
  let after = null;
  try {
    for (let n = 0; n < 20; n++) {
      const params = new URLSearchParams({ limit: "1000" });
      if (after) params.set("after", after);
      const body = await page.read("alerts?" + params);
      for (const a of body.alerts || []) fresh.set(a.id, a);
      if (!body.next_cursor || !(body.alerts || []).length) break;
      after = body.next_cursor;
    }
  } catch {
    return null; // the timeline still shows the anomaly events
  }
  return fresh;
}

export function alertOf(alerts, e) {
  const p = e.payload || {};
  const id = Number.isSafeInteger(p.alert) ? p.alert : e.seq < 0 ? -e.seq : null;
  if (id !== null && alerts.has(id)) return alerts.get(id);
  for (const a of alerts.values()) if (a.event === e.id) return a;
  return null;
}

/** The alert as the timeline shows it: the event's payload is live, so it wins, except that
 * an alert never reopens (whichever source saw it close first says closed). */
export function alertState(alert, e, step) {
  const p = (e && e.payload) || {};
  const a = alert || {};
  const closed = p.state === "closed" || a.state === "closed";
  const endStep = p.end_step ?? a.end_step ?? null;
  const at = step ?? a.step ?? null;
  return {
    id: Number.isSafeInteger(a.id) ? a.id : Number.isSafeInteger(p.alert) ? p.alert : null,
    kind: p.kind || a.kind || "alert",
    title: a.title || null,
    key: p.key || a.key || null,
    state: closed ? "closed" : "open",
    step: Number.isFinite(at) ? at : null,
    endStep: Number.isFinite(endStep) ? endStep : null,
    evidence: (closed && a.evidence && a.evidence.close ? a.evidence : p.evidence) || a.evidence || {},
    checkpoints: a.checkpoints || null,
  };
}

/** One line for a marker's hover text: "anomaly: spike on train/loss (closed until step 40)". */
export function describeAlert(a) {
  const kind = hasMessage("alert.kind." + a.kind) ? t("alert.kind." + a.kind) : a.kind;
  const what = a.title ? t("alert.titled", { title: a.title, kind }) : kind;
  const state = a.state === "closed" && a.endStep !== null ? t("alert.closedUntil", { step: a.endStep }) : t("alert.state." + a.state);
  return a.key ? t("alert.onKey", { what, key: a.key, state }) : t("alert.line", { what, state });
}

/** Evidence as plain lines for a hover title: "open: value 9.1, baseline 2.3, …". */
export function evidenceText(evidence) {
  const lines = [];
  for (const [phase, facts] of Object.entries(evidence || {}).slice(0, 4)) {
    if (!facts || typeof facts !== "object") {
      lines.push(t("alert.evidence", { phase: phaseName(phase), facts: formatEvidence(facts) }));
      continue;
    }
    const parts = Object.entries(facts).slice(0, 16).map(([k, v]) => `${k} ${formatEvidence(v)}`);
    lines.push(t("alert.evidence", { phase: phaseName(phase), facts: parts.join(", ") }));
  }
  return lines.join("\n").slice(0, 2000);
}

// The detector's facts are its own names (value, baseline, sigma): shown as sent; the phase is ours.
const phaseName = (phase) => (hasMessage("alert.phase." + phase) ? t("alert.phase." + phase) : phase);

function formatEvidence(v) {
  if (typeof v === "number") return formatValue(v);
  if (typeof v === "string") return v in { NaN: 1, Infinity: 1, "-Infinity": 1 } ? v : v.slice(0, 200);
  if (v === null || v === undefined) return "–";
  return JSON.stringify(v).slice(0, 200);
}

/** An alert row's "Discuss" control (run/comments.js), or nothing for an alert without an id. */
export function discussAlert(page, a) {
  if (!page.comments || !Number.isSafeInteger(a.id)) return [];
  return [" ", page.comments.discussButton("alert", a.id, a.step)];
}

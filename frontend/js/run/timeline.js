// The timeline: every event of the run (start, code revisions, restarts, checkpoints, data-mix
// changes, manifests, notes, anomalies) as a list beside the charts and as markers on them.
// Events change markers only; the charts' data comes from the store.

import { decode } from "../api.js";
import { markerStyle } from "../chart/markers.js";
import { el, formatBytes, formatTime, formatValue } from "../util.js";
import { hasMessage, t } from "../i18n.js";
import { alertOf, alertState, describeAlert, discussAlert, evidenceText } from "./alerts.js";
import { describeCommandEvent } from "./commands.js";

// Marker types the catalog names (markers.js); another type is shown as the server sent it.
const KNOWN = { restart: 1, checkpoint: 1, note: 1, data_mix: 1, manifest: 1, code: 1, alert: 1, finished: 1, command: 1 };

const baseName = (path) => String(path).split(/[\\/]/).filter(Boolean).pop() || String(path);

/**
 * The size of each checkpoint event as the checkpoints panel shows it: a "pruned" event (the file
 * is gone, its own size 0) takes the size of the checkpoint it prunes, the newest earlier event
 * that recorded the same path and step (reads the same as artifacts/checkpoints.py).
 */
function checkpointSizes(events) {
  const sizes = new Map(); // event id -> size
  const recorded = new Map(); // path \0 step -> size
  for (const e of [...events].filter((x) => x.type === "checkpoint").sort((a, b) => a.id - b.id)) {
    const p = e.payload || {};
    const where = String(p.path ?? p.filename ?? "") + "\u0000" + e.step;
    if (p.status === "pruned" && recorded.has(where)) sizes.set(e.id, recorded.get(where));
    else {
      sizes.set(e.id, p.size);
      if (p.status !== "pruned") recorded.set(where, p.size);
    }
  }
  return sizes;
}

function describe(e, sizes) {
  const p = e.payload || {};
  switch (e.type) {
    case "run_started": {
      const resumed = p.resume_step !== null && p.resume_step !== undefined;
      const values = { step: String(p.resume_step), segment: String(e.segment), dirty: String(Boolean(p.code && p.code.dirty)) };
      if (p.code && p.code.sha) values.sha = String(p.code.sha).slice(0, 12);
      return t((resumed ? "timeline.resumed" : "timeline.started") + (values.sha ? "Code" : ""), values);
    }
    case "checkpoint": {
      const metrics = Object.entries(p.metrics || {}).map(([k, v]) => `${k} ${formatValue(decode(v))}`);
      const size = sizes.get(e.id);
      const details = [
        typeof size === "number" ? formatBytes(size) : null,
        p.sha256 ? "sha256 " + String(p.sha256).slice(0, 12) : null, p.filename ? String(p.filename) : p.path ? baseName(p.path) : null, ...metrics,
      ].filter(Boolean).join(" · ");
      const status = hasMessage("checkpoints.status." + p.status) ? t("checkpoints.status." + p.status) : String(p.status || "");
      return t(details ? "timeline.checkpointDetails" : "timeline.checkpoint", { status, details });
    }
    case "data_mix":
      return t("timeline.dataMix", { weights: Object.entries(p.weights || {}).map(([k, v]) => `${k} ${formatValue(decode(v))}`).join(", ") });
    case "manifest":
      return t("timeline.manifest", { version: String(p.version ?? "") });
    case "note":
      return String(p.text ?? "");
    case "finished":
      return t("timeline.finished", { status: t("status." + (p.status || "finished")) });
    case "command":
      return describeCommandEvent(p);
    case "anomaly":
      return describeAlert({ kind: p.kind || "alert", key: p.key || null, state: p.state === "closed" ? "closed" : "open",
        endStep: p.end_step ?? null });
    default:
      return e.type;
  }
}

function markerType(e) {
  if (e.type === "run_started") return e.payload && e.payload.resume_step !== null && e.payload.resume_step !== undefined ? "restart" : "code";
  if (e.type === "anomaly") return "alert";
  return e.type;
}

function eventStep(page, e) {
  if (e.step !== null && e.step !== undefined) return e.step;
  if (e.type === "run_started") {
    const seg = page.detail.segments.find((s) => s.index === e.segment);
    return seg ? seg.start_step : 0;
  }
  return null;
}

/** One item per event; one per alert (the anomaly event carries it, or the alert alone). */
export function timelineItems(page) {
  const matched = new Set();
  const sizes = checkpointSizes(page.events);
  const items = page.events.map((e) => {
    const item = { type: markerType(e), step: eventStep(page, e), label: describe(e, sizes), ts: e.ts, event: e };
    if (e.type === "anomaly") {
      const alert = alertOf(page.alerts, e);
      if (alert) matched.add(alert.id);
      item.alert = alertState(alert, e, eventStep(page, e));
      item.label = describeAlert(item.alert);
    }
    return item;
  });
  for (const alert of page.alerts.values()) {
    if (matched.has(alert.id)) continue;
    const a = alertState(alert, null, null);
    items.push({ type: "alert", step: a.step, label: describeAlert(a), ts: alert.opened_at, alert: a });
  }
  return items;
}

/** The charts' markers: the timeline's, and the comments' threads (run/comments.js). */
export function markers(page) {
  return timelineItems(page).filter((m) => m.step !== null && m.type !== "finished").map((m) => ({
    step: m.step, type: m.type, label: m.label.length > 300 ? m.label.slice(0, 300) + "…" : m.label,
  })).concat(page.comments ? page.comments.markers() : []);
}

/** The list beside the charts, newest first; `zoomTo(step)` is what a step button does. */
export function renderTimeline(page, zoomTo) {
  const list = document.getElementById("timeline");
  list.replaceChildren();
  const items = timelineItems(page);
  for (const item of items.slice(-500).reverse()) {
    const style = markerStyle(item.type);
    const li = el("li", { className: "tl-" + item.type });
    li.append(el("span", { className: "tl-dot", style: "--c:" + style.color, "aria-hidden": "true" }));
    const body = el("div", { className: "tl-body" });
    const head = el("div", { className: "tl-head" }, el("strong", { text: style.name, "data-user": !(item.type in KNOWN) }));
    if (item.step !== null) {
      head.append(" ", el("button", {
        type: "button", className: "link", text: t("common.stepN", { step: item.step }),
        "aria-label": t("timeline.zoom", { step: String(item.step), what: style.name }), onclick: () => zoomTo(item.step),
      }));
    }
    if (item.alert) {
      head.append(" ", el("span", { className: "badge alert-state alert-" + item.alert.state, text: t("alert.state." + item.alert.state) }),
        ...discussAlert(page, item.alert));
      if (item.alert.id !== null) li.id = "alert-" + item.alert.id;
      if (page.hashShown && "#" + li.id === location.hash) li.classList.add("target"); // kept across re-renders
      const hover = evidenceText(item.alert.evidence);
      if (hover) body.title = hover;
    }
    if (item.ts) head.append(el("time", { className: "tl-time", text: formatTime(item.ts), "data-intl": true }));
    // A note is the team's own words; a command's line carries its sender and reason.
    const userText = item.event && (item.event.type === "note" || item.event.type === "command");
    body.append(head, el("p", { className: "tl-text", text: item.label, "data-user": userText || !(item.type in KNOWN) }));
    if (item.alert && item.alert.checkpoints) {
      const { before, after } = item.alert.checkpoints;
      const has = (c) => Boolean(c && Number.isFinite(c.step));
      const which = has(before) && has(after) ? "both" : has(before) ? "before" : has(after) ? "after" : null;
      if (which) {
        body.append(el("p", { className: "tl-note",
          text: t("timeline.nearest", { which, before: has(before) ? before.step : 0, after: has(after) ? after.step : 0 }) }));
      }
    }
    if (item.event && item.event.type === "manifest" && item.event.payload && item.event.payload.manifest) {
      body.append(el("details", {}, el("summary", { text: t("timeline.manifestDetails") }),
        el("pre", { "data-user": true, text: JSON.stringify(item.event.payload.manifest, null, 2).slice(0, 200000) })));
    }
    li.append(body);
    list.append(li);
  }
  if (!items.length) list.append(el("li", { className: "empty", text: t("timeline.empty") }));
}

/** Merge events from the stream or a re-read (an anomaly closing replaces its event). */
export function mergeEvents(page, fresh) {
  const at = new Map(page.events.map((e, i) => [e.id, i]));
  for (const e of fresh) {
    if (at.has(e.id)) page.events[at.get(e.id)] = e;
    else {
      at.set(e.id, page.events.length);
      page.events.push(e);
    }
  }
  page.events.sort((a, b) => a.id - b.id);
}

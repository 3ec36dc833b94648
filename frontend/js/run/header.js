// The run's header: name, status badge, live indicator, step, loss, heartbeat, segments.

import { decode } from "../api.js";
import { formatAge, formatTime, formatValue, lastLossKey } from "../util.js";
import { renderWithheld } from "./withheld.js";

const $ = (id) => document.getElementById(id);
const LIVE_STATUSES = new Set(["running", "stalled"]);
const STREAM_LABELS = { live: "● live", reconnecting: "reconnecting…", offline: "stream offline", unsupported: "" };

/** The run's name and project (cheap: run.js shows them before the loss curve is drawn). */
export function renderTitle(page) {
  const d = page.detail;
  document.title = d.name + " · " + d.project + " · Runcast";
  $("run-project").textContent = d.project;
  $("run-name").textContent = d.name;
}

/** The whole header. Its numbers are formatted for the locale: a page's first use costs tens of ms. */
export function renderHeader(page) {
  const d = page.detail;
  renderTitle(page);
  renderStatus(page);
  $("fact-step").textContent = d.last_step === null ? "–" : d.last_step.toLocaleString();
  const lossKey = lastLossKey(d.last_values);
  $("fact-loss-key").textContent = lossKey || "Loss";
  $("fact-loss").textContent = lossKey ? formatValue(decode(d.last_values[lossKey].value)) : "–";
  page.heartbeatAt = d.heartbeat_at;
  tickHeartbeat(page);
  $("fact-started").textContent = formatTime(d.started_at ?? d.created_at);
  const resumed = d.segments.filter((s) => s.resumed).length;
  $("fact-segments").textContent = d.segments.length + (resumed ? ` (${resumed} resumed)` : "");
  const lost = d.lost_events || 0; // events the trainer's SDK could not keep
  $("run-hole").hidden = lost === 0;
  $("run-hole").textContent = lost ? `This run has a hole: its trainer could not keep ${lost.toLocaleString()} events.` : "";
  renderSpooled(d);
  renderWithheld($("run-withheld"), d);
}

/** Events the trainer reported waiting in its local spool: logged, not on the server yet. */
function renderSpooled(d) {
  const spooled = d.spooled_events || 0;
  const node = $("run-spooled");
  node.hidden = spooled === 0;
  node.textContent = "";
  if (!spooled) return;
  const since = Math.max(...d.segments.filter((s) => s.spooled_events).map((s) => s.spooled_at || 0));
  node.textContent = `${spooled.toLocaleString()} events of this run wait in its trainer's local spool` +
    (since ? ` (reported ${formatTime(since)})` : "") +
    ": they were logged but are not on the server yet, and appear when the team runs runcast sync.";
}

/** The status badge and the live indicator: "live" only while the run runs and the stream is up. */
export function renderStatus(page) {
  const status = page.detail.status;
  const badge = $("run-status");
  badge.textContent = status;
  badge.className = "badge badge-" + status;
  const node = $("live-state");
  const running = LIVE_STATUSES.has(status);
  const state = running ? page.streamState : "ended";
  node.textContent = running ? STREAM_LABELS[state] ?? "" : "";
  node.dataset.state = state;
  node.title = running ? "" : `The run is ${status}: nothing more is expected (a resume would show up here live).`;
}

export function tickHeartbeat(page) {
  $("fact-heartbeat").textContent = page.heartbeatAt ? formatAge(Date.now() / 1000 - page.heartbeatAt) : "–";
}

/** A live message's status, step and newest loss. */
export function applyLive(page, message) {
  const d = page.detail;
  if (message.status) d.status = message.status;
  if (message.last_step !== undefined && message.last_step !== null) {
    d.last_step = message.last_step;
    $("fact-step").textContent = message.last_step.toLocaleString();
  }
  renderStatus(page);
  page.heartbeatAt = Date.now() / 1000;
  tickHeartbeat(page);
  const lossKey = $("fact-loss-key").textContent;
  for (const p of message.points || []) {
    if (p.key === lossKey && p.value.length) $("fact-loss").textContent = formatValue(decode(p.value[p.value.length - 1]));
  }
}

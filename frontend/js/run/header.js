// The run's header: name, status badge, live indicator, step, loss, heartbeat, segments.

import { decode } from "../api.js";
import { formatAge, formatTime, formatValue, lastLossKey } from "../util.js";
import { formatNumber, t } from "../i18n.js";
import { renderWithheld } from "./withheld.js";

const $ = (id) => document.getElementById(id);
const LIVE_STATUSES = new Set(["running", "stalled"]);
const STREAM_LABELS = { live: "stream.live", reconnecting: "stream.reconnecting", offline: "stream.offline" };

/** The run's name and project (cheap: run.js shows them before the loss curve is drawn). */
export function renderTitle(page) {
  const d = page.detail;
  document.title = t("run.title", { name: d.name, project: d.project });
  $("run-project").textContent = d.project;
  $("run-name").textContent = d.name;
}

/** The whole header. Its numbers are formatted for the locale: a page's first use costs tens of ms. */
export function renderHeader(page) {
  const d = page.detail;
  renderTitle(page);
  renderStatus(page);
  $("fact-step").textContent = d.last_step === null ? "–" : formatNumber(d.last_step);
  const lossKey = lastLossKey(d.last_values);
  const keyNode = $("fact-loss-key");
  keyNode.textContent = lossKey || t("run.fact.loss");
  keyNode.toggleAttribute("data-user", Boolean(lossKey));
  $("fact-loss").textContent = lossKey ? formatValue(decode(d.last_values[lossKey].value)) : "–";
  page.heartbeatAt = d.heartbeat_at;
  tickHeartbeat(page);
  $("fact-started").textContent = formatTime(d.started_at ?? d.created_at);
  const resumed = d.segments.filter((s) => s.resumed).length;
  $("fact-segments").textContent = t("run.fact.segmentsValue", { count: d.segments.length, resumed });
  const lost = d.lost_events || 0; // events the trainer's SDK could not keep
  $("run-hole").hidden = lost === 0;
  $("run-hole").textContent = lost ? t("run.hole", { count: lost }) : "";
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
  node.textContent = since ? t("run.spooledSince", { count: spooled, when: formatTime(since) }) : t("run.spooled", { count: spooled });
}

/** The status badge and the live indicator: "live" only while the run runs and the stream is up. */
export function renderStatus(page) {
  const status = page.detail.status;
  const badge = $("run-status");
  badge.textContent = t("status." + status);
  badge.className = "badge badge-" + status;
  const node = $("live-state");
  const running = LIVE_STATUSES.has(status);
  const state = running ? page.streamState : "ended";
  node.textContent = running && STREAM_LABELS[state] ? t(STREAM_LABELS[state]) : "";
  node.dataset.state = state;
  node.title = running ? "" : t("run.ended", { status: t("status." + status) });
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
    $("fact-step").textContent = formatNumber(message.last_step);
  }
  renderStatus(page);
  page.heartbeatAt = Date.now() / 1000;
  tickHeartbeat(page);
  const lossKey = $("fact-loss-key").hasAttribute("data-user") ? $("fact-loss-key").textContent : null;
  for (const p of message.points || []) {
    if (p.key === lossKey && p.value.length) $("fact-loss").textContent = formatValue(decode(p.value[p.value.length - 1]));
  }
}

// The checkpoints panel (GET /runs/{id}/checkpoints, docs/artifacts.md), newest step first:
// status badge, size, file name, sha256 (copy button), metrics, evaluation scores, download
// and card links, and a "Discuss" control (run/comments.js) on each.

import { decode, runUrl } from "../api.js";
import { copyButton, el, formatBytes, formatValue } from "../util.js";
import { metricsText, scoresLine } from "./evals.js";
import { formatNumber, t } from "../i18n.js";

const $ = (id) => document.getElementById(id);

const CHECKPOINT_STATUS = ["available", "pruned", "private", "missing"];

/** Read the list again and render it; `zoomTo(step)` is what a step button does. */
export async function loadCheckpoints(page, zoomTo) {
  try {
    const body = await page.read("checkpoints");
    page.checkpoints = body.checkpoints || [];
    page.checkpointsWithheld = body.withheld === true; // the publication policy (run/withheld.js)
  } catch (err) {
    if (page.checkpoints === null) {
      $("checkpoints").replaceChildren(el("li", { className: "empty", text: t("checkpoints.failed", { error: err.message }) }));
    }
    return;
  }
  renderCheckpoints(page, zoomTo);
}

function renderCheckpoints(page, zoomTo) {
  const { checkpoints } = page;
  const list = $("checkpoints");
  list.replaceChildren();
  if (!checkpoints.length) {
    const text = t(page.checkpointsWithheld ? "checkpoints.withheld" : "checkpoints.none");
    list.append(el("li", { className: "empty", text }));
    return;
  }
  const ordered = [...checkpoints].sort((a, b) => (b.step ?? 0) - (a.step ?? 0) || (b.segment ?? 0) - (a.segment ?? 0));
  const several = page.detail.segments.length > 1;
  for (const c of ordered.slice(0, 500)) list.append(checkpointItem(page, c, several, zoomTo));
}

function checkpointItem(page, c, several, zoomTo) {
  const { runId } = page;
  const status = CHECKPOINT_STATUS.includes(c.status) ? c.status : "missing";
  const li = el("li", { className: "ck ck-" + status });
  const head = el("div", { className: "ck-head" });
  if (Number.isFinite(c.step)) {
    head.append(el("button", {
      type: "button", className: "link ck-step", text: t("common.stepN", { step: c.step }),
      "aria-label": t("checkpoints.zoom", { step: c.step }), onclick: () => zoomTo(c.step),
    }));
  }
  head.append(" ", el("span", { className: "badge ck-status ck-status-" + status, text: t("checkpoints.status." + status) }));
  if (typeof c.size === "number") head.append(" ", el("span", { className: "ck-size", text: formatBytes(c.size) }));
  if (Number.isFinite(c.segment) && several) head.append(" ", el("span", { className: "ck-seg", text: t("checkpoints.segment", { segment: c.segment }) }));
  if (Number.isSafeInteger(c.id) && page.comments) head.append(" ", page.comments.discussButton("checkpoint", c.id, c.step ?? null));
  li.append(head);
  if (c.filename) li.append(el("p", { className: "ck-file", "data-user": true, text: String(c.filename) + (c.kind === "directory" ? "/" : "") }));
  if (c.sha256) {
    const sha = String(c.sha256);
    li.append(el("p", { className: "ck-sha" }, t("checkpoints.sha"), " ", el("code", { title: sha, text: sha.slice(0, 12), "data-user": true }), " ", copyButton(sha, "sha256")));
  }
  const metrics = Object.entries(c.metrics || {}).slice(0, 12).map(([k, v]) => `${k} ${formatValue(decode(v))}`);
  if (metrics.length) li.append(el("p", { className: "ck-metrics", "data-user": true, text: metrics.join(" · ") }));
  if (Array.isArray(c.evals) && c.evals.length) {
    li.append(el("p", {
      className: "ck-evals",
      title: c.evals.map((e) => t("checkpoints.evalTitle", { suite: e.suite, task: e.task, step: e.step, metrics: metricsText(e) })).join("\n"),
    }, t("checkpoints.scores"), " ", el("span", { "data-user": true, text: scoresLine(c.evals) })));
  }
  if (status === "missing" && c.reason) li.append(el("p", { className: "ck-reason", "data-user": true, text: String(c.reason) }));
  if (Number.isSafeInteger(c.id)) {
    const base = runUrl(runId) + "/checkpoints/" + c.id;
    const links = el("p", { className: "ck-links" });
    if (status === "available" && c.kind !== "directory") {
      links.append(el("a", { className: "ck-download", href: base + "/download", download: "", text: t("checkpoints.download") }), " ");
    }
    links.append(el("a", {
      className: "ck-card", href: base + "/card?download=true", text: t("checkpoints.card"),
      title: t("checkpoints.cardTitle"),
    }));
    li.append(links);
  }
  return li;
}

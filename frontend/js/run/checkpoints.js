// The checkpoints panel (GET /runs/{id}/checkpoints, docs/artifacts.md), newest step first:
// status badge, size, file name, sha256 (copy button), metrics, evaluation scores, download
// and card links.

import { decode, getJSON, runUrl } from "../api.js";
import { copyButton, el, formatBytes, formatValue } from "../util.js";
import { metricsText, scoresLine } from "./evals.js";

const $ = (id) => document.getElementById(id);

const CHECKPOINT_STATUS = ["available", "pruned", "private", "missing"];

/** Read the list again and render it; `zoomTo(step)` is what a step button does. */
export async function loadCheckpoints(page, zoomTo) {
  try {
    const body = await getJSON(runUrl(page.runId) + "/checkpoints");
    page.checkpoints = body.checkpoints || [];
    page.checkpointsWithheld = body.withheld === true; // the publication policy (run/withheld.js)
  } catch (err) {
    if (page.checkpoints === null) {
      $("checkpoints").replaceChildren(el("li", { className: "empty", text: "Checkpoints could not be read: " + err.message }));
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
    const text = page.checkpointsWithheld ? "Checkpoints withheld by the team." : "No checkpoints recorded.";
    list.append(el("li", { className: "empty", text }));
    return;
  }
  const ordered = [...checkpoints].sort((a, b) => (b.step ?? 0) - (a.step ?? 0) || (b.segment ?? 0) - (a.segment ?? 0));
  const several = page.detail.segments.length > 1;
  for (const c of ordered.slice(0, 500)) list.append(checkpointItem(page.runId, c, several, zoomTo));
}

function checkpointItem(runId, c, several, zoomTo) {
  const status = CHECKPOINT_STATUS.includes(c.status) ? c.status : "missing";
  const li = el("li", { className: "ck ck-" + status });
  const head = el("div", { className: "ck-head" });
  if (Number.isFinite(c.step)) {
    head.append(el("button", {
      type: "button", className: "link ck-step", text: "step " + c.step.toLocaleString(),
      "aria-label": `Zoom to step ${c.step} (checkpoint)`, onclick: () => zoomTo(c.step),
    }));
  }
  head.append(" ", el("span", { className: "badge ck-status ck-status-" + status, text: status }));
  if (typeof c.size === "number") head.append(" ", el("span", { className: "ck-size", text: formatBytes(c.size) }));
  if (Number.isFinite(c.segment) && several) head.append(" ", el("span", { className: "ck-seg", text: "segment " + c.segment }));
  li.append(head);
  if (c.filename) li.append(el("p", { className: "ck-file", text: String(c.filename) + (c.kind === "directory" ? "/" : "") }));
  if (c.sha256) {
    const sha = String(c.sha256);
    li.append(el("p", { className: "ck-sha" }, "sha256 ", el("code", { title: sha, text: sha.slice(0, 12) }), " ", copyButton(sha, "sha256")));
  }
  const metrics = Object.entries(c.metrics || {}).slice(0, 12).map(([k, v]) => `${k} ${formatValue(decode(v))}`);
  if (metrics.length) li.append(el("p", { className: "ck-metrics", text: metrics.join(" · ") }));
  if (Array.isArray(c.evals) && c.evals.length) {
    li.append(el("p", {
      className: "ck-evals", text: "Scores: " + scoresLine(c.evals),
      title: c.evals.map((e) => `${e.suite} / ${e.task} (step ${e.step}): ${metricsText(e)}`).join("\n"),
    }));
  }
  if (status === "missing" && c.reason) li.append(el("p", { className: "ck-reason", text: String(c.reason) }));
  if (Number.isSafeInteger(c.id)) {
    const base = runUrl(runId) + "/checkpoints/" + c.id;
    const links = el("p", { className: "ck-links" });
    if (status === "available" && c.kind !== "directory") {
      links.append(el("a", { className: "ck-download", href: base + "/download", download: "", text: "Download" }), " ");
    }
    links.append(el("a", {
      className: "ck-card", href: base + "/card?download=true", text: "card",
      title: "Reproducibility card (JSON): code, config, packages, data position, parent checkpoint",
    }));
    li.append(links);
  }
  return li;
}

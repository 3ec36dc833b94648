// The run's training reports (GET /runs/{id}/reports, docs/reports.md): a link to each report's page;
// the team sees its drafts too, marked as such, and "New report": a draft generated from the
// record of a step range (prefilled: after the last report, up to the run's last step), saved,
// then opened in the report page's editor.

import { getJSON, getRun, runUrl } from "../api.js";
import { el } from "../util.js";
import { t } from "../i18n.js";

const $ = (id) => document.getElementById(id);
let bound = null; // the run whose "New report" form is wired (once per page)

export async function loadReports(page) {
  const runId = page.runId;
  const list = $("reports");
  if (!list) return;
  let body;
  try {
    body = await page.read("reports");
  } catch {
    list.replaceChildren(el("li", { className: "empty" }, t("reports.none")));
    return;
  }
  const reports = body.reports || [];
  if (body.team) offerNew(runId, reports).catch(() => {});
  if (!reports.length) {
    list.replaceChildren(el("li", { className: "empty" }, t("reports.none")));
    return;
  }
  list.replaceChildren(...reports.map((r) => {
    const link = el("a", { href: r.url, "data-user": true }, r.title);
    const steps = el("span", { className: "note" }, " " + t("reports.steps", { from: r.from_step, to: r.to_step }) +
      (r.state === "draft" ? ` · ${t("reports.draft")}` : ""));
    return el("li", {}, link, steps);
  }));
}

/** The team's "New report" form, its step range prefilled (left alone once opened). */
async function offerNew(runId, reports) {
  const box = $("report-new");
  if (!box || box.open) return;
  const run = await getRun(runId);
  const last = run.last_step ?? 0;
  const after = Math.max(-1, ...reports.map((r) => r.to_step)) + 1;
  $("report-new-from").value = String(after <= last ? after : 0);
  $("report-new-to").value = String(last);
  box.hidden = false;
  if (bound === runId) return;
  bound = runId;
  $("report-new-form").addEventListener("submit", (e) => {
    e.preventDefault();
    create(runId);
  });
}

async function create(runId) {
  const from = Number($("report-new-from").value);
  const to = Number($("report-new-to").value);
  const error = $("report-new-error");
  error.textContent = "";
  try {
    const params = new URLSearchParams({ from_step: String(from), to_step: String(to) });
    const draft = await getJSON(`${runUrl(runId)}/report-draft?${params}`);
    const made = await getJSON(`${runUrl(runId)}/reports`, {
      method: "POST",
      headers: { Accept: "application/json", "Content-Type": "application/json" },
      body: JSON.stringify({ title: $("report-new-title").value.trim() || t("reports.defaultTitle", { from, to }),
        body: draft.body, from_step: from, to_step: to }),
    });
    location.assign(made.url + "#edit");
  } catch (err) {
    error.textContent = err.message; // the server's message, naming the field
  }
}

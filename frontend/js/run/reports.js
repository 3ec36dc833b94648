// The run's training reports (GET /runs/{id}/reports, docs/reports.md): a link to each report's page;
// the team sees its drafts too, marked as such.

import { getJSON, runUrl } from "../api.js";
import { el } from "../util.js";
import { t } from "../i18n.js";

export async function loadReports(runId) {
  const list = document.getElementById("reports");
  if (!list) return;
  let body;
  try {
    body = await getJSON(runUrl(runId) + "/reports");
  } catch {
    list.replaceChildren(el("li", { className: "empty" }, t("reports.none")));
    return;
  }
  const reports = body.reports || [];
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

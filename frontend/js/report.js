// The report page (/runs/{id}/reports/{n}, docs/reports.md): the report's sanitized HTML from the
// API, its live blocks drawn by report-blocks.js and drawn again from fresh data every few seconds
// while the run is live (the data route applies the run's policy and broadcast delay); its comments
// below (report/comments.js), read again as often. Its words come from the catalogs (js/i18n.js);
// the title, prose and names are the team's and the run's.
import { getJSON } from "./api.js";
import { loadLanguage, t } from "./i18n.js";
import { ReportComments } from "./report/comments.js";

const REFRESH_MS = 5000;
const match = location.pathname.match(/^\/runs\/([^/]+)\/reports\/(\d+)\/?$/);
const status = document.getElementById("report-status");

function whenPlotly() {
  return new Promise((resolve) => {
    const wait = () => (window.Plotly ? resolve(window.Plotly) : setTimeout(wait, 50));
    wait();
  });
}

async function main() {
  if (!match) throw new Error("not a report address");
  const [, runId, number] = match;
  const base = `/api/v1/runs/${runId}/reports/${number}`;
  const report = await getJSON(base);
  document.title = t("report.pageTitle", { title: report.title });
  document.getElementById("report-title").textContent = report.title;
  document.getElementById("report-meta").textContent = t("report.meta", {
    from: report.from_step, to: report.to_step, version: report.version,
    who: report.author ? report.author.display_name : t("comments.theTeam"),
    draft: String(report.state === "draft"),
  });
  document.getElementById("report-run").href = `/runs/${runId}`;
  document.getElementById("report-export").href = `${base}/export.html`;
  const body = document.getElementById("report-body");
  body.innerHTML = report.html; // sanitized by the server (reports/blocks.py: nh3 allow-list)
  document.getElementById("report").hidden = false;
  status.hidden = true;
  const comments = new ReportComments(runId, number);
  comments.load().catch(() => {});
  const Plotly = await whenPlotly();
  const draw = async () => {
    const data = await getJSON(`${base}/data?version=${report.version}`);
    window.runcastFillBlocks(body, data.blocks, Plotly, t);
  };
  await draw();
  setInterval(() => {
    if (report.blocks.length) draw().catch(() => {});
    comments.load().catch(() => {});
  }, REFRESH_MS);
}

loadLanguage().then(main).catch((err) => {
  status.textContent = err.status === 404 ? t("report.notFound") : t("report.failed", { error: err.message });
});

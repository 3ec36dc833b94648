// The report page (/runs/{id}/reports/{n}, docs/reports.md): the report's sanitized HTML from the
// API, its live blocks drawn by report-blocks.js and drawn again from fresh data every few seconds
// while the run is live (the data route applies the run's policy and broadcast delay); its comments
// below (report/comments.js), read again as often. The team (the API gives it the Markdown source)
// also gets the editor (report/editor.js). Its words come from the catalogs (js/i18n.js); the
// title, prose and names are the team's and the run's.
import { getJSON } from "./api.js";
import { loadLanguage, t } from "./i18n.js";
import { ReportComments } from "./report/comments.js";
import { ReportEditor } from "./report/editor.js";

const REFRESH_MS = 5000;
const match = location.pathname.match(/^\/runs\/([^/]+)\/reports\/(\d+)\/?$/);
const status = document.getElementById("report-status");

function whenPlotly() {
  return new Promise((resolve) => {
    const wait = () => (window.Plotly ? resolve(window.Plotly) : setTimeout(wait, 50));
    wait();
  });
}

/** The report's title, meta line and body (its blocks empty until drawn). */
function show(report) {
  document.title = t("report.pageTitle", { title: report.title });
  document.getElementById("report-title").textContent = report.title;
  document.getElementById("report-meta").textContent = t("report.meta", {
    from: report.from_step, to: report.to_step, version: report.version,
    who: report.author ? report.author.display_name : t("comments.theTeam"),
    draft: String(report.state === "draft"),
  });
  document.getElementById("report-body").innerHTML = report.html; // sanitized by the server (reports/blocks.py: nh3 allow-list)
}

async function main() {
  if (!match) throw new Error("not a report address");
  const [, runId, number] = match;
  const base = `/api/v1/runs/${runId}/reports/${number}`;
  let report = await getJSON(base);
  show(report);
  document.getElementById("report-run").href = `/runs/${runId}`;
  document.getElementById("report-export").href = `${base}/export.html`;
  document.getElementById("report").hidden = false;
  status.hidden = true;
  const comments = new ReportComments(runId, number);
  comments.load().catch(() => {});
  const plotly = whenPlotly();
  const body = document.getElementById("report-body");
  const draw = async () => {
    const data = await getJSON(`${base}/data?version=${report.version}`);
    window.runcastFillBlocks(body, data.blocks, await plotly, t);
  };
  if (report.body !== null) { // the team: the Markdown source is theirs to edit
    const editor = new ReportEditor(runId, number, async () => {
      report = await getJSON(base);
      show(report);
      editor.show(report);
      await draw();
    }, plotly);
    editor.show(report);
    if (location.hash === "#edit") editor.open();
  }
  await draw();
  setInterval(() => {
    if (report.blocks.length) draw().catch(() => {});
    comments.load().catch(() => {});
  }, REFRESH_MS);
}

loadLanguage().then(main).catch((err) => {
  status.textContent = err.status === 404 ? t("report.notFound") : t("report.failed", { error: err.message });
});

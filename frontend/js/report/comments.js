// Comments on a report (anchor kind "report", docs/comments.md): the threads anchored to it, read
// again with the page's refresh; a signed-in reader writes one (from this page: same-site).
import { getJSON } from "../api.js";
import { el, fragment } from "../util.js";
import { t } from "../i18n.js";

const $ = (id) => document.getElementById(id);

export class ReportComments {
  constructor(runId, number) {
    this.url = `/api/v1/runs/${encodeURIComponent(runId)}/comments`;
    this.number = Number(number);
    $("report-comment-form").addEventListener("submit", (e) => {
      e.preventDefault();
      this.post();
    });
  }

  async load() {
    const body = await getJSON(this.url);
    const mine = body.comments.filter((c) => c.anchor.kind === "report" && c.anchor.id === this.number);
    $("report-comments").replaceChildren(...mine.map((c) => el("li", { className: "comment", "data-id": c.id },
      c.author ? el("p", { className: "comment-author", "data-user": true }, c.author.display_name)
        : el("p", { className: "comment-author" }, t("comments.theTeam")),
      el("div", { className: "comment-body", "data-user": true }, fragment(c.html)))));
    $("report-comment-form").hidden = !body.signed_in;
    $("report-comments-card").hidden = !body.signed_in && mine.length === 0;
  }

  async post() {
    const box = $("report-comment-body");
    $("report-comment-error").textContent = "";
    try {
      await getJSON(this.url, {
        method: "POST",
        headers: { Accept: "application/json", "Content-Type": "application/json" },
        body: JSON.stringify({ body: box.value, anchor: { kind: "report", id: this.number } }),
      });
      box.value = "";
      await this.load();
    } catch (err) {
      $("report-comment-error").textContent = err.message; // the server's message, as the run page shows it
    }
  }
}

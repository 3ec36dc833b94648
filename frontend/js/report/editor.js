// The team's editor on the report page (docs/reports.md#the-editor), shown only when the API
// gave this reader the Markdown source (a member's or an owner's session): Edit opens a text
// area beside a live preview, Save writes a new version, Publish / Unpublish, and the list of
// versions (each with its author) to publish or to edit from.
//
// The preview is the server's: POST /report-preview renders the Markdown with the same renderer
// and sanitizer as a saved report (no second renderer here) and returns the blocks' data, which
// report-blocks.js draws as on the page. Its HTML goes in through an inert <template> only.

import { getJSON } from "../api.js";
import { debounce, el, formatTime, fragment } from "../util.js";
import { t } from "../i18n.js";

const $ = (id) => document.getElementById(id);
const PREVIEW_MS = 400;

export class ReportEditor {
  /** `onChange()`: a version was saved or the published one changed (the page reads the report again). */
  constructor(runId, number, onChange, plotly) {
    this.api = `/api/v1/runs/${encodeURIComponent(runId)}`;
    this.base = `${this.api}/reports/${number}`;
    this.onChange = onChange;
    this.plotly = plotly; // resolves to window.Plotly once loaded
    this.report = null;
    this.asked = 0; // the newest preview asked for: an older answer arriving late is dropped
    this.preview = debounce(() => this.renderPreview(), PREVIEW_MS);
    $("report-edit").addEventListener("click", () => this.open());
    $("report-editor-close").addEventListener("click", () => this.close());
    $("report-publish").addEventListener("click", () => this.send("POST", "/publish", {}));
    $("report-unpublish").addEventListener("click", () => this.send("POST", "/unpublish"));
    $("report-editor-body").addEventListener("input", () => this.preview());
    $("report-editor-form").addEventListener("submit", (e) => {
      e.preventDefault();
      this.save();
    });
  }

  /** The team's controls for the report as the API gave it (its newest version). */
  show(report) {
    this.report = report;
    $("report-team").hidden = false;
    $("report-versions-card").hidden = false;
    $("report-publish").hidden = report.published_version === report.latest_version;
    $("report-unpublish").hidden = report.state !== "published";
    this.loadVersions().catch((err) => this.fail(err));
  }

  open(version = this.report) {
    $("report-editor-title").value = version.title;
    $("report-editor-from").value = String(version.from_step);
    $("report-editor-to").value = String(version.to_step);
    $("report-editor-body").value = version.body;
    $("report-editor").hidden = false;
    $("report-edit").hidden = true;
    $("report").hidden = true; // the preview stands for it while editing
    $("report-editor-body").focus();
    this.renderPreview();
  }

  close() {
    this.preview.cancel();
    $("report-editor").hidden = true;
    $("report-edit").hidden = false;
    $("report").hidden = false;
  }

  fail(err, where = "report-editor-error") {
    $(where).textContent = err ? err.message : ""; // the server's message, in the page's language
  }

  async request(method, url, body) {
    const options = { method, headers: { Accept: "application/json" } };
    if (body !== undefined) {
      options.headers["Content-Type"] = "application/json";
      options.body = JSON.stringify(body);
    }
    return getJSON(url, options);
  }

  async renderPreview() {
    const asked = ++this.asked;
    const source = $("report-editor-body").value;
    const host = $("report-editor-preview");
    if (!source.trim()) {
      host.replaceChildren();
      return;
    }
    let answer;
    try {
      answer = await this.request("POST", `${this.api}/report-preview`, { body: source });
    } catch (err) {
      if (asked === this.asked) this.fail(err, "report-editor-preview-error");
      return;
    }
    if (asked !== this.asked) return;
    this.fail(null, "report-editor-preview-error");
    host.replaceChildren(fragment(answer.html)); // sanitized by the server (reports/blocks.py: nh3)
    window.runcastFillBlocks(host, answer.blocks, await this.plotly, t);
  }

  async save() {
    this.fail(null);
    try {
      const saved = await this.request("PUT", this.base, {
        title: $("report-editor-title").value,
        body: $("report-editor-body").value,
        from_step: Number($("report-editor-from").value),
        to_step: Number($("report-editor-to").value),
      });
      $("report-editor-saved").textContent = t("reportEditor.saved", { version: saved.version });
    } catch (err) {
      this.fail(err);
      return;
    }
    await this.onChange();
  }

  async send(method, suffix, body) {
    this.fail(null);
    try {
      await this.request(method, this.base + suffix, body);
    } catch (err) {
      this.fail(err);
      return;
    }
    await this.onChange();
  }

  async loadVersions() {
    const { versions } = await getJSON(`${this.base}/versions`);
    const published = this.report.published_version;
    $("report-versions").replaceChildren(...versions.slice().reverse().map((v) => {
      const item = el("li", { "data-version": v.version },
        el("span", { text: t("reportEditor.version", { version: v.version }) }), " · ",
        el("span", { "data-user": true, text: v.title }), " · ",
        v.author ? el("span", { "data-user": true, text: v.author.display_name }) : t("comments.theTeam"), " · ",
        el("time", { text: formatTime(v.created_at), "data-intl": true }));
      if (v.version === published) item.append(" ", el("span", { className: "badge", text: t("reportEditor.published") }));
      const act = (text, action, fn) => item.append(" ", el("button", { type: "button", className: "link", text,
        "data-action": action, onclick: fn }));
      act(t("reportEditor.editFrom"), "edit", async () => {
        try {
          this.open(await getJSON(`${this.base}?version=${v.version}`));
        } catch (err) {
          this.fail(err);
        }
      });
      if (v.version !== published) act(t("reportEditor.publishVersion"), "publish", () => this.send("POST", "/publish", { version: v.version }));
      return item;
    }));
  }
}

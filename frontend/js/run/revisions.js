// The run's code revisions (GET /runs/{id}/revisions): sha (copy button), branch, remote, dirty
// badge, the segments that used it, a code-host link (http(s) only) and the diff as text.

import { runUrl } from "../api.js";
import { copyButton, el, formatBytes, safeHttpUrl, table } from "../util.js";
import { formatNumber, t } from "../i18n.js";

const $ = (id) => document.getElementById(id);

/** Read the run's revisions (through page.read: batched with the other panels' reads) and render them. */
export async function loadRevisions(page) {
  let body;
  try {
    body = await page.read("revisions");
  } catch {
    return;
  }
  renderRevisions(page.runId, body.revisions || []);
}

function renderRevisions(runId, revisions) {
  const box = $("revisions");
  box.replaceChildren();
  if (!revisions.length) return;
  box.append(el("h3", { text: t("revisions.title", { count: revisions.length }) }));
  const list = el("ul", { className: "revisions" });
  for (const r of revisions.slice(0, 200)) {
    const li = el("li", { className: "revision" });
    const sha = r.sha ? String(r.sha) : null;
    const head = el("div", { className: "rev-head" });
    head.append(sha ? el("code", { className: "rev-sha", title: sha, text: sha.slice(0, 12) }) : el("span", { text: t("revisions.noSha") }));
    if (sha) head.append(" ", copyButton(sha, t("revisions.sha")));
    if (r.dirty) head.append(" ", el("span", { className: "badge rev-dirty", text: t("revisions.dirty") }));
    li.append(head);
    const rows = [];
    if (r.branch) rows.push([t("revisions.branch"), String(r.branch)]);
    if (r.remote) rows.push([t("revisions.remote"), String(r.remote)]);
    if (Array.isArray(r.segments) && r.segments.length) rows.push([t("revisions.segments"), r.segments.join(", ")]);
    if (Array.isArray(r.start_steps) && r.start_steps.length) rows.push([t("revisions.fromSteps"), r.start_steps.map((s) => formatNumber(Number(s))).join(", ")]);
    rows.push([t("revisions.dirty"), r.dirty ? t(r.diff_truncated ? "revisions.yesTruncated" : "revisions.yes") : t("revisions.no")]);
    li.append(table(rows, { labels: true }));
    const links = el("p", { className: "rev-links" });
    const href = safeHttpUrl(r.link);
    if (href) {
      const a = el("a", { className: "rev-link", text: t("revisions.codeHost"), rel: "noopener noreferrer nofollow" });
      a.href = href;
      links.append(a);
    }
    if (r.diff_url && Number.isSafeInteger(r.id)) {
      if (links.childNodes.length) links.append(" · ");
      links.append(el("a", {
        className: "rev-diff", href: runUrl(runId) + "/revisions/" + r.id + "/diff",
        text: typeof r.diff_bytes === "number" ? t("revisions.diffSize", { size: formatBytes(r.diff_bytes) }) : t("revisions.diff"),
      }));
    }
    if (links.childNodes.length) li.append(links);
    list.append(li);
  }
  box.append(list);
}

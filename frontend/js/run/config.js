// The run's config and environment: seed, world size, code revision, group, job type, tags,
// notes, summary, hyperparameters (nested keys flattened), environment, and an uncommitted diff
// in a fold-out.

import { el, table } from "../util.js";
import { t } from "../i18n.js";

/** [dotted key, value as text] for every leaf of a nested config (at most about 500). */
export function flatten(obj, prefix = "", out = []) {
  for (const [k, v] of Object.entries(obj || {})) {
    const name = prefix ? prefix + "." + k : k;
    if (v && typeof v === "object" && !Array.isArray(v) && Object.keys(v).length && out.length < 500) flatten(v, name, out);
    else out.push([name, typeof v === "string" ? v : JSON.stringify(v)]);
  }
  return out;
}

export function renderConfig(detail) {
  const box = document.getElementById("config");
  box.replaceChildren();
  const env = detail.env || {};
  const code = detail.code || {};
  const sha = code.sha ? String(code.sha).slice(0, 12) : null;
  const runRows = [
    [t("config.runId"), detail.id],
    [t("config.seed"), detail.seed === null ? "–" : String(detail.seed)],
    [t("config.worldSize"), env.world_size !== undefined && env.world_size !== null ? String(env.world_size) : "–"],
    [t("config.revision"), sha ? (code.dirty ? t("config.dirty", { sha }) : sha) : "–"],
    [t("config.branch"), code.branch ? String(code.branch) : "–"],
    [t("config.visibility"), t("visibility." + detail.visibility)],
    [t("config.group"), detail.group || "–"],
    [t("config.jobType"), detail.job_type || "–"],
    [t("config.tags"), (detail.tags || []).join(", ") || "–"],
  ];
  const rows = table(runRows, { labels: true });
  rows.rows[5].cells[1].removeAttribute("data-user"); // visibility: the page's word, not the run's
  box.append(el("h3", { text: t("config.run") }), rows);
  if (detail.notes) box.append(el("h3", { text: t("config.notes") }), el("p", { className: "run-notes", "data-user": true, text: detail.notes }));
  const summary = flatten(detail.summary);
  if (summary.length) box.append(el("h3", { text: t("config.summary") }), table(summary));
  const config = flatten(detail.config);
  box.append(el("h3", { text: t("config.hyperparameters") }), config.length ? table(config) : el("p", { text: t("config.noConfig") }));
  const envRows = flatten(env);
  box.append(el("h3", { text: t("config.environment") }), envRows.length ? table(envRows) : el("p", { text: t("config.noEnv") }));
  const codeRows = flatten(Object.fromEntries(Object.entries(code).filter(([k]) => k !== "diff")));
  if (codeRows.length) box.append(el("h3", { text: t("config.code") }), table(codeRows));
  if (code.diff) {
    box.append(el("details", {}, el("summary", { text: t("config.diff") }), el("pre", { "data-user": true, text: String(code.diff).slice(0, 200000) })));
  }
}

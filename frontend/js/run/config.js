// The run's config and environment: seed, world size, code revision, group, job type, tags,
// notes, summary, hyperparameters (nested keys flattened), environment, and an uncommitted diff
// in a fold-out.

import { el, table } from "../util.js";

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
  const runRows = [
    ["run id", detail.id],
    ["seed", detail.seed === null ? "–" : String(detail.seed)],
    ["world size", env.world_size !== undefined && env.world_size !== null ? String(env.world_size) : "–"],
    ["code revision", code.sha ? String(code.sha).slice(0, 12) + (code.dirty ? " (dirty)" : "") : "–"],
    ["branch", code.branch ? String(code.branch) : "–"],
    ["visibility", detail.visibility],
    ["group", detail.group || "–"],
    ["job type", detail.job_type || "–"],
    ["tags", (detail.tags || []).join(", ") || "–"],
  ];
  box.append(el("h3", { text: "Run" }), table(runRows));
  if (detail.notes) box.append(el("h3", { text: "Notes" }), el("p", { className: "run-notes", text: detail.notes }));
  const summary = flatten(detail.summary);
  if (summary.length) box.append(el("h3", { text: "Summary" }), table(summary));
  const config = flatten(detail.config);
  box.append(el("h3", { text: "Hyperparameters" }), config.length ? table(config) : el("p", { text: "No config logged." }));
  const envRows = flatten(env);
  box.append(el("h3", { text: "Environment" }), envRows.length ? table(envRows) : el("p", { text: "No environment logged." }));
  const codeRows = flatten(Object.fromEntries(Object.entries(code).filter(([k]) => k !== "diff")));
  if (codeRows.length) box.append(el("h3", { text: "Code" }), table(codeRows));
  if (code.diff) {
    box.append(el("details", {}, el("summary", { text: "Uncommitted diff" }), el("pre", { text: String(code.diff).slice(0, 200000) })));
  }
}

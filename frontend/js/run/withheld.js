// What the run's publication policy withholds from this page's reader (GET /runs/{id} →
// publication.withheld), said in words, so that an absent panel is not read as absent data;
// and the broadcast delay (withheld.delay_s), so that a quiet chart is not read as a stalled run.

import { t } from "../i18n.js";

// Per withheld kind: its phrase's key, and the keys of a policy that keeps part of it back.
const list = (v) => new Intl.ListFormat(document.documentElement.lang || "en", { type: "conjunction" }).format(v);
const LABELS = {
  metrics: (v) => (v === "none" ? t("withheld.metrics") : t("withheld.metricsOnly", { keys: list(v) })),
  config: (v) => (v === "none" ? t("withheld.config") : t("withheld.configOnly", { keys: list(v) })),
  env: () => t("withheld.env"),
  code: (v) => (v === "none" ? t("withheld.code") : t("withheld.codeCommit")),
  data_mix: () => t("withheld.dataMix"),
  manifests: (v) => (v === "none" ? t("withheld.manifests") : t("withheld.manifestsSummary")),
  notes: () => t("withheld.notes"),
  checkpoints: (v) => (v === "none" ? t("withheld.checkpoints") : t("withheld.checkpointsMetadata")),
  alerts: () => t("withheld.alerts"),
  samples: () => t("withheld.samples"),
  evals: () => t("withheld.evals"),
  media: () => t("withheld.media"),
};

/** A delay in words: "90 seconds", "5 minutes", "1.5 hours", "2 days". */
export function delayText(seconds) {
  const units = [["day", 86400], ["hour", 3600], ["minute", 60]];
  for (const [name, size] of units) {
    if (seconds >= size) return t("delay." + name, { n: Math.round((seconds / size) * 10) / 10 });
  }
  return t("delay.second", { n: seconds });
}

/** The delay sentence, or "" for a live broadcast. */
export function delayPhrase(withheld) {
  const delay = Number((withheld || {}).delay_s || 0);
  return delay > 0 ? t("withheld.delay", { delay: delayText(delay) }) : "";
}

/** One phrase per withheld kind of data, in the policy's order. */
export function withheldPhrases(withheld) {
  return Object.entries(withheld || {})
    .filter(([name]) => name in LABELS)
    .map(([name, value]) => LABELS[name](value));
}

/** Fill the notice (#run-withheld): hidden when nothing is withheld or delayed. */
export function renderWithheld(node, detail) {
  const withheld = detail.publication ? detail.publication.withheld : {};
  const phrases = withheldPhrases(withheld);
  const delay = delayPhrase(withheld);
  node.hidden = phrases.length === 0 && !delay;
  node.replaceChildren();
  if (delay) {
    const line = document.createElement("p");
    line.id = "run-delay";
    const lead = document.createElement("strong");
    lead.textContent = t("withheld.delayLead");
    line.append(lead, delay);
    node.append(line);
  }
  if (!phrases.length) return;
  const lead = document.createElement("strong");
  lead.textContent = t("withheld.lead");
  const list = document.createElement("ul");
  for (const phrase of phrases) {
    const item = document.createElement("li");
    item.textContent = phrase;
    list.append(item);
  }
  node.append(lead, list);
}

// What the run's publication policy withholds from this page's reader (GET /runs/{id} →
// publication.withheld), said in words, so that an absent panel is not read as absent data.

const LABELS = {
  metrics: (v) => (v === "none" ? "metrics withheld by the team" : `metrics: only ${v.join(", ")} published`),
  config: (v) => (v === "none" ? "config withheld by the team" : `config: only ${v.join(", ")} published`),
  env: () => "environment withheld by the team",
  code: (v) => (v === "none" ? "code withheld by the team" : "code: commit only, no diff"),
  data_mix: () => "data mix withheld by the team",
  manifests: (v) => (v === "none" ? "dataset manifests withheld by the team" : "dataset manifests: summary only"),
  notes: () => "notes withheld by the team",
  checkpoints: (v) => (v === "none" ? "checkpoints withheld by the team" : "checkpoints: metadata only"),
  alerts: () => "alerts shown to the team only",
};

/** One phrase per withheld kind of data, in the policy's order. */
export function withheldPhrases(withheld) {
  return Object.entries(withheld || {})
    .filter(([name]) => name in LABELS)
    .map(([name, value]) => LABELS[name](value));
}

/** Fill the notice (#run-withheld): hidden when nothing is withheld. */
export function renderWithheld(node, detail) {
  const phrases = withheldPhrases(detail.publication ? detail.publication.withheld : {});
  node.hidden = phrases.length === 0;
  node.replaceChildren();
  if (!phrases.length) return;
  const lead = document.createElement("strong");
  lead.textContent = "Not published: ";
  const list = document.createElement("ul");
  for (const phrase of phrases) {
    const item = document.createElement("li");
    item.textContent = phrase;
    list.append(item);
  }
  node.append(lead, list);
}

// What the run's publication policy withholds from this page's reader (GET /runs/{id} →
// publication.withheld), said in words, so that an absent panel is not read as absent data;
// and the broadcast delay (withheld.delay_s), so that a quiet chart is not read as a stalled run.

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
  samples: () => "samples withheld by the team",
  evals: () => "evaluations withheld by the team",
  media: () => "media withheld by the team",
};

/** A delay in words: "90 seconds", "5 minutes", "1.5 hours", "2 days". */
export function delayText(seconds) {
  const units = [["day", 86400], ["hour", 3600], ["minute", 60]];
  for (const [name, size] of units) {
    if (seconds >= size) {
      const n = Math.round((seconds / size) * 10) / 10;
      return `${n} ${name}${n === 1 ? "" : "s"}`;
    }
  }
  return `${seconds} second${seconds === 1 ? "" : "s"}`;
}

/** The delay sentence, or "" for a live broadcast. */
export function delayPhrase(withheld) {
  const delay = Number((withheld || {}).delay_s || 0);
  return delay > 0 ? `public viewers see this run as it was ${delayText(delay)} ago; the team sees it live` : "";
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
    lead.textContent = "Delayed broadcast: ";
    line.append(lead, delay);
    node.append(line);
  }
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

// One sample as the samples panel shows it: its output with the words changed since the
// previous step marked (<ins>, <del>), whether the list clipped it, its scores, sampling
// settings and reference. Every string of the run goes in as text (el(), text nodes).

import { decode } from "../api.js";
import { el, formatValue } from "../util.js";
import { wordDiff } from "./worddiff.js";
import { t } from "../i18n.js";

/**
 * The words of `after` with those added since `before` in <ins> and those removed in <del>;
 * unmarked when there is nothing before or the texts are too long to compare (`marked` false).
 */
export function diffText(before, after) {
  const box = el("div", { className: "sample-text", "data-user": true });
  const runs = before === null ? null : wordDiff(before, after);
  box.dataset.marked = String(runs !== null);
  if (runs === null) {
    box.textContent = after;
    return box;
  }
  for (const run of runs) {
    if (run.op === "=") box.append(run.text);
    else box.append(el(run.op === "+" ? "ins" : "del", { text: run.text }));
  }
  return box;
}

/** "name value · name value" of a mapping (scores: wire numbers; settings: any JSON). */
function pairs(mapping, format) {
  return Object.entries(mapping || {}).map(([k, v]) => `${k} ${format(v)}`).join(" · ");
}

const settingText = (v) => (typeof v === "string" ? v : JSON.stringify(v));

/**
 * Fill `box` with `sample` (a list entry, or its whole text once read: `whole`), compared with
 * `previous` (the sample of the step before, or null). `onWhole()` asks for the whole texts;
 * `discuss`: the sample's "Discuss" control, or null.
 */
export function renderSample(box, { sample, previous, whole, wholePrevious, segments, onWhole, discuss = null }) {
  const output = whole ? whole.output : sample.output;
  const before = previous === null ? null : wholePrevious ? wholePrevious.output : previous.output;
  const head = [t("common.stepN", { step: sample.step })];
  if (segments > 1) head.push(t("samples.segment", { segment: sample.segment }));
  head.push(previous === null ? t("samples.first") : t("samples.changesSince", { step: previous.step }));
  const text = diffText(before, output);
  if (before !== null && text.dataset.marked === "false") head.push(t("samples.tooLong"));
  // Each part its own text node: a message of the catalog each, " · " between.
  const meta = el("p", { className: "sample-meta" }, ...head.flatMap((part, i) => (i ? [" · ", part] : [part])));
  if (discuss) meta.append(" · ", discuss); // the sample's "Discuss" (run/comments.js)
  box.replaceChildren(meta, text);
  if (!whole && sample.output_chars > sample.output.length) {
    box.append(el("p", { className: "sample-clipped" },
      t("samples.clipped", { shown: sample.output.length, count: sample.output_chars }), " ",
      el("button", { type: "button", className: "link sample-whole", text: t("samples.wholeOutput"), onclick: onWhole })));
  }
  const scores = pairs(sample.scores, (v) => formatValue(decode(v)));
  if (scores) box.append(el("p", { className: "sample-scores" }, el("strong", { text: t("samples.scores") }), " ", el("span", { text: scores, "data-user": true })));
  const settings = pairs(sample.settings, settingText);
  if (settings) box.append(el("p", { className: "sample-settings" }, el("strong", { text: t("samples.settings") }), " ", el("span", { text: settings, "data-user": true })));
  if (sample.reference !== null && sample.reference !== undefined) {
    const reference = whole ? whole.reference : sample.reference;
    const clipped = !whole && sample.reference_chars > sample.reference.length;
    box.append(el("details", { className: "sample-reference" },
      el("summary", { text: clipped ? t("samples.referenceClipped", { count: sample.reference_chars }) : t("samples.reference") }),
      el("div", { className: "sample-text", text: reference, "data-user": true })));
  }
}

// The samples panel (docs/dashboard.md, "Samples"): pick a key and a prompt (a list with a
// search), read its outputs across steps (a slider, and the list of every step), each with the
// words changed since the previous step marked; an output the list clipped is read whole on
// demand (GET /samples/{id}). Read once the card comes into view; live: the stream's batches
// name the samples they stored, and the panel reads those of the prompt it shows. A prompt of
// many steps shows its newest outputs from a small read first, then its every step.

import { getJSON, runUrl } from "../api.js";
import { debounce, el, LIVE_MAX_WAIT_MS } from "../util.js";
import { renderSample } from "./sampleview.js";
import { t } from "../i18n.js";

const $ = (id) => document.getElementById(id);
const PAGE = 1000; // samples per read: the route's most
const TAIL = 100; // a prompt of more samples than this shows its newest few before the rest is read
const LAST_ID = Number.MAX_SAFE_INTEGER; // sample ids are below 2^53
const HASH_ID = /^[0-9a-f]{16}$/; // the SDK's prompt id when the trainer gave none: not worth showing
const id2 = (key, prompt) => key + "\u0000" + prompt;

/** A prompt as the list shows it: its id when the trainer named it, and its first words. */
function promptLabel(p) {
  const text = p.prompt.replace(/\s+/g, " ").trim().slice(0, 100) || t("samples.emptyPrompt");
  return HASH_ID.test(p.prompt_id) ? text : `${p.prompt_id} · ${text}`;
}

function afterCursor(sample) {
  return sample.step + "_" + sample.id;
}

export class SamplesPanel {
  constructor(page) {
    this.page = page;
    this.prompts = []; // GET /samples/prompts: every key's
    this.key = null;
    this.prompt = null; // the prompt id shown
    this.samples = []; // its samples, oldest step first
    this.partial = false; // only the newest of them read yet
    this.at = -1; // the index of the sample shown
    this.cache = new Map(); // id2(key, prompt) -> its samples as read
    this.whole = new Map(); // sample id -> GET /samples/{id}
    this.wholeShown = false; // the shown sample's whole texts asked for
    this.stale = false; // a live sample of the shown prompt went before those read
    this.ui = null;
    this.opened = false; // the card has come into view
    this.readSeq = 0;
    this.soonPrompts = debounce(() => this.load(), 500, LIVE_MAX_WAIT_MS);
    this.soonMore = debounce(() => this.readMore(), 200, LIVE_MAX_WAIT_MS);
  }

  /** Read the prompts and show them (the card stays hidden while the run has no samples). */
  async load() {
    let body;
    try {
      body = await this.page.read("samples/prompts");
    } catch {
      return; // the next live sample or reset reads again
    }
    const card = $("samples-card");
    if (body.withheld) {
      card.hidden = false;
      this.ui = null;
      $("samples").replaceChildren(el("p", { className: "empty", text: t("samples.withheld") }));
      return;
    }
    this.prompts = body.prompts;
    card.hidden = this.prompts.length === 0;
    if (!this.prompts.length) return;
    if (!this.ui) this.build(card);
    this.fillKeys();
    this.fillPrompts();
  }

  /** Read again what the panel shows (after a stream reset or when the stream was down). */
  reload() {
    this.cache.clear();
    this.samples = [];
    this.load().then(() => this.prompt !== null && this.opened && this.pick(this.key, this.prompt, { force: true }));
  }

  build(card) {
    const ui = (this.ui = {
      key: el("select", { id: "samples-key", "aria-label": t("samples.keyAria"), onchange: () => this.onKey() }),
      search: el("input", { id: "samples-search", type: "search", placeholder: t("samples.search"), "aria-label": t("samples.search"),
        oninput: () => this.filter() }),
      count: el("span", { id: "samples-count", className: "note" }),
      list: el("select", { id: "samples-prompts", "aria-label": t("samples.prompts"),
        onchange: () => this.pick(this.key, ui.list.value) }),
      prompt: el("div", { id: "sample-prompt", className: "sample-prompt" }),
      slider: el("input", { id: "samples-step", type: "range", min: "0", max: "0", value: "0", "aria-label": t("samples.stepAria"),
        oninput: () => this.show(Number(ui.slider.value)) }),
      stepLabel: el("output", { id: "samples-step-label", for: "samples-step" }),
      view: el("div", { id: "sample-view", className: "sample-view", "aria-live": "polite" }),
      steps: el("ol", { id: "sample-steps", className: "sample-steps" }),
      stepsBox: el("details", { className: "sample-steps-box", ontoggle: () => this.renderSteps() }),
    });
    ui.keyLabel = el("label", {}, t("samples.keyLabel"), " ", ui.key);
    ui.stepsTitle = el("summary", { text: t("samples.everyStep") });
    ui.stepsBox.append(ui.stepsTitle, ui.steps);
    const nav = el("div", { className: "sample-nav" },
      el("button", { type: "button", text: "◀", "aria-label": t("samples.previous"), onclick: () => this.show(this.at - 1) }),
      ui.slider,
      el("button", { type: "button", text: "▶", "aria-label": t("samples.next"), onclick: () => this.show(this.at + 1) }),
      ui.stepLabel);
    $("samples").replaceChildren(
      el("div", { className: "samples-controls" }, ui.keyLabel, ui.search, ui.count),
      el("div", { className: "samples-body" }, ui.list,
        el("div", { className: "samples-reader" }, ui.prompt, nav, ui.view, ui.stepsBox)));
    new IntersectionObserver((entries, observer) => {
      if (!entries.some((e) => e.isIntersecting)) return;
      observer.disconnect();
      this.opened = true;
      performance.mark("runcast-samples-open");
      if (this.prompt !== null) this.pick(this.key, this.prompt, { force: true });
    }, { rootMargin: "200px" }).observe(card);
  }

  keys() {
    return [...new Set(this.prompts.map((p) => p.key))];
  }

  fillKeys() {
    const keys = this.keys();
    if (!keys.includes(this.key)) this.key = keys[0];
    const { key } = this.ui;
    if (key.options.length !== keys.length || [...key.options].some((o, i) => o.value !== keys[i])) {
      key.replaceChildren(...keys.map((k) => el("option", { value: k, text: k, "data-user": true })));
    }
    key.value = this.key;
    this.ui.keyLabel.hidden = keys.length < 2;
  }

  onKey() {
    this.key = this.ui.key.value;
    this.prompt = null;
    this.fillPrompts();
  }

  /** The list of the key's prompts; keeps the prompt shown, else shows the first. */
  fillPrompts() {
    const prompts = this.prompts.filter((p) => p.key === this.key);
    const { list } = this.ui;
    list.replaceChildren(...prompts.map((p) => el("option", { value: p.prompt_id, text: promptLabel(p), title: p.prompt, "data-user": true })));
    list.size = Math.max(4, Math.min(16, prompts.length));
    this.filter();
    if (!prompts.some((p) => p.prompt_id === this.prompt)) this.prompt = prompts[0].prompt_id;
    list.value = this.prompt;
    if (this.opened) this.pick(this.key, this.prompt);
  }

  filter() {
    const words = this.ui.search.value.toLowerCase().trim();
    let shown = 0;
    for (const option of this.ui.list.options) {
      option.hidden = words !== "" && !(option.value + " " + option.title).toLowerCase().includes(words);
      if (!option.hidden) shown++;
    }
    const all = this.ui.list.options.length;
    this.ui.count.textContent = shown === all ? t("samples.count", { count: all }) : t("samples.countOf", { shown, count: all });
  }

  /** Show a prompt: its samples from the cache or read (every page), at its newest step. */
  async pick(key, prompt, { force = false } = {}) {
    if (!force && key === this.key && prompt === this.prompt && this.samples.length) return;
    performance.mark("runcast-prompt-pick");
    this.key = key;
    this.prompt = prompt;
    const seq = ++this.readSeq;
    const current = () => seq === this.readSeq; // no other prompt picked meanwhile
    let samples = force ? null : this.cache.get(id2(key, prompt));
    let shown = false;
    try {
      if (!samples) {
        const info = this.prompts.find((p) => p.key === key && p.prompt_id === prompt);
        const tail = info && info.count > TAIL ? await this.readTail(key, prompt, info) : null;
        if (tail && current()) shown = this.display(tail, true, false);
        samples = await this.read(key, prompt, null);
        this.cache.set(id2(key, prompt), samples);
      }
    } catch (err) {
      if (current()) this.ui.view.replaceChildren(el("p", { className: "error", text: t("samples.readFailed", { error: err.message }) }));
      return;
    }
    if (current()) this.display(samples, false, shown);
  }

  /** Show `samples` at the newest; `partial`: the newest few only. Marks the time for the benchmark. */
  display(samples, partial, shownBefore) {
    this.samples = samples;
    this.partial = partial;
    this.renderPrompt();
    this.show(samples.length - 1);
    const marks = shownBefore ? ["runcast-samples-complete"] : partial ? ["runcast-samples-shown"] : ["runcast-samples-shown", "runcast-samples-complete"];
    requestAnimationFrame(() => setTimeout(() => marks.forEach((m) => performance.mark(m))));
    return true;
  }

  /** The newest two or so samples of a prompt (`info`: its entry of the prompts list), or null
   * when the read from a step guessed from the prompt's count and steps does not reach its end. */
  async readTail(key, prompt, info) {
    const spacing = (info.last_step - info.first_step) / (info.count - 1);
    const from = Math.floor(info.last_step - spacing * 1.5);
    const params = new URLSearchParams({ key, prompt, limit: "8" });
    if (from > info.first_step) params.set("after", `${from - 1}_${LAST_ID}`);
    const body = await getJSON(runUrl(this.page.runId) + "/samples?" + params);
    return body.next_cursor || !body.samples.length ? null : body.samples;
  }

  /** Every sample of a prompt after `after` (a cursor, or null: all), oldest step first. */
  async read(key, prompt, after) {
    const out = [];
    for (;;) {
      const params = new URLSearchParams({ key, prompt, limit: String(PAGE) });
      if (after) params.set("after", after);
      const body = await getJSON(runUrl(this.page.runId) + "/samples?" + params);
      out.push(...body.samples);
      if (!body.next_cursor || !body.samples.length) return out;
      after = body.next_cursor;
    }
  }

  renderPrompt() {
    const p = this.prompts.find((q) => q.key === this.key && q.prompt_id === this.prompt);
    const text = el("div", { className: "sample-prompt-text", text: p ? p.prompt : "", "data-user": true });
    this.ui.prompt.replaceChildren(el("strong", { text: t("samples.prompt") }), text);
    if (p && p.prompt_chars > p.prompt.length && this.samples.length) {
      const button = el("button", {
        type: "button", className: "link", text: t("samples.wholePrompt", { count: p.prompt_chars }),
        onclick: async () => {
          const whole = await this.readWhole(this.samples[0]);
          if (whole) text.textContent = whole.prompt;
          button.remove();
        },
      });
      this.ui.prompt.append(button);
    }
    this.ui.slider.max = String(Math.max(0, this.samples.length - 1));
    this.ui.slider.disabled = this.partial || this.samples.length < 2;
    this.ui.stepsTitle.textContent = this.partial ? t("samples.everyStep") : t("samples.everyStepCount", { count: this.samples.length });
    this.renderSteps();
  }

  /** Show the sample at index `i` (clamped), compared with the one before it. */
  show(i) {
    if (!this.samples.length) return;
    this.at = Math.max(0, Math.min(this.samples.length - 1, i));
    this.wholeShown = false;
    this.ui.slider.value = String(this.at);
    const step = this.samples[this.at].step;
    this.ui.stepLabel.textContent = this.partial ? t("common.stepN", { step })
      : t("samples.stepOf", { step, at: this.at + 1, count: this.samples.length });
    this.renderView();
    const current = this.ui.steps.querySelector("[aria-current]");
    if (current) current.removeAttribute("aria-current");
    const item = this.ui.steps.children[this.at];
    if (item) item.setAttribute("aria-current", "step");
  }

  renderView() {
    const sample = this.samples[this.at];
    const previous = this.at > 0 ? this.samples[this.at - 1] : null;
    renderSample(this.ui.view, {
      sample,
      previous,
      whole: this.wholeShown ? this.whole.get(sample.id) : null,
      wholePrevious: this.wholeShown && previous ? this.whole.get(previous.id) : null,
      segments: this.page.detail ? this.page.detail.segments.length : 1,
      onWhole: () => this.showWhole(),
      discuss: this.page.comments ? this.page.comments.discussButton("sample", sample.id, sample.step) : null,
    });
  }

  async showWhole() {
    const sample = this.samples[this.at];
    const previous = this.at > 0 ? this.samples[this.at - 1] : null;
    const [whole] = await Promise.all([this.readWhole(sample), previous && this.readWhole(previous)]);
    if (!whole || this.samples[this.at] !== sample) return;
    this.wholeShown = true;
    this.renderView();
  }

  async readWhole(sample) {
    if (!this.whole.has(sample.id)) {
      try {
        this.whole.set(sample.id, await getJSON(runUrl(this.page.runId) + "/samples/" + sample.id));
      } catch {
        return null;
      }
    }
    return this.whole.get(sample.id);
  }

  /** The list of every step of the prompt (built while its fold-out is open). */
  renderSteps() {
    const { steps, stepsBox } = this.ui;
    if (!stepsBox.open || this.partial) return steps.replaceChildren();
    steps.replaceChildren(...this.samples.map((s, i) => el("li", {},
      el("button", { type: "button", className: "link", text: t("common.stepN", { step: s.step }), onclick: () => this.show(i) }),
      " ", el("span", { className: "sample-preview", text: s.output.slice(0, 300), "data-user": true }))));
    const item = steps.children[this.at];
    if (item) item.setAttribute("aria-current", "step");
  }

  /** The stream's `samples` of a batch: new prompts re-read the list; the shown prompt's read. */
  onLive(entries) {
    if (!this.ui && !$("samples-card").hidden) return; // withheld: nothing comes
    for (const e of entries) {
      if (!this.prompts.some((p) => p.key === e.key && p.prompt_id === e.prompt_id)) this.soonPrompts();
      if (e.key === this.key && e.prompt_id === this.prompt) {
        const last = this.samples[this.samples.length - 1];
        if (last && e.step < last.step) this.stale = true; // a resumed segment went back: read it all
        this.soonMore();
      } else this.cache.delete(id2(e.key, e.prompt_id)); // read again when picked
    }
  }

  /** The shown prompt's samples stored since it was read (all again if one went before them). */
  async readMore() {
    const { key, prompt } = this;
    if (!this.opened) return;
    if (this.stale || !this.samples.length) {
      this.stale = false;
      return this.pick(key, prompt, { force: true });
    }
    const last = this.samples[this.samples.length - 1];
    const seq = this.readSeq;
    let fresh;
    try {
      fresh = await this.read(key, prompt, afterCursor(last));
    } catch {
      return;
    }
    if (seq !== this.readSeq || !fresh.length) return;
    const ids = new Set(this.samples.map((s) => s.id));
    const following = this.at === this.samples.length - 1;
    this.samples.push(...fresh.filter((s) => !ids.has(s.id)));
    this.renderPrompt();
    this.show(following ? this.samples.length - 1 : this.at);
  }
}

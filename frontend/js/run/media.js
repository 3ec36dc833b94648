// The media panel (GET /runs/{id}/media/keys, /media): one block per key across steps, by its
// kind: images as a strip with a step slider (imagestrip.js), tables (mediatable.js),
// histograms as a heat map (histogram.js). A block reads its rows once it comes into view;
// live, the stream's batches name the rows they stored and each block reads its new ones.

import { debounce, el, LIVE_MAX_WAIT_MS } from "../util.js";
import { HistogramBlock } from "./histogram.js";
import { ImageStrip } from "./imagestrip.js";
import { TableBlock } from "./mediatable.js";
import { t } from "../i18n.js";

const $ = (id) => document.getElementById(id);
const BLOCKS = { image: ImageStrip, table: TableBlock, histogram: HistogramBlock };
const id2 = (key, kind) => key + "\u0000" + kind;

export class MediaPanel {
  constructor(page) {
    this.page = page;
    this.blocks = new Map(); // id2(key, kind) -> {info, block, opened, section, count}
    this.withheld = false;
    this.observer = new IntersectionObserver((entries) => {
      for (const entry of entries) {
        if (!entry.isIntersecting) continue;
        this.observer.unobserve(entry.target);
        const b = [...this.blocks.values()].find((x) => x.section === entry.target);
        if (b) this.open(b);
      }
    }, { rootMargin: "200px" });
    this.soonKeys = debounce(() => this.load(), 300, LIVE_MAX_WAIT_MS);
  }

  /** Read the keys: a block for each new one, the others told their new counts. */
  async load() {
    let body;
    try {
      body = await this.page.read("media/keys");
    } catch {
      return;
    }
    const card = $("media-card");
    this.withheld = body.withheld === true;
    if (this.withheld) {
      card.hidden = false;
      this.blocks.clear();
      $("media").replaceChildren(el("p", { className: "empty", text: t("media.withheld") }));
      return;
    }
    card.hidden = body.keys.length === 0;
    for (const info of body.keys) {
      const b = this.blocks.get(id2(info.key, info.kind));
      if (!b) this.add(info);
      else if (info.count !== b.info.count) this.update(b, info);
    }
  }

  add(info) {
    const box = el("div", { className: "media-body" });
    const count = el("span", { className: "note" });
    const section = el("section", { className: "media-key", "data-key": info.key, "data-kind": info.kind },
      el("h3", {}, el("span", { text: info.key, "data-user": true }), " ", count), box);
    const b = { info, section, count, block: new BLOCKS[info.kind](this.page.runId, info, box), opened: false };
    this.counted(b);
    this.blocks.set(id2(info.key, info.kind), b);
    if (this.blocks.size === 1) $("media").replaceChildren();
    $("media").append(section);
    this.observer.observe(section);
  }

  counted(b) {
    b.count.textContent = t("media.count." + b.info.kind, { count: b.info.count });
  }

  async open(b) {
    b.opened = true;
    try {
      await b.block.open();
    } catch (err) {
      b.section.append(el("p", { className: "error", text: t("media.readFailed", { error: err.message }) }));
    }
  }

  update(b, info) {
    b.info = info;
    this.counted(b);
    if (b.opened) b.block.onLive(info).catch(() => {}); // the next message or reset reads again
  }

  /** The stream's `media` of a batch: the keys read again (their counts, and any new key). */
  onLive(entries) {
    if (!this.withheld && entries.length) this.soonKeys();
  }

  /** Everything read again (a stream reset, or the stream was down). */
  reload() {
    for (const b of this.blocks.values()) b.section.remove();
    this.blocks.clear();
    this.load();
  }
}

// An image key across steps: a strip of thumbnails (a window of the key's rows, the newest
// first shown) with a step slider that moves it anywhere in the run. A thumbnail is asked for
// only once it is on screen (an IntersectionObserver on the page's viewport, which clips by
// the strip's scroll box too), at the width it is drawn (`?w=`, resized and cached by the
// server); a click opens the whole image. Images come only from the server's image route.

import { runUrl } from "../api.js";
import { debounce, el } from "../util.js";
import { readAfter, readFrom, readNewest } from "./mediaread.js";
import { t } from "../i18n.js";

const WINDOW = 100; // rows read at a time
const THUMB_HEIGHT = 96; // CSS pixels

/** The thumbnail width to ask for: the drawn width in device pixels, rounded up to 32. */
function thumbWidth(css) {
  return Math.max(16, Math.min(2048, Math.ceil((css * (window.devicePixelRatio || 1)) / 32) * 32));
}

function imageUrl(runId, row, width) {
  return runUrl(runId) + "/media/" + row.id + "/image" + (width ? "?w=" + width : "");
}

const before = (a, b) => a.step < b.step || (a.step === b.step && a.id < b.id);

/** The dialog that shows one image whole (one per page). */
function lightbox() {
  let dialog = document.getElementById("media-lightbox");
  if (!dialog) {
    dialog = el("dialog", { id: "media-lightbox", className: "lightbox", "aria-label": t("media.image") },
      el("img", { alt: "" }), el("p", { className: "lightbox-caption", "data-user": true }),
      el("button", { type: "button", text: t("media.close"), onclick: () => dialog.close() }));
    dialog.addEventListener("click", (e) => e.target === dialog && dialog.close());
    document.body.append(dialog);
  }
  return dialog;
}

export class ImageStrip {
  constructor(runId, info, box) {
    this.runId = runId;
    this.info = info; // {key, kind, count, first_step, last_step}
    this.rows = []; // the window: consecutive rows of the key, oldest first
    this.atEnd = false; // the window reaches the key's newest row
    this.current = -1; // the index in `rows` of the highlighted thumbnail
    this.strip = el("ol", { className: "strip" });
    this.slider = el("input", { type: "range", "aria-label": t("media.stepAria", { key: info.key }), oninput: () => this.soonSlide() });
    this.label = el("output", { className: "note" });
    this.earlier = el("button", { type: "button", className: "strip-earlier", text: t("media.earlier"), onclick: () => this.readEarlier() });
    this.later = el("button", { type: "button", className: "strip-later", text: t("media.later"), onclick: () => this.readLater() });
    this.soonSlide = debounce(() => this.slide(Number(this.slider.value)), 150);
    this.seen = new IntersectionObserver((entries) => {
      for (const entry of entries) {
        if (!entry.isIntersecting) continue;
        const img = entry.target;
        this.seen.unobserve(img);
        img.addEventListener("load", () => img.classList.toggle("pixelated", img.naturalWidth < img.width), { once: true });
        img.src = img.dataset.src;
      }
    });
    box.append(el("div", { className: "strip-nav" }, this.slider, this.label),
      el("div", { className: "strip-row" }, this.earlier, this.strip, this.later));
    this.setRange();
  }

  setRange() {
    this.slider.min = String(this.info.first_step);
    this.slider.max = String(this.info.last_step);
    this.slider.disabled = this.info.count < 2;
  }

  /** First in view: the newest images. */
  async open() {
    this.rows = await readNewest(this.runId, this.info, WINDOW);
    this.atEnd = true;
    this.render();
    this.highlight(this.rows.length - 1);
  }

  thumb(row, i) {
    const ratio = row.width && row.height ? row.width / row.height : 1;
    const width = Math.round(Math.min(THUMB_HEIGHT * 2, Math.max(THUMB_HEIGHT / 2, THUMB_HEIGHT * ratio)));
    const caption = row.caption ? String(row.caption) : "";
    const img = el("img", { alt: caption ? t("media.thumbAltCaption", { step: row.step, caption }) : t("media.thumbAlt", { step: row.step }), width, height: THUMB_HEIGHT, decoding: "async" });
    img.dataset.src = imageUrl(this.runId, row, thumbWidth(width));
    this.seen.observe(img);
    return el("li", { className: "thumb" },
      el("button", { type: "button", title: caption || null, "data-user": true, onclick: () => this.openWhole(i) }, img),
      el("span", { className: "thumb-step", text: t("common.stepN", { step: row.step }) }),
      caption ? el("span", { className: "thumb-caption", text: caption, "data-user": true }) : null);
  }

  render() {
    this.seen.disconnect();
    this.strip.replaceChildren(...this.rows.map((row, i) => this.thumb(row, i)));
    this.earlier.hidden = !this.rows.length || this.rows[0].step <= this.info.first_step;
    this.later.hidden = this.atEnd;
  }

  /** Mark the thumbnail `i` as the slider's step and scroll it into the strip's view. */
  highlight(i) {
    if (!this.rows.length) return;
    this.current = Math.max(0, Math.min(this.rows.length - 1, i));
    const row = this.rows[this.current];
    for (const item of this.strip.querySelectorAll("[aria-current]")) item.removeAttribute("aria-current");
    const item = this.strip.children[this.current];
    item.setAttribute("aria-current", "step");
    this.strip.scrollLeft = item.offsetLeft - (this.strip.clientWidth - item.offsetWidth) / 2; // .strip is positioned
    this.slider.value = String(row.step);
    this.label.textContent = t("media.images", { step: row.step, count: this.info.count, first: this.info.first_step, last: this.info.last_step });
  }

  /** The slider moved to `step`: the window's nearest image, or a window read from there. */
  async slide(step) {
    const inside = this.rows.length && step >= this.rows[0].step && (step <= this.rows[this.rows.length - 1].step || this.atEnd);
    if (!inside) {
      const spacing = this.info.count > 1 ? (this.info.last_step - this.info.first_step) / (this.info.count - 1) : 1;
      const got = await readFrom(this.runId, this.info.key, Math.max(this.info.first_step, Math.floor(step - spacing * (WINDOW / 2))), WINDOW);
      this.rows = got.rows;
      this.atEnd = !got.next;
      this.render();
    }
    let i = this.rows.findIndex((r) => r.step >= step);
    if (i < 0) i = this.rows.length - 1;
    this.highlight(i);
  }

  async readEarlier() {
    const first = this.rows[0];
    const spacing = this.info.count > 1 ? (this.info.last_step - this.info.first_step) / (this.info.count - 1) : 1;
    const got = await readFrom(this.runId, this.info.key, Math.max(this.info.first_step, Math.floor(first.step - spacing * WINDOW)), WINDOW);
    const added = got.rows.filter((r) => before(r, first));
    const width = this.strip.scrollWidth;
    const left = this.strip.scrollLeft;
    this.rows = [...added, ...this.rows];
    this.current += added.length;
    this.render();
    this.strip.scrollLeft = left + this.strip.scrollWidth - width; // the same images stay in view
  }

  async readLater() {
    const got = await readFrom(this.runId, this.info.key, this.rows[this.rows.length - 1].step, WINDOW + 1);
    const last = this.rows[this.rows.length - 1];
    const left = this.strip.scrollLeft;
    this.rows.push(...got.rows.filter((r) => before(last, r)));
    this.atEnd = !got.next;
    this.render();
    this.strip.scrollLeft = left;
  }

  /** New rows of the key (the stream): appended when the window reaches the end, followed when at it. */
  async onLive(info) {
    this.info = info;
    this.setRange();
    if (!this.atEnd || !this.rows.length) return this.rows.length ? null : this.open();
    const following = this.current === this.rows.length - 1;
    const read = await readAfter(this.runId, info.key, this.rows[this.rows.length - 1], WINDOW);
    const ids = new Set(this.rows.map((r) => r.id));
    const fresh = read.filter((r) => !ids.has(r.id));
    if (!fresh.length) return;
    this.rows.push(...fresh);
    this.render();
    this.highlight(following ? this.rows.length - 1 : this.current);
  }

  openWhole(i) {
    this.highlight(i);
    const row = this.rows[i];
    const dialog = lightbox();
    const img = dialog.querySelector("img");
    img.classList.toggle("pixelated", Boolean(row.width) && row.width < 384); // a small image drawn larger
    img.src = imageUrl(this.runId, row, null);
    img.alt = t("media.wholeAlt", { key: this.info.key, step: row.step });
    dialog.querySelector(".lightbox-caption").textContent = t("media.wholeCaption", { key: this.info.key, step: row.step }) +
      (row.width ? ` · ${row.width} × ${row.height}` : "") + (row.caption ? " · " + row.caption : "");
    dialog.showModal();
  }
}

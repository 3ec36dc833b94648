// The run's comments (docs/comments.md): threads beside the charts, each under its anchor (a
// step of a metric, a checkpoint, an alert, a sample, an evaluation), pinned threads first (the
// server's order), the team's answers marked. A signed-in person writes, replies, edits and
// deletes their own, and reports; the team pins, locks, hides and approves. Markers on the
// charts (a toggle) open a thread; a click on a point of the loss chart offers a comment on it.
// The checkpoint, alert, sample and evaluation panels ask `discussButton(kind, id)` for a
// "Discuss" control (with the count of visible comments on that item, kept current here): it
// opens the item's threads, or, signed in, a form to start one.
//
// Only the server's `html` is inserted (rendered from Markdown and sanitized by nh3 there),
// parsed through an inert <template>; nothing of a comment is evaluated. The stream's
// `event: comments` carries no text: the list is read again, with this reader's rights.

import { getJSON, runUrl } from "../api.js";
import { debounce, el, formatTime, fragment, LIVE_MAX_WAIT_MS } from "../util.js";
import { t } from "../i18n.js";

const $ = (id) => document.getElementById(id);
const LABEL_CHARS = 120;
const DATA_ROLES = new Set(["raw", "smooth", "max", "min"]);
const FULL_WIDTH = /^[\u3000-\u303f\uff00-\uffef]/; // CJK symbols and punctuation, full-width forms

/** A comment's first line of text, for a marker's hover. */
function firstLine(c) {
  const text = (fragment(c.html).textContent || "").trim().split("\n")[0];
  return text.length > LABEL_CHARS ? text.slice(0, LABEL_CHARS) + "…" : text;
}

/** A speech bubble (inline SVG: no font needed) for a table cell's "Discuss"; its name is the button's label. */
function bubble() {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", "0 0 16 16");
  svg.setAttribute("width", "12");
  svg.setAttribute("height", "12");
  svg.setAttribute("aria-hidden", "true");
  const path = document.createElementNS(ns, "path");
  path.setAttribute("d", "M2 2h12v9H7l-3 3v-3H2z");
  path.setAttribute("fill", "none");
  path.setAttribute("stroke", "currentColor");
  path.setAttribute("stroke-width", "1.5");
  svg.append(path);
  return svg;
}

/** An anchor as the panel names it: "step 20 of train/loss", "alert #3 at step 812", ... */
export function anchorText(a) {
  const at = a.step !== null;
  switch (a.kind) {
    case "step": return t("comments.anchor.step", { step: a.step, key: a.key });
    case "checkpoint": return t("comments.anchor.checkpoint", { step: a.step });
    case "alert": return t(at ? "comments.anchor.alertAt" : "comments.anchor.alert", { id: a.id, step: a.step });
    case "sample": return t(at ? "comments.anchor.sampleAt" : "comments.anchor.sample", { id: a.id, step: a.step });
    case "eval": return t(at ? "comments.anchor.evalAt" : "comments.anchor.eval", { id: a.id, step: a.step });
    case "report": return t("comments.anchor.report", { id: a.id });
    default: return a.kind;
  }
}

export class CommentsPanel {
  /** `onMarkers()`: the charts' markers changed (a new list, or the toggle). */
  constructor(page, onMarkers) {
    this.page = page;
    this.onMarkers = onMarkers;
    this.comments = [];
    this.signedIn = false;
    this.moderator = false;
    this.loaded = false;
    this.showMarkers = true;
    this.draft = null; // the composer of a new thread: {kind: "step", key, step} or {kind, id, step}
    this.editing = null; // the id of the comment being edited
    this.replying = null; // the thread being replied to
    this.reporting = null; // the comment being reported
    this.focused = null; // the thread a marker opened
    this.focusedAnchor = null; // {kind, id}: the threads a panel's "Discuss" opened
    this.texts = new Map(); // what is typed in each open form, kept across the live re-renders
    this.soon = debounce(() => this.load(), 200, LIVE_MAX_WAIT_MS);
    const toggle = $("comment-markers");
    if (toggle) {
      toggle.addEventListener("change", () => {
        this.showMarkers = toggle.checked;
        this.onMarkers();
      });
    }
  }

  url(suffix = "") {
    return runUrl(this.page.runId) + "/comments" + suffix;
  }

  async load() {
    let body;
    try {
      body = await this.page.read("comments");
    } catch (err) {
      this.setError(t("comments.failed", { error: err.message }));
      return;
    }
    this.comments = body.comments;
    this.signedIn = body.signed_in;
    this.moderator = body.moderator;
    this.hold = body.hold;
    this.loaded = true;
    this.render();
    this.onMarkers();
    this.updateDiscuss();
  }

  /** How many visible comments (threads and replies) are anchored on the item. */
  countFor(kind, id) {
    return this.comments.filter((c) => c.state === "visible" && c.anchor.kind === kind && c.anchor.id === id).length;
  }

  /** A panel's "Discuss" control for an item (`kind`: checkpoint, alert, sample, eval; `id`: its
   * id; `step`: where it is, for the anchor's name); `mini`: a table cell's (an icon and the count). */
  discussButton(kind, id, step = null, mini = false) {
    const button = el("button", { type: "button", className: "link discuss" + (mini ? " discuss-mini" : ""),
      "data-discuss-kind": kind, "data-discuss-id": String(id), "data-discuss-step": step === null ? "" : String(step),
      "aria-label": t("comments.discussLabel", { anchor: anchorText({ kind, id, step }) }),
      onclick: () => this.openAnchor(kind, id, step) });
    this.label(button);
    return button;
  }

  label(button) {
    const count = this.countFor(button.dataset.discussKind, Number(button.dataset.discussId));
    button.dataset.count = String(count);
    if (button.classList.contains("discuss-mini")) button.replaceChildren(bubble(), count ? `\u00a0${count}` : "");
    else button.textContent = t("comments.discuss", { count });
  }

  /** Every "Discuss" control on the page shows the count of the list just read. */
  updateDiscuss() {
    for (const b of document.querySelectorAll("button.discuss[data-discuss-kind]")) this.label(b);
  }

  /** A panel's "Discuss": the item's threads, outlined and scrolled to; else, signed in, a new one. */
  openAnchor(kind, id, step) {
    const heads = this.comments.filter((c) => c.parent === null && c.anchor.kind === kind && c.anchor.id === id);
    this.setError("");
    this.focusedAnchor = { kind, id };
    this.focused = null;
    if (!heads.length && this.signedIn) this.draft = { kind, id, step };
    this.render();
    const first = heads.length ? $("comment-" + heads[0].id) : null;
    const target = first || $("comments-card") || $("comments");
    if (target) target.scrollIntoView({ block: "nearest" });
    const box = heads.length ? null : $("comment-new-body");
    if (box) box.focus();
    else if (!heads.length && !this.signedIn) this.setError(t("comments.signInToDiscuss", { anchor: anchorText({ kind, id, step }) }));
  }

  /** The charts' markers: one per thread anchored on the chart (and not hidden or deleted). */
  markers() {
    if (!this.showMarkers) return [];
    return this.comments
      .filter((c) => c.parent === null && c.anchor.step !== null && (c.state === "visible" || c.state === "held"))
      .map((c) => ({ step: c.anchor.step, type: "comment", label: firstLine(c), id: c.id }));
  }

  /** A click on the loss chart: a comment marker opens its thread; a point offers a comment on it. */
  onChartClick(ev) {
    const points = (ev && ev.points) || [];
    const data = points.find((p) => p.data && p.data.meta && DATA_ROLES.has(p.data.meta.role) && p.data.meta.key);
    const marker = points.find((p) => p.data && p.data.meta && p.data.meta.role === "markers" && p.customdata
      && (!data || p.x === data.x));
    if (marker) return this.focus(marker.customdata);
    if (!data || !this.signedIn) return;
    const xmap = this.page.view.xmapFor();
    const step = Math.round(xmap.toStep(xmap.fromPlot(data.x)));
    if (!Number.isFinite(step)) return;
    this.draft = { kind: "step", key: data.data.meta.key, step };
    this.render();
    const box = $("comment-new-body");
    if (box) box.focus();
  }

  /** Show a thread (a marker's): scrolled into view and outlined. */
  focus(id) {
    this.focusedAnchor = null;
    const head = this.comments.find((c) => c.id === id);
    this.focused = head ? (head.parent ?? head.id) : id;
    this.render();
    const li = $("comment-" + this.focused);
    if (li) li.scrollIntoView({ block: "nearest" });
  }

  setError(text) {
    const p = $("comments-error");
    if (p) p.textContent = text;
  }

  async send(method, suffix, body) {
    this.setError("");
    const options = { method, headers: { Accept: "application/json" } };
    if (body !== undefined) {
      options.headers["Content-Type"] = "application/json";
      options.body = JSON.stringify(body);
    }
    try {
      await getJSON(this.url(suffix), options);
    } catch (err) {
      this.setError(err.message);
      return false;
    }
    await this.load(); // the stream announces it too; this reader sees it at once
    return true;
  }

  render() {
    const host = $("comments");
    if (!host) return;
    const threads = [];
    for (const c of this.comments) {
      if (c.parent === null) threads.push({ head: c, replies: [] });
      else {
        const t = threads.find((x) => x.head.id === c.parent);
        if (t) t.replies.push(c);
      }
    }
    const parts = [];
    if (!this.signedIn) parts.push(el("p", { className: "note", text: t("comments.signIn") }));
    else if (this.draft) parts.push(this.composer());
    else parts.push(el("p", { className: "note", text: t("comments.clickPoint") }));
    if (this.hold && this.signedIn) parts.push(el("p", { className: "note", text: t("comments.holdNote") }));
    const list = el("ol", { className: "comment-threads", id: "comment-threads" });
    for (const t of threads) list.append(this.thread(t));
    if (!threads.length && this.loaded) list.append(el("li", { className: "empty", text: t("comments.none") }));
    const typing = document.activeElement && host.contains(document.activeElement) ? document.activeElement.dataset.draft : null;
    host.replaceChildren(...parts, list);
    const again = typing ? host.querySelector(`[data-draft="${CSS.escape(typing)}"]`) : null;
    if (again) again.focus();
  }

  /** A textarea (or input) whose text survives a re-render; `name` tells the forms apart. */
  field(tag, name, attrs, initial = "") {
    const box = el(tag, { ...attrs, "data-draft": name });
    box.value = this.texts.has(name) ? this.texts.get(name) : initial;
    box.addEventListener("input", () => this.texts.set(name, box.value));
    return box;
  }

  composer() {
    const draft = this.draft;
    const onStep = draft.kind === "step";
    const name = onStep ? `new-${draft.key}-${draft.step}` : `new-${draft.kind}-${draft.id}`;
    const box = this.field("textarea", name, { id: "comment-new-body", rows: "3", required: true, maxlength: "10000",
      "aria-label": t("comments.bodyLabel") });
    const form = el("form", { className: "comment-form", id: "comment-new" },
      el("p", { className: "comment-anchor", text: onStep ? t("comments.newOn", { step: draft.step, key: draft.key })
        : t("comments.newOnAnchor", { anchor: anchorText(draft) }) }), box,
      el("div", { className: "comment-actions" }, el("button", { type: "submit", text: t("comments.post") }),
        el("button", { type: "button", text: t("comments.cancel"), onclick: () => { this.draft = null; this.render(); } })));
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      const anchor = onStep ? draft : { kind: draft.kind, id: draft.id };
      if (await this.send("POST", "", { body: box.value, anchor })) {
        this.texts.delete(name);
        this.draft = null;
        this.render();
      }
    });
    return form;
  }

  thread({ head, replies }) {
    const li = el("li", { className: "comment-thread", id: "comment-" + head.id });
    const anchored = this.focusedAnchor && head.anchor.kind === this.focusedAnchor.kind && head.anchor.id === this.focusedAnchor.id;
    if (this.focused === head.id || anchored) li.classList.add("target");
    const anchor = el("div", { className: "comment-anchor" });
    if (head.anchor.step !== null) {
      anchor.append(el("button", { type: "button", className: "link", text: anchorText(head.anchor),
        onclick: () => this.page.zoomTo(head.anchor.step) }));
    } else anchor.append(anchorText(head.anchor));
    if (head.pinned) anchor.append(" ", el("span", { className: "badge comment-pinned", text: t("comments.pinned") }));
    if (head.locked) anchor.append(" ", el("span", { className: "badge comment-locked", text: t("comments.locked") }));
    li.append(anchor, this.comment(head, head));
    for (const r of replies) li.append(this.comment(r, head));
    if (this.replying === head.id) li.append(this.replyForm(head));
    return li;
  }

  comment(c, head) {
    const art = el("article", { className: "comment" + (c.team ? " comment-team" : "") + (c.parent ? " comment-reply" : ""),
      "data-comment-id": String(c.id), "data-state": c.state });
    const who = el("div", { className: "comment-head" },
      c.author ? el("strong", { text: c.author.display_name, "data-user": true }) : el("strong", { text: t("comments.theTeam") }));
    if (c.team) who.append(" ", el("span", { className: "badge comment-team-badge", text: t("comments.teamBadge") }));
    if (c.state !== "visible") who.append(" ", el("span", { className: "badge comment-state", text: t("comments.state." + c.state) }));
    if (c.reports) who.append(" ", el("span", { className: "badge comment-reports", text: t("comments.reports", { count: c.reports }) }));
    who.append(" ", el("time", { className: "tl-time", text: formatTime(c.created_at), "data-intl": true }));
    if (c.edited_at) {
      const edited = t("comments.edited");
      // A full-width bracket (CJK punctuation) carries its own spacing: no space before "（已编辑）".
      if (!FULL_WIDTH.test(edited)) who.append(" ");
      who.append(el("span", { className: "comment-edited", text: edited }));
    }
    const body = el("div", { className: "comment-body" });
    if (this.editing === c.id) body.append(this.editForm(c));
    else {
      body.dataset.user = ""; // the server's sanitized HTML: the writer's words, in their language
      body.append(fragment(c.html));
    }
    art.append(who, body, this.actions(c, head));
    if (this.reporting === c.id) art.append(this.reportForm(c));
    return art;
  }

  actions(c, head) {
    const row = el("div", { className: "comment-actions" });
    // data-action names the button whatever the language.
    const act = (text, action, fn) => row.append(el("button", { type: "button", className: "link", text,
      "data-action": action, onclick: fn }));
    const rerender = (field, value) => () => {
      this[field] = this[field] === value ? null : value;
      this.render();
    };
    const moderate = (change) => () => this.send("POST", `/${c.id}/moderation`, change);
    const alive = c.state !== "deleted";
    if (this.signedIn && c === head && alive && (!head.locked || this.moderator)) act(t("comments.reply"), "reply", rerender("replying", head.id));
    if (c.mine && alive && c.body !== null) act(t("comments.edit"), "edit", rerender("editing", c.id));
    if (c.mine && alive) act(t("comments.delete"), "delete", () => this.send("DELETE", `/${c.id}`));
    if (this.signedIn && !c.mine && alive) act(t("comments.report"), "report", rerender("reporting", c.id));
    if (this.moderator) {
      if (c === head) act(t(c.pinned ? "comments.unpin" : "comments.pin"), c.pinned ? "unpin" : "pin", moderate({ pinned: !c.pinned }));
      if (c === head) act(t(c.locked ? "comments.unlock" : "comments.lock"), c.locked ? "unlock" : "lock", moderate({ locked: !c.locked }));
      if (c.state === "held") act(t("comments.approve"), "approve", moderate({ approved: true }));
      if (c.state === "visible" || c.state === "held") act(t("comments.hide"), "hide", moderate({ hidden: true }));
      if (c.state === "hidden") act(t("comments.show"), "show", moderate({ hidden: false }));
    }
    return row;
  }

  replyForm(head) {
    const box = this.field("textarea", "reply-" + head.id, { rows: "2", required: true, maxlength: "10000",
      className: "comment-reply-body", "aria-label": t("comments.replyLabel") });
    const form = el("form", { className: "comment-form" }, box,
      el("div", { className: "comment-actions" }, el("button", { type: "submit", text: t("comments.reply") })));
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      if (await this.send("POST", "", { body: box.value, parent: head.id })) {
        this.texts.delete("reply-" + head.id);
        this.replying = null;
        this.render();
      }
    });
    return form;
  }

  editForm(c) {
    const box = this.field("textarea", "edit-" + c.id, { rows: "3", required: true, maxlength: "10000",
      className: "comment-edit-body", "aria-label": t("comments.editLabel") }, c.body);
    const form = el("form", { className: "comment-form" }, box,
      el("div", { className: "comment-actions" }, el("button", { type: "submit", text: t("comments.save") }),
        el("button", { type: "button", text: t("comments.cancel"), onclick: () => { this.editing = null; this.render(); } })));
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      if (await this.send("PATCH", `/${c.id}`, { body: box.value })) {
        this.texts.delete("edit-" + c.id);
        this.editing = null;
        this.render();
      }
    });
    return form;
  }

  reportForm(c) {
    const reason = this.field("input", "report-" + c.id, { type: "text", maxlength: "500",
      className: "comment-report-reason", "aria-label": t("comments.reasonLabel") });
    const form = el("form", { className: "comment-form" }, reason,
      el("button", { type: "submit", text: t("comments.sendReport") }));
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      if (await this.send("POST", `/${c.id}/reports`, { reason: reason.value })) {
        this.texts.delete("report-" + c.id);
        this.reporting = null;
        this.render();
      }
    });
    return form;
  }
}

// The team's hand on a live run (docs/commands.md): the Control card, built only for a signed-in
// member or owner of the run's project (nothing of it is in run.html), and the words the timeline
// uses for every reader's `command` events. Commands go through POST /runs/{id}/commands, as the
// CLI's do: the session cookie and this page's same-origin fetch (the browser's Sec-Fetch-Site)
// are what the server checks. The card's list is GET /runs/{id}/commands, read again on each
// `event: commands` of the stream.

import { ApiError, getJSON, runUrl } from "../api.js";
import { el, formatTime, formatValue } from "../util.js";
import { t } from "../i18n.js";

const TEAM_ROLES = new Set(["owner", "member"]);
const FINISHED = new Set(["finished", "failed", "killed"]);
const TUNABLES_KEY = "_tunables"; // where the SDK declares the tunables in the run's config (run.tunable)
const NOT_TAKEN = "this run does not take commands"; // the SDK's refusal when the script did not opt in
const MAX_REASON_CHARS = 2000;

/** Whether the session's person is a member or owner of `project` (a token's session never is). */
export function isTeam(session, project) {
  return Boolean(session && session.user && session.user.roles.some((r) => r.project === project && TEAM_ROLES.has(r.role)));
}

/** A command as a phrase: "stop", "set lr_scale to 0.5". */
export function commandWhat(c) {
  return c.kind === "set" ? t("commands.what.set", { name: c.name, value: formatValue(c.value) }) : t("commands.what." + c.kind);
}

/** What became of a command: pending, delivered, applied at step S, refused: message, expired. */
export function commandState(c) {
  if (c.state === "acknowledged" && c.outcome === "refused") return t("commands.state.refused", { message: c.message || "" });
  if (c.state === "acknowledged") return c.step === null ? t("commands.state.appliedNow") : t("commands.state.applied", { step: c.step });
  return t("commands.state." + c.state);
}

/** A `command` timeline event (one when sent, one when resolved) as the timeline says it. */
export function describeCommandEvent(p) {
  const what = commandWhat(p);
  if (p.state === "pending" || p.state === "delivered") return t("timeline.commandSent", { what, sender: p.sender, reason: p.reason });
  return t("timeline.commandResolved", { what, state: commandState(p) });
}

/** The tunables the run's script declared: [{name, min, max, value}], `value` the last applied set's or the default. */
function tunablesOf(detail, commands) {
  const declared = (detail.config || {})[TUNABLES_KEY];
  if (!declared || typeof declared !== "object") return [];
  return Object.entries(declared).filter(([, b]) => b && typeof b === "object").map(([name, b]) => {
    const applied = commands.filter((c) => c.kind === "set" && c.name === name && c.outcome === "applied");
    const value = applied.length ? applied[applied.length - 1].value : b.default;
    return { name, min: typeof b.min === "number" ? b.min : null, max: typeof b.max === "number" ? b.max : null, value };
  }).sort((a, b) => a.name.localeCompare(b.name));
}

/** Whether the run's trainer is paused: the last applied pause or resume was a pause. */
function isPaused(commands) {
  const held = commands.filter((c) => (c.kind === "pause" || c.kind === "resume") && c.outcome === "applied");
  return held.length > 0 && held[held.length - 1].kind === "pause";
}

export class ControlCard {
  constructor(page) {
    this.page = page;
    this.commands = [];
    this.confirming = false;
    this.values = new Map(); // what is typed in each tunable's box, kept across re-renders
    this.card = null;
  }

  /** Put the card at the top of the side column and read the run's commands. The card's
   * elements are made once; `render` updates them in place (a live run re-renders often). */
  mount() {
    const side = document.querySelector("aside.side");
    if (!side || this.card) return;
    this.reason = el("input", { id: "control-reason", type: "text", maxlength: String(MAX_REASON_CHARS), required: true,
      autocomplete: "off", placeholder: t("commands.reasonHint") });
    this.closedNote = el("p", { className: "note", id: "control-closed", hidden: true });
    this.stopButton = el("button", { type: "button", id: "control-stop", className: "danger", text: t("commands.stop"),
      onclick: () => this.askStop() });
    this.checkpointButton = el("button", { type: "button", id: "control-checkpoint", text: t("commands.checkpoint"),
      onclick: () => this.send({ kind: "checkpoint" }) });
    this.pauseButton = el("button", { type: "button", id: "control-pause", text: t("commands.pause"),
      onclick: () => this.send({ kind: isPaused(this.commands) ? "resume" : "pause" }) });
    this.confirmBox = el("div", { className: "control-confirm", id: "control-confirm", role: "alertdialog", hidden: true,
      "aria-labelledby": "control-confirm-text" },
      el("p", { id: "control-confirm-text", text: t("commands.confirmStop") }),
      el("button", { type: "button", id: "control-stop-confirm", className: "danger", text: t("commands.confirmStopButton"),
        onclick: () => { this.confirming = false; this.render(); this.send({ kind: "stop" }); } }),
      " ",
      el("button", { type: "button", id: "control-stop-cancel", text: t("comments.cancel"),
        onclick: () => { this.confirming = false; this.render(); } }));
    this.tunablesHost = el("div", { id: "control-tunables-host" });
    this.errorLine = el("p", { className: "error", id: "control-error", role: "alert" });
    this.listHost = el("div", { id: "control-list" });
    this.card = el("section", { className: "card control-card", id: "control-card", "aria-labelledby": "control-title" },
      el("h2", { id: "control-title", text: t("commands.title") }), this.closedNote,
      el("label", { className: "control-reason", for: "control-reason" }, t("commands.reason")), this.reason,
      el("div", { className: "control-actions" }, this.stopButton, this.checkpointButton, this.pauseButton),
      this.confirmBox, this.tunablesHost, this.errorLine, el("h3", { text: t("commands.sent") }), this.listHost);
    side.prepend(this.card);
    this.render();
    this.load();
  }

  async load() {
    try {
      this.commands = (await getJSON(runUrl(this.page.runId) + "/commands")).commands;
    } catch (err) {
      this.setError(t("commands.failed", { error: err.message }));
      return;
    }
    this.render();
  }

  /** Why no command can be sent now, or null. */
  closedBecause() {
    const d = this.page.detail;
    if (FINISHED.has(d.status)) return t("commands.closed.finished", { status: t("status." + d.status) });
    const resolved = this.commands.filter((c) => c.state === "acknowledged");
    const last = resolved[resolved.length - 1];
    const started = Math.max(0, ...d.segments.map((s) => s.started_at || 0));
    if (last && last.outcome === "refused" && last.message === NOT_TAKEN && (last.acked_at || 0) >= started) {
      return t("commands.closed.notTaken");
    }
    return null;
  }

  setError(text) {
    if (this.errorLine) this.errorLine.textContent = text;
  }

  render() {
    if (!this.card) return;
    const closed = this.closedBecause();
    const off = closed !== null;
    this.closedNote.textContent = closed || "";
    this.closedNote.hidden = !off;
    for (const b of [this.reason, this.stopButton, this.checkpointButton, this.pauseButton]) b.disabled = off;
    const pause = t(isPaused(this.commands) ? "commands.resume" : "commands.pause");
    if (this.pauseButton.textContent !== pause) this.pauseButton.textContent = pause;
    this.confirmBox.hidden = !(this.confirming && !off);
    const tunables = tunablesOf(this.page.detail, this.commands);
    const shape = JSON.stringify([tunables, off]);
    if (shape !== this.tunablesShape) { // rebuilt only when it changed: a box being typed in stays
      this.tunablesShape = shape;
      const typing = document.activeElement && this.tunablesHost.contains(document.activeElement) ? document.activeElement.id : null;
      this.tunablesHost.replaceChildren(...(tunables.length ? [this.tunableTable(tunables, off)] : []));
      const again = typing ? document.getElementById(typing) : null;
      if (again) again.focus();
    }
    const listed = JSON.stringify(this.commands);
    if (listed !== this.listed) {
      this.listed = listed;
      this.listHost.replaceChildren(this.list());
    }
  }

  tunableTable(tunables, off) {
    const rows = tunables.map((tb) => {
      const box = el("input", { type: "number", id: "control-set-" + tb.name, step: "any", disabled: off,
        min: tb.min ?? undefined, max: tb.max ?? undefined, "aria-label": t("commands.newValue", { name: tb.name }) });
      box.value = this.values.get(tb.name) ?? "";
      box.addEventListener("input", () => this.values.set(tb.name, box.value));
      const bounds = t("commands.bounds", { min: tb.min === null ? "−∞" : formatValue(tb.min), max: tb.max === null ? "∞" : formatValue(tb.max) });
      return el("tr", { "data-tunable": tb.name },
        el("th", { scope: "row" }, el("code", { text: tb.name, "data-user": true })),
        el("td", { className: "num control-current", text: formatValue(tb.value) }),
        el("td", { className: "control-bounds", text: bounds }),
        el("td", { className: "control-set" }, box, " ", el("button", { type: "button", id: "control-set-button-" + tb.name,
          disabled: off, text: t("commands.set"), onclick: () => this.set(tb, box) })));
    });
    return el("div", { className: "control-tunables-wrap" }, el("table", { className: "control-tunables", id: "control-tunables" },
      el("thead", {}, el("tr", {}, ...["tunable", "current", "bounds", "newValueHead"].map((k) =>
        el("th", { scope: "col", text: t("commands.column." + k) })))),
      el("tbody", {}, ...rows)));
  }

  list() {
    const ol = el("ol", { className: "control-commands", id: "control-commands" });
    for (const c of [...this.commands].reverse()) {
      const state = c.state === "acknowledged" ? c.outcome : c.state;
      ol.append(el("li", { id: "command-" + c.command, className: "command command-" + state, "data-state": state },
        el("div", {}, el("strong", { text: commandWhat(c) }), " ",
          el("span", { className: "badge command-state", text: commandState(c) })),
        el("div", { className: "note" }, el("span", { "data-user": true, text: c.sender }), " · ",
          el("time", { "data-intl": true, text: formatTime(c.created_at) }), " · ", el("span", { "data-user": true, text: c.reason }))));
    }
    if (!this.commands.length) ol.append(el("li", { className: "empty", text: t("commands.none") }));
    return ol;
  }

  /** The reason typed, or null (the field named, the box focused) when it is blank. */
  takeReason() {
    const reason = this.reason.value.trim();
    if (reason) return reason;
    this.setError(t("commands.invalid", { field: "reason", message: t("commands.needReason") }));
    this.reason.focus();
    return null;
  }

  askStop() {
    if (this.takeReason() === null) return;
    this.setError("");
    this.confirming = true;
    this.render();
    document.getElementById("control-stop-confirm").focus();
  }

  set(tb, box) {
    const value = box.value.trim() === "" ? NaN : Number(box.value);
    const field = "value";
    if (!Number.isFinite(value)) return this.refuse(box, t("commands.invalid", { field, message: t("commands.needNumber", { name: tb.name }) }));
    if ((tb.min !== null && value < tb.min) || (tb.max !== null && value > tb.max)) {
      return this.refuse(box, t("commands.invalid", { field, message: t("commands.outOfBounds", {
        name: tb.name, min: tb.min === null ? "−∞" : formatValue(tb.min), max: tb.max === null ? "∞" : formatValue(tb.max) }) }));
    }
    box.removeAttribute("aria-invalid");
    return this.send({ kind: "set", name: tb.name, value });
  }

  refuse(box, text) {
    box.setAttribute("aria-invalid", "true");
    this.setError(text);
    box.focus();
  }

  async send(command) {
    const reason = this.takeReason();
    if (reason === null) return false;
    this.setError("");
    try {
      await getJSON(runUrl(this.page.runId) + "/commands", {
        method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ ...command, reason }),
      });
    } catch (err) {
      const field = err instanceof ApiError ? err.field : null;
      this.setError(field ? t("commands.refusedField", { status: err.status, field, message: err.message })
        : t("commands.failed", { error: err.message }));
      return false;
    }
    this.reason.value = "";
    if (command.kind === "set") this.values.delete(command.name);
    await this.load(); // the stream announces it too; this page shows it at once
    return true;
  }
}

/** The Control card on the run page, for a member or owner of the run's project only. */
export async function mountControl(page) {
  if (!isTeam(await page.session, page.detail.project)) return;
  page.control = new ControlCard(page);
  page.control.mount();
}

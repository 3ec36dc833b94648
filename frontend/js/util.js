// Small helpers shared by the pages: escaping, number and time formats, the palette.
import { formatAgo, formatDateTime, formatNumber, t } from "./i18n.js";
// Every user string reaches the DOM through textContent; strings handed to Plotly
// (which renders a subset of HTML in labels and hover text) go through escapeHtml.

/** Okabe–Ito: distinguishable with the common colour-vision deficiencies. */
export const PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"];
export const GREY = "#9a9a9a";

export function color(i) {
  return PALETTE[((i % PALETTE.length) + PALETTE.length) % PALETTE.length];
}

/** A colour with alpha, from "#rrggbb". */
export function alpha(hex, a) {
  const n = parseInt(hex.slice(1), 16);
  return `rgba(${(n >> 16) & 255},${(n >> 8) & 255},${n & 255},${a})`;
}

// Plotly decodes numeric entities and only a few named ones (not &quot;): quotes go as &#34;.
const ESC = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&#34;", "'": "&#39;" };

/** For text passed to Plotly (legend names, hover text, annotations). */
export function escapeHtml(value) {
  return String(value).replace(/[&<>"']/g, (c) => ESC[c]);
}

/** Create an element with text content (never parsed as HTML) and attributes. */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "text") node.textContent = value;
    else if (name === "className") node.className = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/**
 * The server's sanitized HTML (a comment's or a report's, nh3 there) as nodes: parsed inert (a
 * template runs no script and loads nothing); nothing else may come through here.
 */
export function fragment(html) {
  const template = document.createElement("template");
  template.innerHTML = html;
  return template.content;
}

/** An http(s) address or null: a code-host link from the server is checked before it becomes an href. */
export function safeHttpUrl(raw) {
  if (typeof raw !== "string" || !raw) return null;
  let url;
  try {
    url = new URL(raw);
  } catch {
    return null;
  }
  return url.protocol === "http:" || url.protocol === "https:" ? url.href : null;
}

export function formatValue(value) {
  if (value === null || value === undefined) return "";
  if (typeof value !== "number") return String(value);
  if (!Number.isFinite(value)) return String(value);
  if (value !== 0 && (Math.abs(value) >= 1e6 || Math.abs(value) < 1e-3)) return value.toExponential(3);
  return String(Number(value.toPrecision(5)));
}

export function formatTime(seconds) {
  if (seconds === null || seconds === undefined) return "";
  return formatDateTime(seconds);
}

export function formatAge(seconds) {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return "";
  return formatAgo(seconds);
}

export function formatBytes(n) {
  if (typeof n !== "number") return "";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i += 1; }
  return t("unit.bytes", { n: formatNumber(n, { minimumFractionDigits: i ? 1 : 0, maximumFractionDigits: i ? 1 : 0 }), unit: units[i] });
}

/** The value a loss-like column shows for a run summary's last_values. */
export const LOSS_KEYS = ["loss", "train/loss", "train_loss", "lm_loss"];
export function lastLossKey(lastValues) {
  const keys = Object.keys(lastValues || {});
  return LOSS_KEYS.find((k) => k in lastValues) || keys.find((k) => /loss$/i.test(k) && !/scale/i.test(k)) || null;
}

/** How long a live page may put off a re-read or re-render while messages keep coming. */
export const LIVE_MAX_WAIT_MS = 1000;

/**
 * ``fn`` once the calls stop for ``ms``; with ``maxWait``, at the latest that long after the
 * first call of a burst, so that a steady stream of calls (a live run's messages) cannot
 * put it off for ever. Called with the last call's arguments.
 */
export function debounce(fn, ms, maxWait = Infinity) {
  let timer = null;
  let first = null;
  let args = [];
  const fire = () => {
    timer = null;
    first = null;
    fn(...args);
  };
  const wrapped = (...next) => {
    const now = performance.now();
    if (first === null) first = now;
    args = next;
    clearTimeout(timer);
    timer = setTimeout(fire, Math.max(0, Math.min(ms, first + maxWait - now)));
  };
  wrapped.cancel = () => {
    clearTimeout(timer);
    timer = null;
    first = null;
  };
  return wrapped;
}

/** The status a badge shows: running reads as "live". */
export function statusBadge(status) {
  return el("span", { className: "badge badge-" + status, text: t("status." + status) });
}

/** Dark mode follows the system; Plotly gets matching colours. */
export function theme() {
  const dark = window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches;
  return dark
    ? { dark, fg: "#e6e6e6", grid: "rgba(255,255,255,0.12)", bg: "rgba(0,0,0,0)", hoverbg: "#222" }
    : { dark, fg: "#1f2328", grid: "rgba(0,0,0,0.1)", bg: "rgba(0,0,0,0)", hoverbg: "#fff" };
}

/** A two-column table (th = name, td = value), every cell set as text; values are the run's
 * data (``data-user``), and so are the names unless ``labels`` says they are the page's words. */
export function table(rows, { labels = false } = {}) {
  const node = el("table", { className: "kv" });
  const body = el("tbody");
  for (const [k, v] of rows) {
    body.append(el("tr", {}, el("th", { scope: "row", text: k, "data-user": !labels }), el("td", { text: v, "data-user": true })));
  }
  node.append(body);
  return node;
}

/** A small button that copies `value` to the clipboard and says whether it did. */
export function copyButton(value, what) {
  const button = el("button", { type: "button", className: "copy", text: t("copy.copy"), "aria-label": t("copy.label", { what }) });
  button.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(value);
      button.textContent = t("copy.copied");
    } catch {
      button.textContent = t("copy.failed");
    }
    setTimeout(() => (button.textContent = t("copy.copy")), 1500);
  });
  return button;
}

/** The index of the first element of the sorted array `arr` not below `x`. */
export function bisect(arr, x) {
  let lo = 0;
  let hi = arr.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (arr[mid] < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

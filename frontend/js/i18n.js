// The pages' language (docs/dashboard.md, "Languages"): the catalog of one language
// (frontend/i18n/<code>.json, ICU MessageFormat messages), chosen from a remembered choice or
// the browser's languages, read once before a page renders anything; strings through t(),
// numbers, dates and ages through Intl. A new language is one catalog file and one line in
// LANGUAGES. The catalog is set once per page load and never changes after (a switch reloads
// the page), so the module's one binding is write-once, like <html lang>.

/** Every language with a catalog: code (the catalog's file name) and its own name for the switch. */
export const LANGUAGES = [
  ["en", "English"],
  ["zh-CN", "中文"],
];
export const DEFAULT_LANGUAGE = "en";
const STORAGE_KEY = "runcast.lang"; // the viewer's choice; holds no secret

let loaded = { code: DEFAULT_LANGUAGE, messages: {}, compiled: new Map() };

/** The language of the page as loaded (a code of LANGUAGES). */
export function lang() {
  return loaded.code;
}

// Script and language of a tag, e.g. "zh-SG" -> "zh-Hans", "en-GB" -> "en-Latn".
function family(tag) {
  try {
    const max = new Intl.Locale(tag).maximize();
    return `${max.language}-${max.script}`;
  } catch {
    return null;
  }
}

// The language of a tag, e.g. "zh-Hant-TW" -> "zh".
function language(tag) {
  try {
    return new Intl.Locale(tag).language;
  } catch {
    return null;
  }
}

/**
 * The catalog for a list of preferred tags (navigator.languages): for each tag in turn, the
 * exact code, else a catalog of the same language and script, else one of the same language
 * (zh-TW and zh-Hant read the zh-CN catalog while no Traditional one exists: closer than
 * English). A catalog file for zh-TW would take zh-TW and zh-HK by the second rule.
 */
export function pickLanguage(preferred, codes = LANGUAGES.map(([c]) => c)) {
  for (const tag of preferred || []) {
    const exact = codes.find((c) => c.toLowerCase() === String(tag).toLowerCase());
    if (exact) return exact;
    const fam = family(tag);
    const same = fam && codes.find((c) => family(c) === fam);
    if (same) return same;
    const lng = language(tag);
    const kin = lng && codes.find((c) => language(c) === lng);
    if (kin) return kin;
  }
  return DEFAULT_LANGUAGE;
}

function chosenLanguage() {
  let stored = null;
  try {
    stored = localStorage.getItem(STORAGE_KEY);
  } catch {
    stored = null; // storage off: the browser's languages decide
  }
  if (stored && LANGUAGES.some(([c]) => c === stored)) return stored;
  return pickLanguage(navigator.languages && navigator.languages.length ? navigator.languages : [navigator.language]);
}

// The server lists each catalog's versioned address in the page (frontend.py), so a catalog is
// cached as immutable like the scripts; without that list, its plain address.
function catalogUrl(code) {
  const node = document.getElementById("runcast-catalogs");
  try {
    const urls = node ? JSON.parse(node.textContent) : {};
    if (urls[code]) return urls[code];
  } catch {
    /* the plain address below */
  }
  return `/i18n/${code}.json`;
}

/**
 * Read the chosen language's catalog, set ``<html lang>``, translate the page's static text
 * (``data-i18n``, ``data-i18n-attr``), show it and mount the switch in ``#lang-switch``.
 * Every page awaits this before it renders anything of its own.
 */
export async function loadLanguage() {
  let code = chosenLanguage();
  let messages = null;
  try {
    const response = await fetch(catalogUrl(code), { headers: { Accept: "application/json" } });
    if (response.ok) messages = await response.json();
  } catch {
    messages = null;
  }
  if (!messages && code !== DEFAULT_LANGUAGE) return fallback();
  loaded = { code, messages: messages || {}, compiled: new Map() };
  document.documentElement.lang = code;
  translateStatic(document);
  mountSwitch(document.getElementById("lang-switch"));
  document.documentElement.classList.remove("i18n-pending");
  return code;

  async function fallback() {
    try {
      localStorage.removeItem(STORAGE_KEY);
    } catch {
      /* nothing stored */
    }
    code = DEFAULT_LANGUAGE;
    const response = await fetch(catalogUrl(code)).catch(() => null);
    loaded = { code, messages: response && response.ok ? await response.json() : {}, compiled: new Map() };
    document.documentElement.lang = code;
    translateStatic(document);
    mountSwitch(document.getElementById("lang-switch"));
    document.documentElement.classList.remove("i18n-pending");
    return code;
  }
}

/** Set every ``[data-i18n]`` element's text and every ``data-i18n-attr="title:key;aria-label:key"`` attribute. */
export function translateStatic(root) {
  for (const node of root.querySelectorAll("[data-i18n]")) node.textContent = t(node.dataset.i18n);
  for (const node of root.querySelectorAll("[data-i18n-attr]")) {
    for (const pair of node.dataset.i18nAttr.split(";")) {
      const [attr, key] = pair.split(":").map((s) => s.trim());
      if (attr && key) node.setAttribute(attr, t(key));
    }
  }
}

function mountSwitch(host) {
  if (!host) return;
  const buttons = LANGUAGES.map(([code, name]) => {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "link";
    button.lang = code;
    button.textContent = name;
    button.setAttribute("aria-pressed", String(code === loaded.code));
    button.addEventListener("click", () => {
      if (code === loaded.code) return;
      try {
        localStorage.setItem(STORAGE_KEY, code);
      } catch {
        return; // a choice that cannot be kept would be lost on the reload
      }
      location.reload();
    });
    return button;
  });
  host.replaceChildren(...buttons);
  host.setAttribute("aria-label", t("lang.switch"));
}

// --- messages: the ICU MessageFormat subset the catalogs use -----------------------------------
// {name}, {name, number}, {name, plural, =0 {…} one {…} other {…}} with #, {name, select, a {…}
// other {…}}, '' for an apostrophe. tests/unit/test_i18n_catalogs.py checks every message of every
// catalog formats exactly as intl-messageformat (npm) formats it.

function compile(source) {
  let i = 0;
  const fail = (why) => new Error(`i18n: ${why} at ${i} in ${JSON.stringify(source)}`);
  const word = () => {
    const m = /^\s*([^\s,{}]+)\s*/.exec(source.slice(i));
    if (!m) throw fail("a name expected");
    i += m[0].length;
    return m[1];
  };
  const nodes = (inPlural) => {
    const out = [];
    let text = "";
    const flush = () => {
      if (text) out.push(text);
      text = "";
    };
    while (i < source.length && source[i] !== "}") {
      const c = source[i];
      if (c === "{") {
        flush();
        out.push(argument());
      } else if (c === "#" && inPlural) {
        flush();
        out.push({ hash: true });
        i += 1;
      } else if (c === "'" && source[i + 1] === "'") {
        text += "'";
        i += 2;
      } else {
        text += c;
        i += 1;
      }
    }
    flush();
    return out;
  };
  const argument = () => {
    i += 1; // {
    const name = word();
    if (source[i] === "}") {
      i += 1;
      return { name };
    }
    if (source[i] !== ",") throw fail("',' or '}' expected");
    i += 1;
    const type = word();
    if (source[i] === "}") {
      i += 1;
      return { name, type };
    }
    if (source[i] !== ",") throw fail("',' expected");
    i += 1;
    const options = {};
    for (;;) {
      const m = /^\s*/.exec(source.slice(i));
      i += m[0].length;
      if (source[i] === "}") break;
      const key = word();
      if (source[i] !== "{") throw fail("'{' expected");
      i += 1;
      options[key] = nodes(type === "plural");
      if (source[i] !== "}") throw fail("'}' expected");
      i += 1;
    }
    i += 1;
    if (!options.other) throw fail("an 'other' case is required");
    return { name, type, options };
  };
  const out = nodes(false);
  if (i !== source.length) throw fail("unbalanced '}'");
  return out;
}

function render(parts, values, hash) {
  let out = "";
  for (const part of parts) {
    if (typeof part === "string") out += part;
    else if (part.hash) out += formatNumber(hash);
    else {
      const value = values[part.name];
      if (part.type === "plural") {
        const n = Number(value);
        const exact = part.options["=" + n];
        const branch = exact || part.options[new Intl.PluralRules(loaded.code).select(n)] || part.options.other;
        out += render(branch, values, n);
      } else if (part.type === "select") {
        out += render(part.options[String(value)] || part.options.other, values, hash);
      } else if (part.type === "number") out += formatNumber(Number(value));
      else out += value === undefined || value === null ? "" : String(value); // as ICU: {n} is not grouped, {n, number} is
    }
  }
  return out;
}

/** Whether the catalog has ``key`` (for names from the server that may be new: an alert's kind). */
export function hasMessage(key) {
  return typeof loaded.messages[key] === "string";
}

/** The message ``key`` of the page's language with ``values`` put in (the key itself when the catalog lacks it). */
export function t(key, values = {}) {
  let parts = loaded.compiled.get(key);
  if (!parts) {
    const source = loaded.messages[key];
    if (typeof source !== "string") return key;
    parts = compile(source);
    loaded.compiled.set(key, parts);
  }
  return render(parts, values, 0);
}

// --- numbers, dates, ages: Intl in the page's language -----------------------------------------

/** An integer or short number with the language's grouping (1,234,567). */
export function formatNumber(n, options = {}) {
  return new Intl.NumberFormat(loaded.code, { maximumFractionDigits: 3, ...options }).format(n);
}

/**
 * A moment (epoch seconds) as date and time in UTC, the same for every viewer of a broadcast:
 * Intl's parts (the language's digits and zone name) in the catalog's order ("date.dateTime"),
 * so English reads 2026-12-05 19:28:13 UTC rather than an ambiguous 12/05/2026.
 */
export function formatDateTime(seconds) {
  const parts = {};
  for (const { type, value } of new Intl.DateTimeFormat(loaded.code, {
    year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit", second: "2-digit",
    hourCycle: "h23", timeZone: "UTC", timeZoneName: "short",
  }).formatToParts(new Date(seconds * 1000))) parts[type] = value;
  return t("date.dateTime", { ...parts, zone: parts.timeZoneName });
}

/** How long ago, in the largest whole unit: "5 minutes ago", "5分钟前". */
export function formatAgo(seconds) {
  const s = Math.max(0, Math.round(seconds));
  const [value, unit] = s < 60 ? [s, "second"] : s < 3600 ? [Math.floor(s / 60), "minute"]
    : s < 86400 ? [Math.floor(s / 3600), "hour"] : [Math.floor(s / 86400), "day"];
  return new Intl.RelativeTimeFormat(loaded.code, { numeric: "always", style: "short" }).format(-value, unit);
}

/** A length of time in its largest one or two units: "1 hr, 5 min", "1小时5分钟". */
export function formatDuration(seconds) {
  const s = Math.max(0, Math.round(seconds));
  const parts = s < 60 ? [[s, "second"]] : s < 3600 ? [[Math.floor(s / 60), "minute"], [s % 60, "second"]]
    : s < 86400 ? [[Math.floor(s / 3600), "hour"], [Math.floor((s % 3600) / 60), "minute"]]
      : [[Math.floor(s / 86400), "day"], [Math.floor((s % 86400) / 3600), "hour"]];
  const kept = parts.filter(([v], i) => i === 0 || v > 0);
  const text = kept.map(([v, unit]) => new Intl.NumberFormat(loaded.code, { style: "unit", unit, unitDisplay: "short" }).format(v));
  return new Intl.ListFormat(loaded.code, { style: "narrow", type: "unit" }).format(text);
}

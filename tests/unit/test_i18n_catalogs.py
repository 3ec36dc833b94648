"""The dashboard's catalogs (frontend/i18n/*.json, issue 29): the same keys in every language,
every key the pages use is in them, and every message formats in the page (js/i18n.js, a subset
of ICU MessageFormat) exactly as intl-messageformat formats it."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FRONTEND = ROOT / "frontend"
CATALOGS = {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted((FRONTEND / "i18n").glob("*.json"))}

# t("key"...), t(cond ? "a" : "b"), data-i18n="key", data-i18n-attr="attr:key;attr:key", and the
# tables of keys the modules keep ("panel.lr", "marker.note", ...).
USES = [
    re.compile(r"""\bt\(\s*["']([\w.-]+)["']"""),
    re.compile(r"""\bt\([^;]*?\?\s*["']([\w.-]+)["']\s*:\s*["']([\w.-]+)["']"""),
    re.compile(r"""data-i18n="([\w.-]+)\""""),
    re.compile(r"""["']((?:panel|marker|plotly|stream|x|trace|alert\.kind|runs\.col|reportBlock)\.[\w]+)["']"""),
]
ATTRS = re.compile(r'data-i18n-attr="([^"]+)"')
# Keys put together from a value the server sends (a status, a kind): every value the API documents.
DYNAMIC = {
    "status.": ["running", "stalled", "finished", "failed", "killed"],
    "checkpoints.status.": ["available", "pruned", "private", "missing"],
    "visibility.": ["public", "unlisted", "private"],
    "alert.state.": ["open", "closed"],
    "delay.": ["day", "hour", "minute", "second"],
    "unit.": ["s", "min", "h"],
    "runs.only.": ["tag", "group"],
    "alert.phase.": ["open", "close"],
    "alert.kind.": ["spike", "nonfinite", "grad_norm", "plateau", "divergence", "throughput", "stall", "restart_loop", "alert"],
    "timeline.": ["started", "startedCode", "resumed", "resumedCode"],
    "media.count.": ["image", "table", "histogram"],
    "signin.role.": ["owner", "member", "viewer"],
    "commands.state.": ["pending", "delivered", "expired"],
    "commands.what.": ["stop", "checkpoint", "pause", "resume"],
    "commands.column.": ["tunable", "current", "bounds", "newValueHead"],
    "comments.state.": ["held", "hidden", "deleted"],
    "reportBlock.col.": ["step", "key", "prompt", "output", "suite", "task", "metrics", "change"],  # report-blocks.js's table heads
}


def used_keys() -> set[str]:
    keys: set[str] = set()
    for path in [*FRONTEND.glob("*.html"), *FRONTEND.glob("js/**/*.js")]:
        text = path.read_text(encoding="utf-8")
        for pattern in USES:
            for match in pattern.finditer(text):
                keys.update(g for g in match.groups() if g and "." in g and not g.endswith("."))
        for match in ATTRS.finditer(text):
            keys.update(k for k in (pair.split(":")[1].strip() for pair in match.group(1).split(";")) if "." in k)
    for prefix, values in DYNAMIC.items():
        keys.update(prefix + v for v in values)
    return keys


def test_there_are_two_languages_and_the_list_names_each_catalog() -> None:
    assert set(CATALOGS) == {"en", "zh-CN"}
    listed = re.findall(r'^\s*\["([\w-]+)", "[^"]+"\],$', (FRONTEND / "js" / "i18n.js").read_text(), re.M)
    assert sorted(listed) == sorted(CATALOGS)


def test_every_catalog_has_the_same_keys() -> None:
    en = set(CATALOGS["en"])
    for code, messages in CATALOGS.items():
        assert set(messages) - en == set(), f"{code} has keys en lacks"
        assert en - set(messages) == set(), f"{code} lacks keys of en"
        assert all(isinstance(v, str) and v for v in messages.values()), code


def test_every_key_the_pages_use_is_in_the_catalogs() -> None:
    keys = used_keys()
    assert len(keys) > 250
    missing = sorted(keys - set(CATALOGS["en"]))
    assert missing == [], missing


def test_no_key_is_left_unused() -> None:
    unused = sorted(set(CATALOGS["en"]) - used_keys())
    assert unused == [], unused


def test_chinese_messages_are_chinese() -> None:
    """A zh-CN message copied from English by mistake: Latin words outside placeholders, metric names and units."""
    allowed = {"Runcast", "token", "GPU", "ZeRO", "ID", "PNG", "SVG", "JSON", "HTML", "sha256", "diff", "runcast", "sync", "world", "size",
               "rc_", "UTC", "key", "metric", "adam", "true", "sha",
               "fp", "Adam", "CPU", "CUDA", "GB", "rank", "Markdown",
               "run", "on_command", "commands", "tunable"}  # the SDK's calls, named in the command card
    for key, msg in CATALOGS["zh-CN"].items():
        words = set(re.findall(r"[A-Za-z_]{2,}", re.sub(r"\{[^{}]*\}", "", re.sub(r"\{\s*\w+\s*,\s*(plural|select)\s*,", "{", msg))))
        assert words <= allowed | {"one", "other", "both", "before", "true"}, (key, msg, words - allowed)


NODE_CHECK = r"""
import { IntlMessageFormat } from "intl-messageformat";
import { readFileSync } from "node:fs";
const [catalogDir, i18nPath] = process.argv.slice(2);
// The page's globals, as little of them as js/i18n.js reads: the catalog comes through loadLanguage().
const root = { lang: "en", classList: { remove() {} } };
globalThis.document = { documentElement: root, getElementById: () => null, querySelectorAll: () => [] };
globalThis.localStorage = { getItem: () => null };
const i18n = await import(i18nPath);
const samples = { count: 3, n: 1.5, step: 1200, resumed: 1, differing: 2, total: 5, shown: 4, groups: 1, segment: "2",
  which: "both", dirty: "true", before: 10, after: 20, width: "1600", height: "900" };
const bad = [];
for (const code of ["en", "zh-CN"]) {
  const messages = JSON.parse(readFileSync(`${catalogDir}/${code}.json`, "utf8"));
  Object.defineProperty(globalThis, "navigator", { value: { languages: [code] }, configurable: true });
  globalThis.fetch = async () => ({ ok: true, json: async () => messages });
  if ((await i18n.loadLanguage()) !== code) bad.push(`${code}: not chosen`);
  for (const [key, source] of Object.entries(messages)) {
    for (const extra of [{}, { count: 1, n: 1, resumed: 0, which: "before", dirty: "false" }]) {
      const values = { ...samples, ...extra };
      for (const m of source.matchAll(/\{\s*(\w+)\s*[,}]/g)) if (!(m[1] in values)) values[m[1]] = `<${m[1]}>`;
      let want;
      try { want = new IntlMessageFormat(source, code, undefined, { ignoreTag: true }).format(values); }
      catch (err) { bad.push(`${code} ${key}: intl-messageformat cannot parse it: ${err.message}`); continue; }
      const got = i18n.t(key, values);
      if (got !== want) bad.push(`${code} ${key}: ${JSON.stringify(got)} != ${JSON.stringify(want)}`);
    }
  }
}
console.log(JSON.stringify(bad));
"""


def test_messages_format_as_intl_messageformat_does(tmp_path: Path) -> None:
    node = shutil.which("node")
    modules = ROOT / "vendor" / "node_modules" / "intl-messageformat"
    if node is None or not modules.exists():
        pytest.skip("needs node and vendor/node_modules (scripts/install)")
    script = ROOT / "vendor" / f".i18n-check-{tmp_path.name}.mjs"  # beside node_modules, so the import resolves
    script.write_text(NODE_CHECK)
    try:
        res = subprocess.run([node, str(script), str(FRONTEND / "i18n"), (FRONTEND / "js" / "i18n.js").as_uri()],
                             capture_output=True, text=True, timeout=60, check=False)
    finally:
        script.unlink()
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == []

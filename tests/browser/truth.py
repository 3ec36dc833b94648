"""What a run page holds against what the API stores: the page's store, what Plotly draws,
and ``GET /metrics`` for the same query. Shared by the truth soak and the chrome tests.

A page exposes its store read-only as ``window.__runcast.store.snapshot()``: one entry per
(run, metric) it shows, with the query it answers (``start``, ``end``, ``max_points``), the
run version it reflects, and the series in the API's own shape (wire-encoded values).
"""

from __future__ import annotations

import math
import time
from typing import Any

import httpx

from . import hung

SNAPSHOT = "() => window.__runcast.store.snapshot()"

# Every data trace of every chart on the page: the raw/mean line and the min/max band.
# Date axes (the System panel's clock, whose step is epoch seconds) plot milliseconds.
PLOTTED = """() => [...document.querySelectorAll('.js-plotly-plot')].flatMap(gd => (gd.data || [])
  .filter(t => t.meta && t.meta.key !== undefined && ['raw', 'max', 'min'].includes(t.meta.role))
  .map(t => ({run: t.meta.run, key: t.meta.key, segment: t.meta.segment, role: t.meta.role,
              abandoned: !!t.meta.abandoned, x: Array.from(t.x, v => t.meta.epoch ? v / 1000 : v), y: Array.from(t.y, v => v ?? null)})))"""

COLUMNS = ("step", "last_step", "min", "max", "last", "count")


def metrics(base: str, run: str, key: str, query: dict[str, Any], headers: dict[str, str] | None = None) -> dict[str, Any]:
    """``GET /metrics`` for the query a store entry answers (``headers``: a private run's token)."""
    params: dict[str, Any] = {"key": key, "max_points": query["max_points"]}
    for name in ("start", "end"):
        if query.get(name) is not None:
            params[name] = query[name]
    r = httpx.get(f"{base}/api/v1/runs/{run}/metrics", params=params, headers=headers, timeout=30)
    r.raise_for_status()
    return r.json()


def run_version(base: str, run: str, key: str, headers: dict[str, str] | None = None) -> int:
    return metrics(base, run, key, {"max_points": 1}, headers)["version"]


def _number(v: Any) -> float | None:
    """A wire value as a float (None stays None)."""
    if v is None:
        return None
    if isinstance(v, str):
        return float(v.replace("Infinity", "inf"))
    return float(v)


def _same(a: Any, b: Any, rel: float = 0.0) -> bool:
    x, y = _number(a), _number(b)
    if x is None or y is None:
        return x is None and y is None
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    if rel and math.isfinite(x) and math.isfinite(y):
        return math.isclose(x, y, rel_tol=rel, abs_tol=1e-12)
    return x == y


def entry_problems(entry: dict[str, Any], api: dict[str, Any]) -> list[str]:
    """How a store entry differs from the API's answer to its query (empty when equal)."""
    where = f"{entry['run']}/{entry['key']} {entry['query']}"
    out = []
    for name in ("level", "bucket_width", "version"):
        if entry[name] != api[name]:
            out.append(f"{where}: {name} {entry[name]} != api {api[name]}")
    mine = {s["segment"]: s for s in entry["series"]}
    theirs = {s["segment"]: s for s in api["series"]}
    if sorted(mine) != sorted(theirs):
        return [*out, f"{where}: segments {sorted(mine)} != api {sorted(theirs)}"]
    for seg, want in theirs.items():
        got = mine[seg]
        if got["start_step"] != want["start_step"]:
            out.append(f"{where} segment {seg}: start_step {got['start_step']} != {want['start_step']}")
        if got["step"] != want["step"]:
            missing = sorted(set(want["step"]) - set(got["step"]))
            extra = sorted(set(got["step"]) - set(want["step"]))
            out.append(f"{where} segment {seg}: steps differ; missing {missing[:12]} (of {len(missing)}),"
                       f" extra {extra[:12]} (of {len(extra)})")
            continue
        for col in COLUMNS:
            bad = [i for i, (g, w) in enumerate(zip(got[col], want[col], strict=True)) if not _same(g, w)]
            if bad:
                i = bad[0]
                out.append(f"{where} segment {seg}: {col} differs at step {want['step'][i]}: {got[col][i]} != {want[col][i]}"
                           f" ({len(bad)} differ)")
        bad = [i for i, (g, w) in enumerate(zip(got["mean"], want["mean"], strict=True)) if not _same(g, w, 1e-9)]
        if bad:
            i = bad[0]
            out.append(f"{where} segment {seg}: mean differs at step {want['step'][i]}: {got['mean'][i]} != {want['mean'][i]}")
    return out


def _drawn(v: Any) -> float | None:
    """What Plotly is given for a value: gaps (None) for NaN and ±Infinity."""
    x = _number(v)
    return x if x is not None and math.isfinite(x) else None


def plot_problems(entry: dict[str, Any], plotted: list[dict[str, Any]]) -> list[str]:
    """How the Plotly traces of a store entry differ from the entry (x = step)."""
    where = f"{entry['run']}/{entry['key']}"
    out = []
    bucketed = entry["level"] > 0
    mine = [t for t in plotted if t["run"] == entry["run"] and t["key"] == entry["key"]]
    for series in entry["series"]:
        seg = series["segment"]
        for role, col in (("raw", "mean" if bucketed else "last"), ("max", "max"), ("min", "min")):
            traces = [t for t in mine if t["segment"] == seg and t["role"] == role]
            if role != "raw" and not bucketed:
                if traces:
                    out.append(f"{where} segment {seg}: a {role} band on raw points")
                continue
            drawn: dict[float, Any] = {}
            for t in traces:  # the kept part and the abandoned branch share the fork point
                for x, y in zip(t["x"], t["y"], strict=True):
                    if x in drawn and not _same(drawn[x], y, 1e-12):
                        out.append(f"{where} segment {seg} {role}: two values at x={x}")
                    drawn[x] = y
            if sorted(drawn) != series["step"]:
                missing = sorted(set(series["step"]) - set(drawn))
                extra = sorted(set(drawn) - set(series["step"]))
                out.append(f"{where} segment {seg} {role}: plotted x differ from the store;"
                           f" missing {missing[:12]} (of {len(missing)}), extra {extra[:12]} (of {len(extra)})")
                continue
            for step, value in zip(series["step"], series[col], strict=True):
                if not _same(drawn[step], _drawn(value), 1e-12):
                    out.append(f"{where} segment {seg} {role}: at step {step} plotted {drawn[step]}, store {value}")
                    break
    for t in mine:
        if t["segment"] not in {s["segment"] for s in entry["series"]}:
            out.append(f"{where}: a trace of segment {t['segment']} that the store does not hold")
    return out


def answering(page: Any, seconds: float = 60) -> None:
    """Fail, naming the page, if its script does not answer within ``seconds``.

    Playwright's ``evaluate`` and ``Locator.count`` wait without a limit: a page whose main
    thread never comes free would hold the test until the suite's timeout, saying nothing.
    """
    try:
        page.wait_for_function("() => true", polling=250, timeout=seconds * 1000)
    except Exception as e:  # playwright's TimeoutError
        console = getattr(page, "console", [])[-20:]
        raise AssertionError(f"{page.url}: the page's script answered nothing for {seconds} s ({e});"
                             f" its last console lines: {console}; where it is: {hung.stack(page)}") from e


def scroll_through(page: Any) -> None:
    """Scroll every chart into view, as a reader would (panels load when they come into view)."""
    answering(page)
    cards = page.locator("#run .card:visible")
    for i in range(cards.count()):
        cards.nth(i).scroll_into_view_if_needed()
        page.wait_for_timeout(30)


def settle(page: Any, base: str, run: str, keys: list[str], timeout: float = 45,
           headers: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Wait until the page shows every key, nothing is loading and every entry is at the run's
    current version (the API answers with that version); return the store's entries."""
    deadline = time.monotonic() + timeout
    last: Any = None
    scroll_through(page)
    while True:
        version = run_version(base, run, keys[0], headers)
        answering(page)
        entries = page.evaluate(SNAPSHOT)
        shown = sorted({e["key"] for e in entries if e["run"] == run})
        ready = shown == sorted(keys) and all(not e["loading"] and e["version"] == version for e in entries)
        if ready:
            return entries
        last = (version, shown, [(e["key"], e["loading"], e["version"]) for e in entries])
        if sorted(keys) != shown:
            scroll_through(page)  # a panel made since (a new key)
        if time.monotonic() > deadline:
            raise AssertionError(f"page did not settle at the run's version: {last}")
        time.sleep(0.25)


def assert_page_tells_the_truth(page: Any, base: str, run: str, keys: list[str], label: str,
                                headers: dict[str, str] | None = None) -> int:
    """Every entry of the page's store equals ``GET /metrics`` for its query, and Plotly draws
    exactly the store. Returns the number of points (or buckets) compared. ``headers``: what
    the API needs to show the run (a private run: its project's token)."""
    for _ in range(20):
        entries = settle(page, base, run, keys, headers=headers)
        answers = [metrics(base, e["run"], e["key"], e["query"], headers) for e in entries]
        # A batch the paused trainer had already sent can commit after the page settled:
        # compare only answers of the version the page holds.
        if all(a["version"] == e["version"] for a, e in zip(answers, entries, strict=True)):
            break
    plotted = page.evaluate(PLOTTED)
    problems = []
    compared = 0
    for entry, api in zip(entries, answers, strict=True):
        problems += entry_problems(entry, api)
        problems += plot_problems(entry, plotted)
        compared += sum(len(s["step"]) for s in api["series"])
    assert not problems, f"{label}:\n" + "\n".join(problems[:40])
    return compared

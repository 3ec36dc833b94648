"""The compare page: runs picked by searching, several metrics, alignment by step, tokens,
wall time or relative time (the server's step times), the config diff, state in the URL, and run names that try to run script."""

from __future__ import annotations

import math
from urllib.parse import parse_qs, urlsplit

import httpx
import numpy as np

from .truth import entry_problems, metrics, plot_problems

HOSTILE = 'alpha <img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'
T0 = 1_750_000_000.0  # wall clock of the first step (epoch seconds)

CONFIGS = {
    "alpha": {"lr": 0.001, "batch": 32, "model": {"layers": 2, "d": 64}, "note": "<b>bold?</b>"},
    "beta": {"lr": 0.002, "batch": 32, "model": {"layers": 4, "d": 64}},
}
DIFFERING = ["lr", "model.layers", "note"]
ALL_KEYS = ["batch", "lr", "model.d", "model.layers", "note"]

CHART_X = """(key) => { const card = [...document.querySelectorAll('#charts section')].find(s => s.getAttribute('aria-label') === key);
  const gd = card && card.querySelector('.js-plotly-plot');
  return gd && gd.data ? gd.data.filter(t => t.meta && t.meta.role === 'raw')
    .map(t => ({run: t.meta.run, x: Array.from(t.x)})) : null; }"""


def seed(server):  # type: ignore[no-untyped-def]
    runs = {}
    for name, speed, dt in (("alpha", 1000, 2.0), ("beta", 2000, 3.0), ("gamma", 1000, 1.0)):
        run = server.sdk_run(project="cmp", name=HOSTILE if name == "alpha" else name, config=CONFIGS.get(name, {}))
        for s in range(1, 121):
            run.log({"train/loss": 3 * math.exp(-s / (40 if name == "alpha" else 60)) + 1,
                     "grad_norm": 1 + (s % 7) / 10, "tokens_seen": s * speed, "wall_time": T0 + s * dt}, step=s)
        runs[name] = run
    for run in runs.values():
        assert run.flush(timeout=30)
    return runs


def step_times(base: str, run_id: str) -> tuple[list[int], list[float]]:
    """The run's ``_timestamp`` points (steps, epoch seconds), as the API gives them."""
    body = httpx.get(f"{base}/api/v1/runs/{run_id}/metrics", params={"key": "_timestamp", "max_points": 20000}, timeout=30).json()
    (series,) = body["series"]
    return series["step"], series["last"]


def add_by_search(page, text: str, run_id: str) -> None:  # type: ignore[no-untyped-def]
    page.fill("#run-search", text)
    # The search narrows the list to that one run.
    page.wait_for_function(
        "(id) => { const rows = document.querySelectorAll('#run-results li[data-run]');"
        " return rows.length === 1 && rows[0].dataset.run === id; }", arg=run_id, timeout=10000)
    page.locator(f'#run-results li[data-run="{run_id}"]').get_by_role("button").click()
    page.wait_for_function(f"() => new URLSearchParams(location.search).get('runs')?.split(',').includes({run_id!r})")
    page.wait_for_selector(f'#picked a[href="/runs/{run_id}"]', timeout=10000)


def drawn(page, keys, runs) -> None:  # type: ignore[no-untyped-def]
    page.wait_for_function(
        """([keys, n]) => keys.every(k => { const card = [...document.querySelectorAll('#charts section')]
             .find(s => s.getAttribute('aria-label') === k); const gd = card && card.querySelector('.js-plotly-plot');
             return gd && gd.data && gd.data.filter(t => t.meta && t.meta.role === 'raw' && t.x.length === 120).length === n; })""",
        arg=[keys, len(runs)], timeout=20000,
    )


def test_compare_picks_searches_aligns_and_diffs(live_server, page, tmp_path):
    runs = seed(live_server)
    alpha, beta = runs["alpha"].id, runs["beta"].id
    base = live_server.url
    page.goto(base + "/compare")
    page.wait_for_selector("#run-results li[data-run]", timeout=20000)
    assert page.locator("#run-results li[data-run]").count() == 3

    add_by_search(page, "ALPHA cmp", alpha)  # words of the name and the project, any case
    add_by_search(page, "beta", beta)
    assert page.locator("#picked a").all_text_contents() == [f"{HOSTILE} (cmp)", "beta (cmp)"]

    # Two metrics at once: one chart each, both runs on each.
    page.locator("#metric-picker label", has_text="grad_norm").locator("input").check()
    keys = ["train/loss", "grad_norm"]
    drawn(page, keys, [alpha, beta])
    state = parse_qs(urlsplit(page.url).query)
    assert state["runs"] == [f"{alpha},{beta}"] and sorted(state["keys"][0].split(",")) == sorted(keys)

    # What is drawn is what the API stores: every store entry against GET /metrics, and the traces.
    entries = page.evaluate("window.__runcast.store.snapshot()")
    assert sorted((e["run"], e["key"]) for e in entries) == sorted((r, k) for r in (alpha, beta) for k in keys)
    plotted = page.evaluate(
        """() => [...document.querySelectorAll('.js-plotly-plot')].flatMap(gd => (gd.data || [])
             .filter(t => t.meta && t.meta.key !== undefined && ['raw', 'max', 'min'].includes(t.meta.role))
             .map(t => ({run: t.meta.run, key: t.meta.key, segment: t.meta.segment, role: t.meta.role,
                         abandoned: !!t.meta.abandoned, x: Array.from(t.x), y: Array.from(t.y, v => v ?? null)})))"""
    )
    for entry in entries:
        api = metrics(base, entry["run"], entry["key"], entry["query"])
        assert api["level"] == 0 and [len(s["step"]) for s in api["series"]] == [120]
        mine = [t for t in plotted if t["run"] == entry["run"] and t["key"] == entry["key"]]
        assert entry_problems(entry, api) == [] and plot_problems(entry, mine) == []

    # Aligned by tokens: each run on its own tokens_seen; by wall time: seconds since its start.
    page.select_option("#xmode", "tokens")
    page.wait_for_function("new URLSearchParams(location.search).get('x') === 'tokens'")
    page.wait_for_function(f"() => {{ const t = ({CHART_X})('train/loss'); return t && t.length === 2 && t.every(r => r.x[1] !== 2); }}",
                           timeout=20000)
    by_run = {t["run"]: t["x"] for t in page.evaluate(CHART_X, "train/loss")}
    assert by_run[alpha] == [s * 1000 for s in range(1, 121)] and by_run[beta] == [s * 2000 for s in range(1, 121)]
    # Aligned by time: each run's own step times (the server's _timestamp, preferred to the logged
    # wall_time), in seconds since its first step (these runs last about a second: the unit suits
    # the longest span, one for every run), then as dates (epoch milliseconds on a date axis).
    page.select_option("#xmode", "relative")
    page.wait_for_function("new URLSearchParams(location.search).get('x') === 'relative'")
    page.wait_for_function(f"() => {{ const t = ({CHART_X})('grad_norm'); return t && t.length === 2 && t.every(r => r.x[0] === 0); }}",
                           timeout=20000)
    by_run = {t["run"]: t["x"] for t in page.evaluate(CHART_X, "grad_norm")}
    for rid in (alpha, beta):
        steps, times = step_times(base, rid)
        want = np.interp(np.arange(1, 121), steps, times)
        assert np.allclose(by_run[rid], want - times[0], rtol=0, atol=1e-6)
    assert page.evaluate("document.querySelector('#charts .js-plotly-plot').layout.xaxis.title.text") == "relative time (s)"
    page.select_option("#xmode", "time")
    page.wait_for_function("new URLSearchParams(location.search).get('x') === 'time'")
    page.wait_for_function(f"() => {{ const t = ({CHART_X})('grad_norm'); return t && t.length === 2 && t.every(r => r.x[0] > 1e12); }}",
                           timeout=20000)
    by_run = {t["run"]: t["x"] for t in page.evaluate(CHART_X, "grad_norm")}
    for rid in (alpha, beta):
        steps, times = step_times(base, rid)
        assert np.allclose(by_run[rid], np.interp(np.arange(1, 121), steps, times) * 1000, rtol=0, atol=1e-3)
    assert page.evaluate("document.querySelector('#charts .js-plotly-plot').layout.xaxis.type") == "date"

    # The config diff: exactly the differing keys, then every key; values are text.
    diff_keys = "() => [...document.querySelectorAll('#config-diff tbody tr')].map(r => r.dataset.key)"
    assert page.evaluate(diff_keys) == DIFFERING
    assert page.text_content("#diff-note") == "3 of 5 keys differ."
    assert page.locator('#config-diff tr[data-key="note"] td').all_text_contents() == ["<b>bold?</b>", "—"]
    page.check("#diff-all")
    assert page.evaluate(diff_keys) == ALL_KEYS
    assert parse_qs(urlsplit(page.url).query)["all"] == ["1"]

    # The link is the view: a fresh page on it shows the same.
    shared = page.url
    page.screenshot(path=str(tmp_path / "compare-desktop.png"), full_page=True)  # looked at by hand
    page.set_viewport_size({"width": 390, "height": 844})
    page.wait_for_timeout(400)
    assert page.evaluate("document.documentElement.scrollWidth <= 390")  # nothing wider than a phone
    page.screenshot(path=str(tmp_path / "compare-390.png"), full_page=True)
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(shared)
    drawn(page, keys, [alpha, beta])
    assert page.input_value("#xmode") == "time" and page.is_checked("#diff-all")
    assert page.evaluate(diff_keys) == ALL_KEYS

    # Removing a run takes it off every chart and the diff.
    page.get_by_role("button", name="Remove beta (cmp)").click()
    drawn(page, keys, [alpha])
    assert parse_qs(urlsplit(page.url).query)["runs"] == [alpha]
    legend = page.eval_on_selector_all("#charts .legendtext", "ns => ns.map(n => n.textContent)")
    assert any(HOSTILE in t for t in legend), legend  # drawn as typed: quotes and brackets, no entity shown
    assert page.evaluate("window.__pwned === undefined")
    assert page.dialogs == [] and page.errors == []


def test_compare_names_runs_it_cannot_align_and_old_links_still_work(live_server, page):
    plain = live_server.sdk_run(project="cmp", name="no-tokens")
    full = live_server.sdk_run(project="cmp", name="tokens")
    for s in range(1, 31):
        plain.log({"loss": 2.0 - s / 100}, step=s)
        full.log({"loss": 2.5 - s / 100, "tokens_seen": 512 * s}, step=s)
    assert plain.flush(timeout=30) and full.flush(timeout=30)
    page.goto(f"{live_server.url}/compare?runs={plain.id},{full.id},nope-not-a-run&key=loss&x=tokens")
    page.wait_for_function(
        f"() => {{ const t = ({CHART_X})('loss'); return t && t.length === 1; }}", timeout=20000)
    status = page.text_content("#status")
    assert "Run not found: nope-not-a-run." in status
    assert "Not shown when aligned by tokens seen (no such key logged): no-tokens (cmp)." in status
    assert page.evaluate(CHART_X, "loss")[0]["x"] == [512 * s for s in range(1, 31)]
    assert page.dialogs == [] and page.errors == []


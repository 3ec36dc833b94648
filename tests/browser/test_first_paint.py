"""The run page paints its curves before Plotly.js has loaded (issues 28 and 31): a light drawing
of the first answers (js/chart/sketch.js) that shows the API's points, in the box and on the
axes Plotly then draws them, so nothing moves when Plotly's chart replaces it."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import httpx
import pytest
from browser.reads import key_reads

KEYS = ("train/loss", "train/lr", "train/grad_norm", "train/tokens_per_s")
STEPS = 3000

CHART_STATE = """() => {
  const gd = document.getElementById('chart-main');
  const full = gd._fullLayout;
  return {
    box: full ? {l: full._size.l, t: full._size.t, w: full._size.w, h: full._size.h} : null,
    xrange: full ? full.xaxis.range : null, yrange: full ? full.yaxis.range : null,
    traces: (gd.data || []).filter(t => t.meta && ['max', 'min', 'raw', 'smooth'].includes(t.meta.role))
      .map(t => ({role: t.meta.role, key: t.meta.key, x: Array.from(t.x), y: Array.from(t.y)})),
  };
}"""


def value(key: str, step: int) -> float:
    base = {"train/loss": 3.0, "train/lr": 3e-4, "train/grad_norm": 1.5, "train/tokens_per_s": 9000.0}[key]
    return base * (0.4 + 0.6 * math.exp(-step / 900)) * (1 + 0.02 * math.sin(step / 3))


@pytest.fixture
def run_id(live_server: Any) -> str:
    run = live_server.sdk_run(name="first paint", system_metrics=False)  # no keys appearing meanwhile
    for s in range(STEPS):
        run.log({k: value(k, s) for k in KEYS}, step=s)
    assert run.flush(timeout=60)
    return str(run.id)


def hold_plotly(page: Any) -> list[Any]:
    """Plotly.js's request held until the test lets it go (route.continue_())."""
    held: list[Any] = []
    page.route("**/plotly.min.js", lambda route: held.append(route))
    return held


def api_points(url: str) -> dict[str, list[float]]:
    """The raw trace a /metrics answer makes: steps, and bucket means (or the values)."""
    body = httpx.get(url, timeout=10).json()
    (series,) = body["series"]
    ys = series["mean"] if body.get("level", 0) > 0 else series["last"]
    return {"x": series["step"], "y": [float(v) for v in ys]}


def close(a: list[float], b: list[float], rel: float = 1e-9) -> bool:
    return len(a) == len(b) and all(math.isclose(x, y, rel_tol=rel, abs_tol=1e-12) for x, y in zip(a, b))


def test_the_curve_is_painted_before_plotly_and_shows_the_apis_points(live_server, page, run_id):
    metrics: list[str] = []
    page.on("request", lambda r: metrics.extend(key_reads(r.url, "train/loss")))
    held = hold_plotly(page)
    page.goto(f"{live_server.url}/runs/{run_id}")
    page.wait_for_function("window.__runcastPainted !== undefined", timeout=20000)
    page.wait_for_timeout(300)  # every first answer in (the sketch is painted again as each lands)
    assert page.evaluate("typeof Plotly") == "undefined"
    assert page.evaluate("window.__runcastDrawn") is None
    assert page.locator("#chart-main canvas.sketch").is_visible()
    (main, *_) = page.evaluate("window.__runcast.charts()")
    sketch = main["sketch"]
    (raw,) = [t for t in sketch["traces"] if t["role"] == "raw"]
    assert raw["key"] == "train/loss" and len(raw["x"]) > 100
    assert metrics, "the page read the loss curve"
    api = api_points(metrics[0])
    assert raw["x"] == api["x"] and close(raw["y"], api["y"])
    if os.environ.get("RUNCAST_SCREENSHOT"):
        page.screenshot(path=str(Path(os.environ["RUNCAST_SCREENSHOT"]) / "first-paint-light.png"))

    # Plotly arrives: the same points, in the same box, on the same axes.
    assert held, "Plotly.js was asked for after the first paint"
    for route in held:
        route.continue_()
    page.wait_for_function("window.__runcastDrawn !== undefined", timeout=20000)
    page.wait_for_timeout(300)  # the draw after the first (automargin back on)
    drawn = page.evaluate(CHART_STATE)
    assert page.locator("#chart-main canvas.sketch").count() == 0
    assert drawn["box"] == sketch["box"]
    assert close(drawn["xrange"], sketch["xrange"], 1e-6) and close(drawn["yrange"], sketch["yrange"], 1e-6)
    painted = {(t["role"], t["key"]): t for t in sketch["traces"]}
    for t in drawn["traces"]:
        light = painted.pop((t["role"], t["key"]))
        assert t["x"] == light["x"] and t["y"] == light["y"], t["role"]
    assert painted == {}
    if os.environ.get("RUNCAST_SCREENSHOT"):
        page.screenshot(path=str(Path(os.environ["RUNCAST_SCREENSHOT"]) / "first-paint-plotly.png"))
    assert page.errors == [] and page.dialogs == []


def test_plotly_is_not_render_blocking_and_comes_after_the_first_paint(live_server, page, run_id):
    """Plotly.js is preloaded, never a script of the document: it runs once the curve is painted."""
    page.goto(f"{live_server.url}/runs/{run_id}")
    page.wait_for_function("window.__runcastDrawn !== undefined", timeout=20000)
    html = httpx.get(f"{live_server.url}/runs/{run_id}", timeout=30).text
    assert '<link rel="preload" as="script" href="/vendor/' in html
    assert "<script src=\"/vendor/" not in html
    marks = page.evaluate(
        """() => ({painted: window.__runcastPainted, drawn: window.__runcastDrawn,
                   plotly: performance.getEntriesByType('resource').find(r => r.name.endsWith('/plotly.min.js'))})"""
    )
    assert marks["painted"] < marks["drawn"]
    assert marks["plotly"] is not None
    # Hover and zoom arrive with Plotly.
    page.evaluate("Plotly.relayout(document.getElementById('chart-main'), {'xaxis.range': [1000, 1400]})")
    page.wait_for_function("window.__runcast.view.range && window.__runcast.view.range[0] === 1000", timeout=5000)
    assert page.errors == [] and page.dialogs == []


def test_every_panel_painted_light_matches_its_plotly_chart(live_server, browser, run_id):
    """Panels in view paint too; each one's light drawing equals its Plotly chart (box, axes, points)."""
    context = browser.new_context(viewport={"width": 1280, "height": 1600}, locale="en-US")
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        held = hold_plotly(page)
        page.goto(f"{live_server.url}/runs/{run_id}")
        page.wait_for_function(
            "window.__runcast.charts().filter(c => c.sketch).length >= 3", timeout=20000
        )
        page.wait_for_timeout(300)
        sketches = {tuple(c["keys"]): c["sketch"] for c in page.evaluate("window.__runcast.charts()") if c["sketch"]}
        for route in held:
            route.continue_()
        page.wait_for_function("window.__runcastDrawn !== undefined", timeout=20000)
        page.wait_for_function(
            f"window.__runcast.charts().filter(c => c.sketch && c.plot).length >= {len(sketches)}", timeout=20000
        )
        page.wait_for_timeout(300)  # the draw after the first (automargin back on)
        charts = [c for c in page.evaluate("window.__runcast.charts()") if c["sketch"] and c["plot"]]
        assert {tuple(c["keys"]) for c in charts} == set(sketches)
        for c in charts:
            sketch, plot = c["sketch"], c["plot"]
            assert plot["box"] == sketch["box"], c["keys"]
            assert close(plot["xrange"], sketch["xrange"], 1e-6), c["keys"]
            assert close(plot["yrange"], sketch["yrange"], 1e-6), c["keys"]
        assert errors == []
    finally:
        context.close()


def test_a_flat_series_is_drawn_on_an_axis_around_its_value(live_server, browser):
    """A learning rate held at 3e-4 is drawn on an axis from 2.7e-4 to 3.3e-4, light and by Plotly
    (whose own autorange would centre it on -1 to 1, where it reads as zero); a double click keeps
    that range; once the series moves, the axis autoranges as any other."""
    run = live_server.sdk_run(name="flat", system_metrics=False)
    for s in range(400):
        run.log({"train/loss": value("train/loss", s), "train/lr": 3e-4, "perf/mfu": 0.4}, step=s)
    assert run.flush(timeout=60)
    context = browser.new_context(viewport={"width": 1280, "height": 1600}, locale="en-US")
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    charts = "window.__runcast.charts().filter(c => c.keys.length === 1 && ['train/lr', 'perf/mfu'].includes(c.keys[0]))"
    try:
        held = hold_plotly(page)
        page.goto(f"{live_server.url}/runs/{run.id}")
        page.wait_for_function(f"{charts}.filter(c => c.sketch).length === 2", timeout=20000)
        page.wait_for_timeout(300)
        light = {c["keys"][0]: c["sketch"]["yrange"] for c in page.evaluate(charts)}
        assert close(light["train/lr"], [2.7e-4, 3.3e-4], 1e-9) and close(light["perf/mfu"], [0.36, 0.44], 1e-9)
        for route in held:
            route.continue_()
        page.wait_for_function(f"{charts}.filter(c => c.plot).length === 2", timeout=20000)
        page.wait_for_timeout(300)
        drawn = {c["keys"][0]: c["plot"]["yrange"] for c in page.evaluate(charts)}
        assert close(drawn["train/lr"], light["train/lr"], 1e-9) and close(drawn["perf/mfu"], light["perf/mfu"], 1e-9)
        lr = f"{charts}.find(c => c.keys[0] === 'train/lr')"
        page.evaluate("(() => { const gd = [...document.querySelectorAll('.js-plotly-plot')]"
                      ".find(d => (d.data || []).some(t => t.meta && t.meta.key === 'train/lr'));"
                      " return Plotly.relayout(gd, {'yaxis.autorange': true}); })()")
        page.wait_for_timeout(200)
        assert close(page.evaluate(lr)["plot"]["yrange"], light["train/lr"], 1e-9)  # a double click's autorange
        page.wait_for_function("window.__runcast.stream && window.__runcast.stream.open", timeout=10000)
        run.log({"train/loss": 1.0, "train/lr": 6e-4, "perf/mfu": 0.4}, step=400)
        assert run.flush(timeout=20)
        page.wait_for_function(f"{lr}.plot.yrange[1] > 6e-4", timeout=10000)
        low, high = page.evaluate(lr)["plot"]["yrange"]
        assert low < 3e-4 and high < 7e-4  # Plotly's own padded range around 3e-4..6e-4
        assert errors == []
    finally:
        context.close()
